"""Secrets: what the API answers of one (never its value) and the body that
sets one."""

from typing import Annotated

from ninja import Field, Schema
from pydantic import ConfigDict, WithJsonSchema

from jobs import secrets
from jobs.api.schemas.base import examples, optional
from jobs.models import NAMESPACE_RE
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
    namespaces: list[str] = Field(
        ...,
        description='The namespaces whose jobs may reference it ("": the jobs outside any namespace); '
        "empty: every namespace.",
    )

    model_config = ConfigDict(json_schema_extra={"additionalProperties": False})


class SecretList(Schema):
    results: list[Secret]


# A namespace as the document states it; jobs.secrets.check_namespaces
# refuses another (400 invalid, field namespaces).
NamespaceItem = Annotated[
    str, WithJsonSchema({"type": "string", "maxLength": 100, "pattern": rf"^(?:{NAMESPACE_RE.pattern})?$"})
]


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
    namespaces: list[NamespaceItem] | None = Field(
        None,
        description='The namespaces whose jobs may reference it ("": the jobs outside any namespace); '
        "empty: every namespace; kept when left out. A job of another namespace that references it is "
        "refused at save (secret_not_allowed) and its runs fail.",
        json_schema_extra={"maxItems": secrets.MAX_NAMESPACES},
    )
