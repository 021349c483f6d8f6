"""`manage.py bench`: the commands run and report consistent figures. No
timing assertions: the figures depend on the machine."""

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def bench(*args, env=None):
    result = subprocess.run(
        [sys.executable, "manage.py", "bench", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=240,
    )
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
    result = subprocess.run(
        [sys.executable, "manage.py", "bench", "scheduler", "--schedulers", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "SQLite is single-node" in result.stderr


def test_bench_scheduler_with_metrics_scrapes_each_scheduler():
    out = bench("scheduler", "--jobs", "5", "--duration", "3", "--metrics", "on", "--scrape-every", "1")
    assert "metrics on (scraped every 1 s)" in out
    scrapes = next(line for line in out.splitlines() if line.startswith("metrics scrapes"))
    assert int(scrapes.split()[-1]) >= 1, out


def test_bench_scheduler_with_metrics_shows_each_steps_share_and_statements():
    """Scraped at the window's two ends only: the engine's step counters as
    shares of the scheduler's CPU, statements per pass."""
    out = bench("scheduler", "--jobs", "5", "--duration", "3", "--metrics", "on", "--scrape-every", "100")
    lines = {line.split(":")[0].strip(): line for line in out.splitlines()}
    for group in ("planning", "claim", "hand-off", "outcome written", "upkeep", "rest"):
        assert group in lines, out
    passes = next(line for line in out.splitlines() if line.startswith("passes"))
    assert int(passes.split()[-1].replace(",", "")) >= 3, out
    per_pass = next(line for line in out.splitlines() if line.startswith("SQL statements per pass"))
    assert float(per_pass.split()[-3]) > 0, out


def test_bench_scheduler_runs_cron_jobs_on_a_calendar(tmp_path):
    # skip_holidays: the figures do not depend on the day of the week the test runs.
    figures = json.loads(
        bench(
            "scheduler",
            "--jobs",
            "5",
            "--duration",
            "6",
            "--calendar",
            "cn",
            "--rule",
            "skip_holidays",
            "--json",
            env={"DATABASE_URL": f"sqlite:///{tmp_path / 'configured.sqlite3'}"},
        )
    )
    from jobs import workdays

    assert figures["duplicates"] == 0
    assert figures["fires_run"] + figures["missed"] == figures["fires_expected"]
    # Five jobs every 5 s for 6 s, unless today is a holiday in China (the jobs' zone is UTC).
    today = datetime.now(UTC).date()
    holiday = not workdays.DayRule(workdays.builtin("CN"), workdays.SKIP_HOLIDAYS).verdict(today)[0]
    assert (figures["fires_expected"] == 0) == holiday


def test_bench_refuses_an_unknown_calendar():
    result = subprocess.run(
        [sys.executable, "manage.py", "bench", "scheduler", "--calendar", "XX"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "--calendar" in result.stderr and "XX" in result.stderr
