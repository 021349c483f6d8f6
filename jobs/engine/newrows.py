"""New model instances built without Django's `Model.__init__`.

Planning builds a `Run` for every fire it writes, most passes one or two,
each one pass's whole work. `Model.__init__` walks all of the model's fields
(35 for a run) through its generic keyword handling, and most of them only
take their default. `new(model, **values)` gives the same instance: every
field the call does not name takes its default exactly as `__init__` gives
it (`Field.get_default()`, so a callable default is called for each
instance, a mutable one is not shared where Django does not share it), a
related object given by its field's name (`job=job`) sets the id and the
cached object as `__init__` does. The defaults are read from the model's
fields once, so a field added with a default is covered with no change here
(tests/test_newrows.py compares it with `__init__` field by field, in memory
and as written to the database).

While anything listens to the model's `pre_init` or `post_init` signals,
`__init__` builds it, so that those still run.
"""

import functools

from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init


@functools.cache
def _template(model) -> tuple[dict, tuple, dict, frozenset]:
    """(the fixed defaults by attname, the (attname, field) of defaults made
    per instance, the relation fields by name, every attname)."""
    fixed: dict = {}
    made: list = []
    relations: dict = {}
    for field in model._meta.concrete_fields:
        if field.is_relation:
            relations[field.name] = field
        if (field.has_default() and callable(field.default)) or field.has_db_default():
            made.append((field.attname, field))
        else:
            fixed[field.attname] = field.get_default()
    return fixed, tuple(made), relations, frozenset(f.attname for f in model._meta.concrete_fields)


def new(model, **values):
    """`model(**values)`: an unsaved instance with every other field at its
    default. `values` are field names or attnames of concrete fields."""
    if pre_init.has_listeners(model) or post_init.has_listeners(model):
        return model(**values)
    fixed, made, relations, attnames = _template(model)
    obj = model.__new__(model)
    state = obj._state = ModelState()
    data = obj.__dict__
    data.update(fixed)
    for attname, field in made:
        if attname not in values and field.name not in values:
            data[attname] = field.get_default()
    for name, value in values.items():
        field = relations.get(name)
        if field is None:
            if name not in attnames:
                raise TypeError(f"{model.__name__}() got an unexpected keyword argument {name!r}")
            data[name] = value
        else:
            # As `__init__` does for `job=job`: the id, and the object cached.
            data[field.attname] = None if value is None else getattr(value, field.target_field.attname)
            state.fields_cache[name] = value
    return obj
