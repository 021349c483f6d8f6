"""The database-wide figures the web process's /metrics reports (read at
each scrape, the same whichever gunicorn worker answers): jobs by state,
runs by status over the last few minutes, the oldest fire that is due and
not started, alerts not delivered. Each is one grouped count served by an
index: job_state_due_idx, run_scheduled_idx2, run_queued_idx, alert_due_idx
and alert_delivery_due_idx."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Min

from jobs.models import Alert, AlertDelivery, Job, Run

RECENT = timedelta(minutes=5)  # "runs by status" counts runs scheduled this recently


@dataclass(frozen=True)
class Figures:
    jobs: dict[tuple[str, str], int]  # (namespace, state) -> live jobs
    runs: dict[tuple[str, str], int]  # (namespace, status) -> runs scheduled within RECENT
    oldest_due_seconds: float  # how long the oldest due fire (a job's, or a queued run's) has waited
    undelivered: dict[str, int]  # "email" / "channel" -> alerts not sent yet


def read(now: datetime) -> Figures:
    jobs = Job.objects.filter(deleted_at__isnull=True).order_by().values_list("namespace", "state")
    runs = (
        Run.objects.filter(scheduled_at__gt=now - RECENT, scheduled_at__lte=now)
        .order_by()
        .values_list("job__namespace", "status")
    )
    due_job = Job.objects.scheduled().filter(next_fire_at__lte=now).aggregate(m=Min("next_fire_at"))["m"]
    due_run = Run.objects.filter(status=Run.Status.QUEUED, run_after__lte=now).aggregate(m=Min("run_after"))[
        "m"
    ]
    waiting = [now - at for at in (due_job, due_run) if at is not None]
    return Figures(
        jobs={(ns, state): n for ns, state, n in jobs.annotate(n=Count("id"))},
        runs={(ns or "", status): n for ns, status, n in runs.annotate(n=Count("id"))},
        oldest_due_seconds=max(waiting).total_seconds() if waiting else 0.0,
        undelivered={
            "email": Alert.objects.filter(status=Alert.Status.PENDING).count(),
            "channel": AlertDelivery.objects.filter(status=Alert.Status.PENDING).count(),
        },
    )
