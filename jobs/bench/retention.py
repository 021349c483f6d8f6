"""`bench retention`: the built-in retention job deletes `--runs` expired runs
while the scheduler fires `--jobs` no-op jobs every 5 s (1,000 → 200 fires/s).

The retention job runs where it runs in production: in the scheduler
process, as a queued manual run of the built-in job. Lateness of the no-op
fires is compared before the cleanup and during it; the longest batch
transaction comes from the retention run's own log.
"""

import re
import time
from datetime import timedelta
from pathlib import Path

from django.utils import timezone

from jobs.bench import scheduler as fires
from jobs.bench.report import fmt, summary, table
from jobs.bench.seed import insert_select, timestamp_sql, uuid_sql
from jobs.models import Job, Run

INTERVAL = 5


def seed_expired_runs(count: int, job_ids: list[int]) -> float:
    """`count` finished runs, 40 days old and older, spread over the jobs."""
    first, spread = min(job_ids), len(job_ids)
    return insert_select(
        Run,
        count,
        {
            "job": f"{first} + (n %% {spread})",
            "fire_id": uuid_sql(),
            "scheduled_at": timestamp_sql("%(base)s", "n"),
            "trigger": "'schedule'",
            "status": "'succeeded'",
            "started_at": timestamp_sql("%(base)s", "n"),
            "finished_at": timestamp_sql("%(base)s", "n"),
            "run_after": timestamp_sql("%(base)s", "n"),
            "created_at": timestamp_sql("%(base)s", "n"),
            "duration_ms": "3",
            "result": "'ok'",
            "log": "'00:00:00 a line of log output, as handlers write them'",
        },
        {"base": _db_datetime(timezone.now() - timedelta(days=40))},
    )


def _db_datetime(value):
    from django.db import connection

    return connection.ops.adapt_datetimefield_value(value)


def run(options: dict, workdir: Path) -> dict:
    fires.park_other_jobs()
    parked_at = timezone.now() + fires.PARKED
    fires.seed_jobs(options["jobs"], INTERVAL, first_at=parked_at)
    job_ids = list(Job.objects.filter(handler=fires.NOOP).values_list("id", flat=True))
    seed_seconds = seed_expired_runs(options["runs"], job_ids)
    retention = Job.objects.get(builtin=True, handler="cronboard.retention")
    schedulers = fires.Schedulers(1, workdir)
    schedulers.start()
    try:
        start = fires.release_jobs(parked_at)
        fires._first_fires.clear()
        fires._first_fires.update(Job.objects.filter(handler=fires.NOOP).values_list("id", "next_fire_at"))
        time.sleep(max(0.0, (start - timezone.now()).total_seconds() + options["before"]))
        cleanup = Run.objects.create(
            job=retention,
            scheduled_at=timezone.now(),
            run_after=timezone.now(),
            trigger=Run.Trigger.MANUAL,
            status=Run.Status.QUEUED,
            timeout_seconds=retention.timeout_seconds,
        )
        deadline = time.monotonic() + max(600, options["runs"] / 1000)
        while time.monotonic() < deadline:
            cleanup.refresh_from_db()
            if cleanup.status not in Run.LIVE:
                break
            time.sleep(0.5)
        time.sleep(2)  # the fires of the last moments finish
        rss = schedulers.peak_rss_mb()
    finally:
        schedulers.stop()
    cleanup.refresh_from_db()
    before = fires.Window(start, cleanup.started_at or start)
    during = fires.Window(cleanup.started_at or start, cleanup.finished_at or timezone.now())
    deleted = int(m.group(1)) if (m := re.search(r"deleted (\d+) runs", cleanup.result)) else 0
    longest = (
        float(m.group(1)) if (m := re.search(r"longest batch transaction ([\d.]+) ms", cleanup.log)) else None
    )
    p99 = (
        float(m.group(1))
        if (m := re.search(r"batch transaction p50 [\d.]+ ms, p99 ([\d.]+) ms", cleanup.log))
        else None
    )
    seconds = (during.end - during.start).total_seconds()
    return {
        "runs_seeded": options["runs"],
        "seed_seconds": round(seed_seconds, 1),
        "cleanup_status": cleanup.status,
        "cleanup_error": cleanup.error[:500],
        "rows_deleted": deleted,
        "cleanup_seconds": round(seconds, 1),
        "rows_deleted_per_s": round(deleted / seconds) if seconds > 0 else None,
        "transaction_p99_ms": p99,
        "longest_transaction_ms": longest,
        "lateness_ms_before": _lateness(before),
        "lateness_ms_during": _lateness(during),
        "rss_mb": rss,
    }


def _lateness(window: fires.Window) -> dict:
    started = Run.objects.filter(
        job__handler=fires.NOOP,
        scheduled_at__gte=window.start,
        scheduled_at__lt=window.end,
        started_at__isnull=False,
    ).values_list("scheduled_at", "started_at")
    out = summary((s - at).total_seconds() * 1000 for at, s in started)
    out["fires"] = len(started)
    return out


def render(options: dict, figures: dict) -> str:
    b, d = figures["lateness_ms_before"], figures["lateness_ms_during"]
    rows = [
        ("expired runs seeded", f"{fmt(figures['runs_seeded'])} (in {fmt(figures['seed_seconds'])} s)"),
        (
            "cleanup run",
            figures["cleanup_status"] + (f": {figures['cleanup_error']}" if figures["cleanup_error"] else ""),
        ),
        ("rows deleted", fmt(figures["rows_deleted"])),
        ("cleanup took", fmt(figures["cleanup_seconds"], "s")),
        ("rows deleted per second", fmt(figures["rows_deleted_per_s"])),
        ("batch transaction p99", fmt(figures["transaction_p99_ms"], "ms")),
        ("longest batch transaction", fmt(figures["longest_transaction_ms"], "ms")),
        ("fires measured before / during", f"{fmt(b['fires'])} / {fmt(d['fires'])}"),
        ("lateness p50 before / during", f"{fmt(b['p50'])} / {fmt(d['p50'], 'ms')}"),
        ("lateness p99 before / during", f"{fmt(b['p99'])} / {fmt(d['p99'], 'ms')}"),
        ("lateness max before / during", f"{fmt(b['max'])} / {fmt(d['max'], 'ms')}"),
        ("peak RSS, scheduler", fmt(figures["rss_mb"][0], "MB")),
    ]
    from django.db import connection

    head = (
        f"bench retention: {options['runs']:,} expired runs deleted while {options['jobs']:,} jobs fire every "
        f"{INTERVAL} s ({options['jobs'] / INTERVAL:g} fires/s), {connection.vendor}"
    )
    return head + "\n" + table(rows)
