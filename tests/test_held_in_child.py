"""Fires planned ahead on the process executor wait in their child
(Starter.hold, ProcessPool.start's `at`): the run is handed over when it is
planned, and the child starts it at its time, so the loop does not wake up
for each fire. Until then the run can be taken back (ProcessPool.withdraw):
the pool and the child race for the run's token, and the first to take it
decides. A run of the job that starts first takes the fire back into the
starter, where its time decides it as for any held fire; shutdown hands it
back to the queue. Real child processes on the real clock; every wait for
a fire's time is a wait for a deadline, never a timed assertion."""

import os
import signal
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import services
from jobs.handlers import JobContext, JobHandler, register
from jobs.models import Job, Run
from tests.fixtures.core import runs_of

pytestmark = pytest.mark.django_db

AHEAD_MS = 1000  # JOBS_PLAN_AHEAD_MS's largest value: the most room a test's steps get
# Clocks read in two processes, a few microseconds apart: the slack of
# "not before its time" when it is judged against a reading of our own.
READ_SLACK = 0.002


@register("test.clocks")
class Clocks(JobHandler):
    """Returns when it started: time.monotonic() and time.time()."""

    def run(self, ctx: JobContext) -> str:
        return f"{time.monotonic()!r} {time.time()!r}"


@pytest.fixture(autouse=True)
def plan_ahead(settings):
    settings.JOBS_PLAN_AHEAD_MS = AHEAD_MS


@pytest.fixture
def scheduler(make_scheduler):
    scheduler = make_scheduler(max_workers=2, misfire_threshold=60, executor="process")
    scheduler.pool.warm()
    return scheduler


def fire_in(make_job, seconds: float, **fields) -> Job:
    fields.setdefault("handler", "test.clocks")
    return make_job(next_fire_at=timezone.now() + timedelta(seconds=seconds), properties={}, **fields)


def plan(scheduler):
    return scheduler.run_pass(timezone.now(), running=True)


def sleep_past(at, seconds: float) -> None:
    """Sleep until `seconds` after the time `at` (a datetime)."""
    time.sleep(max(0.0, (at - timezone.now()).total_seconds()) + seconds)


def free_again(scheduler, slots: int) -> list:
    """Read what the children send until the pool has `slots` free (10 s at
    most); the outcomes read meanwhile."""
    outcomes, until = [], time.monotonic() + 10
    while scheduler.pool.free_slots != slots and time.monotonic() < until:
        outcomes += scheduler.pool.wait(0.1)
    return outcomes


def finish(scheduler):
    """Write every run's outcome, each taken at the time it is read."""
    until = time.monotonic() + 10
    while scheduler.pool.flights and time.monotonic() < until:
        scheduler.collect(scheduler.pool.wait(0.2), timezone.now())
    assert not scheduler.pool.flights, "runs still in flight"


def test_a_fire_planned_ahead_waits_in_its_child_and_starts_there_at_its_time(scheduler, make_job):
    job = fire_in(make_job, 0.8)
    plan(scheduler)
    (run,) = runs_of(job)
    assert run.status == "running" and run.started_at == run.scheduled_at
    assert list(scheduler.pool.flights) == [run.pk], "handed over when planned"
    assert not scheduler.starter.held and scheduler.starter.held_at is None, (
        "the loop keeps nothing to wake for"
    )
    assert scheduler.starter.free_slots == 1, "it holds its slot"

    # The loop does nothing at the fire's time: the child starts the run by itself.
    sleep_past(run.scheduled_at, 0.3)
    (outcome,) = scheduler.pool.wait(5)
    assert outcome.status == "succeeded"
    monotonic, wall = (float(x) for x in outcome.result.split())
    assert wall >= run.scheduled_at.timestamp() - READ_SLACK, "never before its time"
    assert outcome.started_monotonic is not None and outcome.started_monotonic <= monotonic

    scheduler.collect([outcome], timezone.now())
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert run.scheduled_at <= run.started_at <= run.finished_at


def test_a_run_started_late_by_its_child_is_recorded_as_it_started(scheduler, make_job):
    job = fire_in(make_job, 0.8)
    plan(scheduler)
    (run,) = runs_of(job)
    (child,) = [c for c in scheduler.pool._children if c.flight is not None]
    os.kill(child.process.pid, signal.SIGSTOP)  # held up past the fire's time
    try:
        sleep_past(run.scheduled_at, 0.5)
    finally:
        os.kill(child.process.pid, signal.SIGCONT)
    finish(scheduler)
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert run.started_at >= run.scheduled_at + timedelta(seconds=0.4), "the time its child started it"
    assert run.finished_at >= run.started_at


def test_a_run_of_the_job_that_starts_first_takes_the_fire_back(scheduler, make_job, staff_user):
    job = fire_in(make_job, 0.9, handler="demo.sleep")
    Job.objects.filter(pk=job.pk).update(properties={"seconds": "2"})
    plan(scheduler)
    (fire,) = runs_of(job)
    assert fire.pk in scheduler.pool.flights

    manual, _ = services.run_now(job=Job.objects.get(pk=job.pk), user=staff_user, now=timezone.now())
    plan(scheduler)  # the claim starts the manual run, before the fire's time
    assert set(scheduler.pool.flights) == {manual.pk}, "the fire was taken back from its child"
    assert [one.run.pk for one in scheduler.starter.held] == [fire.pk], "held here: its time decides it"
    # Its child keeps its place until the fire's time (it sleeps until then),
    # so until then the fire counts twice: one slot fewer, never one more.
    assert scheduler.pool.free_slots == 0 and scheduler.starter.free_slots == -1

    # At its time the fire meets the live run and goes back to planning, as
    # any held fire does (tests/test_plan_ahead.py).
    sleep_past(fire.scheduled_at, 0.05)
    assert scheduler.hand_off_held() is True
    assert not Run.objects.filter(pk=fire.pk).exists()
    job.refresh_from_db()
    assert job.next_fire_at == fire.scheduled_at
    assert set(scheduler.pool.flights) == {manual.pk}
    assert free_again(scheduler, 1) == []
    assert scheduler.pool.free_slots == 1, "the fire's child said it let the run go and is free again"


def test_the_pool_and_the_child_race_for_the_token_and_one_decides(scheduler, make_job):
    early = fire_in(make_job, 0.8)
    late = fire_in(make_job, 0.2, handler="demo.sleep")
    Job.objects.filter(pk=late.pk).update(properties={"seconds": "1"})
    plan(scheduler)
    (early_run,), (late_run,) = runs_of(early), runs_of(late)
    assert scheduler.pool.withdraw(early_run.pk) is True, "taken back before its time"
    assert early_run.pk not in scheduler.pool.flights
    assert scheduler.pool.free_slots == 0, "its child keeps its place until it lets the run go"

    (late_child,) = [c for c in scheduler.pool._children if c.flight is scheduler.pool.flights[late_run.pk]]
    until = time.monotonic() + 10
    while late_child.token.value != 0 and time.monotonic() < until:
        time.sleep(0.01)  # the late run's child takes its token at its time
    assert scheduler.pool.withdraw(late_run.pk) is False, "its child took the token first: it runs"
    assert late_run.pk in scheduler.pool.flights

    outcomes = free_again(scheduler, 2)
    assert [o.run_id for o in outcomes] == [late_run.pk], "the run taken back never ran"
    assert outcomes[0].status == "succeeded"
    assert scheduler.pool.free_slots == 2, "the early run's child let it go at its time"


def test_shutdown_hands_fires_waiting_in_children_back_to_the_queue(scheduler, make_job):
    job = fire_in(make_job, 0.9)
    plan(scheduler)
    (run,) = runs_of(job)
    scheduler.drain(grace=0)
    run.refresh_from_db()
    assert (run.status, run.worker_id, run.started_at, run.run_after) == (
        "queued",
        "",
        None,
        run.scheduled_at,
    )
    assert not scheduler.pool._children, "the pool is closed, and the run never started"


def test_a_child_rebuilds_the_job_and_run_as_the_database_reads_them(scheduler, make_job):
    """The payload's rows (child.payload_of) carry a choices member the engine
    set (`Run.Status.RUNNING`) as its plain value, as a row read back has it:
    the child's job and run equal what the database gives, field by field."""
    from jobs.engine.execution.child import context_from, payload_of

    job = fire_in(make_job, 0.5)
    plan(scheduler)
    flight = next(iter(scheduler.pool.flights.values()))
    assert isinstance(flight.ctx.run.status, Run.Status), "the engine's own value, a member"
    rebuilt = context_from(payload_of(flight.ctx))
    for model, built in ((Job, rebuilt["job"]), (Run, rebuilt["run"])):
        stored = model.objects.get(pk=built.pk)
        for field in model._meta.concrete_fields:
            value, expected = getattr(built, field.attname), getattr(stored, field.attname)
            assert (value, type(value)) == (expected, type(expected)), field.name
    assert rebuilt["run"].job is rebuilt["job"]
    assert job.pk == rebuilt["job"].pk


def test_the_starter_forgets_a_fire_handed_over_once_its_outcome_is_written(scheduler, make_job):
    """A node whose every run is a fire planned ahead starts nothing else:
    what the starter keeps of the fires it handed over still ends with them."""
    job = fire_in(make_job, 0.3, cron_expression="0 0 0 1 1 *", schedule_type="cron")
    plan(scheduler)
    (run,) = runs_of(job)
    assert list(scheduler.starter.ahead) == [run.pk]
    finish(scheduler)
    assert Run.objects.get(pk=run.pk).status == "succeeded"
    plan(scheduler)  # nothing is due: a pass hands nothing over
    assert scheduler.starter.ahead == {}
