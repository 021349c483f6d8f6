"""`manage.py runscheduler` as a real process on a real SQLite file: killed
with SIGKILL, stopped with SIGTERM, started twice."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


class Site:
    """A throw-away Cronboard on its own SQLite file."""

    def __init__(self, tmp_path: Path, executor: str = "process", **env):
        self.db = tmp_path / "cronboard.sqlite3"
        self.env = {
            **os.environ,
            "JOBS_EXECUTOR": executor,
            **env,
            "DATABASE_URL": f"sqlite:///{self.db}",
            "JOBS_WORKER_ID": "proc-test",
            "JOBS_SHUTDOWN_GRACE": "3",
            "PYTHONUNBUFFERED": "1",
        }
        self.logs = tmp_path
        self.procs: list[subprocess.Popen] = []
        self.manage("migrate", "--noinput", "-v0")

    def manage(self, *args, input=None, check=True):
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=120,
            check=check,
        )

    def import_jobs(self, *specs):
        self.manage("jobs", "import", "-", input=json.dumps(list(specs)))

    def start_scheduler(self, name="scheduler"):
        log = open(self.logs / f"{name}-{len(self.procs)}.log", "w")
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runscheduler"],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        return proc

    def query(self, sql, *params):
        with sqlite3.connect(self.db, timeout=20) as conn:
            return conn.execute(sql, params).fetchall()

    def wait_for(self, sql, predicate, timeout=30, *params):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.query(sql, *params)
            if predicate(rows):
                return rows
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting on {sql!r}; last rows: {rows!r}")

    def log_text(self):
        return "\n".join(p.read_text() for p in sorted(self.logs.glob("*.log")))

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@pytest.fixture(params=["process", "thread"])
def site(tmp_path, request):
    """Every test here runs with each executor."""
    s = Site(tmp_path, request.param)
    yield s
    s.stop_all()


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
    site.wait_for("SELECT id FROM jobs_run WHERE status='running'", lambda rows: len(rows) == 1)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    (running,) = site.query("SELECT id, scheduled_at FROM jobs_run WHERE status='running'")

    site.start_scheduler()
    site.wait_for(
        "SELECT status FROM jobs_run WHERE id=?", lambda rows: rows == [("interrupted",)], 30, running[0]
    )
    # The job keeps firing after the restart: a new fire, later than the killed one.
    site.wait_for(
        "SELECT id FROM jobs_run WHERE status='running' AND scheduled_at > ?",
        lambda rows: len(rows) == 1,
        30,
        running[1],
    )
    duplicates = site.query(
        "SELECT job_id, scheduled_at, attempt, COUNT(*) FROM jobs_run WHERE trigger IN ('schedule','catch_up') "
        "GROUP BY job_id, scheduled_at, attempt HAVING COUNT(*) > 1"
    )
    assert duplicates == []
    (error,) = site.query("SELECT error FROM jobs_run WHERE id=?", running[0])[0]
    assert "found at restart" in error


def test_sigterm_during_a_long_run_records_it_interrupted_within_the_grace(site):
    site.import_jobs(SLEEPER)
    proc = site.start_scheduler()
    site.wait_for("SELECT id FROM jobs_run WHERE status='running'", lambda rows: len(rows) == 1)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert time.monotonic() - started < 3 + 5, "the 3 s grace plus start-up slack"
    rows = site.query("SELECT status, error FROM jobs_run WHERE status NOT IN ('skipped')")
    assert [r[0] for r in rows] == ["interrupted"]
    assert "shutdown grace" in rows[0][1]


def test_sigterm_lets_a_short_run_finish(site):
    site.import_jobs({**SLEEPER, "properties": {"seconds": "1"}})
    proc = site.start_scheduler()
    site.wait_for("SELECT id FROM jobs_run WHERE status='running'", lambda rows: len(rows) == 1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert site.query("SELECT status FROM jobs_run") == [("succeeded",)]


def test_second_scheduler_on_the_same_sqlite_database_refuses_to_start(site):
    site.start_scheduler()
    site.wait_for(
        "SELECT holder FROM jobs_lease WHERE name='node:proc-test'", lambda rows: rows == [("proc-test",)]
    )
    second = site.manage("runscheduler", check=False)
    assert second.returncode == 1
    assert "already running on this SQLite database" in second.stderr
    assert "Traceback" not in second.stderr


def test_restart_after_kill_9_is_not_blocked_by_the_dead_process(site):
    first = site.start_scheduler()
    site.wait_for(
        "SELECT holder FROM jobs_lease WHERE name='node:proc-test'", lambda rows: rows == [("proc-test",)]
    )
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    second = site.start_scheduler()
    time.sleep(2)
    assert second.poll() is None, site.log_text()
