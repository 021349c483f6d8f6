"""What the console's overview pages and the API read across jobs: the
dashboard's figures (the dashboard page and GET /api/dashboard), the live
runs ("running now") and a job's live manual run."""

from datetime import datetime, timedelta

from django.db.models import Case, Count, When

from jobs import access
from jobs.models import LIVE_RUN, MANUAL_RUN, Job, Run

MAX_LIVE_RUNS = 5000  # "running now" considers at most this many live runs


def live_manual_runs(job: Job):
    """The job's queued or running manual run, as a query: at most one (a
    partial unique index), read from the live runs' partial index."""
    return Run.objects.filter(LIVE_RUN, MANUAL_RUN, job=job)


def live_run_ids(limit: int = MAX_LIVE_RUNS) -> list[int]:
    """The ids of live runs, from their partial index (run_live_idx): filtered
    inside a big ordered walk of the runs, SQLite would scan every run."""
    return list(Run.objects.filter(LIVE_RUN).order_by().values_list("pk", flat=True)[:limit])


DASHBOARD_ATTENTION = 20  # crashed and failing jobs listed, worst first
DASHBOARD_RUNNING = 20


def dashboard_figures(user, *, now: datetime) -> dict:
    """What the dashboard shows, also GET /api/dashboard: jobs by state, the
    last 24 hours' runs by status and their success rate, the jobs that need
    attention (crashed, then failing), what is running now."""
    jobs = access.visible_jobs(user)
    by_state = dict(jobs.order_by().values_list("state").annotate(n=Count("id")))
    since = now - timedelta(hours=24)
    runs = access.visible_runs(user).filter(scheduled_at__gte=since, scheduled_at__lte=now)
    by_status = dict(runs.order_by().values_list("status").annotate(n=Count("id")))
    succeeded = by_status.get(Run.Status.SUCCEEDED, 0)
    failed = sum(by_status.get(s, 0) for s in Run.FAILED_OUTCOMES)
    attention = list(
        jobs.needing_attention()
        .order_by(Case(When(state=Job.State.CRASHED, then=0), default=1), "-consecutive_failures", "name")
        .only("id", "name", "state", "consecutive_failures", "last_fire_at", "last_status", "last_error")[
            :DASHBOARD_ATTENTION
        ]
    )
    live_ids = live_run_ids()
    if access.namespaces_for(user) is not None:
        # Some namespaces only: count the live runs the user may see (one
        # more query); a user who sees everything counts them all.
        live_ids = list(access.visible_runs(user).filter(pk__in=live_ids).values_list("pk", flat=True))
    running = list(
        access.visible_runs(user)
        .filter(pk__in=live_ids)
        .select_related("job")
        .only(
            "id",
            "status",
            "scheduled_at",
            "started_at",
            "trigger",
            "job__name",
            "job__namespace",
            "handler",
            "task_key",
        )
        .order_by("-scheduled_at", "-id")[:DASHBOARD_RUNNING]
    )
    return {
        "jobs_by_state": {state: by_state.get(state, 0) for state in Job.State.values},
        "runs_24h_by_status": {status: by_status.get(status, 0) for status in Run.Status.values},
        "success_rate_24h": round(100 * succeeded / (succeeded + failed), 1) if succeeded + failed else None,
        "attention": attention,
        "running": running,
        "running_count": len(live_ids),
    }
