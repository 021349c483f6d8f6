"""The engine's parts driven alone, without a Scheduler: each takes its
arguments and says what it did in its return value (docs/architecture.md,
"The engine's steps")."""

from datetime import timedelta

import pytest

from jobs.engine.execution.executors import Outcome, make_pool
from jobs.engine.execution.starting import Starter
from jobs.engine.loop import KNOWN_MAX, POLL, NextQueued, remember
from jobs.engine.outbox import AlertSender
from jobs.engine.outcomes import Recorded, Recorder
from jobs.engine.planning import PLAN_BATCH, Planner, due_jobs, next_fire
from jobs.models import Alert, Job, Run
from tests.fixtures.core import T0

pytestmark = pytest.mark.django_db


@pytest.fixture
def planner(clock):
    return Planner(worker_id="node-a", clustered=False, misfire_threshold=timedelta(seconds=60), clock=clock)


@pytest.fixture
def recorder():
    return Recorder(worker_id="node-a", cap=1000)


@pytest.fixture
def pool():
    made = make_pool(2, executor="thread")
    yield made
    for run_id in list(made.flights):
        made.abandon(run_id)


def test_planning_says_what_it_wrote_queued_and_what_to_start(make_job, planner):
    jobs = [make_job(next_fire_at=T0) for _ in range(3)]

    planned = planner.plan_due(T0, epoch=None, free_slots=1)

    assert (planned.did, planned.full, planned.lease_lost) == (True, False, False)
    (starting,) = planned.starting
    assert (starting.status, starting.worker_id, starting.started_at) == ("running", "node-a", T0)
    assert set(planned.queued) == {run.pk for run in Run.objects.filter(status="queued")}
    assert len(planned.queued) == 2
    assert {run.job_id for run in Run.objects.all()} == {job.pk for job in jobs}
    assert planner.plan_due(T0, epoch=None, free_slots=1).did is False, "nothing is due twice"


def test_planning_reads_the_next_fire_the_loop_sleeps_on(make_job, planner):
    make_job(next_fire_at=T0)  # fires every minute: next at T0 + 60 s once claimed
    other = make_job(next_fire_at=T0 + timedelta(seconds=30))

    planned = planner.plan_due(T0, epoch=None, free_slots=0)

    assert planned.next_fire.at == T0 + timedelta(seconds=30) == next_fire()
    other.delete()
    planned = planner.plan_due(T0 + timedelta(seconds=60), epoch=None, free_slots=0)
    assert planned.next_fire.at == T0 + timedelta(seconds=120) == next_fire(), (
        "the claimed job's own next fire"
    )
    assert planner.plan_due(T0 + timedelta(seconds=61), epoch=None, free_slots=0).next_fire is None, (
        "nothing due: the loop asks the database"
    )


def test_the_claim_starts_runs_planning_holds_and_hands_back_the_rest(
    make_job, planner, recorder, pool, clock
):
    for _ in range(3):
        make_job(next_fire_at=T0)
    known = planner.plan_due(T0, epoch=None, free_slots=0).queued
    starter = Starter(worker_id="node-a", clock=clock, pool=pool, recorder=recorder, log_keep=1000)

    claimed = starter.claim_queued(T0, known=known)

    assert claimed.did and claimed.waiting_for_slots and not claimed.full
    assert set(pool.flights) | set(claimed.known) == set(known), "two started, one still held"
    assert all(pool.flights[pk].ctx.run is known[pk] for pk in pool.flights), "started from memory"
    assert starter.claim_queued(T0, known=claimed.known).waiting_for_slots, "no slot free"


def test_the_due_query_reads_a_range_of_its_index_and_sorts_nothing(make_job):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plan")
    for minute in range(5):
        make_job(next_fire_at=T0 + timedelta(minutes=minute))
    make_job(next_fire_at=T0, state="paused")
    sql, params = due_jobs(T0 + timedelta(minutes=2)).query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = [row[-1] for row in cursor.fetchall()]
    # The due jobs and the first fire after them: two seeks, no sort. With an
    # index on state alone, every pass read and sorted every enabled job.
    seeks = [step for step in plan if "job_state_due_idx (state=? AND next_fire_at" in step]
    assert len(seeks) == 2, plan
    assert not [step for step in plan if "TEMP B-TREE" in step], plan
    due = list(due_jobs(T0 + timedelta(minutes=2)))
    assert [job.next_fire_at for job in due] == [T0 + timedelta(minutes=m) for m in range(3)]
    assert {job.following for job in due} == {T0 + timedelta(minutes=3)}
    assert due_jobs(T0).query.high_mark == PLAN_BATCH


def test_runs_planning_wrote_queued_are_remembered_until_claimed(make_job, planner):
    first = {pk: f"run {pk}" for pk in range(1, 4)}
    # A pass that wrote its fires running (no queued ones) forgets nothing.
    assert remember(first, {}) == first
    assert remember(first, {4: "run 4"}) == {**first, 4: "run 4"}
    # Bounded: the newest are kept; the claim reads the others with their job.
    many = remember({}, {pk: pk for pk in range(KNOWN_MAX + 10)})
    assert len(many) == KNOWN_MAX and min(many) == 10 and max(many) == KNOWN_MAX + 9


def test_recording_a_failure_returns_the_retry_it_queued(make_job, recorder):
    run = Run.objects.create(
        job=make_job(),
        scheduled_at=T0,
        trigger="schedule",
        status="running",
        started_at=T0,
        max_retries=1,
        retry_interval_seconds=30,
    )

    recorded = recorder.record(run, Run.Status.FAILED, T0 + timedelta(seconds=1), error="boom")

    assert recorded == Recorded(runs=1, written=1, alerts=False, queued_at=T0 + timedelta(seconds=31))
    assert recorder.record(run, Run.Status.FAILED, T0, error="again") == Recorded(runs=1), "written once"


def test_recording_a_crash_says_an_alert_was_written(make_job, recorder):
    job = make_job(alert_threshold=1)
    run = Run.objects.create(job=job, scheduled_at=T0, trigger="schedule", status="running", started_at=T0)

    recorded = recorder.record(run, Run.Status.FAILED, T0, error="boom")

    assert (recorded.written, recorded.alerts, recorded.queued_at) == (1, True, None)
    job.refresh_from_db()
    assert job.state == Job.State.CRASHED
    assert Alert.objects.filter(job=job).exists()


def test_finished_runs_are_written_and_let_go_of(make_job, recorder, pool, clock):
    make_job(next_fire_at=T0)
    planner = Planner(
        worker_id="node-a", clustered=False, misfire_threshold=timedelta(seconds=60), clock=clock
    )
    (run,) = planner.plan_due(T0, epoch=None, free_slots=1).starting
    starter = Starter(worker_id="node-a", clock=clock, pool=pool, recorder=recorder, log_keep=1000)
    starter.start_all([run])
    pool.wait(10)  # the handler's own outcome is not needed: one is written by hand

    recorded = recorder.write_finished([Outcome(run.pk, "succeeded", result="ok")], pool, T0)

    assert (recorded.runs, recorded.written) == (1, 1)
    assert run.pk not in pool.flights
    run.refresh_from_db()
    assert (run.status, run.result) == ("succeeded", "ok")


def test_next_queued_is_read_once_per_poll_and_lowered_by_what_was_queued(make_job):
    pacing = NextQueued()
    assert pacing.get(T0) is None
    Run.objects.create(
        job=make_job(),
        scheduled_at=T0,
        trigger="manual",
        status="queued",
        run_after=T0 + timedelta(minutes=5),
    )
    assert pacing.get(T0 + POLL / 2) is None, "not read again within a poll"
    pacing.lower(T0 + timedelta(seconds=30))
    assert pacing.get(T0 + POLL / 2) == T0 + timedelta(seconds=30)
    assert pacing.get(T0 + POLL) == T0 + timedelta(minutes=5), "read again after a poll"


def test_the_outbox_paces_its_reads_and_reads_at_once_after_an_alert_was_written(make_job, monkeypatch):
    sender = AlertSender(read_every=timedelta(seconds=1))
    reads = []
    real = sender.next_wakeup
    monkeypatch.setattr(sender, "next_wakeup", lambda now: reads.append(now) or real(now))

    assert sender.step_if_due(T0) is False
    assert sender.next_due(T0 + timedelta(milliseconds=500)) is None
    assert reads == [T0], "one read within read_every"

    sender.alert_written()
    assert sender.next_due(T0 + timedelta(milliseconds=600)) is None
    assert reads == [T0, T0 + timedelta(milliseconds=600)]
