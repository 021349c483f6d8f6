"""The API's shapes of what reads across jobs: the registered handlers,
the dashboard's figures, upcoming fires, and the cron preview."""

from typing import Annotated, Literal

from ninja import Field, Schema
from pydantic import BeforeValidator, ConfigDict, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from jobs import cron, models, upcoming, workdays
from jobs.api.schemas.base import (
    LOCAL_TIME,
    WholeNumber,
    bounded_expression,
    choice,
    examples,
    instant,
    known_zones,
    storable_text,
)
from jobs.api.schemas.runs import Run
from jobs.text import NO_NUL_PATTERN

PREVIEW_DEFAULT_COUNT = 5
PREVIEW_MAX_COUNT = 50
UPCOMING_MAX_LIMIT = 500


class Handler(Schema):
    name: str
    label: str
    description: str
    properties_help: dict[str, str]
    # A task handler (registry.register's `task`): code starts its jobs.
    task: bool


class HandlerList(Schema):
    results: list[Handler]


class AttentionJob(Schema):
    id: int
    name: str
    state: choice(models.Job.State.values)
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
    window: choice(upcoming.WINDOWS) = Field("24h", description="How far ahead.")
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
        json_schema_extra=examples({"expression": "0 30 3 * * MON-FRI", "timezone": "Europe/Berlin"}),
    )

    expression: StrictStr = Field(
        ..., min_length=1, max_length=cron.MAX_EXPRESSION_CHARS, json_schema_extra={"pattern": NO_NUL_PATTERN}
    )
    timezone: StrictStr = Field(
        "UTC",
        max_length=cron.MAX_ZONE_CHARS,
        description="IANA name, any case; empty means UTC.",
        json_schema_extra=known_zones,
    )
    after: StrictStr | None = instant("ISO-8601; left out: now.")
    count: WholeNumber = Field(PREVIEW_DEFAULT_COUNT, ge=1, le=PREVIEW_MAX_COUNT)
    name: Annotated[StrictStr, BeforeValidator(storable_text)] = Field(
        "",
        max_length=200,
        description="The job's name: the seed H reads (a job's H values come from its name).",
        json_schema_extra={"pattern": NO_NUL_PATTERN},
    )
    calendar: Annotated[StrictStr, BeforeValidator(storable_text)] = Field(
        "",
        max_length=workdays.MAX_CALENDAR_CHARS,
        description="A built-in code (CN, US-CA) or a custom calendar's name; empty: none. Unknown: 47030.",
        json_schema_extra={"pattern": NO_NUL_PATTERN},
    )
    calendar_rule: choice(models.Job.CalendarRule.values) = Field(models.Job.CalendarRule.WORKING_DAYS)
    jitter_seconds: WholeNumber = Field(0, ge=0, le=models.Job.MAX_JITTER_SECONDS)

    @field_validator("expression", mode="before")
    @classmethod
    def _expression_given(cls, value):
        if not isinstance(value, str) or not value.strip():
            raise PydanticCustomError("required", "Send the cron expression as “expression”.")
        return bounded_expression(value)

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
    note: str | None = Field(
        None, description="From the calendar: a working day on a weekend (a make-up day)."
    )


class PreviewSkipped(Schema):
    date: str = Field(..., json_schema_extra={"format": "date"})
    reason: str = Field(..., description="The holiday's name, or weekend.")


class Preview(Schema):
    expression: str = Field(..., description="Normalised, six fields (H kept as written).")
    description: str
    warnings: list[str] = []
    times: list[PreviewTime]
    skipped: list[PreviewSkipped] = Field(
        [], description="Local dates between the times that the calendar rule skipped, with the reason."
    )
    missing: str | None = Field(
        None,
        description="The first date the calendar's installed data does not cover, when the fires reach it.",
        json_schema_extra={"format": "date"},
    )
