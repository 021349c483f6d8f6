"""Secrets: what the API answers of one (never its value) and the body that
sets one."""

from ninja import Field, Schema
from pydantic import ConfigDict

from jobs import secrets
from jobs.api.schemas.base import examples, optional
from jobs.models.secrets import MAX_VALUE_BYTES
from jobs.text import NO_NUL_PATTERN


class Secret(Schema):
    """A secret as anyone may see it: its value is never sent back."""

    name: str
    description: str
    set_at: str = Field(
        ..., json_schema_extra={"format": "date-time"}, description="When the value was last set."
    )
    set_by: str = Field(..., description="Who set it (empty: the command line or a program).")

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})


class SecretList(Schema):
    results: list[Secret]


class SecretInput(Schema):
    model_config = ConfigDict(
        extra="forbid", json_schema_extra=examples({"value": "s3cret", "description": "API"})
    )

    value: str = Field(
        ...,
        description=f"The value, at most {MAX_VALUE_BYTES} bytes in UTF-8 (code max_length); written once, "
        "never answered back.",
        json_schema_extra={"minLength": 1, "maxLength": MAX_VALUE_BYTES, "pattern": NO_NUL_PATTERN},
    )
    description: str | None = optional(
        "What it is for; kept when left out.",
        maxLength=secrets.MAX_DESCRIPTION_CHARS,
        pattern=NO_NUL_PATTERN,
    )
