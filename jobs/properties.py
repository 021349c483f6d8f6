"""A job's properties and a run's overrides of them: their limits, how they
are read from a dict or its JSON text, and the check of a run's overrides
against its job's kind (jobs.kinds)."""

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from jobs import jsontext, kinds
from jobs.models import Job
from jobs.text import validate_storable

MAX_PROPERTIES = 100
MAX_PROPERTY_CHARS = 65_536
MAX_PROPERTY_NAME_CHARS = 200


def coerce_properties(value) -> dict[str, str]:
    """A string → string dict, from a dict or its JSON text. Numbers and
    booleans become strings; nested objects are refused."""
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = jsontext.loads(value)
        except jsontext.JsonTextError as exc:
            code = "duplicate_key" if exc.code == "duplicate_key" else "invalid"
            raise ValidationError(
                _("Properties must be a JSON object: {message}").format(message=exc.message), code=code
            ) from None
    if not isinstance(value, dict):
        raise ValidationError(_("Properties must be an object of names to text values."), code="invalid")
    if len(value) > MAX_PROPERTIES:
        raise ValidationError(
            _("A job can have at most {max_properties} properties.").format(max_properties=MAX_PROPERTIES),
            code="invalid",
        )
    clean: dict[str, str] = {}
    for key, item in value.items():
        key = str(key).strip()
        if not key:
            raise ValidationError(_("A property needs a name."), code="invalid")
        if len(key) > MAX_PROPERTY_NAME_CHARS:
            raise ValidationError(
                _("A property name can be at most {max_property_name_chars} characters.").format(
                    max_property_name_chars=MAX_PROPERTY_NAME_CHARS
                ),
                code="max_length",
            )
        if key in clean:
            raise ValidationError(
                _("Two properties are named “{key}” (names are compared without surrounding spaces).").format(
                    key=key[:100]
                ),
                code="duplicate_key",
            )
        if isinstance(item, (dict, list)):
            raise ValidationError(
                _("Property “{key}” must be text, not a list or object.").format(key=key), code="invalid"
            )
        text = "" if item is None else (str(item).lower() if isinstance(item, bool) else str(item))
        if len(text) > MAX_PROPERTY_CHARS:
            raise ValidationError(
                _("Property “{key}” is longer than {max_property_chars} characters.").format(
                    key=key, max_property_chars=MAX_PROPERTY_CHARS
                ),
                code="invalid",
            )
        clean[key] = text
    return clean


def clean_run_properties(job: Job, value) -> dict[str, str]:
    """A run's property overrides (run now with parameters): coerced like a
    job's properties, then the job kind's rules checked on the job's
    properties with the overrides merged over them. Returns the overrides
    alone (what the run records); raises ValidationError (field
    "properties") naming the first problem."""
    validate_storable(value)  # what the forms' StorableTextMixin checks on their fields
    overrides = coerce_properties(value)
    # Again once parsed: JSON text hides a NUL or a lone surrogate in an
    # escape (`\u0000`, `\udfff`) that only parsing turns into one.
    validate_storable(overrides)
    merged = {**(job.properties or {}), **overrides}
    if len(merged) > MAX_PROPERTIES:
        raise ValidationError(
            _("A job can have at most {max_properties} properties.").format(max_properties=MAX_PROPERTIES),
            code="invalid",
        )
    for field, error in kinds.property_errors(
        job.kind, merged, sql_write=job.sql_write, namespace=job.namespace
    ):
        message = error.messages[0]
        raise ValidationError(
            message if field == "properties" else f"{field}: {message}", code=error.code or "invalid"
        )
    return overrides
