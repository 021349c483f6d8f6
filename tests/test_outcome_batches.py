"""The running loop writes finished runs a batch at a time (jobs.engine.pending):
an outcome waits up to COLLECT_WITHIN after the loop took it, is written
with the time it was taken, and is written at once when a step would
otherwise judge its run still live. Driven pass by pass on a fixed clock
(`run_pass(…, running=True)` is the running loop's pass), with real
runs in the test's executor."""

import time
from datetime import timedelta

import pytest

from jobs import pools, services
from jobs.engine.execution.executors import make_pool
from jobs.engine.execution.pool import Outcome
from jobs.engine.loop import POLL
from jobs.engine.outcomes import Recorder
from jobs.engine.pending import COLLECT_WITHIN
from jobs.engine.planning import Planner
from jobs.engine.starting import Starter
from jobs.models import Alert, Job, JobDependency, Run
from tests.fixtures.core import T0, drain, runs_of

pytestmark = pytest.mark.django_db

MS = timedelta(milliseconds=1)


def take_outcomes(scheduler, count=1, timeout=10.0):
    """Wait for `count` runs to end and take their outcomes, unwritten, at the clock's time."""
    until = time.monotonic() + timeout
    while len(scheduler.pending) < count:
        assert time.monotonic() < until, "timed out waiting for runs to end"
        scheduler.pending.take(scheduler.pool.wait(0.05), scheduler.clock())


def paced(scheduler, now):
    return scheduler.run_pass(now, running=True)


@pytest.mark.parametrize(("handler", "status"), [("demo.echo", "succeeded"), ("demo.fail", "failed")])
def test_outcomes_wait_to_be_written_together_and_keep_the_time_the_run_ended(
    scheduler, make_job, clock, handler, status
):
    first = make_job(next_fire_at=T0, handler=handler)
    paced(scheduler, T0)
    take_outcomes(scheduler)
    second = make_job(next_fire_at=clock.advance(milliseconds=30), handler=handler)
    paced(scheduler, clock())
    take_outcomes(scheduler, 2)

    paced(scheduler, clock.advance(milliseconds=19))  # the first has waited 49 ms
    assert [r.status for r in runs_of(first) + runs_of(second)] == ["running", "running"]

    paced(scheduler, clock.advance(milliseconds=1))  # 50 ms: both, in one write
    (one,), (two,) = runs_of(first), runs_of(second)
    assert (one.status, two.status) == (status, status)
    assert (one.finished_at, one.duration_ms) == (T0, 0), "ended when the loop took it, not when written"
    assert (two.finished_at, two.duration_ms) == (T0 + 30 * MS, 0)
    assert not scheduler.pending and not scheduler.pool.flights


def test_a_fire_due_while_the_last_run_waits_to_be_written_is_no_overlap(scheduler, make_job, clock):
    job = make_job(next_fire_at=T0)
    paced(scheduler, T0)
    take_outcomes(scheduler)
    # The job is due again while its run's outcome waits.
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0 + 10 * MS)
    paced(scheduler, clock.advance(milliseconds=10))
    first, second = runs_of(job)
    assert first.status == "succeeded" and first.finished_at == T0
    assert second.status != "skipped", second.error
    drain(scheduler, clock())


def test_a_fire_due_while_the_last_run_still_runs_is_an_overlap(scheduler, make_job, clock, gate_handler):
    job = make_job(next_fire_at=T0, handler="test.gate")
    paced(scheduler, T0)
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0 + 10 * MS)
    paced(scheduler, clock.advance(milliseconds=10))
    first, second = runs_of(job)
    assert (first.status, second.status, second.skip_reason) == ("running", "skipped", "overlap")
    gate_handler.set()
    drain(scheduler, clock())


def test_a_run_that_ended_in_time_is_not_timed_out_while_its_write_waits(scheduler, make_job, clock):
    job = make_job(next_fire_at=T0, timeout_seconds=1)
    paced(scheduler, T0)
    clock.advance(milliseconds=990)
    take_outcomes(scheduler)  # it ended 10 ms before its deadline
    paced(scheduler, clock.advance(milliseconds=20))
    (run,) = runs_of(job)
    assert (run.status, run.finished_at) == ("succeeded", T0 + 990 * MS)


def test_a_run_that_ended_in_time_is_not_alerted_as_running_long_while_its_write_waits(
    scheduler, make_job, clock
):
    make_job(next_fire_at=T0, timeout_seconds=60, long_running_seconds=20, alert_on=["long_running"])
    paced(scheduler, T0)
    clock.advance(milliseconds=19_990)
    take_outcomes(scheduler)  # it ended 10 ms before the 20 s mark
    scheduler.alert_watch.cadence.again()  # the watch looks in this pass
    scheduler.run_heartbeat.cadence.ran(clock())  # and the heartbeat does not
    paced(scheduler, clock.advance(milliseconds=20))
    assert not Alert.objects.exists()


def test_a_cancel_asked_for_after_the_run_ended_finds_it_ended(scheduler, make_job, clock, staff_user):
    job = make_job(next_fire_at=T0)
    paced(scheduler, T0)
    take_outcomes(scheduler)
    (run,) = runs_of(job)
    services.cancel_run(run=run, user=staff_user, now=clock())
    scheduler.run_heartbeat.cadence.again()  # the heartbeat reads cancel requests in this pass
    paced(scheduler, clock.advance(milliseconds=5))
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_a_queued_run_waiting_for_the_slot_has_the_outcome_written_at_once(
    make_scheduler, make_job, clock, staff_user
):
    scheduler = make_scheduler(max_workers=1, clock=clock, misfire_threshold=60)
    job = make_job(next_fire_at=T0)
    later = make_job()
    services.run_now(job=later, user=staff_user, now=T0)
    paced(scheduler, T0)
    assert scheduler.carry.waiting_for_slots
    take_outcomes(scheduler)
    paced(scheduler, clock())  # no time has passed
    assert runs_of(job)[0].status == "succeeded"
    assert runs_of(later)[0].status in (Run.Status.RUNNING, Run.Status.SUCCEEDED)
    drain(scheduler, clock())


def test_a_pass_outside_the_running_loop_writes_every_outcome_first(scheduler, make_job, clock):
    job = make_job(next_fire_at=T0)
    scheduler.run_pass(T0)
    take_outcomes(scheduler)
    scheduler.run_pass(clock())
    assert runs_of(job)[0].status == "succeeded"


def test_the_wait_is_the_constant_the_docs_give():
    assert timedelta(milliseconds=50) == COLLECT_WITHIN


def test_an_outcome_of_a_job_that_fires_again_within_the_wait_is_written_at_once(scheduler, make_job, clock):
    """So that no planner, on this node or another, finds the run live and
    skips the fire as an overlap."""
    job = make_job(next_fire_at=T0, cron_expression="* * * * * *")  # every second
    paced(scheduler, T0)
    clock.advance(milliseconds=960)
    take_outcomes(scheduler)
    paced(scheduler, clock.advance(milliseconds=5))  # the next fire is 35 ms away
    run, following = runs_of(job)
    assert (run.status, run.finished_at) == ("succeeded", T0 + 960 * MS)
    # Its run ended in the database first, so the next fire was no overlap:
    # planned ahead, it waits for its time.
    assert (following.status, following.scheduled_at) == ("running", T0 + timedelta(seconds=1))
    assert following.pk not in scheduler.pool.flights


def test_an_outcome_is_written_before_admission_lets_a_waiting_run_through(
    scheduler, make_job, clock, gate_handler
):
    pools.save_pool(name="one", size=1)
    jobs = [make_job(next_fire_at=T0, handler="test.gate", pool="one") for _ in range(2)]
    paced(scheduler, T0)
    assert sorted(runs_of(job)[0].status for job in jobs) == ["running", "waiting"]
    gate_handler.set()
    take_outcomes(scheduler)
    clock.advance(milliseconds=10)
    scheduler.run_heartbeat.cadence.ran(clock())  # neither writes the outcome first
    scheduler.alert_watch.cadence.ran(clock())
    paced(scheduler, clock())
    statuses = sorted(runs_of(job)[0].status for job in jobs)
    assert statuses in (["running", "succeeded"], ["succeeded", "succeeded"]), "let through in the same pass"
    drain(scheduler, clock())


def test_a_downstream_job_whose_run_ended_in_the_same_batch_is_not_busy(scheduler, make_job, clock):
    upstream = make_job(next_fire_at=T0, handler="demo.fail")
    downstream = make_job(next_fire_at=T0)
    JobDependency.objects.create(upstream=upstream, downstream=downstream, on=JobDependency.On.FAILURE)
    paced(scheduler, T0)
    take_outcomes(scheduler, 2)
    paced(scheduler, clock.advance(milliseconds=50))  # both written, in one batch
    fired, after = runs_of(downstream)
    assert fired.status == "succeeded"
    assert (after.trigger, after.status) != ("upstream", "skipped"), after.error
    assert after.caused_by_id == runs_of(upstream)[0].pk
    drain(scheduler, clock())


def test_a_scheduler_stopping_without_grace_writes_the_runs_that_ended_as_ended(scheduler, make_job, clock):
    job = make_job(next_fire_at=T0)
    paced(scheduler, T0)
    take_outcomes(scheduler)
    scheduler.drain(grace=0)
    (run,) = runs_of(job)
    assert (run.status, run.finished_at) == ("succeeded", T0)


def test_a_batch_keeps_each_run_s_end_and_no_run_of_it_is_live_for_another_on_both_databases(
    both_databases, make_job, clock
):
    upstream = make_job(next_fire_at=T0, handler="demo.fail")
    downstream = make_job(next_fire_at=T0)
    JobDependency.objects.create(upstream=upstream, downstream=downstream, on=JobDependency.On.FAILURE)
    planner = Planner(
        worker_id="node-a", clustered=False, misfire_threshold=timedelta(seconds=60), clock=clock
    )
    pool = make_pool(2, executor="thread")
    recorder = Recorder(worker_id="node-a", cap=1000)
    starter = Starter(
        worker_id="node-a", clock=clock, pool=pool, recorder=recorder, log_keep=1000, remember_for=POLL
    )
    runs = planner.plan_due(T0, epoch=None, free_slots=2).starting
    starter.start_all(runs)
    failed, succeeded = sorted(runs, key=lambda run: run.job_id != upstream.pk)
    outcomes = [
        Outcome(failed.pk, "failed", error="no", ended_at=T0 + 5 * MS),  # written alone, first
        Outcome(succeeded.pk, "succeeded", ended_at=T0 + 7 * MS),  # in the batch's one statement
    ]
    pool.wait(10)  # a handler ended; their own outcomes are not used
    recorder.write_finished(outcomes, pool.flights, T0 + 50 * MS)

    failed.refresh_from_db()
    succeeded.refresh_from_db()
    assert (failed.status, failed.finished_at, failed.duration_ms) == ("failed", T0 + 5 * MS, 5)
    assert (succeeded.status, succeeded.finished_at, succeeded.duration_ms) == ("succeeded", T0 + 7 * MS, 7)
    (after,) = downstream.runs.filter(trigger=Run.Trigger.UPSTREAM)
    assert after.status == Run.Status.QUEUED, after.error
    for run_id in list(pool.flights):
        pool.abandon(run_id)
