"""The shapes of the API's requests and answers, declared once as ninja
(pydantic) schemas. django-ninja builds the OpenAPI document at /api/schema
from these and from the operations in jobs/api.py, and the same schemas
check each request's shape before a view sees it, so the document cannot
say one thing while the code does another.

Shape only: types, required fields, lengths, enums, minima and maxima, each
taken from where the rule lives (the model, the cron module, the job form,
the alert settings, the channel module). Whether a value makes sense (a cron
expression parses, a handler exists, a zone is real, a name is free) is
decided by the job form and the cron module, as for the console and
`jobs import`. A schema may give a shape error its own code
(PydanticCustomError) where the API always answered that code.

Answers are built by jobs/serializers.py; tests/test_api_schema.py and the
Schemathesis run (tests/test_api_schemathesis.py) check they fit these."""

from typing import Annotated, Any, Literal

from django.core.exceptions import ValidationError
from django.utils.translation import gettext
from ninja import Field, Schema
from pydantic import (
    BeforeValidator,
    ConfigDict,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from jobs import cron, models, upcoming
from jobs.channels import MAX_CHANNELS
from jobs.channels import MAX_URL_CHARS as MAX_CHANNEL_URL_CHARS
from jobs.config import ALERT_KINDS, MAX_ALERT_SECONDS, MAX_EMAILS, MIN_ALERT_SECONDS
from jobs.forms import (
    EARLIEST_INSTANT,
    LATEST_INSTANT,
    MAX_ALERT_THRESHOLD,
    MAX_DESCRIPTION_CHARS,
    MAX_PROPERTIES,
    MAX_PROPERTY_CHARS,
    MAX_PROPERTY_NAME_CHARS,
    MAX_RETRIES,
    MAX_UPSTREAMS,
    NAMESPACE_RE,
    check_interval,
)
from jobs.serializers import JOB_PAGE_DEFAULT, JOB_PAGE_MAX, PAGE_MAX_CHARS
from jobs.text import NO_NUL_PATTERN, VISIBLE_PATTERN

PREVIEW_DEFAULT_COUNT = 5
PREVIEW_MAX_COUNT = 50
UPCOMING_MAX_LIMIT = 500


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


def _choice(values) -> Any:
    return Literal[tuple(values)]


def _max_length(model, field: str) -> int:
    return model._meta.get_field(field).max_length


def _registered_handlers(schema: dict) -> None:
    # The registry is filled at start-up, so it is read when the document is built.
    from jobs.handlers import registry

    schema["enum"] = sorted(info.name for info in registry.available())


def _known_zones(schema: dict) -> None:
    # Any case is accepted and stored canonically; these are the spellings.
    schema["enum"] = ["", *cron.known_zones()]
    schema["maxLength"] = cron.MAX_ZONE_CHARS


def _known_zones_or_none(schema: dict) -> None:
    _known_zones(schema)
    schema["enum"].append(None)


def _first_handler() -> str:
    from jobs.handlers import registry

    # A demo handler rather than one of Cronboard's own maintenance jobs.
    names = sorted(
        (info.name for info in registry.available()), key=lambda name: (name.startswith("cronboard."), name)
    )
    return names[0] if names else ""


def _examples(*examples):
    """A schema's `examples` (valid requests, which clients and Schemathesis
    start from); a callable value is called when the document is built."""

    def extra(schema: dict) -> None:
        schema["examples"] = [
            {key: value() if callable(value) else value for key, value in example.items()}
            for example in examples
        ]

    return extra


def _registered_handlers_or_none(schema: dict) -> None:
    _registered_handlers(schema)
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


def _instant(description: str, *, empty: bool = False) -> Any:
    pattern = f"^$|{INSTANT_PATTERN}" if empty else INSTANT_PATTERN
    return _optional(description, pattern=pattern)


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


# -- jobs -----------------------------------------------------------------------------
#
# A job's limits are enforced by the job form (with its codes, every problem
# of a body reported at once, as the console and `jobs import` see them);
# the schemas check the JSON types and state the limits from the same
# constants (`_stated`), so the document says exactly what the form does.


def _lengths(keywords: dict) -> dict:
    # A text's maximum length is checked here too, on the text as sent: the
    # form trims first, and the document's maxLength counts what is sent. (A
    # text too short, or empty, is the form's to report with its other problems.)
    return {"max_length": keywords.pop("maxLength")} if "maxLength" in keywords else {}


def _documented(**keywords) -> Any:
    """JSON Schema keywords for the document only: the form enforces them
    exactly as stated (on the text as sent), with its own codes."""
    return Field(json_schema_extra=keywords)


def _stated(**keywords) -> Any:
    """JSON Schema keywords for the document; the form enforces them (and
    this schema a text's maximum length as sent)."""
    lengths = _lengths(keywords)
    return Field(json_schema_extra=keywords or None, **lengths)


NAME_CHARS = _max_length(models.Job, "name")
Name = Annotated[StrictStr, _stated(minLength=1, maxLength=NAME_CHARS, pattern=VISIBLE_PATTERN)]
# What a client may send as a property's value: numbers and booleans are
# stored as their text, null as the empty text.
PropertyInput = (
    Annotated[StrictStr, _stated(maxLength=MAX_PROPERTY_CHARS, pattern=NO_NUL_PATTERN)]
    | StrictInt
    | StrictFloat
    | StrictBool
    | None
)
PropertiesInput = Annotated[
    dict[str, PropertyInput],
    _stated(
        maxProperties=MAX_PROPERTIES,
        propertyNames={"maxLength": MAX_PROPERTY_NAME_CHARS, "pattern": VISIBLE_PATTERN},
    ),
]


class Upstream(Schema):
    model_config = ConfigDict(extra="forbid")

    job: Annotated[StrictStr, _documented(maxLength=NAME_CHARS, pattern=VISIBLE_PATTERN)]
    on: _choice(models.JobDependency.On.values) = models.JobDependency.On.SUCCESS


UpstreamInput = Upstream | Annotated[StrictStr, _documented(maxLength=NAME_CHARS, pattern=VISIBLE_PATTERN)]
Seconds = Annotated[WholeNumber, _stated(minimum=MIN_ALERT_SECONDS, maximum=MAX_ALERT_SECONDS)]
EditableState = _choice([models.Job.State.ENABLED, models.Job.State.PAUSED])


def _optional(description: str | None = None, **keywords) -> Any:
    lengths = _lengths(keywords)
    return Field(None, description=description, json_schema_extra=keywords or None, **lengths)


def _bounded_expression(value):
    if isinstance(value, str) and len(value) > cron.MAX_EXPRESSION_CHARS:
        # The cron module's own code for it (47001), as the form answers; the
        # length as sent, which the document's maxLength counts.
        raise PydanticCustomError(
            str(cron.MALFORMED),
            f"The cron expression is longer than {cron.MAX_EXPRESSION_CHARS} characters",
        )
    return value


def _bounded_channel(value):
    # The channel module trims before it measures; the document's maxLength
    # counts the text as sent. Its own code and words, as the form answers.
    if isinstance(value, str) and len(value) > MAX_CHANNEL_URL_CHARS:
        raise PydanticCustomError(
            "invalid_channel",
            gettext("A channel URL is longer than {max_url_chars} characters.").format(
                max_url_chars=MAX_CHANNEL_URL_CHARS
            ),
        )
    return value


ChannelUrl = Annotated[
    StrictStr,
    BeforeValidator(_bounded_channel),
    _documented(maxLength=MAX_CHANNEL_URL_CHARS, pattern=NO_NUL_PATTERN),
]


class JobFields(Schema):
    """The writable fields of a job (models.Job.EDITABLE_FIELDS). null, or a field
    left out, means its default (POST, PUT) or its stored value (PATCH)."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = _optional(
        "Unique among live jobs, compared after trimming; no control, bidi-override or zero-width "
        "characters (code invalid_characters)."
    )
    description: StrictStr | None = _optional(maxLength=MAX_DESCRIPTION_CHARS, pattern=NO_NUL_PATTERN)
    namespace: StrictStr | None = _optional(
        "Lower-case letters, digits, - and _; empty for none.",
        maxLength=_max_length(models.Job, "namespace"),
        pattern=rf"^\s*(?:{NAMESPACE_RE.pattern})?\s*$",
    )
    kind: _choice(models.Job.Kind.values) | None = None
    handler: StrictStr | None = Field(
        None,
        description="For python jobs: a registered handler (GET /api/handlers).",
        json_schema_extra=_registered_handlers_or_none,
    )
    properties: PropertiesInput | None = _optional(
        "Parameters for the handler; url/method/headers/body for http, sql for sql. "
        "Names are trimmed; two equal names are refused (code duplicate_key)."
    )
    after: list[UpstreamInput] | None = _optional(
        "Upstream jobs: this job runs after each final run of each that matches `on` "
        "(default success); names are compared after Unicode NFC normalisation. Refused: an "
        "unknown upstream (code 47007), a cycle (47008), a chain deeper than JOBS_MAX_CHAIN_DEPTH "
        "(47009), more than JOBS_MAX_DOWNSTREAM jobs after one job (47010).",
        maxItems=MAX_UPSTREAMS,
    )
    sql_write: StrictBool | None = None
    schedule_type: _choice(models.Job.ScheduleType.values) | None = _optional(
        "none: no schedule of its own (runs by hand or after upstream jobs)."
    )
    cron_expression: StrictStr | None = _optional(
        "Six fields, seconds first (five get 0 seconds); for schedule_type cron.",
        maxLength=cron.MAX_EXPRESSION_CHARS,
        pattern=NO_NUL_PATTERN,
    )
    interval_seconds: WholeNumber | None = _optional(
        "For schedule_type interval.",
        minimum=models.Job.MIN_INTERVAL_SECONDS,
        maximum=models.Job.MAX_INTERVAL_SECONDS,
    )
    timezone: StrictStr | None = Field(
        None,
        description="IANA name, any case (stored canonically: europe/berlin → Europe/Berlin); "
        "empty means UTC; cron fields are read in it.",
        json_schema_extra=_known_zones_or_none,
    )
    misfire_policy: _choice(models.Job.MisfirePolicy.values) | None = None
    run_once: StrictBool | None = None
    max_retries: WholeNumber | None = _optional(minimum=0, maximum=MAX_RETRIES)
    retry_interval_seconds: WholeNumber | None = _optional(minimum=0, maximum=models.Job.MAX_TIMEOUT_SECONDS)
    timeout_seconds: WholeNumber | None = _optional(minimum=1, maximum=models.Job.MAX_TIMEOUT_SECONDS)
    alert_threshold: WholeNumber | None = _optional(
        "Consecutive failed fires that crash the job; 0 never.", minimum=0, maximum=MAX_ALERT_THRESHOLD
    )
    alert_emails: list[Annotated[StrictStr, _stated(format="email")]] | None = _optional(
        f"At most {MAX_EMAILS} distinct addresses (code too_many).", maxItems=MAX_EMAILS
    )
    alert_channels: list[ChannelUrl] | None = _optional(
        "Apprise URLs (slack://…, json://host/path …). Read back masked; "
        "sending a masked URL back unchanged keeps the stored one.",
        maxItems=MAX_CHANNELS,
    )
    alert_on: list[_choice(ALERT_KINDS)] | None = _optional(
        "Kinds of alert for this job; empty: the sys.job.alertOn setting."
    )
    late_after_seconds: Seconds | None = _optional(
        "late: a fire not started this long after its time; null: sys.job.lateAfterSeconds."
    )
    long_running_seconds: Seconds | None = _optional(
        "long_running: a run still going after this long (below the timeout); null: the setting."
    )
    notify_recovered: StrictBool | None = _optional(
        "Also send a notice when the job next succeeds after a crash."
    )
    state: EditableState | None = _optional(
        "A crashed job is re-enabled by the toggle, or by `enabled` sent with the version it has as "
        "crashed; without `version` it stays crashed, and a state left as read keeps the stored one."
    )
    version: WholeNumber | None = _optional(
        "PUT/PATCH: the version you read; a stale one is refused with 409."
    )
    # A job as the API answers it may be sent back: what only the server
    # writes is accepted and ignored.
    id: Any = Field(None, json_schema_extra={"readOnly": True})
    builtin: Any = Field(None, json_schema_extra={"readOnly": True})
    consecutive_failures: Any = Field(None, json_schema_extra={"readOnly": True})
    next_fire_at: Any = Field(None, json_schema_extra={"readOnly": True})
    last_fire_at: Any = Field(None, json_schema_extra={"readOnly": True})
    last_status: Any = Field(None, json_schema_extra={"readOnly": True})
    last_error: Any = Field(None, json_schema_extra={"readOnly": True})
    last_duration_ms: Any = Field(None, json_schema_extra={"readOnly": True})
    owner: Any = Field(None, json_schema_extra={"readOnly": True})
    created_at: Any = Field(None, json_schema_extra={"readOnly": True})
    updated_at: Any = Field(None, json_schema_extra={"readOnly": True})

    @field_validator("cron_expression", mode="before")
    @classmethod
    def _expression_bounded(cls, value):
        return _bounded_expression(value)

    @field_validator("interval_seconds")
    @classmethod
    def _interval_in_range(cls, value):
        # The document's minimum and maximum hold whatever the schedule type:
        # the form reads the interval only for an interval job, and a value
        # it would ignore must not pass unchecked. Its rule and codes.
        if value is None:
            return value
        try:
            return check_interval(value)
        except ValidationError as exc:
            raise PydanticCustomError(exc.code, exc.messages[0]) from None


class JobInput(JobFields):
    """PATCH: fields left out keep their values."""

    model_config = ConfigDict(json_schema_extra=_examples({"description": "Sends the nightly report."}))


class JobCreate(JobFields):
    """POST and PUT: fields left out take their defaults (a python job needs a
    handler, a cron job a cron_expression, an interval job interval_seconds)."""

    model_config = ConfigDict(
        json_schema_extra=_examples(
            {"name": "nightly-report", "handler": _first_handler, "cron_expression": "0 30 3 * * *"}
        )
    )

    name: Name = Field(
        ...,
        description="Unique among live jobs, compared after trimming; no control, bidi-override or "
        "zero-width characters (code invalid_characters).",
    )


class Job(Schema):
    id: int
    name: str
    description: str
    namespace: str
    kind: _choice(models.Job.Kind.values)
    handler: str
    properties: dict[str, str]
    after: list[Upstream]
    sql_write: bool
    schedule_type: _choice(models.Job.ScheduleType.values)
    cron_expression: str
    interval_seconds: int | None
    timezone: str
    misfire_policy: _choice(models.Job.MisfirePolicy.values)
    run_once: bool
    max_retries: int
    retry_interval_seconds: int
    timeout_seconds: int
    alert_threshold: int
    alert_emails: list[str]
    alert_channels: list[str]
    alert_on: list[_choice(ALERT_KINDS)]
    late_after_seconds: int | None
    long_running_seconds: int | None
    notify_recovered: bool
    state: _choice(models.Job.State.values)
    version: int = Field(..., ge=1)
    builtin: bool
    consecutive_failures: int = Field(..., ge=0)
    next_fire_at: str | None = Field(..., json_schema_extra={"format": "date-time"})
    last_fire_at: str | None = Field(..., json_schema_extra={"format": "date-time"})
    last_status: str
    last_error: str
    last_duration_ms: int | None
    owner: str | None = Field(..., description="The owner's username.")
    created_at: str = Field(..., json_schema_extra={"format": "date-time"})
    updated_at: str = Field(..., json_schema_extra={"format": "date-time"})

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})


class JobListItem(Job):
    properties: dict[str, str] = Field(None, description="Only with include=properties.")

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})


class JobList(Schema):
    results: list[JobListItem]
    next_cursor: str | None = Field(..., description="Pass as `cursor` for the next page; null on the last.")


INCLUDE_PROPERTIES = "properties"


class JobFilters(Schema):
    namespace: str = Field(
        None,
        description="Only this namespace (empty: jobs outside any).",
        json_schema_extra={"pattern": NO_NUL_PATTERN},
    )
    state: _choice(["", *models.Job.State.values]) = Field(None, description="Only this state (empty: any).")
    kind: _choice(["", *models.Job.Kind.values]) = Field(None, description="Only this kind (empty: any).")
    limit: int = page_limit()
    cursor: str = Field(
        None,
        description="next_cursor from the previous page; empty or left out: the first page.",
        json_schema_extra={"pattern": f"^$|{models.CURSOR_PATTERN}"},
    )
    include: _choice(["", INCLUDE_PROPERTIES]) = Field(
        None, description="properties: each job's properties too (left out otherwise: they may be large)."
    )


class RunNow(Schema):
    """Run now; `properties` overrides the job's properties for this run only
    (merged over them, validated like the job's own)."""

    model_config = ConfigDict(extra="forbid")

    properties: PropertiesInput | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_body(cls, data):
        return {} if data is None else data  # the body may be left out


# -- runs -----------------------------------------------------------------------------


class Run(Schema):
    id: int
    job_id: int | None = Field(..., description="null for a one-off task.")
    fire_id: str = Field(
        ..., json_schema_extra={"format": "uuid"}, description="Shared by the attempts of one fire."
    )
    scheduled_at: str = Field(..., json_schema_extra={"format": "date-time"})
    attempt: int = Field(..., ge=1)
    trigger: _choice(models.Run.Trigger.values)
    status: _choice(models.Run.Status.values)
    skip_reason: _choice(["", *models.Run.SkipReason.values])
    worker_id: str
    started_at: str | None = Field(..., json_schema_extra={"format": "date-time"})
    finished_at: str | None = Field(..., json_schema_extra={"format": "date-time"})
    duration_ms: int | None
    result: str
    error: str
    properties: dict[str, str] = Field(
        ..., description="A task's properties; a job's run: its property overrides ({} if none)."
    )
    caused_by: int | None = Field(
        ..., description="trigger upstream: the upstream run that started this one."
    )
    chain_id: int | None = Field(
        ..., description="trigger upstream: the first run of the chain of runs this one belongs to."
    )
    chain_depth: int | None = Field(
        ..., ge=1, description="trigger upstream: how many runs came before this one in its chain."
    )
    handler: str = Field(None, description="One-off tasks only: the task's handler.")
    task_key: str = Field(None, description="One-off tasks only: the dedupe key.")

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})


class RunDetail(Run):
    log: str

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})


class RunPage(Schema):
    results: list[Run]
    next_cursor: str | None = Field(..., description="Pass as `cursor` for the next page; null on the last.")


def _comma_list(values) -> str:
    # Items separated by commas; empty items are ignored.
    item = "|".join(values)
    return rf"^(?:{item})?(?:,(?:{item})?)*$"


class RunFilters(Schema):
    status: Annotated[str, StringConstraints(pattern=_comma_list(models.Run.Status.values))] = Field(
        None, description="Only these statuses (comma-separated)."
    )
    trigger: _choice(["", *models.Run.Trigger.values]) = Field(
        None, description="Only this trigger (empty: any)."
    )
    from_: str = Field(
        None,
        alias="from",
        description="Scheduled at or after (ISO-8601; no zone means UTC).",
        json_schema_extra={"pattern": f"^$|{INSTANT_PATTERN}"},
    )
    to: str = Field(
        None,
        description="Scheduled before (ISO-8601).",
        json_schema_extra={"pattern": f"^$|{INSTANT_PATTERN}"},
    )
    limit: int = page_limit()
    cursor: str = Field(
        None,
        description="next_cursor from the previous page; empty or left out: the first page.",
        json_schema_extra={"pattern": f"^$|{models.CURSOR_PATTERN}"},
    )


class AllRunFilters(RunFilters):
    job: int = Field(None, ge=1, le=MAX_ID, description="Only this job's runs.")


# -- tasks ----------------------------------------------------------------------------


class TaskInput(Schema):
    """Limits enforced by the task form, stated here from the same constants."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra=_examples({"handler": _first_handler, "key": "example"})
    )

    handler: StrictStr = Field(
        ...,
        description="A registered handler.",
        json_schema_extra=_registered_handlers,
    )
    key: Annotated[
        StrictStr,
        _stated(minLength=1, maxLength=_max_length(models.Run, "task_key"), pattern=VISIBLE_PATTERN),
    ] = Field(..., description="Dedupe key: one live task per (handler, key).")
    properties: PropertiesInput | None = None
    run_after: StrictStr | None = _instant("ISO-8601; empty or left out: now.", empty=True)
    max_retries: WholeNumber | None = _optional(minimum=0, maximum=MAX_RETRIES)
    retry_interval_seconds: WholeNumber | None = _optional(minimum=0, maximum=models.Job.MAX_TIMEOUT_SECONDS)
    timeout_seconds: WholeNumber | None = _optional(minimum=1, maximum=models.Job.MAX_TIMEOUT_SECONDS)


# -- handlers, dashboard, upcoming ---------------------------------------------------------


class Handler(Schema):
    name: str
    label: str
    description: str
    properties_help: dict[str, str]


class HandlerList(Schema):
    results: list[Handler]


class AttentionJob(Schema):
    id: int
    name: str
    state: _choice(models.Job.State.values)
    consecutive_failures: int


class Dashboard(Schema):
    jobs_by_state: dict[str, int]
    runs_24h_by_status: dict[str, int]
    success_rate_24h: float | None = Field(
        ...,
        description="Percent of finished runs (succeeded, failed, timed out, interrupted) that succeeded.",
    )
    attention: list[AttentionJob] = Field(
        ..., description="Crashed jobs, then failing ones (most failures first), at most 20."
    )
    running: list[Run] = Field(..., description="Queued and running runs, newest first, at most 20.")
    running_count: int


class UpcomingQuery(Schema):
    window: _choice(upcoming.WINDOWS) = Field("24h", description="How far ahead.")
    limit: int = Field(upcoming.PAGE, ge=1, le=UPCOMING_MAX_LIMIT, description="Page size.")
    cursor: str = Field(
        None,
        description="next_cursor from the previous page; empty or left out: the first page.",
        json_schema_extra={"pattern": f"^$|{models.CURSOR_PATTERN}"},
    )


class Fire(Schema):
    job: int
    name: str
    at: str = Field(..., json_schema_extra={"format": "date-time"}, description="UTC.")
    local: str = Field(..., description=LOCAL_TIME)
    timezone: str
    dst: Literal["repeated", "shifted"] | None = Field(
        ...,
        description="repeated: a local time that happens twice; shifted: the first fire after clocks changed.",
    )


class UpcomingPage(Schema):
    results: list[Fire]
    next_cursor: str | None = Field(..., description="Pass as `cursor` for the next page; null on the last.")


# -- cron preview ---------------------------------------------------------------------


class PreviewRequest(Schema):
    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra=_examples({"expression": "0 30 3 * * MON-FRI", "timezone": "Europe/Berlin"}),
    )

    expression: StrictStr = Field(
        ..., min_length=1, max_length=cron.MAX_EXPRESSION_CHARS, json_schema_extra={"pattern": NO_NUL_PATTERN}
    )
    timezone: StrictStr = Field(
        "UTC",
        max_length=cron.MAX_ZONE_CHARS,
        description="IANA name, any case; empty means UTC.",
        json_schema_extra=_known_zones,
    )
    after: StrictStr | None = _instant("ISO-8601; left out: now.")
    count: WholeNumber = Field(PREVIEW_DEFAULT_COUNT, ge=1, le=PREVIEW_MAX_COUNT)

    @field_validator("expression", mode="before")
    @classmethod
    def _expression_given(cls, value):
        if not isinstance(value, str) or not value.strip():
            raise PydanticCustomError("required", "Send the cron expression as “expression”.")
        return _bounded_expression(value)

    @field_validator("timezone", mode="before")
    @classmethod
    def _zone_bounded(cls, value):
        if isinstance(value, str) and len(value) > cron.MAX_ZONE_CHARS:
            raise PydanticCustomError(
                str(cron.UNKNOWN_ZONE), f"A time zone name has at most {cron.MAX_ZONE_CHARS} characters"
            )
        return value


class PreviewTime(Schema):
    utc: str = Field(..., json_schema_extra={"format": "date-time"})
    local: str = Field(..., description=LOCAL_TIME)
    dst: Literal["skipped", "repeated"] | None = Field(
        None,
        description="skipped: the wall time fell in a spring-forward gap; repeated: a fall-back hour.",
    )


class Preview(Schema):
    expression: str = Field(..., description="Normalised, six fields.")
    description: str
    warnings: list[str] = []
    times: list[PreviewTime]
