"""The scheduler's steps, driven with a fixed clock: planning, outcomes, and
writing outcomes in batches. Recovery is in test_recovery.py, manual runs and
saving in test_services.py, retention in test_retention.py."""

import time
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction

from jobs import alerts, services
from jobs.handlers import HandlerError, JobHandler, register
from jobs.handlers.registry import unregister
from jobs.models import Job, Run, cap_message
from tests.fixtures.core import T0, drain, runs_of

pytestmark = pytest.mark.django_db


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
    drain(scheduler, clock())
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert run.worker_id == "node-a"
    assert run.result == "0 properties"
    job.refresh_from_db()
    assert job.last_status == "succeeded"


def test_new_fires_queue_behind_a_run_that_waits_for_a_slot(make_scheduler, make_job, clock, gate_handler):
    """One node writes a due fire already running only while a slot is free
    and no older queued run waits for one; otherwise the fire is queued and
    claim_queued serves the queue in order."""
    scheduler = make_scheduler(worker_id="node-a", max_workers=1, clock=clock, misfire_threshold=60)
    blocker = make_job(next_fire_at=T0, handler="test.gate")
    scheduler.plan_due(T0)
    assert Run.objects.get(job=blocker).status == "running"

    waiting, _ = services.run_now(job=make_job(), now=T0)
    assert not scheduler.claim_queued(T0), "no free slot"
    gate_handler.set()
    drain(scheduler, clock())
    assert scheduler.pool.free_slots == 1

    later = make_job(next_fire_at=T0 + timedelta(seconds=1))
    scheduler.plan_due(clock.advance(seconds=1))
    (fire,) = runs_of(later)
    assert fire.status == "queued", "the free slot is the waiting run's"
    assert scheduler.claim_queued(clock())
    assert set(scheduler.pool.flights) == {waiting.pk}, "the older queued run goes first"
    drain(scheduler, clock())
    assert scheduler.claim_queued(clock())
    assert set(scheduler.pool.flights) == {fire.pk}
    drain(scheduler, clock())


def test_claim_with_a_stale_next_fire_time_writes_nothing(make_job, scheduler):
    job = make_job(next_fire_at=T0)
    stale = Job.objects.get(pk=job.pk)
    plan = scheduler.planner.plan_fire(stale, T0, busy=False)
    # Another process claims the fire first.
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0 + timedelta(minutes=1))
    with transaction.atomic():
        assert scheduler.planner.claim_fire(plan, T0, epoch=None) is False
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
    assert skipped.error == (
        f"missed: the fire times from {T0.isoformat()} to {(T0 + timedelta(minutes=10)).isoformat()} passed "
        "before the scheduler reached them (it was stopped or held up); only the last one runs"
    )
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
    drain(scheduler, clock())


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
    # Planned ahead (JOBS_PLAN_AHEAD_MS, tests/test_plan_ahead.py): the window before it.
    assert scheduler.plan_ahead == timedelta(milliseconds=50)
    assert scheduler.next_wakeup(T0) == T0 + timedelta(milliseconds=250)
    assert scheduler.next_wakeup(T0 - timedelta(seconds=10)) == T0 - timedelta(seconds=9)


def test_batched_claim_skips_a_stale_job_and_claims_the_others(make_job, scheduler):
    """One statement claims the batch: the job whose next fire time moved since
    it was read claims nothing, and does not stop the others."""
    jobs = [make_job(name=f"batch-{i}", next_fire_at=T0) for i in range(3)]
    read = list(Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk"))
    plans = [scheduler.planner.plan_fire(job, T0, busy=False) for job in read]
    Job.objects.filter(pk=jobs[1].pk).update(next_fire_at=T0 + timedelta(minutes=1))  # claimed elsewhere

    with transaction.atomic():
        won = scheduler.planner.claim_batch(plans, T0, epoch=None)

    assert won == {jobs[0].pk, jobs[2].pk}
    moved = dict(Job.objects.values_list("pk", "next_fire_at"))
    assert moved[jobs[0].pk] == moved[jobs[2].pk] == T0 + timedelta(minutes=1)
    assert Job.objects.get(pk=jobs[0].pk).last_fire_at == T0
    assert Job.objects.get(pk=jobs[1].pk).last_fire_at is None
    assert scheduler.planner.claim_batch(plans, T0, epoch=None) == set(), "the same plans again claim nothing"


# -- outcomes ------------------------------------------------------------------------


def test_failed_attempt_is_retried_inside_the_same_fire(make_job, scheduler, clock, flaky_handler):
    job = make_job(next_fire_at=T0, handler="test.flaky", max_retries=2, retry_interval_seconds=30)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    drain(scheduler, clock())
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
    drain(scheduler, clock())
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
        drain(scheduler, clock())
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
    drain(scheduler, clock())
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
        drain(scheduler, clock())
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


def test_run_log_is_capped_when_written(make_scheduler, make_job, clock):
    @register("test.chatty")
    class Chatty(JobHandler):
        def run(self, ctx):
            for i in range(500):
                ctx.log(f"line {i:04d} " + "x" * 50)

    scheduler = make_scheduler(worker_id="a", max_workers=1, clock=clock, max_message_chars=2000)
    try:
        job = make_job(next_fire_at=T0, handler="test.chatty")
        scheduler.plan_due(T0)
        scheduler.claim_queued(T0)
        drain(scheduler, clock())
    finally:
        unregister("test.chatty")
    (run,) = runs_of(job)
    assert len(run.log) <= 2000
    assert "line 0000" in run.log and "line 0499" in run.log
    assert "characters omitted; original length" in run.log


# -- writing outcomes in batches ----------------------------------------------------------


def start_gated(scheduler, jobs, now=T0):
    """Plan and start one fire of each job (their handler waits on the gate)."""
    scheduler.plan_due(now)
    scheduler.claim_queued(now)
    by_job = {f.job_id: f.run_id for f in scheduler.pool.flights.values()}
    return [by_job[job.pk] for job in jobs]


def test_a_batch_of_successes_costs_the_same_statements_however_many_runs_it_holds(
    make_scheduler, make_job, clock, gate_handler
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs.engine.execution.pool import Outcome

    statements = []
    for size in (2, 6):
        Job.objects.all().delete()
        scheduler = make_scheduler(worker_id="node-a", max_workers=size, clock=clock, misfire_threshold=60)
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
    from jobs.engine.execution.pool import Outcome

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
    from jobs.engine.execution.pool import Outcome

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
