"""Every due fire of an enabled job is run or recorded: edits, run-now and the
scheduler writing the same job row, step by step on a fixed clock, and the
schedule check that notices a job off its schedule. The tests that write the
row from both sides run on both databases (`both_databases`). The same race
with real processes is in test_fire_guarantee_process.py."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import refusals, services
from jobs.engine import schedulecheck
from jobs.forms import JobForm
from jobs.models import Job, Run
from jobs.serializers import spec_to_form_data
from tests.fixtures.core import T0, drain, runs_of

pytestmark = pytest.mark.django_db

STEP = timedelta(seconds=5)


def interval_job(make_job, **fields):
    """An interval job every 5 s, due at T0, its last fire one interval before."""
    fields = {"schedule_type": "interval", "cron_expression": "", "interval_seconds": 5, **fields}
    job = make_job(**fields)
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0, last_fire_at=T0 - STEP)
    job.refresh_from_db()
    return job


def edit(job, now, **changes):
    """What the API's PATCH does with a job it loaded: the form on that
    instance, then the save service."""
    form = JobForm(spec_to_form_data(changes, instance=job), instance=job, user=None)
    assert form.is_valid(), form.errors
    return services.save_job(job=form.save(commit=False), now=now)


@pytest.fixture
def node(make_scheduler, clock):
    """One node on the fixed clock, on either database (no leader lease to
    judge by the database's clock)."""
    return make_scheduler(max_workers=4, clock=clock, misfire_threshold=60, clustered=False)


def scheduled(job):
    return [
        (run.scheduled_at, run.status, run.skip_reason) for run in runs_of(job) if run.trigger == "schedule"
    ]


# -- the cause: an edit wrote back the scheduler's columns as it had loaded them ----------


def test_an_edit_loaded_before_a_claim_keeps_what_the_claim_wrote(both_databases, make_job, node):
    job = interval_job(make_job)
    loaded = Job.objects.get(pk=job.pk)  # the editor's copy: next T0, last T0 - 5 s
    node.plan_due(T0)
    drain(node, T0)

    edit(loaded, T0 + timedelta(milliseconds=100), description="edited")

    job.refresh_from_db()
    assert (job.next_fire_at, job.last_fire_at, job.last_status) == (T0 + STEP, T0, "succeeded")
    assert job.description == "edited"


def test_an_edit_that_keeps_the_schedule_never_moves_a_due_fire(both_databases, make_job, node):
    # Due at T0, not claimed yet when the edit comes 200 ms later.
    job = interval_job(make_job)
    saved = edit(job, T0 + timedelta(milliseconds=200), description="edited")
    assert saved.next_fire_at == T0

    node.plan_due(T0 + timedelta(milliseconds=250))
    assert [at for at, *_ in scheduled(job)] == [T0]
    job.refresh_from_db()
    assert job.next_fire_at == T0 + STEP


def test_edits_and_run_now_between_fires_leave_the_grid_unbroken(make_job, scheduler, clock):
    job = interval_job(make_job)
    for tenth in range(0, 300, 7):  # 30 s, an edit or a run-now every 0.7 s
        now = clock.advance(milliseconds=700) if tenth else clock()
        loaded = Job.objects.get(pk=job.pk)
        if tenth % 3:
            edit(loaded, now, description=f"edit {tenth}")
        else:
            services.run_now(job=loaded, now=now)
        scheduler.claim_queued(now)
        scheduler.plan_due(now)
        drain(scheduler, now)
    fires = scheduled(job)
    assert [at for at, *_ in fires] == [T0 + n * STEP for n in range(len(fires))]
    assert len(fires) >= 5
    # Each fire ran, or is recorded as an overlap with the manual run of its pass.
    assert {(status, reason) for _at, status, reason in fires} <= {("succeeded", ""), ("skipped", "overlap")}
    job.refresh_from_db()
    assert job.next_fire_at == fires[-1][0] + STEP


def test_run_now_never_moves_the_schedule(make_job, scheduler, clock):
    job = interval_job(make_job)
    manual, _ = services.run_now(job=job, now=T0 - timedelta(seconds=1))
    job.refresh_from_db()
    assert job.next_fire_at == T0

    # The manual run is still queued at T0: the fire is recorded as an
    # overlap, and the next one stays on the grid.
    scheduler.plan_due(T0)
    assert scheduled(job) == [(T0, "skipped", "overlap")]
    job.refresh_from_db()
    assert job.next_fire_at == T0 + STEP


def test_a_schedule_changed_while_a_fire_is_due_runs_that_fire_then_counts_from_it(make_job, scheduler):
    job = interval_job(make_job)
    saved = edit(job, T0 + timedelta(milliseconds=300), interval_seconds=60)
    assert saved.next_fire_at == T0, "the due fire is owed, not dropped"

    scheduler.plan_due(T0 + timedelta(milliseconds=400))
    assert [at for at, *_ in scheduled(job)] == [T0]
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(seconds=60)


def test_an_edit_that_turns_the_schedule_off_while_a_fire_is_due_owes_no_fire(make_job, scheduler):
    job = interval_job(make_job)
    saved = edit(job, T0 + timedelta(milliseconds=300), schedule_type="none")
    assert saved.next_fire_at is None, "a schedule that fires no more owes nothing"

    scheduler.plan_due(T0 + timedelta(milliseconds=400))
    assert scheduled(job) == []


def test_a_schedule_change_counts_from_the_last_fire_as_it_is_now(make_job, scheduler, clock):
    job = interval_job(make_job)
    loaded = Job.objects.get(pk=job.pk)
    scheduler.plan_due(T0)
    drain(scheduler, T0)
    saved = edit(loaded, T0 + timedelta(seconds=1), interval_seconds=30)
    assert saved.next_fire_at == T0 + timedelta(seconds=30), "the claimed fire's time, not the loaded one's"


def test_a_claim_planned_from_the_row_before_an_edit_writes_nothing(both_databases, make_job, node):
    job = interval_job(make_job)
    plan = node.planner.plan_fire(Job.objects.get(pk=job.pk), T0, busy=False)
    edit(Job.objects.get(pk=job.pk), T0, interval_seconds=60)

    assert node.planner.claim_batch([plan], T0, epoch=None) == set()
    # Planned again from the row as it is: the new interval counts from this fire.
    node.plan_due(T0)
    job.refresh_from_db()
    assert [at for at, *_ in scheduled(job)] == [T0]
    assert job.next_fire_at == T0 + timedelta(seconds=60)


def test_a_due_fire_whose_run_exists_already_moves_its_job_on(make_job, scheduler):
    job = interval_job(make_job)
    Run.objects.create(
        job=job, scheduled_at=T0, trigger=Run.Trigger.SCHEDULE, status=Run.Status.SUCCEEDED, finished_at=T0
    )
    scheduler.plan_due(T0)
    job.refresh_from_db()
    assert job.next_fire_at == T0 + STEP, "not left due, refused on every pass"
    assert len(scheduled(job)) == 1


def test_saving_a_job_deleted_since_it_was_loaded_is_refused_and_changes_nothing(make_job):
    job = interval_job(make_job)
    loaded = Job.objects.get(pk=job.pk)
    services.delete_job(job=job, now=T0)
    with pytest.raises(refusals.StaleJobError):
        edit(loaded, T0, description="too late")
    job.refresh_from_db()
    assert job.is_deleted and job.next_fire_at is None and job.description == ""


# -- the schedule check -------------------------------------------------------------------------


@pytest.fixture
def check(node):
    """The schedule check of `node`, its count started at T0, after the
    scheduler's start gave the seeded built-in jobs their first fire."""
    schedulecheck.schedule_unplanned(T0)
    check = schedulecheck.ScheduleCheck(planner=node.planner)
    assert check.step(T0) is None
    return check


def test_the_schedule_check_puts_a_job_without_a_next_fire_back_on_its_grid(
    both_databases, make_job, check, caplog
):
    job = interval_job(make_job)
    Job.objects.filter(pk=job.pk).update(next_fire_at=None, last_fire_at=T0 + timedelta(seconds=27))
    now = T0 + schedulecheck.CHECK_EVERY

    checked = check.step(now)

    assert checked.counts() == {"missing": 1}
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(seconds=32), "its last fire plus the interval"
    assert f"job {job.pk} ({job.name}) was off its schedule (missing" in caplog.text


def test_a_job_without_a_next_fire_gets_the_same_one_at_start_as_from_the_schedule_check(
    both_databases, make_job, check
):
    """schedule_unplanned (at start) and the schedule check use one rule: an
    interval job stays on its grid, counted from its last fire."""
    job = interval_job(make_job, interval_seconds=60)
    on_grid = T0 + timedelta(seconds=40)
    Job.objects.filter(pk=job.pk).update(next_fire_at=None, last_fire_at=on_grid - timedelta(seconds=60))
    now = T0 + schedulecheck.CHECK_EVERY

    assert schedulecheck.schedule_unplanned(now) is True
    job.refresh_from_db()
    assert job.next_fire_at == on_grid, "its last fire plus the interval"

    Job.objects.filter(pk=job.pk).update(next_fire_at=None)
    check.step(now)
    job.refresh_from_db()
    assert job.next_fire_at == on_grid


def test_the_schedule_check_brings_back_a_next_fire_pushed_past_its_interval(both_databases, make_job, check):
    job = interval_job(make_job)
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0 + timedelta(minutes=10), last_fire_at=T0)
    now = T0 + schedulecheck.CHECK_EVERY

    assert check.step(now).counts() == {"ahead": 1}
    job.refresh_from_db()
    assert job.next_fire_at == now + STEP, "the last fire plus the interval is past: now plus the interval"


def test_the_schedule_check_records_a_fire_stuck_due_and_moves_the_job_on(both_databases, make_job, check):
    job = interval_job(make_job)  # due at T0, and nothing claimed it
    now = T0 + schedulecheck.CHECK_EVERY

    assert check.step(now).counts() == {"stuck": 1}
    job.refresh_from_db()
    assert job.next_fire_at == now + STEP
    (skipped,) = runs_of(job)
    assert (skipped.scheduled_at, skipped.status, skipped.skip_reason) == (T0, "skipped", "misfire")
    assert "never claimed" in skipped.error


def test_the_schedule_check_leaves_jobs_on_their_schedule_alone(both_databases, make_job, check):
    now = T0 + schedulecheck.CHECK_EVERY
    on_grid = interval_job(make_job, interval_seconds=3600)
    Job.objects.filter(pk=on_grid.pk).update(next_fire_at=now + timedelta(minutes=59), last_fire_at=T0)
    make_job(next_fire_at=now + timedelta(seconds=30))  # cron, every minute
    make_job(cron_expression="0 0 0 1 1 *", next_fire_at=datetime(2027, 1, 1, tzinfo=UTC))  # a year ahead
    make_job(state=Job.State.PAUSED)
    make_job(schedule_type=Job.ScheduleType.NONE, cron_expression="")
    make_job(run_once=True, state=Job.State.ENABLED)  # fired: no next fire, waits to be paused
    before = list(Job.objects.order_by("pk").values_list("pk", "next_fire_at"))

    assert check.step(now).repairs == []
    assert list(Job.objects.order_by("pk").values_list("pk", "next_fire_at")) == before


def test_the_schedule_check_costs_one_query_every_check_every_and_none_between(make_job, check):
    job = interval_job(make_job, interval_seconds=60)
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0 + timedelta(seconds=60))
    with CaptureQueriesContext(connection) as queries:
        assert check.step(T0 + schedulecheck.CHECK_EVERY - timedelta(seconds=1)) is None
    assert len(queries) == 0
    with CaptureQueriesContext(connection) as queries:
        assert check.step(T0 + schedulecheck.CHECK_EVERY).repairs == []
    assert len(queries) == 1


def test_the_scheduler_runs_the_schedule_check_in_its_passes(make_job, node, clock):
    job = interval_job(make_job)
    node.start(T0)
    node.run_pass(T0)
    Job.objects.filter(pk=job.pk).update(next_fire_at=None)
    node.run_pass(clock.advance(seconds=schedulecheck.CHECK_EVERY.total_seconds()))
    job.refresh_from_db()
    assert job.next_fire_at == T0 + STEP + STEP * 6, "last fire T0 + 5 s is past: now + 5 s"
