"""`bench pages`: the console over a big history. Bulk-seeds `--jobs` jobs
and `--runs` runs (a tenth of them on one job, so its history has a page
500), then times each page server-side through the test client: p50/p95 in
ms and the number of SQL queries the page made.

The trends' rollup of the seeded runs is built as the scheduler builds it
after an upgrade (its time is a seed figure), and the trends' lists of
jobs are also timed uncached.

Written against the console's URL names (jobs:job_list, job_detail,
job_runs, run_detail, run_list, cron_preview).
"""

import logging
import time
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from jobs import trends
from jobs.bench.report import fmt, summary, table
from jobs.bench.seed import insert_select, timestamp_sql, uuid_sql
from jobs.models import Job, Run, run_cursor

HEAVY_SHARE = 10  # one job in ten runs is the heavy job's
BIG_LOG = 262_144  # the default JOBS_MAX_MESSAGE_CHARS cap


def seed(jobs: int, runs: int) -> dict:
    now = timezone.now()
    base = connection.ops.adapt_datetimefield_value(now)
    seconds = {}
    seconds["jobs"] = insert_select(
        Job,
        jobs,
        {
            "name": "'job-' || n",
            "description": "CASE WHEN n %% 7 = 0 THEN 'nightly export of the billing ledger' ELSE 'a job' END",
            "handler": "'demo.echo'",
            "schedule_type": "CASE WHEN n %% 3 = 0 THEN 'cron' ELSE 'interval' END",
            "cron_expression": "CASE WHEN n %% 3 = 0 THEN '0 */5 * * * *' ELSE '' END",
            "interval_seconds": "CASE WHEN n %% 3 = 0 THEN NULL ELSE 60 + n %% 600 END",
            "state": "CASE WHEN n %% 50 = 0 THEN 'crashed' WHEN n %% 20 = 0 THEN 'paused' ELSE 'enabled' END",
            "kind": "CASE WHEN n %% 11 = 0 THEN 'http' ELSE 'python' END",
            "next_fire_at": timestamp_sql("%(base)s", "-(n %% 3600)"),
            "last_fire_at": timestamp_sql("%(base)s", "n %% 3600"),
            "last_status": "CASE WHEN n %% 10 = 0 THEN 'failed' ELSE 'succeeded' END",
        },
        {"base": base},
    )
    newline = "char(10)" if connection.vendor == "sqlite" else "chr(10)"
    first = Job.objects.filter(name__startswith="job-").order_by("id").values_list("id", flat=True)[0]
    heavy = runs // HEAVY_SHARE
    seconds["runs"] = insert_select(
        Run,
        runs,
        {
            # The first `heavy` runs are the heavy job's; the rest go round.
            "job": f"CASE WHEN n <= {heavy} THEN {first} ELSE {first} + (n %% {jobs}) END",
            "fire_id": uuid_sql(),
            "scheduled_at": timestamp_sql("%(base)s", "n * 5"),
            "run_after": timestamp_sql("%(base)s", "n * 5"),
            "started_at": timestamp_sql("%(base)s", "n * 5"),
            "finished_at": timestamp_sql("%(base)s", "n * 5 - 1"),
            "created_at": timestamp_sql("%(base)s", "n * 5"),
            "heartbeat_at": timestamp_sql("%(base)s", "n * 5 - 1"),
            "trigger": "'schedule'",
            "status": "CASE WHEN n %% 10 = 0 THEN 'failed' ELSE 'succeeded' END",
            "error": "CASE WHEN n %% 10 = 0 THEN 'HandlerError: upstream said 503' ELSE '' END",
            "duration_ms": "n %% 5000",
            "worker_id": "'node-a'",
            "result": "'ok'",
            "log": f"'00:00:01 started' || {newline} || '00:00:02 done'",
        },
        {"base": base},
    )
    job = Job.objects.get(pk=first)
    big = Run.objects.create(
        job=job,
        scheduled_at=now + timedelta(seconds=1),
        trigger=Run.Trigger.MANUAL,
        status=Run.Status.SUCCEEDED,
        started_at=now,
        finished_at=now,
        log="\n".join(f"{i:06d} a line of handler output, as long as lines usually are" for i in range(4700))[
            :BIG_LOG
        ],
    )
    light = Job.objects.filter(name__startswith="job-").order_by("-id").values_list("id", flat=True)[0]
    # The trends' rollup of those runs, as the scheduler builds it after an
    # upgrade (an hour of history per step): its cost is a seed figure.
    started = time.perf_counter()
    while not trends.roll_up(now):
        pass
    seconds["rollup"] = time.perf_counter() - started
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    return {"heavy": first, "heavy_runs": heavy, "light": light, "big_run": big.pk, "seconds": seconds}


def _page_500_cursor(job_id: int) -> str | None:
    from jobs.web import common

    per_page = getattr(common, "RUNS_PER_PAGE", 25)
    rows = (
        Run.objects.filter(job_id=job_id).order_by("-scheduled_at", "-id").values_list("scheduled_at", "id")
    )
    try:
        at, run_id = rows[499 * per_page - 1]
    except IndexError:
        return None
    return run_cursor(at, run_id)


def pages(ids: dict) -> list[tuple[str, str]]:
    """(label, URL) for each page timed."""
    try:
        out = [
            ("job list", reverse("jobs:job_list")),
            (
                "job list, filtered + searched",
                reverse("jobs:job_list") + "?state=enabled&kind=python&q=billing",
            ),
            (f"job detail ({ids['heavy_runs']:,} runs)", reverse("jobs:job_detail", args=[ids["heavy"]])),
            ("job detail (small job)", reverse("jobs:job_detail", args=[ids["light"]])),
            ("history page 1", reverse("jobs:job_runs", args=[ids["heavy"]])),
        ]
        cursor = _page_500_cursor(ids["heavy"])
        if cursor:
            out.append(
                ("history page 500", reverse("jobs:job_runs", args=[ids["heavy"]]) + f"?before={cursor}")
            )
        out += [
            ("run log viewer (256 KB log)", reverse("jobs:run_detail", args=[ids["big_run"]])),
            ("all runs", reverse("jobs:run_list")),
            ("all runs, running now", reverse("jobs:run_list") + "?status=live"),
            ("all runs, failed today", reverse("jobs:run_list") + "?status=failures&since=today"),
            ("all runs of one job", reverse("jobs:run_list") + f"?job={ids['light']}"),
            ("all runs, searched (a word in 1 run in 10)", reverse("jobs:run_list") + "?q=upstream+503"),
            ("dashboard", reverse("jobs:dashboard")),
            ("dashboard trends, 7 days", reverse("jobs:dashboard_trends") + "?window=7d"),
            ("dashboard trends, 30 days", reverse("jobs:dashboard_trends") + "?window=30d"),
            ("upcoming, next 24 hours", reverse("jobs:upcoming")),
            ("upcoming, next 7 days", reverse("jobs:upcoming") + "?window=7d"),
            (
                "cron preview",
                reverse("jobs:cron_preview") + "?cron_expression=0+0+9+%3F+*+5%233&timezone=Europe%2FBerlin",
            ),
            ("API job list, first page", reverse("api:jobs")),
            ("API runs, first page", reverse("api:runs")),
            ("export as JSON (the console's button)", reverse("jobs:job_export") + "?limit=1000"),
        ]
    except NoReverseMatch as exc:
        raise SystemExit(f"bench pages needs the console's pages: {exc}") from None
    return out


def run(options: dict) -> dict:
    from django.conf import settings

    ids = seed(options["jobs"], options["runs"])
    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-pw-123")
    host = next(
        (h for h in settings.ALLOWED_HOSTS if h not in ("*", "") and not h.startswith(".")), "localhost"
    )
    client = Client(HTTP_HOST=host)
    # The login's lockout bookkeeping logs at INFO; the figures are the output.
    logging.getLogger("axes").setLevel(logging.WARNING)
    client.force_login(user)
    results = []
    for label, url in pages(ids):
        for _ in range(2):  # warm: template loading, the first connection
            response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{label}: {url} answered {response.status_code}")
        with CaptureQueriesContext(connection) as queries:
            size = len(client.get(url).content)
        # Now: the next request's start clears the log this reads from.
        query_count = len(queries)
        timings = []
        for _ in range(options["repeat"]):
            started = time.perf_counter()
            client.get(url)
            timings.append((time.perf_counter() - started) * 1000)
        figures = summary(timings)
        results.append(
            {
                "page": label,
                "url": url,
                "p50_ms": figures["p50"],
                "p95_ms": figures["p95"],
                "queries": query_count,
                "kb": size / 1024,
            }
        )
    # The trends' lists of jobs are kept TOP_LISTS_FOR seconds, so the pages
    # above time them cached: their cost when they are not, once per period.
    uncached = []
    for _ in range(max(3, options["repeat"] // 6)):
        cache.clear()
        started = time.perf_counter()
        client.get(reverse("jobs:dashboard_trends") + "?window=30d")
        uncached.append((time.perf_counter() - started) * 1000)
    lists = summary(uncached)
    return {
        "jobs": options["jobs"],
        "runs": options["runs"],
        "seed_seconds": ids["seconds"],
        "pages": results,
        "trend_lists_uncached": {"p50_ms": lists["p50"], "p95_ms": lists["p95"]},
    }


def render(figures: dict) -> str:
    rows = [
        (r["page"], fmt(r["p50_ms"]), fmt(r["p95_ms"]), fmt(r["queries"]), fmt(r["kb"]))
        for r in figures["pages"]
    ]
    seeded = ", ".join(f"{k} {v:.1f} s" for k, v in figures["seed_seconds"].items())
    return (
        f"bench pages: {figures['jobs']:,} jobs, {figures['runs']:,} runs ({connection.vendor}; seeded in {seeded}); "
        "server time through the test client\n"
        + table(rows, ["page", "p50 ms", "p95 ms", "queries", "KB"])
        + "\ntrends' lists of jobs (slowest, most failing; 30 days), not cached, as once every "
        + f"{trends.TOP_LISTS_FOR // 60} minutes: p50 {fmt(figures['trend_lists_uncached']['p50_ms'])} ms, "
        + f"p95 {fmt(figures['trend_lists_uncached']['p95_ms'])} ms"
    )
