"""`manage.py bench`: the commands run and report consistent figures. No
timing assertions: the figures depend on the machine."""

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def bench(*args, env=None, check=True, timeout=240):
    """`manage.py bench ARGS` in a process of its own. Its standard output
    when `check` (the command must succeed), else the finished process, for
    a test of a refusal to read its exit status and standard error."""
    result = subprocess.run(
        [sys.executable, "manage.py", "bench", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if not check:
        return result
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_bench_scheduler_json_has_the_promised_keys_and_no_duplicates(tmp_path):
    # The configured database must not be touched: point it at a file that
    # does not exist and check it still does not afterwards.
    configured = tmp_path / "configured.sqlite3"
    figures = json.loads(
        bench(
            "scheduler",
            "--jobs",
            "5",
            "--duration",
            "3",
            "--json",
            env={"DATABASE_URL": f"sqlite:///{configured}"},
        )
    )
    assert set(figures) == {
        "fires_expected",
        "fires_run",
        "duplicates",
        "missed",
        "lateness_ms",
        "fires_per_s",
        "rss_mb",
        "cpu_ms_per_fire",
        "cpu_share",
        "server",
    }
    assert figures["cpu_ms_per_fire"] > 0 and len(figures["cpu_share"]) == 1
    assert figures["server"] is None, "no PostgreSQL server to count round trips on"
    assert set(figures["lateness_ms"]) == {"p50", "p95", "p99", "max"}
    assert figures["fires_expected"] == 3, "5 jobs × 5 s, first fires spread over 5 s, 3 s measured"
    assert figures["duplicates"] == 0
    assert figures["missed"] == 0
    assert figures["fires_run"] == 3
    assert len(figures["rss_mb"]) == 1 and figures["rss_mb"][0] > 0
    assert not configured.exists()


def test_bench_refuses_several_schedulers_on_sqlite():
    result = bench("scheduler", "--schedulers", "2", check=False, timeout=60)
    assert result.returncode != 0
    assert "SQLite is single-node" in result.stderr


def test_bench_scheduler_with_metrics_scrapes_each_scheduler():
    out = bench("scheduler", "--jobs", "5", "--duration", "3", "--metrics", "on", "--scrape-every", "1")
    assert "metrics on (scraped every 1 s)" in out
    scrapes = next(line for line in out.splitlines() if line.startswith("metrics scrapes"))
    assert int(scrapes.split()[-1]) >= 1, out


def test_bench_scheduler_with_metrics_shows_each_steps_share_and_statements():
    """Scraped at the window's two ends only: the engine's step counters as
    shares of the scheduler's CPU (--step-cpu), statements per pass."""
    out = bench(
        "scheduler",
        "--jobs",
        "5",
        "--duration",
        "3",
        "--metrics",
        "on",
        "--scrape-every",
        "100",
        "--step-cpu",
    )
    lines = {line.split(":")[0].strip(): line for line in out.splitlines()}
    for group in ("planning", "claim", "hand-off", "outcome written", "upkeep", "rest"):
        assert group in lines, out
    # The step's CPU time in ms (its share needs the scheduler's, counted in ticks of 10 ms: none in 3 s).
    assert re.search(r"\d ms, ", lines["planning"]), out
    passes = next(line for line in out.splitlines() if line.startswith("passes"))
    # An idle scheduler passes about once a second; a loaded machine may give it fewer.
    assert int(passes.split()[-1].replace(",", "")) >= 1, out
    per_pass = next(line for line in out.splitlines() if line.startswith("SQL statements per pass"))
    assert float(per_pass.split()[-3]) > 0, out


def test_step_figures_give_each_steps_cpu_even_when_the_schedulers_took_under_a_tick():
    from jobs.bench.counters import step_figures

    before = {"plan_due": [0.0, 0, 0], "claim_queued": [0.0, 0, 0]}
    after = {"plan_due": [0.003, 12, 3], "claim_queued": [0.001, 3, 3]}
    counted = step_figures(before, after, 0.0, 3, cpu_counted=True)
    assert counted["groups"]["planning"] == {
        "cpu_share": None,
        "cpu_ms_per_fire": 1.0,
        "statements_per_pass": 4.0,
    }
    assert counted["groups"]["rest"]["cpu_ms_per_fire"] is None
    shared = step_figures(before, after, 0.008, 3, cpu_counted=True)
    assert shared["groups"]["planning"]["cpu_share"] == 0.375
    assert shared["groups"]["rest"]["cpu_share"] == 0.5
    uncounted = step_figures(before, after, 0.008, 3, cpu_counted=False)["groups"]["planning"]
    assert uncounted["cpu_share"] is None and uncounted["cpu_ms_per_fire"] is None


def test_bench_scheduler_without_step_cpu_shows_statements_but_no_cpu_shares():
    out = bench("scheduler", "--jobs", "5", "--duration", "3", "--metrics", "on", "--scrape-every", "100")
    planning = next(line for line in out.splitlines() if line.strip().startswith("planning:"))
    assert planning.split(":", 1)[1].split()[:2] == ["CPU", "share,"] and "-, -" in planning, out
    assert "statements/pass" in planning, out


def test_bench_scheduler_runs_cron_jobs_on_a_working_days_calendar_on_any_day(tmp_path):
    # working_days fires even on a weekend or a holiday: the bench declares the run's days working days.
    figures = json.loads(
        bench(
            "scheduler",
            "--jobs",
            "5",
            "--duration",
            "6",
            "--calendar",
            "cn",
            "--json",
            env={"DATABASE_URL": f"sqlite:///{tmp_path / 'configured.sqlite3'}"},
        )
    )
    assert figures["duplicates"] == 0
    assert figures["fires_run"] + figures["missed"] == figures["fires_expected"]
    assert figures["fires_expected"] > 0, "five jobs every 5 s for 6 s, whatever the day"


@pytest.mark.django_db
def test_the_bench_declares_a_refused_day_a_working_day_of_a_calendar_based_on_the_one_asked():
    from datetime import date

    from jobs import workdays
    from jobs.bench.scheduler import fire_on_the_run_s_days
    from jobs.models import find_calendar

    saturday, monday = date(2026, 12, 5), date(2026, 12, 7)
    assert fire_on_the_run_s_days("CN", "working_days", [monday]) == ("CN", [])
    name, declared = fire_on_the_run_s_days("CN", "working_days", [saturday, monday])
    assert (name, declared) == ("bench-CN", [saturday])
    days = workdays.DayRule(find_calendar(name), "working_days")
    assert days.verdict(saturday)[0] and days.verdict(monday)[0]
    assert not days.verdict(date(2026, 12, 6))[0], "the base's other days are as they were"


def test_bench_refuses_an_unknown_calendar():
    result = bench("scheduler", "--calendar", "XX", check=False, timeout=60)
    assert result.returncode != 0
    assert "--calendar" in result.stderr and "XX" in result.stderr


def test_bench_shards_runs_every_shard_of_one_fire_once():
    figures = json.loads(bench("shards", "--shards", "20", "--repeat", "1", "--json"))
    assert (figures["shards"], figures["runs"]) == (20, 20)
    assert sum(figures["per_node"].values()) == 20
    assert figures["finished_after_s"] >= figures["first_started_after_s"] >= 0
    assert set(figures["planning_ms"]) == {"p50", "p95", "p99", "max"}


def test_bench_shards_refuses_shards_out_of_range():
    result = bench("shards", "--shards", "1001", check=False, timeout=60)
    assert result.returncode != 0
    assert "--shards: 1 to 1,000" in result.stderr


@pytest.mark.postgres
def test_bench_pages_seeds_and_times_every_page_on_postgresql(postgres_server):
    """The seed's SQL is each database's own (the log's newline was SQLite's
    char(), which PostgreSQL does not have); every page answers."""
    small = ["--jobs", "30", "--runs", "400", "--repeat", "1", "--json"]
    figures = json.loads(bench("pages", *small, "--database-url", postgres_server.url()))
    assert figures["runs"] == 400
    searched = next(page for page in figures["pages"] if page["page"].startswith("all runs, searched"))
    assert searched["queries"] > 0 and searched["kb"] > 0


def test_bench_preview_view_times_the_console_s_preview_with_and_without_a_calendar(tmp_path):
    figures = json.loads(
        bench(
            "preview",
            "--view",
            "--repeat",
            "1",
            "--json",
            env={"DATABASE_URL": f"sqlite:///{tmp_path / 'configured.sqlite3'}"},
        )
    )
    assert figures["calendar"] == "CN" and len(figures["rows"]) == 5
    assert all(row["plain_ms"] > 0 and row["calendar_ms"] > 0 for row in figures["rows"])
    assert figures["ratio"] > 0


@pytest.mark.django_db
def test_the_pages_seed_plans_every_job_in_the_next_hour_on_sqlite():
    """The seed's jobs fire within the hour after it (`next_fire_at`: the
    base less -(n % 3600) seconds). SQLite read that modifier as
    '--5 seconds', no time at all, so its Upcoming pages showed no fires."""
    from django.utils import timezone

    from jobs.bench.pages import seed
    from jobs.models import Job

    before = timezone.now().replace(microsecond=0)
    seed(40, 200)
    after = timezone.now() + timedelta(hours=1)
    planned = list(Job.objects.filter(name__startswith="job-").values_list("next_fire_at", flat=True))
    assert len(planned) == 40
    assert all(at is not None and before <= at <= after for at in planned)
