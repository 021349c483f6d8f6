"""The API's shapes of a job: what a client sends to create, replace or
change one (`JobCreate`, `JobInput`), a job as the API answers it, the job
list and its filters, and the body of run now. The job form enforces the
limits these state (jobs/api/schemas/base.py)."""

from typing import Annotated, Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext
from ninja import Field, Schema
from pydantic import BeforeValidator, ConfigDict, StrictBool, StrictStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from jobs import cron, models, workdays
from jobs.api.schemas.base import (
    PropertiesInput,
    WholeNumber,
    bounded_expression,
    choice,
    documented,
    examples,
    first_handler,
    known_zones_or_none,
    max_length_of,
    optional,
    page_limit,
    registered_handlers_or_none,
    stated,
)
from jobs.channels import MAX_CHANNELS
from jobs.channels import MAX_URL_CHARS as MAX_CHANNEL_URL_CHARS
from jobs.config import ALERT_KINDS, MAX_ALERT_SECONDS, MAX_EMAILS, MIN_ALERT_SECONDS
from jobs.forms import (
    MAX_ALERT_THRESHOLD,
    MAX_DESCRIPTION_CHARS,
    MAX_RETRIES,
    NAMESPACE_RE,
    check_interval,
)
from jobs.text import NO_NUL_PATTERN, VISIBLE_PATTERN
from jobs.workflows import MAX_UPSTREAMS

NAME_CHARS = max_length_of(models.Job, "name")
Name = Annotated[StrictStr, stated(minLength=1, maxLength=NAME_CHARS, pattern=VISIBLE_PATTERN)]


class Upstream(Schema):
    model_config = ConfigDict(extra="forbid")

    job: Annotated[StrictStr, documented(maxLength=NAME_CHARS, pattern=VISIBLE_PATTERN)]
    on: choice(models.JobDependency.On.values) = models.JobDependency.On.SUCCESS


UpstreamInput = Upstream | Annotated[StrictStr, documented(maxLength=NAME_CHARS, pattern=VISIBLE_PATTERN)]
Seconds = Annotated[WholeNumber, stated(minimum=MIN_ALERT_SECONDS, maximum=MAX_ALERT_SECONDS)]
EditableState = choice([models.Job.State.ENABLED, models.Job.State.PAUSED])


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
    documented(maxLength=MAX_CHANNEL_URL_CHARS, pattern=NO_NUL_PATTERN),
]


class JobFields(Schema):
    """The writable fields of a job (models.Job.EDITABLE_FIELDS). null, or a field
    left out, means its default (POST, PUT) or its stored value (PATCH)."""

    model_config = ConfigDict(extra="forbid")

    name: Name | None = optional(
        "Unique among live jobs, compared after trimming; no control, bidi-override or zero-width "
        "characters (code invalid_characters)."
    )
    description: StrictStr | None = optional(maxLength=MAX_DESCRIPTION_CHARS, pattern=NO_NUL_PATTERN)
    namespace: StrictStr | None = optional(
        "Lower-case letters, digits, - and _; empty for none.",
        maxLength=max_length_of(models.Job, "namespace"),
        pattern=rf"^\s*(?:{NAMESPACE_RE.pattern})?\s*$",
    )
    kind: choice(models.Job.Kind.values) | None = None
    handler: StrictStr | None = Field(
        None,
        description="For python jobs: a registered handler (GET /api/handlers).",
        json_schema_extra=registered_handlers_or_none,
    )
    properties: PropertiesInput | None = optional(
        "Parameters for the handler; url/method/headers/body for http, sql for sql. "
        "Names are trimmed; two equal names are refused (code duplicate_key)."
    )
    after: list[UpstreamInput] | None = optional(
        "Upstream jobs: this job runs after each final run of each that matches `on` "
        "(default success); names are compared after Unicode NFC normalisation. Refused: an "
        "unknown upstream (code 47007), a cycle (47008), a chain deeper than JOBS_MAX_CHAIN_DEPTH "
        "(47009), more than JOBS_MAX_DOWNSTREAM jobs after one job (47010).",
        maxItems=MAX_UPSTREAMS,
    )
    sql_write: StrictBool | None = None
    schedule_type: choice(models.Job.ScheduleType.values) | None = optional(
        "none: no schedule of its own (runs by hand or after upstream jobs)."
    )
    cron_expression: StrictStr | None = optional(
        "Six fields, seconds first (five get 0 seconds); for schedule_type cron.",
        maxLength=cron.MAX_EXPRESSION_CHARS,
        pattern=NO_NUL_PATTERN,
    )
    interval_seconds: WholeNumber | None = optional(
        "For schedule_type interval.",
        minimum=models.Job.MIN_INTERVAL_SECONDS,
        maximum=models.Job.MAX_INTERVAL_SECONDS,
    )
    timezone: StrictStr | None = Field(
        None,
        description="IANA name, any case (stored canonically: europe/berlin → Europe/Berlin); "
        "empty means UTC; cron fields are read in it.",
        json_schema_extra=known_zones_or_none,
    )
    calendar: StrictStr | None = optional(
        "Cron only: a country code with an optional subdivision (CN, US-CA, DE-BY, GB-SCT) or a "
        "custom calendar's name; empty: none. Unknown: 47030.",
        maxLength=workdays.MAX_CALENDAR_CHARS,
        pattern=NO_NUL_PATTERN,
    )
    calendar_rule: choice(models.Job.CalendarRule.values) | None = optional(
        "Which dates of the calendar the job fires on (default working_days); one that leaves "
        "no fire in 400 days: 47032."
    )
    jitter_seconds: WholeNumber | None = optional(
        "Cron only: each fire delayed by a stable pseudo-random 0..jitter_seconds.",
        minimum=0,
        maximum=models.Job.MAX_JITTER_SECONDS,
    )
    misfire_policy: choice(models.Job.MisfirePolicy.values) | None = None
    overlap_policy: choice(models.Job.OverlapPolicy.values) | None = optional(
        "A fire while a run of the job is live: skip (recorded skipped), queue_one (start when it "
        "ends; a further fire is skipped), replace (cancel it, then start), allow (side by side up "
        "to max_parallel)."
    )
    max_parallel: WholeNumber | None = optional(
        "With overlap_policy allow: runs at once.", minimum=1, maximum=models.Job.MAX_PARALLEL
    )
    pool: StrictStr | None = optional(
        "A concurrency pool's name (GET /api/pools), empty for none; an unknown one is 47023.",
        maxLength=100,
        pattern=NO_NUL_PATTERN,
    )
    shards: WholeNumber | None = optional(
        "Each fire as this many runs, shard 0 to shards - 1, on any node (1: not split); outside "
        "the range 47036; above 1 with broadcast 47037. Sharded or broadcast: overlap_policy skip "
        "(else 47038) and no pool (else 47039).",
        minimum=1,
        maximum=models.Job.MAX_SHARDS,
    )
    broadcast: StrictBool | None = optional("Each fire as one run on every live node, pinned to it.")
    run_once: StrictBool | None = None
    max_retries: WholeNumber | None = optional(minimum=0, maximum=MAX_RETRIES)
    retry_interval_seconds: WholeNumber | None = optional(minimum=0, maximum=models.Job.MAX_TIMEOUT_SECONDS)
    timeout_seconds: WholeNumber | None = optional(minimum=1, maximum=models.Job.MAX_TIMEOUT_SECONDS)
    alert_threshold: WholeNumber | None = optional(
        "Consecutive failed fires that crash the job; 0 never.", minimum=0, maximum=MAX_ALERT_THRESHOLD
    )
    alert_emails: list[Annotated[StrictStr, stated(format="email")]] | None = optional(
        f"At most {MAX_EMAILS} distinct addresses (code too_many).", maxItems=MAX_EMAILS
    )
    alert_channels: list[ChannelUrl] | None = optional(
        "Names of alert channels (GET /api/channels); empty: the global channels "
        "(sys.job.alertChannels). A name no channel has: 400 47029. A URL stands for "
        "the named channel that has it (47029 when none does).",
        maxItems=MAX_CHANNELS,
    )
    alert_on: list[choice(ALERT_KINDS)] | None = optional(
        "Kinds of alert for this job; empty: the sys.job.alertOn setting."
    )
    late_after_seconds: Seconds | None = optional(
        "late: a fire not started this long after its time; null: sys.job.lateAfterSeconds."
    )
    long_running_seconds: Seconds | None = optional(
        "long_running: a run still going after this long (below the timeout); null: the setting."
    )
    notify_recovered: StrictBool | None = optional(
        "Also send a notice when the job next succeeds after a crash."
    )
    state: EditableState | None = optional(
        "A crashed job is re-enabled by the toggle, or by `enabled` sent with the version it has as "
        "crashed; without `version` it stays crashed, and a state left as read keeps the stored one."
    )
    version: WholeNumber | None = optional(
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
        return bounded_expression(value)

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

    model_config = ConfigDict(json_schema_extra=examples({"description": "Sends the nightly report."}))


class JobCreate(JobFields):
    """POST and PUT: fields left out take their defaults (a python job needs a
    handler, a cron job a cron_expression, an interval job interval_seconds)."""

    model_config = ConfigDict(
        json_schema_extra=examples(
            {"name": "nightly-report", "handler": first_handler, "cron_expression": "0 30 3 * * *"}
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
    kind: choice(models.Job.Kind.values)
    handler: str
    properties: dict[str, str]
    after: list[Upstream]
    sql_write: bool
    schedule_type: choice(models.Job.ScheduleType.values)
    cron_expression: str
    interval_seconds: int | None
    timezone: str
    calendar: str
    calendar_rule: choice(models.Job.CalendarRule.values)
    jitter_seconds: int
    misfire_policy: choice(models.Job.MisfirePolicy.values)
    overlap_policy: choice(models.Job.OverlapPolicy.values)
    max_parallel: int
    pool: str
    shards: int
    broadcast: bool
    run_once: bool
    max_retries: int
    retry_interval_seconds: int
    timeout_seconds: int
    alert_threshold: int
    alert_emails: list[str]
    alert_channels: list[str]
    alert_on: list[choice(ALERT_KINDS)]
    late_after_seconds: int | None
    long_running_seconds: int | None
    notify_recovered: bool
    state: choice(models.Job.State.values)
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
    state: choice(["", *models.Job.State.values]) = Field(None, description="Only this state (empty: any).")
    kind: choice(["", *models.Job.Kind.values]) = Field(None, description="Only this kind (empty: any).")
    limit: int = page_limit()
    cursor: str = Field(
        None,
        description="next_cursor from the previous page; empty or left out: the first page.",
        json_schema_extra={"pattern": f"^$|{models.CURSOR_PATTERN}"},
    )
    include: choice(["", INCLUDE_PROPERTIES]) = Field(
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
