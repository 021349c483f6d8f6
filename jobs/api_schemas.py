"""The shapes of the API's requests and answers, declared once as ninja
(pydantic) schemas. django-ninja builds the OpenAPI document at /api/schema
from these and from the operations in jobs/api.py, and the same schemas
check each request's shape before a view sees it, so the document cannot
say one thing while the code does another.

Shape only: types, required fields, lengths, enums, minima and maxima.
Whether a value makes sense (a cron expression parses, a handler exists,
a zone is real) is decided by the job form and the cron module, as for the
console and `jobs import`. A schema may give a shape error its own code
(PydanticCustomError) where the API always answered that code."""

from typing import Literal

from ninja import Field, Schema
from pydantic import ConfigDict, StrictInt, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from jobs import cron

PREVIEW_DEFAULT_COUNT = 5
PREVIEW_MAX_COUNT = 50


class ErrorItem(Schema):
    code: str
    message: str
    field: str | None


class Error(Schema):
    """Every error answer: `code` says why, `field` where; `errors` lists every problem."""

    code: str = Field(
        ...,
        description="e.g. required, invalid, unique, 47003, stale_version, forbidden; "
        "invalid_text: a NUL or a lone surrogate, which no database stores.",
    )
    message: str
    field: str | None
    errors: list[ErrorItem] = Field(
        default_factory=list, description="Present when a request had several problems."
    )


class Handler(Schema):
    name: str
    label: str
    description: str
    properties_help: dict[str, str]


class HandlerList(Schema):
    results: list[Handler]


class PreviewRequest(Schema):
    model_config = ConfigDict(extra="ignore")

    expression: StrictStr = Field(..., min_length=1, max_length=cron.MAX_EXPRESSION_CHARS)
    timezone: StrictStr = Field(
        "UTC", max_length=cron.MAX_ZONE_CHARS, description="IANA name, any case; empty means UTC."
    )
    after: StrictStr | None = Field(
        None, json_schema_extra={"format": "date-time"}, description="ISO-8601; default now."
    )
    count: StrictInt = Field(PREVIEW_DEFAULT_COUNT, ge=1, le=PREVIEW_MAX_COUNT)

    @field_validator("expression", mode="before")
    @classmethod
    def _expression_given(cls, value):
        if not isinstance(value, str) or not value.strip():
            raise PydanticCustomError("required", "Send the cron expression as “expression”.")
        if len(value) > cron.MAX_EXPRESSION_CHARS:
            # The cron module's own code for it (47001), as the form answers.
            raise PydanticCustomError(
                str(cron.MALFORMED),
                f"The cron expression is longer than {cron.MAX_EXPRESSION_CHARS} characters",
            )
        return value

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
    local: str = Field(..., json_schema_extra={"format": "date-time"})
    dst: Literal["skipped", "repeated"] | None = Field(
        None,
        description="skipped: the wall time fell in a spring-forward gap; repeated: a fall-back hour.",
    )


class Preview(Schema):
    expression: str = Field(..., description="Normalised, six fields.")
    description: str
    warnings: list[str] = []
    times: list[PreviewTime]
