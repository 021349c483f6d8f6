"""The audit trail: one row per change a person or program makes to a job."""

from jobs import channels
from jobs.models import AuditEvent, Job

AUDITED_FIELDS = Job.EDITABLE_FIELDS


def snapshot(job: Job) -> dict:
    """The audited fields; channel URLs masked (the trail never holds a secret)."""
    values = {name: getattr(job, name) for name in AUDITED_FIELDS}
    if "alert_channels" in values:
        values["alert_channels"] = channels.masked_list(values["alert_channels"])
    return values


def diff(before: dict | None, after: dict) -> dict:
    """{field: [old, new]} for what changed; everything (old = None) for a create."""
    before = before or {}
    return {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}


def record(
    *, job: Job, action: str, user=None, via: str = AuditEvent.Via.CONSOLE, changes: dict | None = None
) -> AuditEvent:
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
