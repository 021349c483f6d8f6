"""`manage.py health`: the scheduler container's health check. Exit 0 while
this node's scheduler holds its node lease, 1 with a one-line reason when the
lease is stale, released or was never taken."""

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
import time_machine
from django.core.management import call_command

from jobs.engine.loop import Scheduler

REPO = Path(__file__).resolve().parent.parent
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
WORKER = "sched-1"


@pytest.fixture(autouse=True)
def _worker_id(db, settings):
    settings.JOBS_WORKER_ID = WORKER


def health(at: datetime) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    with time_machine.travel(at, tick=False):
        try:
            call_command("health", stdout=out, stderr=err)
            code = 0
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue().strip(), err.getvalue().strip()


def heartbeat_at(now: datetime) -> Scheduler:
    """What the running scheduler does every JOBS_LEASE_RENEW_SECONDS."""
    scheduler = Scheduler(worker_id=WORKER, clock=lambda: now)
    scheduler.renew_node_lease(now)
    return scheduler


def test_a_fresh_heartbeat_is_healthy():
    heartbeat_at(T0)
    assert health(T0 + timedelta(seconds=25)) == (0, f"ok: scheduler {WORKER} is alive", "")


def test_a_heartbeat_older_than_the_lease_is_unhealthy(settings):
    heartbeat_at(T0)
    code, out, err = health(T0 + timedelta(seconds=settings.JOBS_LEASE_TTL_SECONDS + 1))
    assert (code, out) == (1, "")
    assert err.startswith(
        f"unhealthy: the scheduler {WORKER} has not renewed its lease since 2030-01-01T12:00:00"
    )
    assert len(err.splitlines()) == 1


def test_no_scheduler_ever_is_unhealthy():
    assert health(T0) == (1, "", f"unhealthy: no scheduler has ever run as {WORKER}")


def test_a_stopped_scheduler_is_unhealthy():
    scheduler = heartbeat_at(T0)
    scheduler.drain(grace=0)  # shutdown releases the node lease
    assert health(T0 + timedelta(seconds=1)) == (
        1,
        "",
        f"unhealthy: the scheduler {WORKER} stopped (it released its lease at shutdown)",
    )


def test_another_nodes_heartbeat_does_not_count(settings):
    heartbeat_at(T0)
    settings.JOBS_WORKER_ID = "sched-2"
    assert health(T0)[0] == 1


LEASE = """
from datetime import timedelta
from django.utils import timezone
from jobs import cluster
from jobs.engine import leases
leases.acquire(cluster.node_lease_name("{worker}"), "{worker}", now=timezone.now(), ttl=timedelta(seconds={ttl}))
"""


@pytest.mark.slow
@pytest.mark.postgres
def test_on_postgresql_the_lease_is_judged_by_the_database_clock(postgres_server, migrated_postgres):
    """The health command in its own process, as Docker runs it, against a
    real server: a lease live by the database's clock is healthy; one whose
    expiry is past on that clock is not, whatever this host's clock says."""
    env = {
        **os.environ,
        "DATABASE_URL": postgres_server.create_database("health", template=migrated_postgres),
        "JOBS_WORKER_ID": WORKER,
    }

    def manage(*args):
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    absent = manage("health")
    assert (absent.returncode, absent.stderr.strip()) == (
        1,
        f"unhealthy: no scheduler has ever run as {WORKER}",
    )
    manage("shell", "-c", LEASE.format(worker=WORKER, ttl=30))
    fresh = manage("health")
    assert (fresh.returncode, fresh.stdout.strip()) == (0, f"ok: scheduler {WORKER} is alive")
    manage("shell", "-c", LEASE.format(worker=WORKER, ttl=-1))  # renewed, but already expired
    stale = manage("health")
    assert stale.returncode == 1
    assert stale.stderr.startswith(f"unhealthy: the scheduler {WORKER} has not renewed its lease since")
