"""Named alert channels: what the API answers and the bodies it takes."""

from ninja import Field, Schema
from pydantic import ConfigDict, StrictStr

from jobs.api.schemas.base import choice, examples, optional
from jobs.api.schemas.jobs import ChannelUrl
from jobs.config import ALERT_KINDS
from jobs.models import CHANNEL_NAME_PATTERN
from jobs.text import NO_NUL_PATTERN


class Channel(Schema):
    name: str = Field(..., json_schema_extra={"pattern": f"^{CHANNEL_NAME_PATTERN}$"})
    url: str | None = Field(
        None, description="The Apprise URL, masked; only administrators get it (null for the others)."
    )
    kinds: list[str] = Field(..., description="The kinds of alert it receives; empty: every kind asked for.")
    description: str
    jobs: int = Field(..., description="Live jobs that name it.")
    default: bool = Field(..., description="One of the global channels (sys.job.alertChannels).")


class ChannelList(Schema):
    results: list[Channel]


class ChannelInput(Schema):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=examples(
            {"url": "json://hooks.example.com/cronboard", "kinds": ["crashed", "failed"]}
        ),
    )

    url: ChannelUrl | None = optional(
        "The Apprise URL; required for a new channel. Null, or the URL as read back (masked), "
        "keeps the stored one."
    )
    kinds: list[choice(ALERT_KINDS)] | None = optional(
        "Kinds of alert it receives; empty: every kind the job (or sys.job.alertOn) asks for."
    )
    description: StrictStr | None = optional(maxLength=500, pattern=NO_NUL_PATTERN)
