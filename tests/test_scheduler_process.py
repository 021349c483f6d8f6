"""`manage.py runscheduler` as a real process on a real SQLite file: killed
with SIGKILL, stopped with SIGTERM, started twice."""

import signal
import time

import pytest

from tests.fixtures import processes

pytestmark = pytest.mark.slow


@pytest.fixture(params=["process", "thread"])
def site(tmp_path, migrated_sqlite, request):
    """Every test here runs with each executor."""
    s = processes.SqliteSite(tmp_path, migrated_sqlite, request.param)
    yield s
    s.stop_all(sig=signal.SIGKILL, timeout=10)


SLEEPER = {
    "name": "sleeper",
    "handler": "demo.sleep",
    "properties": {"seconds": "60"},
    "schedule_type": "interval",
    "interval_seconds": 5,
    "timeout_seconds": 120,
}


def test_kill_9_mid_run_is_recovered_as_interrupted_and_the_job_fires_again(site):
    site.import_jobs(SLEEPER)
    first = site.start_scheduler()
    site.wait_for_rows("SELECT id FROM jobs_run WHERE status='running'", lambda rows: len(rows) == 1)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    (running,) = site.sql("SELECT id, scheduled_at FROM jobs_run WHERE status='running'")

    site.start_scheduler()
    site.wait_for_rows(
        "SELECT status FROM jobs_run WHERE id=?", lambda rows: rows == [("interrupted",)], 30, running[0]
    )
    # The job keeps firing after the restart: a new fire, later than the killed one.
    site.wait_for_rows(
        "SELECT id FROM jobs_run WHERE status='running' AND scheduled_at > ?",
        lambda rows: len(rows) == 1,
        30,
        running[1],
    )
    duplicates = site.sql(
        "SELECT job_id, scheduled_at, attempt, COUNT(*) FROM jobs_run WHERE trigger IN ('schedule','catch_up') "
        "GROUP BY job_id, scheduled_at, attempt HAVING COUNT(*) > 1"
    )
    assert duplicates == []
    (error,) = site.sql("SELECT error FROM jobs_run WHERE id=?", [running[0]])[0]
    assert "found at restart" in error


def test_sigterm_during_a_long_run_records_it_interrupted_within_the_grace(site):
    site.import_jobs(SLEEPER)
    proc = site.start_scheduler()
    site.wait_for_rows("SELECT id FROM jobs_run WHERE status='running'", lambda rows: len(rows) == 1)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(40) == 0
    assert time.monotonic() - started < 30, "the 3 s grace, far below the run's 60 s"
    rows = site.sql("SELECT status, error FROM jobs_run WHERE status NOT IN ('skipped')")
    assert [r[0] for r in rows] == ["interrupted"]
    assert "shutdown grace of 3 s ran out" in rows[0][1]


def test_sigterm_lets_a_short_run_finish(site):
    site.import_jobs({**SLEEPER, "properties": {"seconds": "1"}})
    proc = site.start_scheduler()
    site.wait_for_rows("SELECT id FROM jobs_run WHERE status='running'", lambda rows: len(rows) == 1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    # Under load the next interval fire can come while the run is still on:
    # that one is recorded as skipped (overlap), which is not what this tests.
    assert site.sql("SELECT status FROM jobs_run WHERE status != 'skipped'") == [("succeeded",)]


def test_second_scheduler_on_the_same_sqlite_database_refuses_to_start(site):
    site.start_scheduler()
    site.wait_for_rows(
        "SELECT holder FROM jobs_lease WHERE name='node:proc-test'", lambda rows: rows == [("proc-test",)]
    )
    second = site.manage("runscheduler", check=False)
    assert second.returncode == 1
    assert "already running on this SQLite database" in second.stderr
    assert "Traceback" not in second.stderr


def test_restart_after_kill_9_is_not_blocked_by_the_dead_process(site):
    first = site.start_scheduler()
    site.wait_for_rows(
        "SELECT holder FROM jobs_lease WHERE name='node:proc-test'", lambda rows: rows == [("proc-test",)]
    )
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    second = site.start_scheduler()
    # Up when it holds the node lease itself (or given up, if it exits).
    site.wait_for_rows(
        "SELECT 1 FROM jobs_lease WHERE name='node:proc-test' AND json_extract(info, '$.pid') = ?",
        lambda rows: rows or second.poll() is not None,
        30,
        second.pid,
    )
    assert second.poll() is None, site.logs()


@pytest.mark.parametrize("command", [("runscheduler",), ("jobs", "list"), ("cluster", "status")])
def test_a_database_that_was_never_migrated_is_refused_in_one_sentence(tmp_path, command):
    fresh = processes.Site(tmp_path, f"sqlite:///{tmp_path / 'new.sqlite3'}")
    started = fresh.manage(*command, check=False, timeout=60)
    assert started.returncode == 1
    assert "The database is not migrated" in started.stderr
    assert "python manage.py migrate" in started.stderr
    assert "Traceback" not in started.stderr


def test_the_scheduler_runs_cronboards_own_system_checks(tmp_path):
    nowhere = processes.Site(tmp_path, f"sqlite:///{tmp_path / 'nowhere' / 'db.sqlite3'}")
    started = nowhere.manage("runscheduler", check=False, timeout=60)
    assert started.returncode == 1
    assert "cronboard.E001" in started.stderr


# What the fork server of the run processes imports (jobs.engine.execution.forkserver),
# then the scheduler's command itself, in one process.
LOADED_BY_THE_SCHEDULER = """
import sys
import jobs.engine.execution.forkserver
from django.core.management import call_command
call_command("runscheduler", "--once")
print(sorted(name for name in ("ninja", "pydantic", "psycopg") if name in sys.modules))
"""


def test_the_scheduler_and_its_run_processes_leave_the_apis_libraries_unloaded(tmp_path, migrated_sqlite):
    """django-ninja and pydantic serve the web side's API only (config/settings.py
    lists ninja's folders rather than the app), and psycopg only PostgreSQL: a
    scheduler on SQLite starts without them, with about 0.2 s of CPU and
    20 MB less."""
    site = processes.Site(tmp_path, processes.copy_sqlite(migrated_sqlite, tmp_path / "db.sqlite3"))
    assert site.django(LOADED_BY_THE_SCHEDULER).strip().splitlines()[-1] == "[]"
