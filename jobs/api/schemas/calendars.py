"""Custom working-day calendars: what the API answers of one and the body
that sets one."""

from ninja import Field, Schema
from pydantic import ConfigDict

from jobs import calendars, workdays
from jobs.api.schemas.base import StorableText, examples
from jobs.text import NO_NUL_PATTERN


class CalendarDate(Schema):
    date: StorableText = Field(..., json_schema_extra={"format": "date", "pattern": NO_NUL_PATTERN})
    name: StorableText = Field("", max_length=200, json_schema_extra={"pattern": NO_NUL_PATTERN})

    model_config = ConfigDict(extra="forbid")


class Calendar(Schema):
    name: str
    description: str
    base: str = Field(
        ..., description="A built-in code (CN, US-CA), another custom calendar, or empty: Mon-Fri."
    )
    non_working: list[CalendarDate]
    working: list[CalendarDate]

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})


class CalendarList(Schema):
    results: list[Calendar]


class CalendarInput(Schema):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=examples(
            {"base": "CN", "non_working": [{"date": "2025-12-31", "name": "Year-end close"}], "working": []}
        ),
    )

    description: StorableText = Field("", max_length=1000, json_schema_extra={"pattern": NO_NUL_PATTERN})
    base: StorableText = Field(
        "",
        max_length=workdays.MAX_CALENDAR_CHARS,
        description="47030 unknown; 47031 itself, or a chain of bases that leads back to it.",
        json_schema_extra={"pattern": NO_NUL_PATTERN},
    )
    non_working: list[CalendarDate] = Field([], max_length=calendars.MAX_DATES)
    working: list[CalendarDate] = Field([], max_length=calendars.MAX_DATES)
    ics: StorableText | None = Field(
        None,
        max_length=calendars.MAX_ICS_BYTES,
        description="An iCalendar (.ics) file's text: its events' dates are added to non_working (47033 if unreadable).",
        json_schema_extra={"pattern": NO_NUL_PATTERN},
    )
