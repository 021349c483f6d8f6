"""Jobs and runs as plain JSON-ready dicts, and JSON objects back into
JobForm data. The API, `manage.py jobs export` and `jobs runs --json` all
use these, so the field names and time format are the same everywhere.

Times are ISO-8601 in UTC with a `Z`.
"""

from datetime import datetime, timezone as dt_timezone

from jobs.handlers.registry import HandlerInfo
from jobs.models import Job, Run

# The fields a client sends; the same names as `manage.py jobs import`.
JOB_WRITABLE_FIELDS = (
    "name",
    "description",
    "namespace",
    "kind",
    "handler",
    "properties",
    "schedule_type",
    "cron_expression",
    "interval_seconds",
    "timezone",
    "misfire_policy",
    "run_once",
    "sql_write",
    "max_retries",
    "retry_interval_seconds",
    "timeout_seconds",
    "alert_threshold",
    "alert_emails",
    "state",
)
# Sent back by the server; ignored when a client sends them back (so a
# client can GET a job, change a field and PUT the whole object).
JOB_READ_ONLY_FIELDS = (
    "id",
    "next_fire_at",
    "last_fire_at",
    "last_status",
    "last_error",
    "consecutive_failures",
    "owner",
    "builtin",
    "created_at",
    "updated_at",
)

RUN_FIELDS = (
    "id",
    "job_id",
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
    "handler",
    "task_key",
)

_STRING_FIELDS = {
    "name",
    "description",
    "namespace",
    "kind",
    "handler",
    "schedule_type",
    "cron_expression",
    "timezone",
    "misfire_policy",
    "state",
}
_INTEGER_FIELDS = {"interval_seconds", "max_retries", "retry_interval_seconds", "timeout_seconds", "alert_threshold", "version"}
_BOOLEAN_FIELDS = {"run_once", "sql_write"}
# Far above every field's own limit; refused here so no oversized number
# ever reaches the database driver.
_INT_LIMIT = 2**31 - 1


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(dt_timezone.utc).isoformat().replace("+00:00", "Z")


def job_to_dict(job: Job, *, read_only: bool = True) -> dict:
    """The job as the API returns it. `read_only=False` leaves only what a
    client (or `jobs import`) sends, plus `version`."""
    data = {"id": job.pk} if read_only else {}
    for name in JOB_WRITABLE_FIELDS:
        value = getattr(job, name)
        if name == "properties":
            value = dict(value or {})
        elif name == "alert_emails":
            value = list(value or [])
        data[name] = value
    data["version"] = job.version
    if read_only:
        data.update(
            next_fire_at=iso(job.next_fire_at),
            last_fire_at=iso(job.last_fire_at),
            last_status=job.last_status,
            last_error=job.last_error,
            consecutive_failures=job.consecutive_failures,
            owner=job.owner.get_username() if job.owner_id else None,
            builtin=job.builtin,
            created_at=iso(job.created_at),
            updated_at=iso(job.updated_at),
        )
    return data


def run_to_dict(run: Run, *, with_log: bool = False) -> dict:
    data = {
        "id": run.pk,
        "job_id": run.job_id,
        "fire_id": str(run.fire_id),
        "scheduled_at": iso(run.scheduled_at),
        "attempt": run.attempt,
        "trigger": run.trigger,
        "status": run.status,
        "skip_reason": run.skip_reason,
        "worker_id": run.worker_id,
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "duration_ms": run.duration_ms,
        "result": run.result,
        "error": run.error,
        "handler": run.handler,
        "task_key": run.task_key,
    }
    if with_log:
        data["log"] = run.log
    return data


def handler_to_dict(info: HandlerInfo) -> dict:
    return {
        "name": info.name,
        "label": info.label,
        "description": info.description,
        "properties_help": dict(info.properties_help),
    }


def job_form_data(payload: dict, *, job: Job | None = None) -> tuple[dict, list[dict]]:
    """JobForm data from a JSON object, and the errors that are the JSON's
    own (wrong types, unknown fields) in the `{code, message, field}` shape.

    With `job` (a PATCH), fields the payload leaves out keep the job's
    current values; without it (a create or a PUT) they take a new job's
    defaults. Validation proper is JobForm's."""
    errors: list[dict] = []
    # A new job's values are the model's defaults (name "" is then "required").
    data = job_to_dict(job if job is not None else Job(), read_only=False)
    data.pop("version")
    for field, value in payload.items():
        if field in JOB_READ_ONLY_FIELDS:
            continue
        if field not in JOB_WRITABLE_FIELDS and field != "version":
            errors.append({"code": "unknown_field", "message": f"Unknown field “{field}”.", "field": field})
            continue
        problem = _type_problem(field, value)
        if problem:
            errors.append({"code": "invalid", "message": problem, "field": field})
            continue
        if value is None:
            data.pop(field, None)
        else:
            data[field] = value
    return data, errors


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
    if field == "alert_emails" and not (isinstance(value, list) and all(isinstance(item, str) for item in value)):
        return "Must be a list of email addresses."
    return None
