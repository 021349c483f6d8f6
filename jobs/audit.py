"""The audit trail: one row per change a person or program makes to a job."""


from jobs.models import AuditEvent, Job

AUDITED_FIELDS = [
    "name",
    "description",
    "namespace",
    "kind",
    "handler",
    "properties",
    "sql_write",
    "schedule_type",
    "cron_expression",
    "interval_seconds",
    "timezone",
    "misfire_policy",
    "run_once",
    "max_retries",
    "retry_interval_seconds",
    "timeout_seconds",
    "alert_threshold",
    "alert_emails",
    "notify_recovered",
    "state",
]


def snapshot(job: Job) -> dict:
    return {name: getattr(job, name) for name in AUDITED_FIELDS}


def diff(before: dict | None, after: dict) -> dict:
    """{field: [old, new]} for what changed; everything (old = None) for a create."""
    before = before or {}
    return {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}


def record(*, job: Job, action: str, user=None, via: str = AuditEvent.Via.CONSOLE, changes: dict | None = None) -> AuditEvent:
    real_user = user if getattr(user, "pk", None) else None
    return AuditEvent.objects.create(
        job=job,
        job_name=job.name,
        user=real_user,
        username=real_user.get_username() if real_user else "",
        action=action,
        via=via,
        changes=changes or {},
    )
