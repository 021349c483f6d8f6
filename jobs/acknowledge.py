"""Acknowledging an alert: an operator of its job's namespace says someone
is on it. The console, the API and the tests acknowledge through here."""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from jobs import audit, refusals
from jobs.models import Alert, AuditEvent


def acknowledge_alert(
    *, alert: Alert, user, via: str = AuditEvent.Via.CONSOLE, now: datetime | None = None
) -> bool:
    """Mark `alert` acknowledged by `user` (an operator or more where its job
    is: ForbiddenError otherwise, check_job_change's rule). False when it
    was already: the first acknowledgement stands, with its who and when."""
    job = alert.job
    refusals.check_job_change(
        kinds=[job.kind], user=user, action="acknowledge", runs=False, namespaces=[job.namespace]
    )
    now = now or timezone.now()
    name = user.get_username() if getattr(user, "pk", None) else ""
    with transaction.atomic():
        taken = Alert.objects.filter(pk=alert.pk, acknowledged_at__isnull=True).update(
            acknowledged_at=now, acknowledged_by=name
        )
        if taken:
            audit.record(
                job=job,
                action="acknowledge",
                user=user,
                via=via,
                changes={"alert": [None, f"{alert.kind} #{alert.pk}"]},
            )
    alert.refresh_from_db(fields=["acknowledged_at", "acknowledged_by"])
    return bool(taken)
