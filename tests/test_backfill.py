"""Backfill: the fires a job's schedule had in a range, one waiting run per
fire with the fire as its scheduled time, started `parallel` at a time in
fire order, cancellable as a whole; bad ranges refused with nothing written."""

import threading
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from jobs import backfills
from jobs.handlers import HandlerError, JobHandler, register
from jobs.handlers.registry import unregister
from jobs.models import AuditEvent, Backfill, Run
from tests.fixtures.core import T0

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)
NOW = T0 + timedelta(days=1)


@pytest.fixture
def recorded():
    """ "test.recorded": records ctx.scheduled_at and the trigger it ran for,
    and runs until released (or cancelled)."""
    seen: list = []
    gate = threading.Event()

    @register("test.recorded")
    class Recorded(JobHandler):
        def run(self, ctx):
            seen.append(ctx.scheduled_at)
            while not gate.wait(0.02):
                if ctx.cancelled.is_set():
                    raise HandlerError("cancelled")
            return "done"

    recorded.seen, recorded.gate = seen, gate
    yield recorded
    gate.set()
    unregister("test.recorded")


def hourly(make_job, **fields):
    return make_job(cron_expression="0 0 * * * *", handler="test.recorded", **fields)


def test_plan_counts_the_fires_of_the_schedule_in_the_range(make_job):
    job = hourly(make_job)
    plan = backfills.plan_backfill(job=job, start=T0, end=T0 + 3 * HOUR, now=NOW)
    assert plan.fires == [T0, T0 + HOUR, T0 + 2 * HOUR, T0 + 3 * HOUR]
    assert not Backfill.objects.exists() and not Run.objects.exists(), "a plan writes nothing"


def test_backfill_runs_each_fire_with_its_scheduled_time_one_at_a_time_in_order(
    make_job, scheduler, clock, recorded
):
    job = hourly(make_job)
    backfill = backfills.start_backfill(job=job, start=T0, end=T0 + 2 * HOUR, now=NOW)
    runs = list(Run.objects.filter(backfill=backfill).order_by("scheduled_at"))
    assert [(r.scheduled_at, r.trigger, r.status) for r in runs] == [
        (T0 + i * HOUR, "backfill", "waiting") for i in range(3)
    ]
    clock.now = NOW
    recorded.gate.set()
    for _ in range(3):
        assert scheduler.admit_waiting(clock())
        assert not scheduler.admit_waiting(clock()), "parallel 1: one at a time"
        scheduler.claim_queued(clock())
        admitted = Run.objects.filter(backfill=backfill, status__in=Run.ADMITTED).count()
        assert admitted == 1
        while Run.objects.filter(backfill=backfill, status__in=Run.ADMITTED).exists():
            scheduler.collect(scheduler.pool.wait(0.05), clock())
    assert recorded.seen == [T0, T0 + HOUR, T0 + 2 * HOUR], "ctx.scheduled_at is the fire, in order"
    assert set(Run.objects.filter(backfill=backfill).values_list("status", flat=True)) == {"succeeded"}
    event = AuditEvent.objects.get(job=job, action="backfill")
    assert event.changes["fires"] == [None, 3]


def test_parallel_starts_that_many_at_once(make_job, scheduler, clock, recorded):
    job = hourly(make_job)
    backfill = backfills.start_backfill(job=job, start=T0, end=T0 + 4 * HOUR, parallel=2, now=NOW)
    clock.now = NOW
    scheduler.admit_waiting(clock())
    scheduler.claim_queued(clock())
    started = Run.objects.filter(backfill=backfill, status="running").order_by("scheduled_at")
    assert [r.scheduled_at for r in started] == [T0, T0 + HOUR]


def test_a_backfill_does_not_hold_up_the_jobs_own_schedule(make_job, scheduler, clock, recorded):
    job = hourly(make_job, next_fire_at=NOW)
    backfills.start_backfill(job=job, start=T0, end=T0 + 2 * HOUR, now=NOW - HOUR)
    clock.now = NOW
    scheduler.plan_due(NOW)
    assert Run.objects.get(job=job, trigger="schedule").status == "running"


def test_fires_that_succeeded_are_left_out_unless_asked(make_job):
    job = hourly(make_job)
    Run.objects.create(job=job, scheduled_at=T0 + HOUR, trigger="schedule", status="succeeded")
    Run.objects.create(job=job, scheduled_at=T0 + 2 * HOUR, trigger="schedule", status="failed")
    plan = backfills.plan_backfill(job=job, start=T0, end=T0 + 2 * HOUR, now=NOW)
    assert (plan.fires, plan.succeeded) == ([T0, T0 + 2 * HOUR], 1)
    plan = backfills.plan_backfill(job=job, start=T0, end=T0 + 2 * HOUR, include_succeeded=True, now=NOW)
    assert plan.fires == [T0, T0 + HOUR, T0 + 2 * HOUR]


def test_cancel_ends_the_waiting_runs_and_stops_the_running_one(make_job, scheduler, clock, recorded):
    job = hourly(make_job)
    backfill = backfills.start_backfill(job=job, start=T0, end=T0 + 3 * HOUR, now=NOW)
    clock.now = NOW
    scheduler.admit_waiting(clock())
    scheduler.claim_queued(clock())
    reached = backfills.cancel_backfill(backfill=backfill, now=clock())
    assert reached == 4
    statuses = list(
        Run.objects.filter(backfill=backfill).order_by("scheduled_at").values_list("status", flat=True)
    )
    assert statuses == ["running", "cancelled", "cancelled", "cancelled"]
    scheduler.heartbeat(clock.advance(seconds=5))
    while Run.objects.filter(backfill=backfill, status="running").exists():
        scheduler.collect(scheduler.pool.wait(0.05), clock())
    assert Run.objects.get(backfill=backfill, scheduled_at=T0).status == "cancelled"
    assert backfill.cancelled_at is not None
    assert not scheduler.admit_waiting(clock.advance(seconds=1)), "nothing of it starts any more"


@pytest.mark.parametrize(
    ("start", "end", "code"),
    [
        (T0 - timedelta(days=800), T0, "47024"),  # 19,200 hourly fires
        (T0, NOW + HOUR, "47025"),  # ends in the future
        (T0 + HOUR, T0, "47025"),  # ends before it starts
    ],
)
def test_bad_ranges_are_refused_with_their_code_and_nothing_written(make_job, start, end, code):
    job = hourly(make_job)
    with pytest.raises(backfills.BackfillRefused) as refused:
        backfills.start_backfill(job=job, start=start, end=end, now=NOW)
    assert refused.value.code == code
    assert not Backfill.objects.exists() and not Run.objects.exists()


def test_parallel_out_of_range_and_a_job_without_schedule_are_refused(make_job):
    with pytest.raises(backfills.BackfillRefused) as refused:
        backfills.start_backfill(job=hourly(make_job), start=T0, end=T0 + HOUR, parallel=0, now=NOW)
    assert refused.value.code == "47026"
    with pytest.raises(backfills.BackfillRefused) as refused:
        backfills.start_backfill(job=make_job(schedule_type="none"), start=T0, end=T0 + HOUR, now=NOW)
    assert refused.value.code == "47027"
    assert not Run.objects.exists()


def test_ten_thousand_fires_is_allowed(make_job):
    job = make_job(schedule_type="interval", interval_seconds=60, cron_expression="")
    end = T0 + timedelta(minutes=9_999)
    plan = backfills.plan_backfill(job=job, start=T0, end=end, now=end + HOUR)
    assert len(plan.fires) == 10_000


def test_the_command_counts_creates_and_cancels_a_backfill(make_job):
    job = hourly(make_job, name="hourly")
    out = StringIO()
    args = ["jobs", "backfill", "hourly", "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-01T05:30:00Z"]
    call_command(*args, "--dry-run", stdout=out)
    assert "6 fire(s) to run" in out.getvalue()
    assert not Run.objects.exists()
    call_command(*args, "--parallel", "2", stdout=out)
    backfill = Backfill.objects.get(job=job)
    assert (backfill.fires, backfill.parallel) == (6, 2)
    call_command("jobs", "backfill-cancel", str(backfill.pk), stdout=out)
    assert set(Run.objects.values_list("status", flat=True)) == {"cancelled"}


def test_the_command_refuses_a_future_range_with_its_code(make_job):
    hourly(make_job, name="hourly")
    with pytest.raises(CommandError, match="47025"):
        call_command(
            "jobs", "backfill", "hourly", "--from", "2025-01-01T00:00:00Z", "--to", "2999-01-01T00:00:00Z"
        )
    assert not Run.objects.exists()


def test_the_command_manages_pools(make_job):
    from io import StringIO

    out = StringIO()
    call_command("jobs", "pool", "heavy", "--size", "2", stdout=out)
    with pytest.raises(CommandError, match="47020"):
        call_command("jobs", "pool", "heavy", "--size", "0")
    call_command("jobs", "pools", stdout=out)
    assert "heavy\tsize 2\tlive 0\tjobs 0" in out.getvalue()
    call_command("jobs", "pool", "heavy", "--delete", stdout=out)
