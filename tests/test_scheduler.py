"""The scheduler's steps, driven with a fixed clock."""

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction

from jobs import alerts, services
from jobs.handlers import HandlerError, JobHandler, register
from jobs.handlers.registry import unregister
from jobs.models import Job, Lease, Run, cap_message
from jobs.scheduler import STALE_AFTER, Scheduler

T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self, now=T0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, **kwargs):
        self.now += timedelta(**kwargs)
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def scheduler(clock):
    s = Scheduler(
        worker_id="node-a", max_workers=4, clock=clock, misfire_threshold=60, max_message_chars=262144
    )
    yield s
    for flight in list(s.pool.flights.values()):
        s.pool.abandon(flight.run_id)


def finish_all(scheduler, clock, timeout=5.0):
    """Wait for every started run and write its outcome."""
    until = time.monotonic() + timeout
    while scheduler.pool.flights and time.monotonic() < until:
        scheduler.collect(scheduler.pool.wait(0.2), clock())
    assert not scheduler.pool.flights, "runs still in flight"


def runs_of(job):
    return list(job.runs.order_by("scheduled_at", "attempt", "id"))


@pytest.fixture
def gate_handler():
    """A handler that blocks until the test opens the gate (and ignores `cancelled`)."""
    gate = threading.Event()

    @register("test.gate")
    class Gate(JobHandler):
        def run(self, ctx):
            gate.wait(10)
            return "through"

    yield gate
    gate.set()
    unregister("test.gate")


@pytest.fixture
def flaky_handler():
    calls = []

    @register("test.flaky")
    class Flaky(JobHandler):
        def run(self, ctx):
            calls.append((ctx.fire_id, ctx.attempt))
            if len(calls) < 2:
                raise HandlerError("first attempt fails")
            return "second attempt works"

    yield calls
    unregister("test.flaky")


# -- planning ----------------------------------------------------------------------


def test_due_fire_is_claimed_once_and_starts_in_the_pass_that_plans_it(make_job, scheduler, clock):
    job = make_job(next_fire_at=T0)
    assert scheduler.plan_due(T0)
    assert not scheduler.plan_due(T0), "the claim moved next_fire_at: nothing is due twice"
    (run,) = runs_of(job)
    assert (run.trigger, run.scheduled_at, run.attempt) == ("schedule", T0, 1)
    assert run.status in ("running", "succeeded"), (
        "one node: written running and started, no claim of its own"
    )
    assert run.started_at == T0
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(minutes=1)
    assert job.last_fire_at == T0

    assert not scheduler.claim_queued(T0), "nothing was left queued"
    finish_all(scheduler, clock)
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert run.worker_id == "node-a"
    assert run.result == "0 properties"
    job.refresh_from_db()
    assert job.last_status == "succeeded"


def test_new_fires_queue_behind_a_run_that_waits_for_a_slot(make_job, clock, gate_handler):
    """One node writes a due fire already running only while a slot is free
    and no older queued run waits for one; otherwise the fire is queued and
    claim_queued serves the queue in order."""
    scheduler = Scheduler(worker_id="node-a", max_workers=1, clock=clock, misfire_threshold=60)
    blocker = make_job(next_fire_at=T0, handler="test.gate")
    scheduler.plan_due(T0)
    assert Run.objects.get(job=blocker).status == "running"

    waiting, _ = services.run_now(job=make_job(), now=T0)
    assert not scheduler.claim_queued(T0), "no free slot"
    gate_handler.set()
    finish_all(scheduler, clock)
    assert scheduler.pool.free_slots == 1

    later = make_job(next_fire_at=T0 + timedelta(seconds=1))
    scheduler.plan_due(clock.advance(seconds=1))
    (fire,) = runs_of(later)
    assert fire.status == "queued", "the free slot is the waiting run's"
    assert scheduler.claim_queued(clock())
    assert set(scheduler.pool.flights) == {waiting.pk}, "the older queued run goes first"
    finish_all(scheduler, clock)
    assert scheduler.claim_queued(clock())
    assert set(scheduler.pool.flights) == {fire.pk}
    finish_all(scheduler, clock)


def test_claim_with_a_stale_next_fire_time_writes_nothing(make_job, scheduler):
    job = make_job(next_fire_at=T0)
    stale = Job.objects.get(pk=job.pk)
    stale.busy = False
    plan = scheduler.plan_fire(stale, T0)
    # Another process claims the fire first.
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0 + timedelta(minutes=1))
    with transaction.atomic():
        assert scheduler.claim_fire(plan=plan, now=T0) is False
    assert Run.objects.count() == 0


def test_duplicate_scheduled_run_is_refused_by_the_database(make_job):
    job = make_job(next_fire_at=T0)
    Run.objects.create(job=job, scheduled_at=T0, trigger="schedule")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(job=job, scheduled_at=T0, trigger="catch_up")


def test_paused_job_is_not_planned(make_job, scheduler):
    make_job(next_fire_at=T0, state=Job.State.PAUSED)
    assert not scheduler.plan_due(T0)


def test_fire_a_little_late_still_runs_at_its_scheduled_time(make_job, scheduler, clock):
    job = make_job(next_fire_at=T0)
    late = T0 + timedelta(seconds=30)
    scheduler.plan_due(late)
    (run,) = runs_of(job)
    assert (run.status, run.scheduled_at, run.started_at) == ("running", T0, late)


def test_misfire_skip_records_one_skipped_run_and_moves_past_now(make_job, scheduler):
    job = make_job(next_fire_at=T0, cron_expression="0 0 * * * *")  # hourly
    now = T0 + timedelta(hours=5, minutes=30)
    scheduler.plan_due(now)
    (run,) = runs_of(job)
    assert (run.status, run.skip_reason, run.scheduled_at) == ("skipped", "misfire", T0)
    assert "misfire threshold" in run.error
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(hours=6)


def test_misfire_fire_once_now_runs_once_as_catch_up(make_job, scheduler):
    job = make_job(next_fire_at=T0, cron_expression="0 0 * * * *", misfire_policy="fire_once_now")
    now = T0 + timedelta(hours=5, minutes=30)
    scheduler.plan_due(now)
    (run,) = runs_of(job)
    assert (run.status, run.trigger) == ("running", "catch_up")
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(hours=6)


def test_several_due_fires_become_one_skip_record_and_the_latest_runs(make_job, scheduler):
    job = make_job(next_fire_at=T0, cron_expression="*/10 * * * * *")
    now = T0 + timedelta(minutes=10, seconds=5)  # 61 fire times are due
    scheduler.plan_due(now)
    skipped, fired = runs_of(job)
    assert (skipped.status, skipped.skip_reason, skipped.scheduled_at) == ("skipped", "misfire", T0)
    assert (fired.status, fired.scheduled_at) == ("running", T0 + timedelta(minutes=10))
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(minutes=10, seconds=10)


def test_interval_job_never_replays_missed_windows(make_job, scheduler):
    job = make_job(next_fire_at=T0, schedule_type="interval", interval_seconds=30, cron_expression="")
    now = T0 + timedelta(hours=1, seconds=12)
    scheduler.plan_due(now)
    skipped, fired = runs_of(job)
    assert skipped.skip_reason == "misfire"
    assert fired.scheduled_at == T0 + timedelta(hours=1)
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(hours=1, seconds=30)


def test_interval_misfire_moves_to_now_plus_interval(make_job, scheduler):
    job = make_job(next_fire_at=T0, schedule_type="interval", interval_seconds=600, cron_expression="")
    now = T0 + timedelta(minutes=5)
    scheduler.plan_due(now)
    (run,) = runs_of(job)
    assert run.skip_reason == "misfire"
    job.refresh_from_db()
    assert job.next_fire_at == now + timedelta(minutes=10)


def test_overlapping_fire_is_skipped_while_first_runs(make_job, scheduler, clock, gate_handler):
    job = make_job(next_fire_at=T0, handler="test.gate")
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    clock.advance(minutes=1)
    scheduler.plan_due(clock())
    first, second = runs_of(job)
    assert first.status == "running"
    assert (second.status, second.skip_reason) == ("skipped", "overlap")
    gate_handler.set()
    finish_all(scheduler, clock)


def test_run_once_job_disables_itself_after_firing(make_job, scheduler):
    job = make_job(next_fire_at=T0, run_once=True)
    scheduler.plan_due(T0)
    job.refresh_from_db()
    assert job.state == Job.State.PAUSED
    assert job.next_fire_at is None
    assert job.runs.count() == 1


def test_enabled_job_without_next_fire_time_gets_one_at_start(make_job, scheduler):
    job = make_job(next_fire_at=None)
    scheduler.schedule_unplanned(T0)
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(minutes=1)


def test_next_wakeup_is_the_next_fire_time_when_sooner_than_the_poll(make_job, scheduler):
    make_job(next_fire_at=T0 + timedelta(milliseconds=300))
    assert scheduler.next_wakeup(T0) == T0 + timedelta(milliseconds=300)
    assert scheduler.next_wakeup(T0 - timedelta(seconds=10)) == T0 - timedelta(seconds=9)


# -- outcomes ------------------------------------------------------------------------


def test_failed_attempt_is_retried_inside_the_same_fire(make_job, scheduler, clock, flaky_handler):
    job = make_job(next_fire_at=T0, handler="test.flaky", max_retries=2, retry_interval_seconds=30)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    finish_all(scheduler, clock)
    first, retry = runs_of(job)
    assert (first.status, first.error) == ("failed", "first attempt fails")
    assert (retry.status, retry.attempt, retry.fire_id, retry.scheduled_at) == (
        "queued",
        2,
        first.fire_id,
        T0,
    )
    assert retry.run_after == T0 + timedelta(seconds=30)
    assert not scheduler.claim_queued(clock.advance(seconds=29)), "not before the retry interval"
    assert scheduler.claim_queued(clock.advance(seconds=1))
    finish_all(scheduler, clock)
    retry.refresh_from_db()
    assert retry.status == "succeeded"
    assert {fire for fire, _ in flaky_handler} == {str(first.fire_id)}
    job.refresh_from_db()
    assert job.consecutive_failures == 0


def test_timeout_records_timed_out_frees_the_slot_and_is_not_retried(
    make_job, scheduler, clock, gate_handler
):
    job = make_job(next_fire_at=T0, handler="test.gate", timeout_seconds=5, max_retries=3)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    (flight,) = scheduler.pool.flights.values()
    assert not scheduler.enforce_deadlines(clock.advance(seconds=4))
    assert scheduler.enforce_deadlines(clock.advance(seconds=1))
    assert flight.ctx.cancelled.is_set()
    assert scheduler.pool.free_slots == 4, "a handler that ignores cancel holds no slot"
    (run,) = runs_of(job)
    assert run.status == "timed_out"
    assert "timed out after 5 s" in run.error
    gate_handler.set()
    time.sleep(0.2)
    assert scheduler.collect(scheduler.pool.wait(0.5), clock()) is False, "a late outcome is ignored"
    run.refresh_from_db()
    assert run.status == "timed_out"
    assert job.runs.count() == 1


def test_job_crashes_at_threshold_and_alerts_once(make_job, scheduler, clock, monkeypatch):
    crashes = []
    monkeypatch.setattr("jobs.alerts.on_crash", lambda **kw: crashes.append(kw))
    job = make_job(next_fire_at=T0, handler="demo.fail", alert_threshold=2, cron_expression="*/10 * * * * *")
    for _ in range(2):
        scheduler.plan_due(clock())
        scheduler.claim_queued(clock())
        finish_all(scheduler, clock)
        clock.advance(seconds=10)
    job.refresh_from_db()
    assert job.state == Job.State.CRASHED
    assert job.consecutive_failures == 2
    assert job.next_fire_at is None
    assert len(crashes) == 1 and crashes[0]["job"].pk == job.pk
    assert not scheduler.plan_due(clock.advance(minutes=5)), "a crashed job is not scheduled"

    services.resume_job(job=job, now=clock())
    job.refresh_from_db()
    assert (job.state, job.consecutive_failures) == (Job.State.ENABLED, 0)
    assert job.next_fire_at > clock()


def test_unknown_handler_fails_its_run_with_a_clear_error(make_job, scheduler, clock):
    job = make_job(next_fire_at=T0)
    Job.objects.filter(pk=job.pk).update(handler="gone.away")
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    finish_all(scheduler, clock)
    (run,) = runs_of(job)
    assert run.status == "failed"
    assert "'gone.away' is not registered" in run.error


def test_handler_exception_is_recorded_with_its_traceback(make_job, scheduler, clock):
    @register("test.boom")
    class Boom(JobHandler):
        def run(self, ctx):
            ctx.log("about to fail")
            return 1 / 0

    try:
        job = make_job(next_fire_at=T0, handler="test.boom")
        scheduler.plan_due(T0)
        scheduler.claim_queued(T0)
        finish_all(scheduler, clock)
    finally:
        unregister("test.boom")
    (run,) = runs_of(job)
    assert run.error.startswith("ZeroDivisionError: division by zero")
    assert "Traceback" in run.error
    assert run.log.endswith("about to fail")


def test_long_log_is_capped_with_head_tail_and_a_length_marker():
    text = "H" * 1000 + "M" * 10_000 + "T" * 1000
    capped = cap_message(text, 3000)
    assert len(capped) <= 3000
    assert capped.startswith("H" * 1000) and capped.endswith("T" * 1000)
    assert "original length 12000 characters" in capped
    assert cap_message(text, 0) == text, "0 means unlimited"


def test_run_log_is_capped_when_written(make_job, clock):
    @register("test.chatty")
    class Chatty(JobHandler):
        def run(self, ctx):
            for i in range(500):
                ctx.log(f"line {i:04d} " + "x" * 50)

    scheduler = Scheduler(worker_id="a", max_workers=1, clock=clock, max_message_chars=2000)
    try:
        job = make_job(next_fire_at=T0, handler="test.chatty")
        scheduler.plan_due(T0)
        scheduler.claim_queued(T0)
        finish_all(scheduler, clock)
    finally:
        unregister("test.chatty")
    (run,) = runs_of(job)
    assert len(run.log) <= 2000
    assert "line 0000" in run.log and "line 0499" in run.log
    assert "characters omitted; original length" in run.log


# -- recovery, sweep, shutdown ---------------------------------------------------------------


def test_restart_marks_own_running_runs_interrupted(make_job, clock):
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
    Scheduler(worker_id="node-a", clock=clock).recover(T0 + timedelta(seconds=5))
    left.refresh_from_db()
    other.refresh_from_db()
    assert left.status == "interrupted"
    assert "found at restart" in left.error
    assert other.status == "running", "another worker's run is the sweep's business"


def test_interrupted_run_is_retried_only_if_the_job_allows(make_job, clock):
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
    Scheduler(worker_id="node-a", clock=clock).recover(T0)
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
    finish_all(scheduler, clock)


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
    assert not scheduler.requeue_unstarted_claims(T0), "only after a database error"
    scheduler._claims_uncertain = True
    scheduler.run_pass(T0)
    assert lost.pk in scheduler.pool.flights, "requeued and claimed again in the same pass"
    finish_all(scheduler, clock)
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
    finish_all(scheduler, clock)


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
    task = services.enqueue("test.gate", key="note:1")
    Run.objects.filter(pk=task.pk).update(run_after=T0)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    assert len(scheduler.pool.flights) == 2
    scheduler.drain(grace=0.2)
    (run,) = runs_of(job)
    task.refresh_from_db()
    assert run.status == "interrupted" and "scheduler stopped" in run.error
    assert (task.status, task.error, task.worker_id) == ("queued", "scheduler stopped, task requeued", "")


# -- manual runs and one-off tasks ------------------------------------------------------------


def test_run_now_twice_queues_one_run(make_job):
    job = make_job(next_fire_at=T0)
    first, created = services.run_now(job=job)
    again, created_again = services.run_now(job=job)
    assert created and not created_again
    assert first.pk == again.pk
    assert job.runs.filter(trigger="manual").count() == 1


def test_second_live_manual_run_is_refused_by_the_database(make_job):
    job = make_job(next_fire_at=T0)
    Run.objects.create(job=job, scheduled_at=T0, trigger="manual")
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(job=job, scheduled_at=T0 + timedelta(seconds=1), trigger="api")


def test_manual_run_executes_like_a_fire(make_job, scheduler, clock):
    job = make_job(next_fire_at=T0 + timedelta(hours=1), properties={"a": "1"})
    run, _ = services.run_now(job=job, now=T0)
    scheduler.claim_queued(T0)
    finish_all(scheduler, clock)
    run.refresh_from_db()
    assert (run.status, run.result) == ("succeeded", "1 properties")


def test_enqueue_returns_the_live_task_for_the_same_key(db):
    first = services.enqueue("demo.echo", key="note:42", properties={"n": "1"})
    again = services.enqueue("demo.echo", key="note:42", properties={"n": "2"})
    other = services.enqueue("demo.echo", key="note:43")
    assert first.pk == again.pk != other.pk
    assert first.trigger == "task" and first.status == "queued"


def test_batch_enqueue_deduplicates_inside_the_batch(db):
    requests = [
        services.TaskRequest("demo.echo", "k1"),
        services.TaskRequest("demo.echo", "k2"),
        services.TaskRequest("demo.echo", "k1"),
    ]
    runs = services.enqueue_many(requests)
    assert runs[0].pk == runs[2].pk != runs[1].pk
    assert Run.objects.filter(trigger="task").count() == 2


def test_enqueue_of_an_unknown_handler_is_refused(db):
    with pytest.raises(ValueError, match="not registered"):
        services.enqueue("no.such", key="x")
    assert not Run.objects.exists()


def test_finished_task_key_can_be_enqueued_again(db, clock):
    scheduler = Scheduler(worker_id="a", max_workers=1, clock=clock)
    task = services.enqueue("demo.echo", key="once", properties={"x": "y"})
    scheduler.claim_queued(timezone_now_after(task))
    finish_all(scheduler, clock)
    task.refresh_from_db()
    assert task.status == "succeeded"
    assert services.enqueue("demo.echo", key="once").pk != task.pk


def test_cancelled_queued_task_is_recorded_failed(db):
    task = services.enqueue("demo.echo", key="c")
    assert services.cancel_run(run=task)
    task.refresh_from_db()
    assert (task.status, task.error) == ("failed", "task cancelled")


def timezone_now_after(run):
    return run.run_after + timedelta(seconds=1)


# -- saving, pausing, resuming -------------------------------------------------------------


def test_saving_recomputes_next_fire_and_resets_failures(make_job):
    job = make_job(next_fire_at=T0, consecutive_failures=2)
    job.cron_expression = "0 0 * * * *"
    services.save_job(job=job, expected_version=job.version, now=T0 + timedelta(minutes=10))
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(hours=1)
    assert job.consecutive_failures == 0
    assert job.version == 2


def test_stale_save_is_refused_and_changes_nothing(make_job):
    job = make_job(next_fire_at=T0, description="original")
    first = Job.objects.get(pk=job.pk)
    second = Job.objects.get(pk=job.pk)
    first.description = "first editor"
    services.save_job(job=first, expected_version=1)
    second.description = "second editor"
    with pytest.raises(services.StaleJobError):
        services.save_job(job=second, expected_version=1)
    job.refresh_from_db()
    assert job.description == "first editor"


def test_pause_clears_next_fire_and_resume_recomputes_from_now(make_job):
    job = make_job(next_fire_at=T0)
    services.pause_job(job=job)
    job.refresh_from_db()
    assert (job.state, job.next_fire_at) == ("paused", None)
    later = T0 + timedelta(days=3, seconds=30)
    services.resume_job(job=job, now=later)
    job.refresh_from_db()
    assert job.state == "enabled"
    assert job.next_fire_at == T0 + timedelta(days=3, minutes=1)


def test_unknown_stored_time_zone_reads_as_utc(make_job):
    job = make_job(next_fire_at=T0, cron_expression="0 0 9 * * *")
    Job.objects.filter(pk=job.pk).update(timezone="Atlantis/Capital")
    job.refresh_from_db()
    assert job.zone_is_unknown
    assert job.next_fire_after(T0) == datetime(2026, 3, 3, 9, tzinfo=UTC)


def test_soft_deleted_job_stops_firing_and_keeps_its_runs(make_job, scheduler, clock, gate_handler):
    job = make_job(next_fire_at=T0, handler="test.gate")
    scheduler.plan_due(T0)
    queued, _ = services.run_now(job=job, now=T0)  # waits: one manual run after the fire
    services.delete_job(job=job)
    job.refresh_from_db()
    assert job.deleted_at is not None and job.next_fire_at is None
    fired, manual = runs_of(job)
    assert (manual.pk, manual.status, manual.error) == (queued.pk, "cancelled", "job deleted")
    assert fired.cancel_requested, "the running fire is asked to stop"
    scheduler.heartbeat(clock.advance(seconds=5))
    fired.refresh_from_db()
    assert (fired.status, fired.error) == ("cancelled", "cancelled by an admin")
    assert not Job.objects.live().filter(pk=job.pk).exists()
    # The name is free again for a new job.
    services.save_job(job=Job(name=job.name, handler="demo.echo", cron_expression="0 * * * * *"))


# -- writing outcomes in batches ----------------------------------------------------------


def start_gated(scheduler, jobs, now=T0):
    """Plan and start one fire of each job (their handler waits on the gate)."""
    scheduler.plan_due(now)
    scheduler.claim_queued(now)
    by_job = {f.job_id: f.run_id for f in scheduler.pool.flights.values()}
    return [by_job[job.pk] for job in jobs]


def test_a_batch_of_successes_costs_the_same_statements_however_many_runs_it_holds(
    make_job, clock, gate_handler
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs.workers import Outcome

    statements = []
    for size in (2, 6):
        Job.objects.all().delete()
        scheduler = Scheduler(worker_id="node-a", max_workers=size, clock=clock, misfire_threshold=60)
        jobs = [make_job(next_fire_at=T0, handler="test.gate", consecutive_failures=2) for _ in range(size)]
        run_ids = start_gated(scheduler, jobs)
        outcomes = [
            Outcome(run_id, "succeeded", result=f"done {i}", log="a line") for i, run_id in enumerate(run_ids)
        ]
        # The kinds-of-alert setting is read at most every 5 s per process
        # (jobs.config.get_setting_cached): warm it so both batches are alike.
        alerts.kinds_for(jobs[0])
        with CaptureQueriesContext(connection) as queries:
            assert scheduler.collect(outcomes, clock.advance(seconds=1))
        statements.append(len(queries))
        for i, (job, run_id) in enumerate(zip(jobs, run_ids, strict=True)):
            run = Run.objects.get(pk=run_id)
            assert (run.status, run.result, run.log, run.duration_ms) == (
                "succeeded",
                f"done {i}",
                "a line",
                1000,
            )
            job.refresh_from_db()
            assert (job.last_status, job.consecutive_failures, job.last_duration_ms) == ("succeeded", 0, 1000)
        for flight in list(scheduler.pool.flights.values()):
            scheduler.pool.abandon(flight.run_id)
    assert statements[0] == statements[1], f"statements per batch grew with its size: {statements}"


@pytest.mark.parametrize(("order", "last_status", "failures"), [
    (("succeeded", "failed"), "failed", 1),
    (("failed", "succeeded"), "succeeded", 0),
])  # fmt: skip
def test_two_runs_of_one_job_in_a_batch_are_recorded_in_the_order_they_finished(
    make_job, scheduler, clock, gate_handler, order, last_status, failures
):
    from jobs.workers import Outcome

    job = make_job(next_fire_at=T0, handler="test.gate", alert_threshold=0)
    (fired,) = start_gated(scheduler, [job])
    manual, _ = services.run_now(job=job, now=T0)
    scheduler.claim_queued(T0)
    assert set(scheduler.pool.flights) == {fired, manual.pk}
    outcomes = [
        Outcome(run_id, status, error="boom" if status == "failed" else "")
        for run_id, status in zip((fired, manual.pk), order, strict=True)
    ]
    scheduler.collect(outcomes, clock.advance(seconds=1))
    job.refresh_from_db()
    assert (job.last_status, job.consecutive_failures) == (last_status, failures)
    assert sorted(Run.objects.filter(job=job).values_list("status", flat=True)) == sorted(order)


def test_a_batched_success_leaves_a_run_that_was_already_timed_out_and_its_job_alone(
    make_job, scheduler, clock, gate_handler
):
    from jobs.workers import Outcome

    job = make_job(next_fire_at=T0, handler="test.gate", consecutive_failures=1, last_status="timed_out")
    other = make_job(next_fire_at=T0, handler="test.gate")
    swept, fine = start_gated(scheduler, [job, other])
    Run.objects.filter(pk=swept).update(status="timed_out", error="timed out after 5 s")
    scheduler.collect([Outcome(swept, "succeeded"), Outcome(fine, "succeeded")], clock.advance(seconds=1))
    run = Run.objects.get(pk=swept)
    assert (run.status, run.error) == ("timed_out", "timed out after 5 s")
    job.refresh_from_db()
    assert (job.last_status, job.consecutive_failures) == ("timed_out", 1)
    assert Run.objects.get(pk=fine).status == "succeeded"


# -- retention --------------------------------------------------------------------------------


def test_retention_deletes_old_finished_runs_and_keeps_the_rest(make_job, settings):
    from django.utils import timezone

    from jobs.config import set_setting
    from jobs.handlers.builtin import delete_runs_before

    set_setting("sys.job.logRetentionDays", 7)
    job = make_job(next_fire_at=T0)
    now = timezone.now()
    old = [
        Run(job=job, scheduled_at=now - timedelta(days=8, minutes=i), trigger="manual", status="succeeded")
        for i in range(1200)
    ]
    Run.objects.bulk_create(old)
    recent = Run.objects.create(
        job=job, scheduled_at=now - timedelta(days=6), trigger="manual", status="failed"
    )
    stuck = Run.objects.create(
        job=job, scheduled_at=now - timedelta(days=30), trigger="schedule", status="running"
    )
    deleted = delete_runs_before(now - timedelta(days=7), batch=500)
    assert deleted == 1200
    assert set(Run.objects.values_list("pk", flat=True)) == {recent.pk, stuck.pk}


def test_retention_keeps_alerts_of_deleted_runs_without_their_run(make_job):
    # The batch delete is one DELETE statement, not the ORM's delete(): the
    # alert's on_delete=SET_NULL must still hold.
    from django.utils import timezone

    from jobs.handlers.builtin import delete_runs_before
    from jobs.models import Alert

    job = make_job(next_fire_at=T0)
    now = timezone.now()
    run = Run.objects.create(
        job=job, scheduled_at=now - timedelta(days=40), trigger="schedule", status="failed"
    )
    alert = Alert.objects.create(
        job=job,
        run=run,
        kind=Alert.Kind.CRASH,
        status=Alert.Status.SENT,
        subject="s",
        body_text="t",
        body_html="h",
        message_id="<m@x>",
    )
    assert delete_runs_before(now - timedelta(days=30)) == 1
    alert.refresh_from_db()
    assert alert.run_id is None
    assert not Run.objects.filter(pk=run.pk).exists()


def _expired_runs(job, count, *, days=40):
    from django.utils import timezone

    now = timezone.now()
    return Run.objects.bulk_create(
        Run(
            job=job,
            scheduled_at=now - timedelta(days=days, minutes=i),
            trigger="schedule",
            status="succeeded",
        )
        for i in range(count)
    )


def test_retention_batch_shrinks_after_a_slow_transaction_and_grows_after_quick_ones(make_job, monkeypatch):
    from django.utils import timezone

    from jobs.handlers import builtin

    job = make_job(next_fire_at=T0)
    _expired_runs(job, 120)
    recent = Run.objects.create(
        job=job, scheduled_at=timezone.now() - timedelta(days=1), trigger="manual", status="failed"
    )
    stuck = Run.objects.create(
        job=job, scheduled_at=timezone.now() - timedelta(days=90), trigger="schedule", status="running"
    )
    timings = iter([0.040] + [0.001] * 9)  # seconds each batch's transaction "took"

    def delete_runs(ids):
        count, _ = real_delete_runs(ids)
        return count, next(timings)

    real_delete_runs = builtin._delete_runs
    monkeypatch.setattr(builtin, "_delete_runs", delete_runs)
    sizes, pauses = [], []
    deleted = builtin.delete_runs_before(
        timezone.now() - timedelta(days=30),
        batch=40,
        budget=0.010,
        on_batch=lambda rows, seconds: sizes.append(rows),
        sleep=pauses.append,
    )

    # 40 runs took 40 ms, four times the budget: 10 fit; then a quarter more each time.
    assert sizes == [40, 10, 13, 17, 22, 18]
    assert deleted == 120
    assert set(Run.objects.values_list("pk", flat=True)) == {recent.pk, stuck.pk}
    # Twice the lock time, at least PAUSE, between batches.
    assert pauses[:2] == [0.080, builtin.PAUSE]


def test_next_batch_size_aims_at_the_budget_within_bounds():
    from jobs.handlers.builtin import MAX_BATCH, MIN_BATCH, next_batch_size

    assert next_batch_size(200, 0.024, budget=0.006) == 50  # what would have fitted
    assert next_batch_size(100, 0.005, budget=0.006) == 100  # close enough: stays
    assert next_batch_size(100, 0.002, budget=0.006) == 126  # well inside: a quarter more
    assert next_batch_size(MIN_BATCH, 5.0, budget=0.006) == MIN_BATCH
    assert next_batch_size(MAX_BATCH, 0.0, budget=0.006) == MAX_BATCH


# Transactional: inside the test's transaction no checkpoint can run, so the
# cleanup (rightly) does not try one.
@pytest.mark.django_db(transaction=True)
def test_retention_checkpoints_after_each_batch_outside_its_transaction(make_job):
    # On a WAL database a checkpoint inside a transaction fails ("database
    # table is locked"), and one inside the batch would hold the write lock
    # while it copies: it comes after the batch's commit, before the next one.
    from django.db import connection
    from django.utils import timezone

    from jobs.handlers.builtin import delete_runs_before

    _expired_runs(make_job(next_fire_at=T0), 5)
    seen = []

    def record(execute, sql, params, many, context):
        kind = "checkpoint" if "wal_checkpoint" in sql else "delete" if sql.startswith("DELETE") else None
        if kind:
            seen.append((kind, "in transaction" if connection.in_atomic_block else "outside"))
        return execute(sql, params, many, context)

    batches = []
    with connection.execute_wrapper(record):
        delete_runs_before(
            timezone.now() - timedelta(days=30),
            batch=2,
            on_batch=lambda rows, seconds: batches.append(rows),
            sleep=lambda seconds: None,
        )

    assert len(batches) > 1
    assert seen == [("delete", "in transaction"), ("checkpoint", "outside")] * len(batches)
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_retention_commits_leave_checkpoints_to_it_and_the_setting_is_restored(make_job):
    from django.db import connection
    from django.utils import timezone

    from jobs.handlers.builtin import delete_runs_before

    def autocheckpoint():
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint")
            return cursor.fetchone()[0]

    _expired_runs(make_job(next_fire_at=T0), 3)
    default = autocheckpoint()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_autocheckpoint = 500")
    during = []
    delete_runs_before(
        timezone.now() - timedelta(days=30),
        batch=1,
        on_batch=lambda rows, seconds: during.append(autocheckpoint()),
        sleep=lambda seconds: None,
    )
    after = autocheckpoint()
    with connection.cursor() as cursor:
        cursor.execute(f"PRAGMA wal_autocheckpoint = {default}")

    assert during and set(during) == {0}
    assert after == 500


def test_retention_job_is_builtin_visible_and_scheduled(db, clock):
    job = Job.objects.get(builtin=True, handler="cronboard.retention")
    assert job.cron_expression == "0 30 3 * * ?"
    Scheduler(worker_id="a", clock=clock).schedule_unplanned(T0)
    job.refresh_from_db()
    assert job.next_fire_at == datetime(2026, 3, 3, 3, 30, tzinfo=UTC)
    with pytest.raises(services.ServiceError):
        services.delete_job(job=job)


def test_batched_claim_skips_a_stale_job_and_claims_the_others(make_job, scheduler):
    """One statement claims the batch: the job whose next fire time moved since
    it was read claims nothing, and does not stop the others."""
    jobs = [make_job(name=f"batch-{i}", next_fire_at=T0) for i in range(3)]
    read = list(Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk"))
    for job in read:
        job.busy = False
    plans = [scheduler.plan_fire(job, T0) for job in read]
    Job.objects.filter(pk=jobs[1].pk).update(next_fire_at=T0 + timedelta(minutes=1))  # claimed elsewhere

    with transaction.atomic():
        won = scheduler._claim_batch(plans, T0)

    assert won == {jobs[0].pk, jobs[2].pk}
    moved = dict(Job.objects.values_list("pk", "next_fire_at"))
    assert moved[jobs[0].pk] == moved[jobs[2].pk] == T0 + timedelta(minutes=1)
    assert Job.objects.get(pk=jobs[0].pk).last_fire_at == T0
    assert Job.objects.get(pk=jobs[1].pk).last_fire_at is None
    assert scheduler._claim_batch(plans, T0) == set(), "the same plans again claim nothing"
