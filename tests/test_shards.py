"""Sharded and broadcast fires on a fixed clock: what planning writes, the
row the database refuses, what each handler is told, the fire's one outcome
(its failures and alerts counted once, its downstream jobs started once),
the sweep's interrupted shards and broadcast runs, and the claim that keeps a
broadcast run on its node. On both databases where the rows' rules are the
databases' own (`both_databases`); real processes in
test_shards_processes.py."""

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import alerts
from jobs.engine.maintenance import STALE_AFTER
from jobs.engine.planning import Planner
from jobs.handlers import HandlerError, JobHandler, register
from jobs.handlers.registry import unregister
from jobs.models import Alert, JobDependency, Lease, Run
from tests.fixtures.core import T0, drain

pytestmark = pytest.mark.django_db


@pytest.fixture
def shard_handler():
    """ "test.shard": records (shard_index, shard_total) of each attempt, and
    fails the shards named in the job's `fail` property ("1,2")."""
    seen = []
    lock = threading.Lock()

    @register("test.shard")
    class Shard(JobHandler):
        def run(self, ctx):
            with lock:
                seen.append((ctx.shard_index, ctx.shard_total, ctx.attempt))
            failing = {int(n) for n in str(ctx.properties.get("fail") or "").split(",") if n}
            if ctx.shard_index in failing:
                raise HandlerError(f"shard {ctx.shard_index} broke")
            return f"shard {ctx.shard_index} of {ctx.shard_total}"

    yield seen
    unregister("test.shard")


@pytest.fixture
def node(make_scheduler, clock):
    """One node on the fixed clock, on either database."""
    return make_scheduler(max_workers=8, clock=clock, misfire_threshold=60, clustered=False)


def sharded_job(make_job, shards=4, **fields):
    return make_job(handler="test.shard", shards=shards, next_fire_at=T0, **fields)


def run_all(scheduler, now, rounds=4):
    """Claim and finish what is queued, retries included, until nothing is left."""
    for _ in range(rounds):
        scheduler.claim_queued(now)
        drain(scheduler, now)


def shards_of(job):
    return sorted(job.runs.filter(trigger="schedule").values_list("shard_index", "attempt", "status"))


# -- planning -------------------------------------------------------------------------


def test_a_sharded_fire_is_one_run_per_shard_with_one_fire_id(both_databases, make_job, node, shard_handler):
    job = sharded_job(make_job, shards=5)
    node.plan_due(T0)
    runs = list(job.runs.order_by("shard_index"))
    assert [(run.shard_index, run.shard_total, run.scheduled_at) for run in runs] == [
        (index, 5, T0) for index in range(5)
    ]
    assert len({run.fire_id for run in runs}) == 1
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(minutes=1)


def test_the_database_refuses_a_second_row_for_one_shard_of_a_fire(both_databases, make_job):
    job = make_job(shards=3)
    fire = dict(job=job, scheduled_at=T0, trigger="schedule", fire_id=uuid.uuid4(), shard_total=3)
    Run.objects.create(**fire, shard_index=0)
    Run.objects.create(**fire, shard_index=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(**fire, shard_index=1)
    assert job.runs.count() == 2


def test_each_shard_is_told_its_index_and_the_total(make_job, node, shard_handler):
    sharded_job(make_job, shards=4)
    node.plan_due(T0)
    run_all(node, T0)
    assert sorted(shard_handler) == [(index, 4, 1) for index in range(4)]


# -- the fire's outcome -------------------------------------------------------------------


def test_a_fire_succeeds_once_every_shard_did_and_starts_its_downstream_job_once(
    both_databases, make_job, node, shard_handler
):
    job = sharded_job(make_job, shards=4)
    after = make_job(name="after", schedule_type="none", cron_expression="")
    JobDependency.objects.create(upstream=job, downstream=after, on="success")
    node.plan_due(T0)
    run_all(node, T0)
    assert shards_of(job) == [(index, 1, "succeeded") for index in range(4)]
    # One downstream run, for the fire, whichever shard ended last.
    assert [run.trigger for run in after.runs.all()] == ["upstream"]
    job.refresh_from_db()
    assert (job.last_status, job.consecutive_failures) == ("succeeded", 0)


def test_each_shard_retries_alone_and_the_fire_fails_once_with_one_alert(
    both_databases, make_job, node, shard_handler
):
    job = sharded_job(
        make_job,
        shards=3,
        properties={"fail": "0,2"},
        max_retries=1,
        retry_interval_seconds=0,
        alert_threshold=0,
        alert_on=["failed"],
    )
    after = make_job(name="after", schedule_type="none", cron_expression="")
    JobDependency.objects.create(upstream=job, downstream=after, on="failure")
    node.plan_due(T0)
    run_all(node, T0)
    assert shards_of(job) == [
        (0, 1, "failed"),
        (0, 2, "failed"),
        (1, 1, "succeeded"),
        (2, 1, "failed"),
        (2, 2, "failed"),
    ]
    job.refresh_from_db()
    assert (job.last_status, job.consecutive_failures) == ("failed", 1)
    (alert,) = Alert.objects.filter(job=job)
    assert alert.kind == Alert.Kind.FAILED
    assert "2 of 3 shards did not succeed; shard 0 ended failed" in job.last_error
    (downstream,) = after.runs.all()
    # It starts after the shard that failed the fire, whichever ended last.
    assert (downstream.caused_by.shard_index, downstream.caused_by.status) == (0, "failed")
    assert alert.run_id == downstream.caused_by_id


def test_a_shard_cancelled_while_queued_still_ends_its_fire_once(
    both_databases, make_job, make_scheduler, clock, shard_handler
):
    """The last live piece of a fire, cancelled before it started: the fire's
    outcome is still written (its failure counted, its alert sent), and the
    piece never runs."""
    from jobs import services

    one_slot = make_scheduler(max_workers=1, clock=clock, misfire_threshold=60, clustered=False)
    job = sharded_job(make_job, shards=2, properties={"fail": "0"}, alert_threshold=0, alert_on=["failed"])
    one_slot.plan_due(T0)
    drain(one_slot, T0)  # shard 0 ran in the one slot and failed; shard 1 waits for it
    assert job.runs.get(shard_index=1).status == "queued"
    assert Alert.objects.filter(job=job).count() == 0, "shard 1 is still queued: the fire is not over"
    assert services.cancel_run(run=job.runs.get(shard_index=1), now=T0) is True
    run_all(one_slot, T0)

    assert shards_of(job) == [(0, 1, "failed"), (1, 1, "cancelled")]
    assert (1, 1) not in {(index, attempt) for index, _total, attempt in shard_handler}
    job.refresh_from_db()
    assert (job.last_status, job.consecutive_failures) == ("failed", 1)
    assert Alert.objects.filter(job=job, kind=Alert.Kind.FAILED).count() == 1


def test_retrying_a_failed_shard_runs_that_shard_again(both_databases, make_job, node, shard_handler):
    """Retry on one failed piece: the same index and total, not the whole job
    as shard 0 of 1 (a handler splitting its data by them would do all of it)."""
    from jobs import services

    job = sharded_job(make_job, shards=3, properties={"fail": "1"})
    node.plan_due(T0)
    run_all(node, T0)
    failed = job.runs.get(shard_index=1, trigger="schedule")
    retry, created = services.retry_run(run=failed)
    assert created and (retry.shard_index, retry.shard_total) == (1, 3)
    Run.objects.filter(pk=retry.pk).update(run_after=T0, scheduled_at=T0)
    run_all(node, T0)

    assert sorted(seen for seen in shard_handler if seen[0] == 1) == [(1, 3, 1), (1, 3, 1)]
    retry.refresh_from_db()
    job.refresh_from_db()
    assert retry.status == "failed"
    assert job.last_error.startswith("1 of 1 shards did not succeed; shard 1 ended failed")


def test_a_fire_that_fails_again_and_again_crashes_its_job_once_per_fire(
    make_job, node, clock, shard_handler
):
    job = sharded_job(make_job, shards=3, properties={"fail": "0,1,2"}, alert_threshold=2)
    node.plan_due(T0)
    run_all(node, T0)
    job.refresh_from_db()
    assert (job.state, job.consecutive_failures) == ("enabled", 1)
    node.plan_due(job.next_fire_at)
    run_all(node, job.next_fire_at)
    job.refresh_from_db()
    assert (job.state, job.consecutive_failures) == ("crashed", 2)
    assert Alert.objects.filter(job=job, kind=Alert.Kind.CRASH).count() == 1


def test_a_shard_whose_node_died_is_interrupted_by_the_sweep_and_retried_anywhere(
    both_databases, make_job, make_scheduler, clock, shard_handler
):
    job = sharded_job(make_job, shards=2, max_retries=1, retry_interval_seconds=0)
    node = make_scheduler(max_workers=1, clock=clock, misfire_threshold=60, clustered=False)
    node.plan_due(T0)  # starts shard 0 in its one slot
    # Shard 1 was taken by node-b, which died: no lease, no heartbeat since.
    stale = T0 - STALE_AFTER - timedelta(seconds=1)
    Run.objects.filter(job=job, shard_index=1, status="queued").update(
        status="running", worker_id="node-b", started_at=stale, heartbeat_at=stale
    )
    run_all(node, T0)
    node.sweep(T0)
    run_all(node, T0)
    assert shards_of(job) == [(0, 1, "succeeded"), (1, 1, "interrupted"), (1, 2, "succeeded")]
    retry = job.runs.get(shard_index=1, attempt=2)
    assert (retry.worker_id, retry.shard_total, retry.node) == ("node-a", 2, "")
    job.refresh_from_db()
    assert (job.last_status, job.consecutive_failures) == ("succeeded", 0)


# -- broadcast ------------------------------------------------------------------------


def test_a_broadcast_fire_on_one_node_is_one_run_pinned_to_it(both_databases, make_job, node, shard_handler):
    job = make_job(handler="test.shard", broadcast=True, next_fire_at=T0)
    node.plan_due(T0)
    run_all(node, T0)
    assert list(job.runs.values_list("node", "shard_index", "shard_total", "status")) == [
        ("node-a", 0, 1, "succeeded")
    ]


def live_nodes(*names, until, refusing=False):
    for name in names:
        info = {"clock_skew_seconds": 31.4, "clock_refused": True} if refusing else {}
        Lease.objects.create(name=f"node:{name}", holder=name, expires_at=until, info=info)


def test_a_broadcast_fire_is_one_run_per_live_node(both_databases, make_job):
    job = make_job(broadcast=True, next_fire_at=T0)
    # Live by either database's clock: ours (SQLite) or the server's (PostgreSQL).
    live_nodes("node-b", "node-c", until=max(T0, timezone.now()) + timedelta(hours=1))
    live_nodes("node-gone", until=T0 - timedelta(seconds=1))
    planner = Planner(worker_id="node-a", clustered=True, misfire_threshold=timedelta(60), clock=None)
    runs = planner.plan_fire(job, T0, busy=False).runs
    assert [(run.node, run.shard_index, run.shard_total) for run in runs] == [
        ("node-a", 0, 3),
        ("node-b", 1, 3),
        ("node-c", 2, 3),
    ]
    assert len({run.fire_id for run in runs}) == 1


def test_a_broadcast_fire_pins_no_run_to_a_node_that_refuses_work_for_its_clock(both_databases, make_job):
    job = make_job(broadcast=True, next_fire_at=T0)
    until = max(T0, timezone.now()) + timedelta(hours=1)
    live_nodes("node-b", until=until)
    live_nodes("node-skewed", until=until, refusing=True)
    planner = Planner(worker_id="node-a", clustered=True, misfire_threshold=timedelta(60), clock=None)
    runs = planner.plan_fire(job, T0, busy=False).runs
    assert [(run.node, run.shard_index, run.shard_total) for run in runs] == [
        ("node-a", 0, 2),
        ("node-b", 1, 2),
    ]


def test_a_broadcast_run_queued_for_a_refusing_node_past_the_misfire_threshold_is_interrupted(
    both_databases, make_job, node, shard_handler
):
    """Pinned before its node began refusing work for its clock: it waits
    as a late fire may (the misfire threshold, 60 s here), then is recorded
    interrupted with the reason, so the fire ends and the job's next fire
    runs instead of being skipped as an overlap for as long as the clock is
    off."""
    job = make_job(handler="test.shard", broadcast=True, max_retries=3, retry_interval_seconds=0)
    live_nodes("node-skewed", until=max(T0, timezone.now()) + timedelta(hours=1), refusing=True)
    fire = dict(
        job=job, scheduled_at=T0, trigger="schedule", fire_id=uuid.uuid4(), shard_total=2, run_after=T0
    )
    Run.objects.create(**fire, shard_index=0, node="node-a")
    pinned = Run.objects.create(**fire, shard_index=1, node="node-skewed")
    run_all(node, T0)
    node.sweep(T0 + timedelta(seconds=59))
    pinned.refresh_from_db()
    assert pinned.status == "queued", "within the misfire threshold it may still start late"

    node.sweep(T0 + timedelta(seconds=59) + timedelta(minutes=2))
    pinned.refresh_from_db()
    assert (pinned.status, pinned.attempt) == ("interrupted", 1), "never retried elsewhere"
    assert "node-skewed" in pinned.error and "refuses work: its clock" in pinned.error
    assert "misfire threshold (60 s)" in pinned.error
    job.refresh_from_db()
    assert (job.last_status, job.runs.filter(status__in=["queued", "running"]).count()) == ("interrupted", 0)

    job.next_fire_at = T0 + timedelta(minutes=3)
    job.save(update_fields=["next_fire_at"])
    node.plan_due(job.next_fire_at)
    (next_fire,) = job.runs.filter(scheduled_at=job.next_fire_at)
    assert (next_fire.status, next_fire.node) == ("running", "node-a"), "not skipped as an overlap"


def test_a_node_claims_only_the_broadcast_runs_pinned_to_it(both_databases, make_job, node, shard_handler):
    job = make_job(handler="test.shard", broadcast=True)
    fire = dict(
        job=job, scheduled_at=T0, trigger="schedule", run_after=T0, fire_id=uuid.uuid4(), shard_total=2
    )
    Run.objects.create(**fire, shard_index=0, node="node-a")
    Run.objects.create(**fire, shard_index=1, node="node-b")
    run_all(node, T0)
    assert sorted(job.runs.values_list("node", "status", "worker_id")) == [
        ("node-a", "succeeded", "node-a"),
        ("node-b", "queued", ""),
    ]


def test_a_broadcast_run_whose_node_died_is_interrupted_never_moved(both_databases, make_job, node):
    job = make_job(broadcast=True, max_retries=3, retry_interval_seconds=0)
    stale = T0 - STALE_AFTER - timedelta(seconds=1)
    fire = dict(
        job=job, scheduled_at=T0, trigger="schedule", fire_id=uuid.uuid4(), shard_total=3, max_retries=3
    )
    Run.objects.create(**fire, shard_index=0, node="node-a", status="succeeded", finished_at=T0)
    # node-b died running its run; node-c died before it claimed its own.
    Run.objects.create(
        **fire, shard_index=1, node="node-b", status="running", worker_id="node-b", heartbeat_at=stale
    )
    Run.objects.create(**fire, shard_index=2, node="node-c", run_after=T0)
    node.sweep(T0)
    assert sorted(job.runs.values_list("node", "attempt", "status")) == [
        ("node-a", 1, "succeeded"),
        ("node-b", 1, "interrupted"),
        ("node-c", 1, "interrupted"),
    ]
    job.refresh_from_db()
    assert job.last_status == "interrupted"
    assert "2 of 3 shards did not succeed" in job.last_error


def test_a_split_fire_running_long_is_one_long_running_alert(both_databases, make_job):
    job = make_job(shards=3, long_running_seconds=20, alert_on=["long_running"])
    fire = dict(job=job, scheduled_at=T0, trigger="schedule", fire_id=uuid.uuid4(), shard_total=3)
    for index in range(3):
        Run.objects.create(**fire, shard_index=index, status="running", started_at=T0, worker_id="node-a")
    assert alerts.check_long_running(T0 + timedelta(seconds=30)) == 1
    assert Alert.objects.filter(job=job, kind=Alert.Kind.LONG_RUNNING).count() == 1
