"""Job and Run ⇄ plain dicts: the one shape shared by `manage.py jobs
import/export/runs --json` and the JSON API."""

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import models

from jobs import secrets
from jobs.handlers.registry import HandlerInfo
from jobs.models import Job, Run, run_cursor
from jobs.text import CODE, find_unstorable, storable

# The writable fields of a job, in the jobs-as-code file and the API.
JOB_FIELDS = Job.EDITABLE_FIELDS
# What job_to_dict adds; a client may send them back (GET, change, PUT the
# whole object) and they are ignored.
JOB_READ_ONLY_FIELDS = (
    "id",
    "builtin",
    "consecutive_failures",
    "next_fire_at",
    "last_fire_at",
    "last_status",
    "last_error",
    "last_duration_ms",
    "owner",
    "created_at",
    "updated_at",
)

RUN_FIELDS = [
    "fire_id",
    "scheduled_at",
    "attempt",
    "trigger",
    "status",
    "skip_reason",
    "worker_id",
    "started_at",
    "finished_at",
    "duration_ms",
    "result",
    "error",
]


# Pages of jobs (GET /api/jobs, the console's export): so many by default,
# at most JOB_PAGE_MAX.
JOB_PAGE_DEFAULT = 100
JOB_PAGE_MAX = 1000
# A page of answers ends early, after at least one item, once its JSON
# passes this many characters, which bounds what a request holds in memory
# whatever is stored: one job's properties alone may be 6.5 MB (100
# properties of 65,536 characters), a run's result and error 256 K
# characters each. Its next_cursor goes on from there.
PAGE_MAX_CHARS = 16 * 1024 * 1024
# Rows read from the database at once while a page is written.
PAGE_CHUNK_ROWS = 20


@dataclass
class Page:
    """A page of answers: each item's JSON, and the cursor of the next page
    (None on the last)."""

    items: list[str]
    next_cursor: str | None

    def envelope(self) -> str:
        """The API's page: {"results": [...], "next_cursor": ...}."""
        return f'{{"results": [{", ".join(self.items)}], "next_cursor": {json.dumps(self.next_cursor)}}}'


def json_page(rows: Iterable, *, limit: int, render: Callable[[object], str]) -> Page:
    """Up to `limit` of the ordered `rows` (a query of at least limit + 1,
    read PAGE_CHUNK_ROWS at a time), each rendered to JSON as it comes, and
    fewer once PAGE_MAX_CHARS is passed; the cursor is the last one's
    position (run_cursor of a run's scheduled_at or a job's created_at)."""
    items: list[str] = []
    size, last = 0, None
    for row in rows.iterator(chunk_size=PAGE_CHUNK_ROWS):
        if len(items) >= limit or size >= PAGE_MAX_CHARS:
            when = last.scheduled_at if isinstance(last, Run) else last.created_at
            return Page(items, run_cursor(when, last.pk))
        text = render(row)
        items.append(text)
        size += len(text)
        last = row
    return Page(items, None)


def job_page(jobs, *, limit: int, after: tuple[datetime, int] | None, render: Callable[[Job], str]) -> Page:
    """A page of jobs in (created_at, id) order, after the cursor's position."""
    if after is not None:
        jobs = jobs.created_after(*after)
    return json_page(jobs.order_by("created_at", "id")[: limit + 1], limit=limit, render=render)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 in UTC with a Z, second precision kept to the microsecond only when present."""
    if value is None:
        return None
    value = value.astimezone(UTC)
    text = value.replace(tzinfo=None).isoformat()
    return f"{text}Z"


def job_to_spec(job: Job, *, mask_credentials: bool = False) -> dict:
    """What `jobs export` writes and `jobs import` reads back. Alert channels
    by name (the URLs stay with the named channels); credentials typed in
    clear in the properties are masked with `mask_credentials` (for those who
    may not edit the job: jobs.secrets.mask_credentials)."""
    spec = {name: getattr(job, name) for name in JOB_FIELDS}
    if spec["state"] == Job.State.CRASHED:
        spec["state"] = Job.State.ENABLED
    spec["alert_emails"] = list(spec["alert_emails"] or [])
    spec["alert_on"] = list(spec["alert_on"] or [])
    spec["alert_channels"] = list(spec["alert_channels"] or [])
    spec["properties"] = dict(spec["properties"] or {})
    if mask_credentials:
        spec["properties"] = secrets.mask_credentials(spec["properties"])
    return spec


def job_to_dict(job: Job, *, properties: bool = True, mask_credentials: bool = False) -> dict:
    """The API's view of a job: the spec plus identity and live state;
    without `properties` (left out, and not read: the list defers them);
    with `mask_credentials`, as job_to_spec."""
    data = {name: getattr(job, name) for name in JOB_FIELDS if properties or name != "properties"}
    if properties and mask_credentials:
        data["properties"] = secrets.mask_credentials(data["properties"] or {})
    data.update(
        alert_channels=list(job.alert_channels or []),
        id=job.pk,
        version=job.version,
        builtin=job.builtin,
        consecutive_failures=job.consecutive_failures,
        next_fire_at=iso(job.next_fire_at),
        last_fire_at=iso(job.last_fire_at),
        last_status=job.last_status,
        last_error=job.last_error,
        last_duration_ms=job.last_duration_ms,
        owner=job.owner.get_username() if job.owner_id and job.owner else None,
        created_at=iso(job.created_at),
        updated_at=iso(job.updated_at),
    )
    return data


def run_to_dict(run: Run, *, with_log: bool = False, mask_credentials: bool = False) -> dict:
    """A run as the API answers it; `mask_credentials` as job_to_spec."""
    data = {
        "id": run.pk,
        "job_id": run.job_id,
        "fire_id": str(run.fire_id),
        "scheduled_at": iso(run.scheduled_at),
        "attempt": run.attempt,
        "shard_index": run.shard_index,
        "shard_total": run.shard_total,
        "node": run.node,
        "trigger": run.trigger,
        "status": run.status,
        "skip_reason": run.skip_reason,
        "worker_id": run.worker_id,
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "duration_ms": run.duration_ms,
        "result": run.result,
        "error": run.error,
        # A task's properties; a job's run: its overrides ({} if none).
        "properties": (secrets.mask_credentials if mask_credentials else dict)(run.properties or {}),
        # trigger=upstream: the upstream run that started this one, and the
        # chain it belongs to (its first run, how many runs came before it).
        "caused_by": run.caused_by_id,
        "chain_id": run.chain_id,
        "chain_depth": run.chain_depth,
    }
    if run.is_task:
        data.update(handler=run.handler, task_key=run.task_key)
    if with_log:
        data["log"] = run.log
    return data


def alert_to_dict(alert) -> dict:
    """An alert as the API answers it (jobs.api.schemas.alerts.Alert)."""
    return {
        "id": alert.pk,
        "job_id": alert.job_id,
        "kind": alert.kind,
        "status": alert.status,
        "subject": alert.subject,
        "created_at": iso(alert.created_at),
        "acknowledged_at": iso(alert.acknowledged_at),
        "acknowledged_by": alert.acknowledged_by,
    }


def spec_to_form_data(spec: dict, *, instance: Job | None = None) -> dict:
    """Map a job spec (import file, API body) onto JobForm's data. Fields the
    spec leaves out keep the instance's values on update, defaults on create."""
    data: dict = {}
    base = job_to_spec(instance) if instance is not None else {}
    if instance is not None:
        # Leaving the state out must not re-enable a crashed job.
        base["state"] = instance.state
    for name in JOB_FIELDS:
        value = spec[name] if name in spec else base.get(name)
        if value is not None:
            data[name] = value
    if instance is not None:
        data["version"] = spec.get("version", instance.version)
    return data


def handler_to_dict(info: HandlerInfo) -> dict:
    return {
        "name": info.name,
        "label": info.label,
        "description": info.description,
        "properties_help": dict(info.properties_help),
        "task": info.task,
    }


def _fields_of(*types) -> set[str]:
    return {name for name in JOB_FIELDS if isinstance(Job._meta.get_field(name), types)}


# JSON types follow the model, so a field added to Job.EDITABLE_FIELDS is checked too.
_STRING_FIELDS = _fields_of(models.CharField, models.TextField)
_INTEGER_FIELDS = _fields_of(models.IntegerField) | {"version"}
_BOOLEAN_FIELDS = _fields_of(models.BooleanField)
# Far above every field's own limit; refused here so no oversized number
# ever reaches the database driver.
_INT_LIMIT = 2**31 - 1


def spec_errors(spec: dict) -> list[dict]:
    """The problems that are the JSON's own — unknown keys, wrong types — as
    `{code, message, field}`. JobForm validates everything else; this only
    keeps it from reading `["a"]` as the name "['a']" or `true` as 1."""
    errors = []
    for field, value in spec.items():
        if field in JOB_READ_ONLY_FIELDS:
            continue
        if field not in JOB_FIELDS and field != "version":
            if problem := find_unstorable(field):
                # The field's name is the bad input: named, it could not be shown or stored.
                errors.append(
                    {"code": CODE, "message": f"A field name contains {problem}.", "field": storable(field)}
                )
            else:
                errors.append(
                    {"code": "unknown_field", "message": f"Unknown field “{field}”.", "field": field}
                )
            continue
        problem = _type_problem(field, value)
        if problem:
            errors.append({"code": "invalid", "message": problem, "field": field})
    return errors


def _type_problem(field: str, value) -> str | None:
    if value is None:
        return None
    if field in _STRING_FIELDS and not isinstance(value, str):
        return "Must be a string."
    if field in _INTEGER_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int):
            return "Must be a whole number."
        if not -_INT_LIMIT <= value <= _INT_LIMIT:
            return "Out of range."
    if field in _BOOLEAN_FIELDS and not isinstance(value, bool):
        return "Must be true or false."
    if field == "properties" and not isinstance(value, dict):
        return "Must be an object of names to text values."
    if field == "alert_emails" and not (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    ):
        return "Must be a list of email addresses."
    if field == "alert_channels" and not (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    ):
        return "Must be a list of channel names."
    if field == "alert_on" and not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        return "Must be a list of kinds of alert."
    return None
