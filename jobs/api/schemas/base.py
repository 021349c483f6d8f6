"""What the API's schemas share: the error shape, the error answers an
operation declares, the limits and patterns of requests (ids, pages,
instants, property maps) and the helpers that state a rule in the document
from the constant it lives in."""

from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BeforeValidator, StrictBool, StrictFloat, StrictInt, StrictStr
from pydantic_core import PydanticCustomError

from jobs import cron
from jobs.forms import EARLIEST_INSTANT, LATEST_INSTANT
from jobs.properties import MAX_PROPERTIES, MAX_PROPERTY_CHARS, MAX_PROPERTY_NAME_CHARS
from jobs.serializers import JOB_PAGE_DEFAULT, JOB_PAGE_MAX, PAGE_MAX_CHARS
from jobs.text import CODE as INVALID_TEXT
from jobs.text import NO_NUL_PATTERN, VISIBLE_PATTERN, find_unstorable


def page_limit():
    """A page's size, the same for pages of jobs and of runs (a run page
    carries no logs)."""
    return Field(
        JOB_PAGE_DEFAULT,
        ge=1,
        le=JOB_PAGE_MAX,
        description=f"Page size. A page ends early (with a next_cursor) once its JSON passes "
        f"{PAGE_MAX_CHARS:,} characters.",
    )


# Ids are database keys: a path or filter id beyond this is no id at all.
MAX_ID = 2**63 - 1


def _whole(value):
    # JSON Schema's integer includes 3.0; a bool or a string is no number.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# An integer in a request: strict (no true, no "3"), as JSON Schema reads it.
WholeNumber = Annotated[StrictInt, BeforeValidator(_whole)]


def choice(values) -> Any:
    return Literal[tuple(values)]


def max_length_of(model, field: str) -> int:
    return model._meta.get_field(field).max_length


def registered_handlers(schema: dict) -> None:
    # The registry is filled at start-up, so it is read when the document is built.
    from jobs.handlers import registry

    schema["enum"] = sorted(info.name for info in registry.available())


def known_zones(schema: dict) -> None:
    # Any case is accepted and stored canonically; these are the spellings.
    schema["enum"] = ["", *cron.known_zones()]
    schema["maxLength"] = cron.MAX_ZONE_CHARS


def known_zones_or_none(schema: dict) -> None:
    known_zones(schema)
    schema["enum"].append(None)


def first_handler() -> str:
    from jobs.handlers import registry

    # A demo handler rather than one of Cronboard's own maintenance jobs.
    names = sorted(
        (info.name for info in registry.available()), key=lambda name: (name.startswith("cronboard."), name)
    )
    return names[0] if names else ""


def examples(*examples):
    """A schema's `examples` (valid requests, which clients and Schemathesis
    start from); a callable value is called when the document is built."""

    def extra(schema: dict) -> None:
        schema["examples"] = [
            {key: value() if callable(value) else value for key, value in example.items()}
            for example in examples
        ]

    return extra


def registered_handlers_or_none(schema: dict) -> None:
    registered_handlers(schema)
    schema["enum"] = ["", *schema["enum"], None]


def _year_pattern(first: int, last: int) -> str:
    centuries = []
    for century in range(first // 100, last // 100 + 1):
        low, high = max(first, century * 100), min(last, century * 100 + 99)
        if (low, high) == (century * 100, century * 100 + 99):
            centuries.append(f"{century:02d}\\d\\d")
        else:
            years = "|".join(f"{year % 100:02d}" for year in range(low, high + 1))
            centuries.append(f"{century:02d}(?:{years})")
    return "(?:" + "|".join(centuries) + ")"


# An instant a client may name (forms.check_instant): a date, or a date-time
# with an optional zone, in a year far enough inside the bounds that no
# offset crosses them. Stated for the document; the API parses it.
INSTANT_PATTERN = (
    "^"
    + _year_pattern(EARLIEST_INSTANT.year + 1, LATEST_INSTANT.year - 2)
    + "-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-8]))"
    + "(?:T(?:[01]\\d|2[0-3]):[0-5]\\d(?::[0-5]\\d(?:\\.\\d{1,6})?)?(?:Z|[+-](?:[01]\\d|2[0-3]):[0-5]\\d)?)?$"
)


def instant(description: str, *, empty: bool = False) -> Any:
    pattern = f"^$|{INSTANT_PATTERN}" if empty else INSTANT_PATTERN
    return optional(description, pattern=pattern)


# Not RFC 3339 `date-time`: before standard time a zone's offset may have
# seconds (Europe/Moscow in 1901 is +02:30:17).
LOCAL_TIME = "ISO 8601 in the job's zone, with its UTC offset (which may have seconds, for dates before standard time)."


# -- errors ---------------------------------------------------------------------


class ErrorItem(Schema):
    code: str
    message: str
    field: str | None


class Error(Schema):
    """Every error answer: `code` says why, `field` where; `errors` lists every problem."""

    code: str = Field(
        ...,
        description="e.g. required, invalid, invalid_choice, max_length, unique, 47003, stale_version, "
        "forbidden; invalid_text: a NUL or a lone surrogate, which no database stores.",
    )
    message: str
    field: str | None
    errors: list[ErrorItem] = Field(
        default_factory=list, description="Present when a request had several problems."
    )


# The error answers operations declare, besides their own.
ERRORS = {400: Error, 401: Error}
EDIT_ERRORS = {**ERRORS, 403: Error}
OBJECT_ERRORS = {401: Error, 404: Error}
# An operation that changes a job or a run may also find it gone or changed.
CHANGE_ERRORS = {401: Error, 403: Error, 404: Error, 409: Error}


# -- stating a rule in the document ----------------------------------------------------
#
# A job's limits are enforced by the job form (with its codes, every problem
# of a body reported at once, as the console and `jobs import` see them);
# the schemas check the JSON types and state the limits from the same
# constants (`stated`), so the document says exactly what the form does.


def _lengths(keywords: dict) -> dict:
    # A text's maximum length is checked here too, on the text as sent: the
    # form trims first, and the document's maxLength counts what is sent. (A
    # text too short, or empty, is the form's to report with its other problems.)
    return {"max_length": keywords.pop("maxLength")} if "maxLength" in keywords else {}


def documented(**keywords) -> Any:
    """JSON Schema keywords for the document only: the form enforces them
    exactly as stated (on the text as sent), with its own codes."""
    return Field(json_schema_extra=keywords)


def stated(**keywords) -> Any:
    """JSON Schema keywords for the document; the form enforces them (and
    this schema a text's maximum length as sent)."""
    lengths = _lengths(keywords)
    return Field(json_schema_extra=keywords or None, **lengths)


def optional(description: str | None = None, **keywords) -> Any:
    lengths = _lengths(keywords)
    return Field(None, description=description, json_schema_extra=keywords or None, **lengths)


def storable_text(value):
    """A text the databases store (jobs.text): a NUL or a lone surrogate is
    refused with code invalid_text, as the document's pattern says, for a
    field that reaches no form that would refuse it."""
    if isinstance(value, str) and (problem := find_unstorable(value)):
        raise PydanticCustomError(INVALID_TEXT, f"Contains {problem}, which cannot be stored.")
    return value


# A text field checked by storable_text, stated in the document.
StorableText = Annotated[str, BeforeValidator(storable_text)]


def bounded_expression(value):
    if isinstance(value, str) and len(value) > cron.MAX_EXPRESSION_CHARS:
        # The cron module's own code for it (47001), as the form answers; the
        # length as sent, which the document's maxLength counts.
        raise PydanticCustomError(
            str(cron.MALFORMED),
            f"The cron expression is longer than {cron.MAX_EXPRESSION_CHARS} characters",
        )
    return value


# What a client may send as a property's value: numbers and booleans are
# stored as their text, null as the empty text.
PropertyInput = (
    Annotated[StrictStr, stated(maxLength=MAX_PROPERTY_CHARS, pattern=NO_NUL_PATTERN)]
    | StrictInt
    | StrictFloat
    | StrictBool
    | None
)
PropertiesInput = Annotated[
    dict[str, PropertyInput],
    stated(
        maxProperties=MAX_PROPERTIES,
        propertyNames={"maxLength": MAX_PROPERTY_NAME_CHARS, "pattern": VISIBLE_PATTERN},
    ),
]
