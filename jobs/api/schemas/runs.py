"""The API's shapes of runs: a run as the API answers it (with its log for
getRun), a page of runs and the filters of the run lists, and the body
that enqueues a one-off task."""

from typing import Annotated

from ninja import Field, Schema
from pydantic import ConfigDict, StrictStr, StringConstraints

from jobs import models
from jobs.api.schemas.base import (
    INSTANT_PATTERN,
    MAX_ID,
    PropertiesInput,
    WholeNumber,
    choice,
    examples,
    first_handler,
    instant,
    max_length_of,
    optional,
    page_limit,
    registered_handlers,
    stated,
)
from jobs.forms import MAX_RETRIES
from jobs.text import VISIBLE_PATTERN


class Run(Schema):
    id: int
    job_id: int | None = Field(..., description="null for a one-off task.")
    fire_id: str = Field(
        ..., json_schema_extra={"format": "uuid"}, description="Shared by the attempts of one fire."
    )
    scheduled_at: str = Field(..., json_schema_extra={"format": "date-time"})
    attempt: int = Field(..., ge=1)
    shard_index: int = Field(..., ge=0, description="Which shard of its fire the run is, from 0.")
    shard_total: int = Field(
        ..., ge=1, description="How many runs its fire is: its job's shards, or a broadcast's live nodes."
    )
    node: str = Field(..., description="A broadcast run: the node it is pinned to; empty for any node.")
    trigger: choice(models.Run.Trigger.values)
    status: choice(models.Run.Status.values)
    skip_reason: choice(["", *models.Run.SkipReason.values])
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
    trigger: choice(["", *models.Run.Trigger.values]) = Field(
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
        extra="forbid", json_schema_extra=examples({"handler": first_handler, "key": "example"})
    )

    handler: StrictStr = Field(
        ...,
        description="A registered handler.",
        json_schema_extra=registered_handlers,
    )
    key: Annotated[
        StrictStr,
        stated(minLength=1, maxLength=max_length_of(models.Run, "task_key"), pattern=VISIBLE_PATTERN),
    ] = Field(..., description="Dedupe key: one live task per (handler, key).")
    properties: PropertiesInput | None = None
    run_after: StrictStr | None = instant("ISO-8601; empty or left out: now.", empty=True)
    max_retries: WholeNumber | None = optional(minimum=0, maximum=MAX_RETRIES)
    retry_interval_seconds: WholeNumber | None = optional(minimum=0, maximum=models.Job.MAX_TIMEOUT_SECONDS)
    timeout_seconds: WholeNumber | None = optional(minimum=1, maximum=models.Job.MAX_TIMEOUT_SECONDS)
