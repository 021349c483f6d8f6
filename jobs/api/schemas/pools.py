"""Concurrency pools and backfills: what the API answers and the bodies it takes."""

from ninja import Field, Schema
from pydantic import ConfigDict, StrictBool, StrictStr

from jobs.api.schemas.base import INSTANT_PATTERN, WholeNumber, examples, optional
from jobs.models import MAX_BACKFILL_PARALLEL, MAX_POOL_SIZE, POOL_NAME_PATTERN
from jobs.text import NO_NUL_PATTERN


class Pool(Schema):
    name: str = Field(..., json_schema_extra={"pattern": f"^{POOL_NAME_PATTERN}$"})
    size: int
    description: str
    live: int = Field(..., description="Its jobs' runs admitted now (queued or running), cluster-wide.")
    jobs: int = Field(..., description="Live jobs in the pool.")


class PoolList(Schema):
    results: list[Pool]


class PoolInput(Schema):
    model_config = ConfigDict(extra="forbid", json_schema_extra=examples({"size": 2}))

    size: WholeNumber = Field(
        ...,
        description=f"Runs of the pool's jobs live at once, 1 to {MAX_POOL_SIZE} (47020 otherwise).",
        json_schema_extra={"minimum": 1, "maximum": MAX_POOL_SIZE},
    )
    description: StrictStr | None = optional(maxLength=500, pattern=NO_NUL_PATTERN)


class BackfillInput(Schema):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=examples(
            {"range_start": "2025-01-01T00:00:00Z", "range_end": "2025-01-31T23:59:59Z", "dry_run": True}
        ),
    )

    range_start: StrictStr = Field(
        ...,
        description="ISO-8601: the first instant of the range.",
        json_schema_extra={"pattern": INSTANT_PATTERN},
    )
    range_end: StrictStr = Field(
        ...,
        description="ISO-8601: the last instant, not in the future (47025); at most 10,000 fires in between (47024).",
        json_schema_extra={"pattern": INSTANT_PATTERN},
    )
    parallel: WholeNumber | None = optional(
        "Runs of the backfill at once, in fire order (default 1; 47026 outside 1..100).",
        minimum=1,
        maximum=MAX_BACKFILL_PARALLEL,
    )
    include_succeeded: StrictBool | None = optional("Also fires that already have a successful run.")
    dry_run: StrictBool | None = optional("Only count the fires: nothing is created.")


class BackfillPlan(Schema):
    fires: int = Field(..., description="The fires a backfill would run.")
    succeeded: int = Field(..., description="Fires left out: they already have a successful run.")


class Backfill(Schema):
    id: int
    job_id: int
    range_start: str
    range_end: str
    parallel: int
    include_succeeded: bool
    fires: int
    created_at: str
    cancelled_at: str | None
    runs: dict[str, int] = Field(..., description="Its runs by status.")
