"""Overlap policies (skip, queue_one, replace, allow), concurrency pools and
the admission step that lets waiting runs through, driven with a fixed clock
and real runs that last until the test lets them end."""

import threading
from datetime import timedelta

import pytest

from jobs import admission, pools, services
from jobs.forms import JobForm
from jobs.handlers import HandlerError, JobHandler, register
from jobs.handlers.registry import unregister
from jobs.models import AuditEvent, Job, Pool, Run
from tests.factories import job_data
from tests.fixtures.core import T0, drain, runs_of

pytestmark = pytest.mark.django_db

MINUTE = timedelta(minutes=1)


@pytest.fixture
def held():
    """ "test.held": runs until the test sets its run's gate (by scheduled
    time) or the run is cancelled; records each run's scheduled time."""
    gates: dict = {}
    seen: list = []

    @register("test.held")
    class Held(JobHandler):
        def run(self, ctx):
            seen.append(ctx.scheduled_at)
            gate = gates.setdefault(ctx.scheduled_at, threading.Event())
            while not gate.wait(0.02):
                if ctx.cancelled.is_set():
                    raise HandlerError("cancelled")
            return "released"

    def release(at):
        gates.setdefault(at, threading.Event()).set()

    held.release, held.seen = release, seen
    yield held
    # A copy: a run still starting may add its gate meanwhile (its thread
    # sees the test's end through the cancellation the scheduler sends).
    for gate in list(gates.values()):
        gate.set()
    unregister("test.held")


def step(scheduler, now):
    """One pass's planning, admission and claim at `now`."""
    scheduler.plan_due(now)
    scheduler.admit_waiting(now)
    scheduler.claim_queued(now)


def wait_for(scheduler, now, predicate, timeout=10.0):
    """Collect outcomes until `predicate()` holds."""
    import time

    until = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < until, "timed out waiting for the state"
        scheduler.collect(scheduler.pool.wait(0.05), now)


def statuses(job):
    return [(run.scheduled_at, run.status) for run in runs_of(job)]


def test_skip_is_the_default_and_records_the_fire_as_skipped(scheduler, make_job, held, clock):
    job = make_job(next_fire_at=T0, handler="test.held")
    assert job.overlap_policy == Job.OverlapPolicy.SKIP
    step(scheduler, T0)
    step(scheduler, clock.advance(minutes=1))
    first, second = runs_of(job)
    assert (first.status, second.status, second.skip_reason) == ("running", "skipped", "overlap")


def test_queue_one_starts_right_after_the_live_run_and_skips_a_further_fire(scheduler, make_job, held, clock):
    job = make_job(next_fire_at=T0, handler="test.held", overlap_policy="queue_one")
    step(scheduler, T0)
    step(scheduler, clock.advance(minutes=1))
    assert statuses(job) == [(T0, "running"), (T0 + MINUTE, "waiting")]
    (waiting,) = [r for r in runs_of(job) if r.status == "waiting"]
    assert admission.waiting_reasons([waiting]) == {waiting.pk: "waiting for the job's live run to end (1/1)"}

    step(scheduler, clock.advance(minutes=1))
    third = runs_of(job)[2]
    assert (third.status, third.skip_reason) == ("skipped", "overlap")
    assert "already queued" in third.error

    held.release(T0)
    wait_for(scheduler, clock(), lambda: Run.objects.get(job=job, scheduled_at=T0).status == "succeeded")
    assert scheduler.admit_waiting(clock())
    scheduler.claim_queued(clock())
    queued = Run.objects.get(job=job, scheduled_at=T0 + MINUTE)
    assert queued.status == "running"
    assert queued.lateness == clock() - (T0 + MINUTE), "lateness counts from the fire"
    held.release(T0 + MINUTE)
    drain(scheduler, clock())


def test_queue_one_run_does_not_start_while_the_live_run_goes_on(scheduler, make_job, held, clock):
    job = make_job(next_fire_at=T0, handler="test.held", overlap_policy="queue_one")
    step(scheduler, T0)
    step(scheduler, clock.advance(minutes=1))
    for _ in range(3):
        assert not scheduler.admit_waiting(clock.advance(seconds=5))
    assert Run.objects.get(job=job, scheduled_at=T0 + MINUTE).status == "waiting"


def test_replace_cancels_the_live_run_as_the_console_does_then_starts(scheduler, make_job, held, clock):
    job = make_job(next_fire_at=T0, handler="test.held", overlap_policy="replace")
    step(scheduler, T0)
    step(scheduler, clock.advance(minutes=1))
    old = Run.objects.get(job=job, scheduled_at=T0)
    assert old.cancel_requested and old.status == "running"
    event = AuditEvent.objects.get(job=job, action="cancel-run")
    assert (event.via, event.changes) == ("system", {"run": [old.pk, None]})
    assert Run.objects.get(job=job, scheduled_at=T0 + MINUTE).status == "waiting"
    assert not scheduler.admit_waiting(clock()), "not while the cancelled run still runs"

    scheduler.heartbeat(clock.advance(seconds=5))  # hands the cancel to the worker
    wait_for(scheduler, clock(), lambda: Run.objects.get(pk=old.pk).status == "cancelled")
    assert scheduler.admit_waiting(clock())
    scheduler.claim_queued(clock())
    assert Run.objects.get(job=job, scheduled_at=T0 + MINUTE).status == "running"


def test_replace_cancels_a_waiting_replacement_too(scheduler, make_job, held, clock):
    job = make_job(next_fire_at=T0, handler="test.held", overlap_policy="replace")
    step(scheduler, T0)
    scheduler.plan_due(clock.advance(minutes=1))
    scheduler.plan_due(clock.advance(minutes=1))
    assert [s for _at, s in statuses(job)] == ["running", "cancelled", "waiting"]


def test_allow_runs_side_by_side_up_to_max_parallel(scheduler, make_job, held, clock):
    job = make_job(next_fire_at=T0, handler="test.held", overlap_policy="allow", max_parallel=2)
    step(scheduler, T0)
    step(scheduler, clock.advance(minutes=1))
    step(scheduler, clock.advance(minutes=1))
    assert [s for _at, s in statuses(job)] == ["running", "running", "skipped"]
    assert "max_parallel" in runs_of(job)[2].error
    held.release(T0)
    wait_for(scheduler, clock(), lambda: Run.objects.get(job=job, scheduled_at=T0).status == "succeeded")
    step(scheduler, clock.advance(minutes=1))
    assert runs_of(job)[3].status == "running", "a slot of the two is free again"


def test_pool_admits_its_size_in_fire_order_and_explains_the_wait(make_scheduler, make_job, held, clock):
    scheduler = make_scheduler(max_workers=8, clock=clock, misfire_threshold=60)
    pools.save_pool(name="heavy", size=2)
    jobs = [
        make_job(next_fire_at=T0 + timedelta(seconds=i), handler="test.held", pool="heavy") for i in range(3)
    ]
    now = clock.advance(seconds=2)
    step(scheduler, now)
    assert [runs_of(j)[0].status for j in jobs] == ["running", "running", "waiting"]
    third = runs_of(jobs[2])[0]
    assert admission.waiting_reasons([third]) == {third.pk: "waiting for pool heavy (2/2)"}
    assert not scheduler.admit_waiting(clock.advance(seconds=3))

    held.release(T0)
    wait_for(scheduler, clock(), lambda: runs_of(jobs[0])[0].status == "succeeded")
    step(scheduler, clock.advance(seconds=1))
    third.refresh_from_db()
    assert third.status == "running"
    assert third.lateness == clock() - (T0 + timedelta(seconds=2)), "lateness counts from the fire"


def test_a_full_pool_does_not_hold_up_other_waiting_runs(make_scheduler, make_job, held, clock):
    scheduler = make_scheduler(max_workers=8, clock=clock, misfire_threshold=60)
    pools.save_pool(name="one", size=1)
    pools.save_pool(name="other", size=1)
    first = make_job(next_fire_at=T0, handler="test.held", pool="one")
    second = make_job(next_fire_at=T0, handler="test.held", pool="one")
    free = make_job(next_fire_at=T0 + timedelta(seconds=1), handler="test.held", pool="other")
    step(scheduler, clock.advance(seconds=1))
    assert sorted(r.status for j in (first, second) for r in runs_of(j)) == ["running", "waiting"]
    assert runs_of(free)[0].status == "running"


def test_pool_size_zero_is_refused_with_its_code_and_nothing_saved():
    with pytest.raises(pools.PoolRefused) as refused:
        pools.save_pool(name="heavy", size=0)
    assert refused.value.code == pools.CODE_POOL_SIZE == "47020"
    assert not Pool.objects.exists()


def test_a_pool_in_use_is_not_deleted(make_job):
    pools.save_pool(name="heavy", size=2)
    make_job(pool="heavy")
    with pytest.raises(pools.PoolRefused) as refused:
        pools.delete_pool(name="heavy")
    assert refused.value.code == "47022"
    assert Pool.objects.filter(name="heavy").exists()


def test_pool_changes_are_audited():
    pools.save_pool(name="heavy", size=2)
    pools.save_pool(name="heavy", size=3)
    pools.delete_pool(name="heavy")
    rows = list(AuditEvent.objects.filter(subject="pool").order_by("pk").values_list("action", "changes"))
    assert rows == [
        ("pool-save", {"pool": [None, "heavy"], "size": [None, 2]}),
        ("pool-save", {"pool": [None, "heavy"], "size": [2, 3]}),
        ("pool-delete", {"pool": ["heavy", None]}),
    ]


def test_job_form_validates_the_overlap_fields():
    pools.save_pool(name="heavy", size=1)
    form = JobForm(data=job_data(overlap_policy="allow", max_parallel="0", pool="nope"))
    assert not form.is_valid()
    codes = {e["field"]: e["code"] for e in form.error_list()}
    assert codes == {"max_parallel": "out_of_range", "pool": "47023"}
    form = JobForm(data=job_data(overlap_policy="sometimes"))
    assert not form.is_valid() and "overlap_policy" in form.errors

    form = JobForm(data=job_data(overlap_policy="allow", max_parallel="3", pool="heavy"))
    assert form.is_valid(), form.errors
    job = services.save_job(job=form.save(commit=False))
    job.refresh_from_db()
    assert (job.overlap_policy, job.max_parallel, job.pool) == ("allow", 3, "heavy")
    defaults = JobForm(data=job_data(name="plain"))
    assert defaults.is_valid(), defaults.errors
    assert (defaults.cleaned_data["overlap_policy"], defaults.cleaned_data["max_parallel"]) == ("skip", 1)


def test_a_run_waiting_for_its_pool_is_late_from_its_fire(make_scheduler, make_job, held, clock):
    from jobs.models import Alert

    scheduler = make_scheduler(max_workers=4, clock=clock, misfire_threshold=60)
    pools.save_pool(name="heavy", size=1)
    make_job(next_fire_at=T0, handler="test.held", pool="heavy", timeout_seconds=3600)
    late = make_job(next_fire_at=T0, pool="heavy", alert_on=["late"], late_after_seconds=30)
    step(scheduler, T0)
    (waiting,) = Run.objects.filter(job=late, status="waiting")
    assert not scheduler.alert_watch.step(clock.advance(seconds=20))
    assert scheduler.alert_watch.step(clock.advance(seconds=20))
    (alert,) = Alert.objects.all()
    assert (alert.run_id, alert.kind) == (waiting.pk, "late")


def test_admission_asks_nothing_between_its_checks_while_no_run_waits(make_job):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs.engine.admission import Admission

    step_of = Admission(every=timedelta(seconds=1))
    assert step_of.step(T0) == [] and not step_of.left, "the first step looks, and finds nothing"
    with CaptureQueriesContext(connection) as queries:
        assert step_of.step(T0 + timedelta(milliseconds=500)) == []
    assert len(queries) == 0, "no run waits: no query until the next check"

    job = make_job(pool="")
    waiting = Run.objects.create(job=job, scheduled_at=T0, trigger="schedule", status="waiting", run_after=T0)
    assert step_of.step(T0 + timedelta(milliseconds=600), wrote_waiting=True) == [waiting.pk]
    other = Run.objects.create(
        job=make_job(), scheduled_at=T0, trigger="schedule", status="waiting", run_after=T0
    )
    assert step_of.step(T0 + timedelta(milliseconds=700)) == [], "written by another process: not seen yet"
    assert step_of.step(T0 + timedelta(seconds=2)) == [other.pk], "seen at the next check"


def test_manual_runs_of_a_pool_s_jobs_wait_for_the_pool_and_start_in_order(
    make_scheduler, make_job, held, clock
):
    scheduler = make_scheduler(max_workers=8, clock=clock, misfire_threshold=60)
    pools.save_pool(name="heavy", size=1)
    busy = make_job(next_fire_at=T0, handler="test.held", pool="heavy")
    first, second = (make_job(handler="test.held", pool="heavy") for _ in range(2))
    step(scheduler, T0)
    assert runs_of(busy)[0].status == "running"

    # A manual run of the busy job itself waits for the pool, not for its fire.
    again, _created = services.run_now(job=busy, now=clock.advance(seconds=1))
    one, _created = services.run_now(job=first, now=clock.advance(seconds=1))
    two, _created = services.run_now(job=second, trigger=Run.Trigger.API, now=clock.advance(seconds=1))
    assert [run.status for run in (again, one, two)] == ["waiting"] * 3
    assert admission.waiting_reasons([one]) == {one.pk: "waiting for pool heavy (1/1)"}
    assert services.run_now(job=first, now=clock())[0].pk == one.pk, "still one live manual run a job"
    step(scheduler, clock.advance(seconds=1))
    assert Run.objects.filter(job__pool="heavy", status__in=["queued", "running"]).count() == 1

    # Each ends in turn; the next in order takes the one place, never two.
    for run in (runs_of(busy)[0], again, one, two):
        run.refresh_from_db()
        wait_for(scheduler, clock(), lambda run=run: run.refresh_from_db() or run.status == "running")
        assert Run.objects.filter(job__pool="heavy", status__in=["queued", "running"]).count() == 1
        held.release(run.scheduled_at)
        wait_for(scheduler, clock(), lambda run=run: run.refresh_from_db() or run.status == "succeeded")
        step(scheduler, clock.advance(seconds=1))


def test_a_downstream_run_of_a_pool_s_job_waits_for_the_pool(make_scheduler, make_job, held, clock):
    from jobs.models import JobDependency

    scheduler = make_scheduler(max_workers=8, clock=clock, misfire_threshold=60)
    pools.save_pool(name="heavy", size=1)
    busy = make_job(next_fire_at=T0, handler="test.held", pool="heavy")
    upstream = make_job(next_fire_at=T0 + timedelta(seconds=1), handler="test.held")
    downstream = make_job(handler="test.held", pool="heavy")
    JobDependency.objects.create(upstream=upstream, downstream=downstream, on="success")
    step(scheduler, clock.advance(seconds=1))
    held.release(T0 + timedelta(seconds=1))
    wait_for(scheduler, clock(), lambda: downstream.runs.exists())
    (after,) = runs_of(downstream)
    assert (after.trigger, after.status) == ("upstream", "waiting")
    step(scheduler, clock.advance(seconds=1))
    after.refresh_from_db()
    assert after.status == "waiting", "the pool is full"
    held.release(T0)
    wait_for(scheduler, clock(), lambda: runs_of(busy)[0].status == "succeeded")
    step(scheduler, clock.advance(seconds=1))
    after.refresh_from_db()
    assert after.status == "running"


def test_queue_one_queues_a_fire_behind_a_manual_run_waiting_for_its_pool(
    make_scheduler, make_job, held, clock
):
    """The run queue_one keeps behind the live one is a fire: a manual run
    waiting for the job's pool is not one, so the fire is written waiting
    instead of skipped, and starts after the manual run, in order."""
    scheduler = make_scheduler(max_workers=8, clock=clock, misfire_threshold=60)
    pools.save_pool(name="heavy", size=1)
    other = make_job(next_fire_at=T0, handler="test.held", pool="heavy")
    job = make_job(next_fire_at=T0 + MINUTE, handler="test.held", pool="heavy", overlap_policy="queue_one")
    step(scheduler, T0)
    manual, _created = services.run_now(job=job, now=clock.advance(seconds=1))
    assert manual.status == "waiting", "the pool is full"

    step(scheduler, clock.advance(minutes=1))
    fire = Run.objects.get(job=job, scheduled_at=T0 + MINUTE)
    assert (fire.status, fire.skip_reason) == ("waiting", "")
    step(scheduler, clock.advance(minutes=1))
    further = Run.objects.get(job=job, scheduled_at=T0 + 2 * MINUTE)
    assert (further.status, further.skip_reason) == ("skipped", "overlap"), "one fire waits, not two"

    held.release(T0)
    wait_for(scheduler, clock(), lambda: runs_of(other)[0].status == "succeeded")
    step(scheduler, clock.advance(seconds=1))
    manual.refresh_from_db()
    fire.refresh_from_db()
    assert (manual.status, fire.status) == ("running", "waiting"), "the manual run came first"
    held.release(manual.scheduled_at)
    wait_for(scheduler, clock(), lambda: manual.refresh_from_db() or manual.status == "succeeded")
    step(scheduler, clock.advance(seconds=1))
    fire.refresh_from_db()
    assert fire.status == "running"
    held.release(fire.scheduled_at)
    drain(scheduler, clock())
