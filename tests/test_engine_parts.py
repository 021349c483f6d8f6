"""The engine's parts driven alone, without a Scheduler: each takes its
arguments and says what it did in its return value (docs/architecture.md,
"The engine's steps")."""

from datetime import timedelta

import pytest

from jobs.engine.execution.executors import make_pool
from jobs.engine.execution.pool import Outcome
from jobs.engine.loop import POLL
from jobs.engine.outbox import AlertSender
from jobs.engine.outcomes import Recorded, Recorder
from jobs.engine.planning import PLAN_BATCH, Planner, due_jobs, due_query, next_fire
from jobs.engine.starting import NextQueued, Starter
from jobs.models import QUEUED_RUN, Alert, Job, Run
from tests.fixtures.core import T0
from tests.fixtures.databases import query_plan

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
    make_job, planner, recorder, pool, clock, gate_handler
):
    for _ in range(3):
        # Held by the gate: a run that finished would free its slot at once.
        make_job(next_fire_at=T0, handler="test.gate")
    known = planner.plan_due(T0, epoch=None, free_slots=0).queued
    starter = Starter(
        worker_id="node-a", clock=clock, pool=pool, recorder=recorder, log_keep=1000, remember_for=POLL
    )

    claimed = starter.claim_queued(T0, known=known)

    assert claimed.did and claimed.waiting_for_slots and not claimed.full
    assert set(pool.flights) | set(claimed.known) == set(known), "two started, one still held"
    assert all(pool.flights[pk].ctx.run is known[pk] for pk in pool.flights), "started from memory"
    assert starter.claim_queued(T0, known=claimed.known).waiting_for_slots, "no slot free"


@pytest.mark.parametrize(
    ("age", "from_memory"),
    [(POLL - timedelta(milliseconds=1), True), (POLL + timedelta(milliseconds=1), False)],
)
def test_a_held_run_starts_from_memory_only_within_the_edit_poll(
    make_job, planner, recorder, pool, clock, age, from_memory
):
    """Within POLL a queued run starts with its job as planning read it (as a
    run started in the pass that planned it does); past POLL it is read
    again, so an edit made in the console while it waited for a slot counts."""
    job = make_job(next_fire_at=T0, properties={"v": 1})
    known = planner.plan_due(T0, epoch=None, free_slots=0).queued
    Job.objects.filter(pk=job.pk).update(properties={"v": 2})
    starter = Starter(
        worker_id="node-a", clock=clock, pool=pool, recorder=recorder, log_keep=1000, remember_for=POLL
    )
    claimed = starter.claim_queued(T0 + age, known=known)
    (flight,) = pool.flights.values()
    assert (flight.ctx.run is known[flight.run_id]) == from_memory
    assert flight.ctx.properties == ({"v": 1} if from_memory else {"v": 2})
    assert claimed.known == {}


def test_the_due_query_reads_a_range_of_its_index_and_sorts_nothing(make_job):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plan")
    for minute in range(5):
        make_job(next_fire_at=T0 + timedelta(minutes=minute))
    make_job(next_fire_at=T0, state="paused")
    plan = query_plan(due_query(T0 + timedelta(minutes=2)))
    # The due jobs and the first fire after them: two seeks, no sort. With an
    # index on state alone, every pass read and sorted every enabled job.
    seeks = [step for step in plan if "job_state_due_idx (state=? AND next_fire_at" in step]
    assert len(seeks) == 2, plan
    assert not [step for step in plan if "TEMP B-TREE" in step], plan
    due = due_jobs(T0 + timedelta(minutes=2))
    assert [job.next_fire_at for job in due] == [T0 + timedelta(minutes=m) for m in range(3)]
    assert {job.following for job in due} == {T0 + timedelta(minutes=3)}
    assert due_query(T0).query.high_mark == PLAN_BATCH


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


def test_finished_runs_are_written_and_their_ids_handed_back_for_the_pool_to_let_go_of(
    make_job, recorder, pool, clock
):
    make_job(next_fire_at=T0)
    planner = Planner(
        worker_id="node-a", clustered=False, misfire_threshold=timedelta(seconds=60), clock=clock
    )
    (run,) = planner.plan_due(T0, epoch=None, free_slots=1).starting
    starter = Starter(
        worker_id="node-a", clock=clock, pool=pool, recorder=recorder, log_keep=1000, remember_for=POLL
    )
    starter.start_all([run])
    pool.wait(10)  # the handler's own outcome is not needed: one is written by hand

    recorded = recorder.write_finished([Outcome(run.pk, "succeeded", result="ok")], pool.flights, T0)

    assert (recorded.runs, recorded.written, recorded.finished) == (1, 1, (run.pk,))
    assert run.pk in pool.flights, "the recorder leaves the pool's flights to the pool"
    pool.release(recorded.finished)
    assert run.pk not in pool.flights
    run.refresh_from_db()
    assert (run.status, run.result) == ("succeeded", "ok")


def test_next_queued_is_read_once_per_poll_and_lowered_by_what_was_queued(make_job):
    pacing = NextQueued(every=POLL)
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


# -- outcomes, one run at a time (timeouts, cancels, shutdown, recovery) --------------


def test_a_retry_copies_the_fire_and_its_policy_and_waits_its_interval(make_job, recorder, staff_user):
    job = make_job()
    upstream = Run.objects.create(job=job, scheduled_at=T0, trigger="schedule", status="succeeded")
    run = Run.objects.create(
        job=job,
        scheduled_at=T0,
        trigger="manual",
        status="running",
        started_at=T0,
        attempt=2,
        max_retries=3,
        retry_interval_seconds=45,
        timeout_seconds=12,
        handler="demo.echo",
        task_key="k-1",
        properties={"a": "1"},
        caused_by=upstream,
        created_by=staff_user,
    )

    recorder.record(run, Run.Status.TIMED_OUT, T0 + timedelta(seconds=12), error="slow")  # not retried
    recorder.record(run, Run.Status.INTERRUPTED, T0, error="again")  # written once: nothing
    run.status = "running"
    Run.objects.filter(pk=run.pk).update(status="running")
    recorded = recorder.record(run, Run.Status.INTERRUPTED, T0 + timedelta(seconds=20), error="killed")

    retry = Run.objects.get(attempt=3)
    assert recorded.queued_at == retry.run_after == T0 + timedelta(seconds=65)
    assert (retry.status, retry.created_at, retry.fire_id) == (
        "queued",
        T0 + timedelta(seconds=20),
        run.fire_id,
    )
    copied = ("job_id", "scheduled_at", "trigger", "max_retries", "retry_interval_seconds", "timeout_seconds")
    assert [getattr(retry, f) for f in copied] == [getattr(run, f) for f in copied]
    assert (retry.handler, retry.task_key, retry.properties) == ("demo.echo", "k-1", {"a": "1"})
    assert (retry.caused_by_id, retry.created_by_id) == (upstream.pk, staff_user.pk)


def test_an_attempt_past_max_retries_is_not_retried(make_job, recorder):
    run = Run.objects.create(
        job=make_job(), scheduled_at=T0, trigger="schedule", status="running", started_at=T0, attempt=2,
        max_retries=1,
    )  # fmt: skip
    assert recorder.record(run, Run.Status.FAILED, T0, error="boom").queued_at is None
    assert not Run.objects.filter(attempt=3).exists()


def test_recording_on_the_job_counts_a_fire_once_after_its_last_attempt(make_job, recorder):
    job = make_job(alert_threshold=2, consecutive_failures=0)
    late = T0 + timedelta(milliseconds=2500)

    fires = iter(range(100))

    def running(**fields):  # a fire of its own each time
        return Run.objects.create(
            job=job,
            scheduled_at=T0 + timedelta(minutes=next(fires)),
            trigger="schedule",
            status="running",
            started_at=T0,
            **fields,
        )

    recorder.record(running(max_retries=1), Run.Status.FAILED, late, error="x" * 5000)
    job.refresh_from_db()
    # A failed attempt with a retry still to come: the job's last status, not a failure yet.
    assert (job.last_status, job.consecutive_failures, job.last_duration_ms) == ("failed", 0, 2500)
    assert len(job.last_error) < 5000 and job.last_error.startswith("xxx")

    retry = Run.objects.get(job=job, attempt=2)
    Run.objects.filter(pk=retry.pk).update(status="running", started_at=T0)
    retry.refresh_from_db()
    recorder.record(retry, Run.Status.TIMED_OUT, late, error="slow")
    job.refresh_from_db()
    assert (job.last_status, job.last_error, job.consecutive_failures, job.state) == (
        "timed_out",
        "slow",
        1,
        "enabled",
    )

    recorded = recorder.record(running(), Run.Status.FAILED, late, error="boom")
    job.refresh_from_db()
    assert recorded.alerts and (job.consecutive_failures, job.state, job.next_fire_at) == (2, "crashed", None)

    # A crashed job is not crashed twice; a success clears the count.
    assert recorder.record(running(), Run.Status.FAILED, late).alerts is False
    job.refresh_from_db()
    assert (job.consecutive_failures, job.state) == (3, "crashed")
    recorder.record(running(), Run.Status.SUCCEEDED, late, result="fine")
    job.refresh_from_db()
    assert (job.last_status, job.last_error, job.consecutive_failures) == ("succeeded", "", 0)


def test_a_paused_job_counts_failures_but_does_not_crash(make_job, recorder):
    job = make_job(alert_threshold=1, state="paused")
    run = Run.objects.create(job=job, scheduled_at=T0, trigger="schedule", status="running", started_at=T0)
    assert recorder.record(run, Run.Status.FAILED, T0).alerts is False
    job.refresh_from_db()
    assert (job.state, job.consecutive_failures) == ("paused", 1)


def test_an_outcome_that_cannot_be_stored_is_recorded_failed_and_says_why(make_job, recorder):
    from django.db import IntegrityError, OperationalError

    run = Run.objects.create(
        job=make_job(), scheduled_at=T0, trigger="schedule", status="running", started_at=T0
    )

    def refused():
        raise IntegrityError("value too long")

    recorded = recorder.record_alone(run, "succeeded", T0, refused)
    assert (recorded.runs, recorded.written) == (1, 1)
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == (
        "The run ended (succeeded), but its outcome could not be written to the database: "
        "IntegrityError: value too long. It is recorded as failed instead, without its result and log."
    )

    def lost():
        raise OperationalError("server closed the connection")

    with pytest.raises(OperationalError):
        recorder.record_alone(run, "succeeded", T0, lost)


def test_connection_errors_are_told_from_errors_of_the_data():
    from django.db import DataError, IntegrityError, InterfaceError, OperationalError

    from jobs.engine.outcomes import is_connection_error

    class Cause(Exception):
        def __init__(self, sqlstate):
            self.sqlstate = sqlstate

    def operational(sqlstate=None):
        exc = OperationalError("x")
        exc.__cause__ = Cause(sqlstate) if sqlstate is not None else None
        return exc

    assert is_connection_error(operational()) and is_connection_error(InterfaceError("gone"))
    assert is_connection_error(operational("57P01")) and is_connection_error(operational("40P01"))
    assert not is_connection_error(operational("54000")) and not is_connection_error(operational("54001"))
    assert not is_connection_error(IntegrityError("dup")) and not is_connection_error(DataError("nul"))
    assert not is_connection_error(ValueError("x"))


# -- planning's own helpers -----------------------------------------------------


def test_a_skipped_fire_is_written_finished_with_its_reason(make_job, planner):
    job = make_job(max_retries=2, retry_interval_seconds=7, timeout_seconds=9)
    skipped = planner.skipped(job, T0, Run.SkipReason.OVERLAP, T0 + timedelta(seconds=3), "still running")
    assert (skipped.status, skipped.skip_reason, skipped.error) == ("skipped", "overlap", "still running")
    assert (skipped.scheduled_at, skipped.finished_at, skipped.run_after, skipped.created_at) == (
        T0,
        T0 + timedelta(seconds=3),
        T0 + timedelta(seconds=3),
        T0 + timedelta(seconds=3),
    )
    assert (skipped.worker_id, skipped.trigger, skipped.job) == ("node-a", "schedule", job)
    assert (skipped.max_retries, skipped.retry_interval_seconds, skipped.timeout_seconds) == (2, 7, 9)


def test_jobs_without_a_next_fire_time_get_one(make_job):
    from jobs.engine.schedulecheck import schedule_unplanned

    plain = make_job()
    paused = make_job(state="paused")
    once = make_job(run_once=True)
    gone = make_job()
    gone.deleted_at = T0
    gone.save()
    never = make_job(cron_expression="0 0 0 1 1 ? 2020")
    Job.objects.update(next_fire_at=None)

    assert schedule_unplanned(T0) is True
    found = dict(Job.objects.values_list("pk", "next_fire_at"))
    assert found[plain.pk] == T0 + timedelta(minutes=1)
    assert found[paused.pk] is found[once.pk] is found[gone.pk] is found[never.pk] is None
    assert schedule_unplanned(T0) is False, "nothing left to plan"


@pytest.mark.parametrize("busy", [False, True])
def test_planning_is_told_whether_a_job_is_busy_and_skips_its_fire_as_an_overlap(make_job, planner, busy):
    job = Job.objects.get(pk=make_job(next_fire_at=T0).pk)  # a plain row: no annotation to read
    plan = planner.plan_fire(job, T0, busy=busy)
    assert [(run.status, run.skip_reason) for run in plan.runs] == (
        [("skipped", "overlap")] if busy else [("queued", "")]
    )


def test_the_one_job_claim_moves_only_the_fire_it_read(make_job, planner):
    job = make_job(next_fire_at=T0)
    plan = planner.plan_fire(job, T0, busy=False)
    assert planner.claim_fire(plan, T0, epoch=None) is True
    job.refresh_from_db()
    assert (job.next_fire_at, job.last_fire_at) == (T0 + timedelta(minutes=1), T0)
    assert Run.objects.filter(job=job, scheduled_at=T0, status="queued").count() == 1
    assert planner.claim_fire(plan, T0, epoch=None) is False, "the row moved: a second claim writes nothing"
    assert Run.objects.filter(job=job).count() == 1

    once = make_job(next_fire_at=T0, run_once=True)
    assert planner.claim_fire(planner.plan_fire(once, T0, busy=False), T0, epoch=None) is True
    once.refresh_from_db()
    assert (once.state, once.next_fire_at) == ("paused", None)
    stopped = make_job(next_fire_at=T0)
    plan = planner.plan_fire(stopped, T0, busy=False)
    Job.objects.filter(pk=stopped.pk).update(state="paused")
    assert planner.claim_fire(plan, T0, epoch=None) is False, "a job paused since it was read"


def test_the_claims_questions_read_the_queued_runs_index(db):
    """Asked on every pass: is a queued run due, when is the next one. Both
    by run_queued_idx, which SQLite uses only when the status is a literal
    `=` (bound, or written `IN ('queued')`, it scanned another index)."""
    from django.db import connection

    from jobs.engine.starting import _queued_due

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plan")
    later = Run.objects.filter(QUEUED_RUN, run_after__gt=T0).values("run_after")
    for queryset in (_queued_due(T0), later):
        plan = " | ".join(query_plan(queryset))
        assert "USING INDEX run_queued_idx" in plan, plan


def test_the_sqlite_claim_marks_the_oldest_due_runs_in_one_statement(
    make_job, recorder, pool, clock, gate_handler
):
    """A question (is one due?), one UPDATE … RETURNING that marks the
    oldest due queued runs running, and one read of the runs it does not
    hold, whatever their number: nothing is compiled by the ORM per claim."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "sqlite":
        pytest.skip("the SQLite claim")
    runs = [
        Run.objects.create(
            job=make_job(handler="test.gate"),
            scheduled_at=T0,
            trigger="manual",
            status="queued",
            run_after=T0 - timedelta(seconds=s),
        )
        for s in (1, 3, 2)
    ]
    not_due = Run.objects.create(
        job=make_job(handler="test.gate"),
        scheduled_at=T0,
        trigger="manual",
        status="queued",
        run_after=T0 + timedelta(seconds=1),
    )
    starter = Starter(
        worker_id="node-a", clock=clock, pool=pool, recorder=recorder, log_keep=1000, remember_for=POLL
    )

    with CaptureQueriesContext(connection) as queries:
        claimed = starter.claim_queued(T0, known={})

    assert len(queries) == 3, [q["sql"][:60] for q in queries]
    assert claimed.did and claimed.waiting_for_slots, "both slots filled, one more due"
    oldest = [runs[1].pk, runs[2].pk]
    assert sorted(pool.flights) == sorted(oldest)
    for run in Run.objects.filter(pk__in=oldest):
        assert (run.status, run.worker_id, run.started_at) == ("running", "node-a", T0)
    assert set(Run.objects.filter(status="queued").values_list("pk", flat=True)) == {runs[0].pk, not_due.pk}


def test_the_leader_wakes_the_other_nodes_only_for_fires_its_own_claim_left(
    make_scheduler, make_job, clock, monkeypatch
):
    """The NOTIFY comes after the leader's claim in the same pass: runs its
    claim took need nobody else, so nobody is woken for them."""
    from jobs.engine import loop

    woken = []
    monkeypatch.setattr(loop, "wake_schedulers", lambda sender="": woken.append(sender))
    scheduler = make_scheduler(max_workers=2, clock=clock, clustered=True)
    scheduler.lead(T0)
    make_job(next_fire_at=T0)
    scheduler.run_pass(T0)
    assert len(scheduler.pool.flights) == 1
    assert woken == [], "its claim took the one fire"

    for _ in range(3):
        make_job(next_fire_at=T0 + timedelta(seconds=1))
    scheduler.run_pass(T0 + timedelta(seconds=1))
    assert woken == ["node-a"], "one slot was free for three fires: two are left for the others"


def test_sharing_asks_what_is_left_of_the_runs_planning_wrote(make_scheduler, clock, monkeypatch):
    from jobs.engine import loop
    from jobs.engine.planning import Planned

    monkeypatch.setattr(loop, "wake_schedulers", lambda sender="": None)
    scheduler = make_scheduler(max_workers=1, clock=clock, clustered=True)
    running, queued = Run(status="running"), Run(status="queued")
    assert not scheduler.share(Planned(did=True, queued={1: running}))
    assert not scheduler.share(Planned(did=True, queued={1: queued}, lease_lost=True))
    assert not scheduler.share(Planned())
    assert scheduler.share(Planned(did=True, queued={1: running, 2: queued}))
    assert scheduler.share(Planned(did=True, queued={1: running}, waiting=True))
    assert scheduler.share(Planned(did=True, queued=None)), "a replan, one job at a time"
