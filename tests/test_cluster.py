"""Cluster behaviour of the scheduler steps, driven with a fixed clock.

The schedulers here are told they are `clustered` (as on PostgreSQL) while
the test database is SQLite, where leases use the caller's clock: the same
code paths, judged by a clock the test controls. The real thing (processes,
PostgreSQL's clock, kill -9, SIGSTOP) is in test_cluster_processes.py."""

import logging
import os
from datetime import timedelta

import pytest

from jobs.engine import leases
from jobs.engine.leadership import WorkerIdInUse
from jobs.models import Job, LeadershipChange, Run
from tests.fixtures.core import T0


@pytest.fixture
def node(make_scheduler):
    """node(worker_id): a clustered scheduler whose clock stands at T0."""
    return lambda worker_id: make_scheduler(worker_id=worker_id, clustered=True, clock=lambda: T0)


@pytest.fixture
def due_job(make_job):
    return make_job(schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=5, next_fire_at=T0)


def test_only_the_leader_plans(node, due_job):
    a, b = node("a"), node("b")
    assert a.lead(T0) is True
    assert b.lead(T0) is False

    assert b.plan_due(T0) is False
    assert a.plan_due(T0) is True

    run = Run.objects.get()
    assert (run.scheduled_at, run.planned_epoch) == (T0, 1)
    assert (run.status, run.worker_id) == ("queued", ""), "the fire waits in the queue for any node to claim"


def test_leader_that_stalled_past_its_lease_claims_nothing(node, due_job, caplog):
    """The epoch fence: `a` decided it leads (epoch 1), stalled past its lease,
    and `b` took over (epoch 2). `a` still believes it leads; its claim's
    UPDATE checks the lease and touches nothing. Without the lease condition in
    `Planner._claimable`, `a` would plan this fire (the compare-and-set alone cannot
    tell a stale leader from a live one: the job row is exactly as `a` read it)."""
    a, b = node("a"), node("b")
    a.lead(T0)
    later = T0 + leases.lease_ttl() + timedelta(seconds=1)
    assert b.lead(later) is True
    Job.objects.filter(pk=due_job.pk).update(next_fire_at=later)
    assert a.leadership.is_leader()  # its belief is stale: nothing told it yet

    with caplog.at_level(logging.WARNING, logger="cronboard.scheduler"):
        a.plan_due(later)

    assert not Run.objects.exists()
    assert a.leadership.leader_epoch is None
    assert "fire claims refused" in caplog.text
    b.plan_due(later)
    assert Run.objects.get().planned_epoch == 2


def test_leader_whose_lease_lapsed_with_no_successor_claims_nothing_until_it_renews(node, due_job):
    a = node("a")
    a.lead(T0)
    later = T0 + leases.lease_ttl() + timedelta(seconds=1)
    Job.objects.filter(pk=due_job.pk).update(next_fire_at=later)

    a.plan_due(later)
    assert not Run.objects.exists()

    assert a.lead(later) is True  # retaken: a new epoch
    a.plan_due(later)
    assert Run.objects.get().planned_epoch == 2


def test_a_standby_takes_over_within_forty_seconds_of_the_leaders_last_renewal(node, db):
    a, b = node("a"), node("b")
    a.lead(T0)  # then a dies: it never renews again
    took_over_at = None
    for second in range(61):
        now = T0 + timedelta(seconds=second)
        if b.lead(now):
            took_over_at = second
            break
    assert took_over_at is not None and took_over_at <= 40
    assert [(c.epoch, c.worker_id) for c in LeadershipChange.objects.order_by("epoch")] == [
        (1, "a"),
        (2, "b"),
    ]


def test_renewals_keep_the_epoch_and_are_not_leadership_changes(node, db):
    a = node("a")
    for second in range(0, 60, 10):
        a.lead(T0 + timedelta(seconds=second))
    assert a.leadership.leader_epoch == 1
    assert LeadershipChange.objects.count() == 1


def test_shutdown_hands_the_lease_to_a_standby_at_its_next_try(node, db):
    a, b = node("a"), node("b")
    a.start(T0)
    a.lead(T0)
    a.drain(grace=0)
    assert b.lead(T0 + timedelta(seconds=1)) is True


def test_a_second_live_process_with_the_same_worker_id_is_refused(node, db):
    first = node("n1")
    first.leadership.node_info.update(host="elsewhere", pid=4242)
    first.start(T0)

    with pytest.raises(WorkerIdInUse, match="Another scheduler is running as JOBS_WORKER_ID=n1"):
        node("n1").leadership.check_identity(T0 + timedelta(seconds=5))


def test_a_restart_after_kill_9_on_the_same_host_does_not_wait_for_the_dead_process(node, db):
    dead = node("n1")
    dead.leadership.node_info["pid"] = _a_pid_that_is_not_running()
    dead.start(T0)

    successor = node("n1")
    successor.leadership.check_identity(T0 + timedelta(seconds=5))  # no WorkerIdInUse
    successor.start(T0 + timedelta(seconds=5))
    assert successor.leadership.node_epoch == 2


def test_a_process_that_lost_its_worker_id_to_a_successor_stops(node, db):
    old = node("n1")
    old.start(T0)
    node("n1").start(T0 + leases.lease_ttl() + timedelta(seconds=1))  # old stalled past its node lease

    old.renew_node_lease(T0 + leases.lease_ttl() + timedelta(seconds=2))

    assert old.stopping


def _a_pid_that_is_not_running() -> int:
    pid = 999_999
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        pid -= 1


def test_a_batched_claim_under_a_lost_lease_claims_nothing(node, make_job):
    """The batch statement carries the epoch fence: `a` lost the lease to `b`,
    so none of its plans moves a job row, although every row is as it read it."""
    jobs = [make_job(name=f"fenced-{i}", schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=5, next_fire_at=T0)
            for i in range(3)]  # fmt: skip
    a, b = node("a"), node("b")
    a.lead(T0)
    later = T0 + leases.lease_ttl() + timedelta(seconds=1)
    plans = [a.planner.plan_fire(job, T0, busy=False) for job in jobs]
    assert b.lead(later) is True

    assert a.planner.claim_batch(plans, later, epoch=a.leadership.leader_epoch) == set()
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("next_fire_at", flat=True)) == {T0}
    b_plans = [b.planner.plan_fire(job, T0, busy=False) for job in jobs]
    assert b.planner.claim_batch(b_plans, later, epoch=b.leadership.leader_epoch) == {job.pk for job in jobs}
