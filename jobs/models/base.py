"""What every model module shares: the defaults a job or task gets, the
limits on them, how a choice field reads its label, how a wide row loads,
and keyset pages."""

import functools
from datetime import datetime

from django.db.models import Model, Q
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init
from django.utils.encoding import force_str

from jobs import cron

# What a job or a one-off task gets when it does not say (the model, the job
# form, the API, `jobs import`, tasks.enqueue).
DEFAULT_MAX_RETRIES = 0
DEFAULT_RETRY_INTERVAL_SECONDS = 60
DEFAULT_TIMEOUT_SECONDS = 600
DEFAULT_ALERT_THRESHOLD = 3
# The limits on them: the interval floor is the cron module's (error 47004);
# a run's timeout (and an HTTP job's own request timeout) is at most a day.
MIN_INTERVAL_SECONDS = cron.MIN_INTERVAL_SECONDS
MAX_TIMEOUT_SECONDS = 86_400
# overlap_policy=allow: at most this many runs of one job live at once.
MAX_PARALLEL = 100
# A sharded job's fire is split into at most this many runs (Job.shards).
MAX_SHARDS = 1_000
# The longest stable delay a cron job's fires may get (Job.jitter_seconds).
MAX_JITTER_SECONDS = 3_600


class ChoiceLabels:
    """`get_FOO_display()` without translating every label of the field.
    Django's looks the value up in `dict(make_hashable(field.flatchoices))`,
    and hashing a lazy label translates it: every label of the field, for
    every cell of a runs table. This one translates only the label it
    returns."""

    def _get_FIELD_display(self, field):
        value = getattr(self, field.attname)
        for choice, label in field.flatchoices:
            if choice == value:
                return force_str(label, strings_only=True)
        return force_str(value, strings_only=True)


class QuickLoad:
    """`from_db` without `Model.__init__`, for a model whose rows are wide
    and read often (the scheduler reads every due job, 48 columns, on every
    pass): a row with every column is stored in the instance in one go,
    where `__init__` sets each field with its own `setattr`. The instance is
    the one `Model.from_db` gives (tests/test_quickload.py compares them).
    `Model.from_db` still builds it while anything listens to the model's
    `pre_init` or `post_init` signals, for a row with deferred columns, and
    when a field stores its value through a descriptor that does more than
    store it."""

    @classmethod
    def from_db(cls, db, field_names, values):
        attnames = _stored_attnames(cls)
        if (
            attnames is None
            or len(values) != len(attnames)
            or pre_init.has_listeners(cls)
            or post_init.has_listeners(cls)
        ):
            return super().from_db(db, field_names, values)
        obj = cls.__new__(cls)
        state = obj._state = ModelState()
        state.adding, state.db = False, db
        obj.__dict__.update(zip(attnames, values, strict=True))
        return obj


# The setters that only store the value in the instance's __dict__ (a
# ForeignKey's id also forgets a cached object, which a new instance has not).
_PLAIN_SETTERS = {getattr(DeferredAttribute, "__set__", None), ForeignKeyDeferredAttribute.__set__}


@functools.cache
def _stored_attnames(model: type[Model]) -> tuple | None:
    """Every concrete field's attname in field order, or None when one of
    them is set through a descriptor whose setter does more than store it."""
    attnames = tuple(field.attname for field in model._meta.concrete_fields)
    for attname in attnames:
        descriptor = getattr(model, attname, None)
        if not isinstance(descriptor, DeferredAttribute):
            return None
        if getattr(type(descriptor), "__set__", None) not in _PLAIN_SETTERS:
            return None
    return attnames


def keyset_before(field: str, at: datetime, pk: int) -> Q:
    """The rows after (at, pk) in newest-first (field, id) order: one keyset
    page further back. The plain bound on `field` lets its index seek; the
    OR only sorts out rows at the same instant."""
    return Q(**{f"{field}__lte": at}) & (Q(**{f"{field}__lt": at}) | Q(id__lt=pk))


def keyset_after(field: str, at: datetime, pk: int) -> Q:
    """The rows before (at, pk) in newest-first (field, id) order: one keyset
    page nearer the present (see keyset_before)."""
    return Q(**{f"{field}__gte": at}) & (Q(**{f"{field}__gt": at}) | Q(id__gt=pk))
