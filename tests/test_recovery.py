"""What the scheduler does about runs left behind, driven with a fixed clock:
recovery at restart, the sweep, claims whose commit was lost, heartbeats,
cancel, and shutdown."""

from datetime import timedelta

import pytest

from jobs import services, tasks
from jobs.engine.maintenance import STALE_AFTER
from jobs.models import Lease, Run
from tests.fixtures.core import T0, drain, runs_of

pytestmark = pytest.mark.django_db


# -- recovery, sweep, shutdown ---------------------------------------------------------------


def test_restart_marks_own_running_runs_interrupted(make_scheduler, make_job, clock):
    job = make_job(next_fire_at=T0 + timedelta(minutes=1))
    left = Run.objects.create(
        job=job, scheduled_at=T0, trigger="schedule", status="running", worker_id="node-a", started_at=T0
    )
    other = Run.objects.create(
        job=job,
        scheduled_at=T0 - timedelta(minutes=1),
        trigger="schedule",
        status="running",
        worker_id="node-b",
        started_at=T0,
    )
    make_scheduler(worker_id="node-a", clock=clock).recover(T0 + timedelta(seconds=5))
    left.refresh_from_db()
    other.refresh_from_db()
    assert left.status == "interrupted"
    assert "found at restart" in left.error
    assert other.status == "running", "another worker's run is the sweep's business"


def test_interrupted_run_is_retried_only_if_the_job_allows(make_scheduler, make_job, clock):
    job = make_job(next_fire_at=T0 + timedelta(minutes=1), max_retries=1)
    Run.objects.create(
        job=job,
        scheduled_at=T0,
        trigger="schedule",
        status="running",
        worker_id="node-a",
        started_at=T0,
        max_retries=1,
    )
    make_scheduler(worker_id="node-a", clock=clock).recover(T0)
    assert list(job.runs.order_by("attempt").values_list("status", "attempt")) == [
        ("interrupted", 1),
        ("queued", 2),
    ]


def test_sweep_interrupts_stale_runs_of_workers_without_a_lease(make_job, scheduler, clock):
    job = make_job(next_fire_at=T0 + timedelta(hours=1))
    stale_at = T0 - STALE_AFTER - timedelta(seconds=1)
    dead = Run.objects.create(
        job=job,
        scheduled_at=T0,
        trigger="schedule",
        status="running",
        worker_id="dead",
        heartbeat_at=stale_at,
    )
    alive = Run.objects.create(
        job=job,
        scheduled_at=T0 - timedelta(minutes=1),
        trigger="schedule",
        status="running",
        worker_id="alive",
        heartbeat_at=stale_at,
    )
    Lease.objects.create(name="node:alive", holder="alive", expires_at=T0 + timedelta(seconds=20))
    assert scheduler.sweep(T0)
    dead.refresh_from_db()
    alive.refresh_from_db()
    assert dead.status == "interrupted" and "stopped sending heartbeats" in dead.error
    assert alive.status == "running"
    assert not scheduler.sweep(T0 + timedelta(seconds=30)), "the sweep runs every 2 minutes"


def test_sweep_interrupts_an_orphaned_run_of_this_node_but_not_its_live_flights(
    make_job, scheduler, clock, gate_handler
):
    job = make_job(next_fire_at=T0, handler="test.gate")
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    (flight_run,) = runs_of(job)
    # A run this node claimed but never started (its claim's commit was lost).
    orphan = Run.objects.create(
        job=job, scheduled_at=T0 - timedelta(hours=1), trigger="schedule", status="running",
        worker_id="node-a", heartbeat_at=T0 - STALE_AFTER - timedelta(seconds=1),
    )  # fmt: skip
    Run.objects.filter(pk=flight_run.pk).update(heartbeat_at=T0 - STALE_AFTER - timedelta(seconds=1))
    assert scheduler.sweep(T0)
    orphan.refresh_from_db()
    flight_run.refresh_from_db()
    assert orphan.status == "interrupted"
    assert flight_run.status == "running", "a run this node is executing is never swept"
    gate_handler.set()
    drain(scheduler, clock())


def test_claim_whose_commit_answer_was_lost_is_requeued_and_runs(make_job, scheduler, clock):
    """Regression: PostgreSQL restarted while a claim committed; the run stayed
    `running` on a node that never started it, and every later fire of its
    job was skipped as an overlap until the sweep."""
    job = make_job(next_fire_at=T0 + timedelta(hours=1))
    lost = Run.objects.create(
        job=job,
        scheduled_at=T0,
        trigger="schedule",
        status="running",
        worker_id="node-a",
        started_at=T0,
        heartbeat_at=T0,
    )
    scheduler.run_pass(T0)
    lost.refresh_from_db()
    assert (lost.status, lost.pk in scheduler.pool.flights) == ("running", False), (
        "only after a database error"
    )
    scheduler.run_pass(T0, claims_uncertain=True)
    assert lost.pk in scheduler.pool.flights, "requeued and claimed again in the same pass"
    drain(scheduler, clock())
    lost.refresh_from_db()
    assert (lost.status, lost.worker_id) == ("succeeded", "node-a")


def test_heartbeat_touches_running_runs_and_flushes_their_log(make_job, scheduler, clock, gate_handler):
    job = make_job(next_fire_at=T0, handler="test.gate")
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    (flight,) = scheduler.pool.flights.values()
    flight.ctx.log("working")
    scheduler.heartbeat(clock.advance(seconds=3))
    (run,) = runs_of(job)
    assert run.heartbeat_at == clock()
    assert run.log.endswith("working")
    gate_handler.set()
    drain(scheduler, clock())


def test_cancel_of_a_running_run_is_picked_up_by_the_heartbeat(make_job, scheduler, clock, gate_handler):
    job = make_job(next_fire_at=T0, handler="test.gate")
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    (run,) = runs_of(job)
    assert services.cancel_run(run=run)
    scheduler.heartbeat(clock.advance(seconds=3))
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert scheduler.pool.free_slots == 4


def test_shutdown_interrupts_runs_and_requeues_tasks(make_job, scheduler, clock, gate_handler):
    job = make_job(next_fire_at=T0, handler="test.gate")
    task = tasks.enqueue("test.gate", key="note:1")
    Run.objects.filter(pk=task.pk).update(run_after=T0)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    assert len(scheduler.pool.flights) == 2
    scheduler.drain(grace=0.2)
    (run,) = runs_of(job)
    task.refresh_from_db()
    assert run.status == "interrupted" and "scheduler stopped" in run.error
    assert (task.status, task.error, task.worker_id) == ("queued", "scheduler stopped, task requeued", "")
