"""/healthz/scheduler: the dead man's switch an external monitor polls.

In-process on SQLite with a fixed clock (time-machine) for fresh and stale
heartbeats; then a real scheduler process, killed with SIGKILL, on SQLite and
on PostgreSQL (real server, tests/fixtures/postgres.py)."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest
import time_machine

from tests.fixtures.core import T0
from tests.fixtures.processes import copy_sqlite

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def renewed(db, make_scheduler):
    """A scheduler that renewed its node lease at T0 (its heartbeat)."""
    scheduler = make_scheduler(worker_id="node-a", clock=lambda: T0, clustered=False)
    scheduler.renew_node_lease(T0)
    return scheduler


def test_plain_healthz_stays_as_it_was_without_a_scheduler(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.parametrize("path", ["/healthz/scheduler", "/healthz?scheduler=1"])
def test_no_scheduler_ever_is_unhealthy(client, db, path):
    response = client.get(path)
    assert response.status_code == 503
    assert response.json() == {
        "status": "scheduler silent",
        "scheduler_heartbeat_age_seconds": None,
        "scheduler_clock_skew_seconds": None,
    }


@pytest.mark.parametrize("path", ["/healthz/scheduler", "/healthz?scheduler=1"])
def test_a_fresh_heartbeat_is_healthy_and_a_stale_one_is_not(client, renewed, path):
    with time_machine.travel(T0 + timedelta(seconds=59), tick=False):
        response = client.get(path)
        assert response.status_code == 200
        assert response.json() == {
            "status": "ok",
            "scheduler_heartbeat_age_seconds": 59.0,
            "scheduler_clock_skew_seconds": None,
        }
    with time_machine.travel(T0 + timedelta(seconds=61), tick=False):
        response = client.get(path)
        assert response.status_code == 503
        assert response.json()["status"] == "scheduler silent"
        assert client.get("/healthz").status_code == 200, "the plain check does not look at the scheduler"


def test_a_scheduler_that_stopped_cleanly_is_gone_at_once(client, renewed):
    renewed.drain(grace=0)
    with time_machine.travel(T0 + timedelta(seconds=1), tick=False):
        assert client.get("/healthz/scheduler").status_code == 503


def test_the_scheduler_check_refuses_post(client, db):
    assert client.post("/healthz/scheduler").status_code == 405


# -- real processes -------------------------------------------------------------------

PROBE = textwrap.dedent(
    """
    import time_machine
    from datetime import timedelta
    from django.test import Client
    from django.utils import timezone
    with time_machine.travel(timezone.now() + timedelta(seconds={ahead}), tick=False):
        print(Client().get("/healthz/scheduler").status_code)
    """
)


def manage(env, *args, timeout=120):
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def probe(env, *, ahead: float = 0) -> int:
    """The answer a monitor gets now, or `ahead` seconds from now."""
    return int(manage(env, "shell", "-v", "0", "-c", PROBE.format(ahead=ahead)).splitlines()[-1])


def wait_for(env, status: int, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if probe(env) == status:
            return time.monotonic() - started
        time.sleep(1)
    raise AssertionError(f"/healthz/scheduler never answered {status} within {timeout} s")


def start_and_kill_scheduler(env, tmp_path):
    assert probe(env) == 503
    with open(tmp_path / "scheduler.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runscheduler"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(env, 200, 60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _env(database_url: str, **extra) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JOBS_", "DATABASE_URL"))}
    return {
        **base,
        "DATABASE_URL": database_url,
        "JOBS_WORKER_ID": "hc-node",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


@pytest.mark.slow
@pytest.mark.postgres
def test_healthz_reports_a_killed_scheduler_on_postgresql(postgres_server, migrated_postgres, tmp_path):
    # A short lease: the check fails once the killed node's lease has expired.
    env = _env(
        postgres_server.create_database("healthz_sched", template=migrated_postgres),
        JOBS_LEASE_TTL_SECONDS="4",
        JOBS_LEASE_RENEW_SECONDS="1",
    )
    start_and_kill_scheduler(env, tmp_path)
    wait_for(env, 503, 30)


@pytest.mark.slow
def test_healthz_reports_a_killed_scheduler_on_sqlite(migrated_sqlite, tmp_path):
    env = _env(
        copy_sqlite(migrated_sqlite, tmp_path / "hc.sqlite3"),
        JOBS_LEASE_TTL_SECONDS="4",
        JOBS_LEASE_RENEW_SECONDS="1",
    )
    start_and_kill_scheduler(env, tmp_path)
    # SQLite: silent 60 s after its last heartbeat (the process is gone, its lease row stays).
    assert probe(env) == 200
    assert probe(env, ahead=61) == 503
