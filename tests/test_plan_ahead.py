"""On one node the running loop plans a fire up to JOBS_PLAN_AHEAD_MS before
its time (jobs.engine.planning, Planner.plan_due's `ahead`): its run is
written running from the fire's time and held, with a slot, until the loop
hands it to a worker at that time (Starter.start_held). Driven pass by pass
on a fixed clock (`run_pass(…, running=True)` is the running loop's pass);
the last test runs a real scheduler process."""

import signal
from datetime import datetime, timedelta

import pytest

from jobs import pools, services
from jobs.engine.planning import plan_at
from jobs.models import Job, Run
from tests.fixtures import processes
from tests.fixtures.core import T0, drain, runs_of

pytestmark = pytest.mark.django_db

MS = timedelta(milliseconds=1)
AHEAD = 50 * MS


@pytest.fixture(autouse=True)
def plan_ahead(settings):
    settings.JOBS_PLAN_AHEAD_MS = 50


def running_pass(scheduler, now):
    return scheduler.run_pass(now, running=True)


def held_fire_beside_a_manual_run(scheduler, make_job, clock, user):
    """A job's fire at T0 + 30 ms, planned ahead at T0, and a manual run of
    the job (gated: it stays live) that the claim starts at T0 + 10 ms.
    Returns the job, the fire's run and the manual run."""
    job = make_job(next_fire_at=T0 + 30 * MS, handler="test.gate")
    running_pass(scheduler, T0)
    (fire,) = runs_of(job)
    manual, _ = services.run_now(job=job, user=user, now=T0 + 10 * MS)
    running_pass(scheduler, clock.advance(milliseconds=10))  # the claim starts the manual run
    return job, fire, manual


def test_a_fire_within_the_window_is_written_running_from_its_time_and_starts_at_it(
    scheduler, make_job, clock
):
    job = make_job(next_fire_at=T0 + 30 * MS)
    running_pass(scheduler, T0)
    (run,) = runs_of(job)
    assert (run.status, run.worker_id, run.started_at, run.scheduled_at) == (
        "running",
        "node-a",
        T0 + 30 * MS,
        T0 + 30 * MS,
    )
    assert not scheduler.pool.flights and scheduler.starter.held_at == T0 + 30 * MS
    assert scheduler.starter.free_slots == scheduler.pool.free_slots - 1, "it holds a slot"

    clock.advance(milliseconds=29)
    scheduler.hand_off_held()
    assert not scheduler.pool.flights, "never before its time"

    clock.advance(milliseconds=3)  # handed off 2 ms late
    scheduler.hand_off_held()
    assert list(scheduler.pool.flights) == [run.pk]
    drain(scheduler, clock())
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert run.started_at == T0 + 32 * MS, "the time it started, not the time planned"
    job.refresh_from_db()
    assert job.last_fire_at == T0 + 30 * MS and job.next_fire_at == T0 + timedelta(minutes=1)


def test_a_pass_outside_the_running_loop_plans_nothing_ahead(scheduler, make_job):
    job = make_job(next_fire_at=T0 + 30 * MS)
    scheduler.run_pass(T0)
    assert runs_of(job) == []


def test_the_window_is_plan_ahead_long(scheduler, make_job):
    inside = make_job(next_fire_at=T0 + AHEAD)
    outside = make_job(next_fire_at=T0 + AHEAD + MS)
    done = running_pass(scheduler, T0)
    assert [r.scheduled_at for r in runs_of(inside)] == [T0 + AHEAD]
    assert runs_of(outside) == []
    # Planned when its own window opens, not before.
    assert done.next_fire.at == T0 + AHEAD + MS


def test_no_window_plans_each_fire_when_it_is_due(settings, make_scheduler, make_job, clock):
    settings.JOBS_PLAN_AHEAD_MS = 0
    scheduler = make_scheduler(max_workers=4, clock=clock)
    job = make_job(next_fire_at=T0 + MS)
    running_pass(scheduler, T0)
    assert runs_of(job) == []


def test_the_next_pass_plans_a_window_at_a_time():
    # Idle: a fire far off is planned the window before it.
    assert plan_at(T0 + timedelta(seconds=10), T0, AHEAD) == T0 + timedelta(seconds=10) - AHEAD
    # Busy: fires just past the window wait for the next window, so one pass
    # plans many rather than each pass the next one.
    assert plan_at(T0 + AHEAD + 5 * MS, T0, AHEAD) == T0 + AHEAD
    # Inside the window (left for later: no slot, a live run): at its time.
    assert plan_at(T0 + 20 * MS, T0, AHEAD) == T0 + 20 * MS
    assert plan_at(T0 + timedelta(seconds=10), T0, timedelta(0)) == T0 + timedelta(seconds=10)


def test_a_job_with_a_live_run_is_planned_at_its_time(scheduler, make_job, clock, gate_handler):
    job = make_job(next_fire_at=T0, handler="test.gate", cron_expression="* * * * * *")
    running_pass(scheduler, T0)
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0 + 20 * MS)
    done = running_pass(scheduler, clock.advance(milliseconds=1))
    assert len(runs_of(job)) == 1, "the overlap is decided at the fire's time, not ahead"
    assert done.next_fire.at == T0 + 20 * MS
    running_pass(scheduler, clock.advance(milliseconds=19))
    first, second = runs_of(job)
    assert (second.status, second.skip_reason) == ("skipped", "overlap")
    gate_handler.set()
    drain(scheduler, clock())


@pytest.mark.parametrize(
    "fields",
    [{"shards": 3}, {"run_once": True}],
    ids=["sharded", "run-once"],
)
def test_jobs_whose_fire_is_not_one_plain_run_are_planned_at_their_time(scheduler, make_job, fields):
    job = make_job(next_fire_at=T0 + 20 * MS, **fields)
    done = running_pass(scheduler, T0)
    assert runs_of(job) == []
    assert done.next_fire.at == T0 + 20 * MS


def test_fires_ahead_take_only_the_slots_free_and_queued_runs_still_get_a_slot(
    scheduler, make_job, clock, staff_user
):
    ahead = [make_job(next_fire_at=T0 + (10 + i) * MS) for i in range(5)]
    done = running_pass(scheduler, T0)  # four slots
    assert [len(runs_of(job)) for job in ahead] == [1, 1, 1, 1, 0]
    assert done.next_fire.at == T0 + 14 * MS, "the one left is planned at its time"
    assert scheduler.starter.free_slots == 0

    manual = make_job()
    run, _ = services.run_now(job=manual, user=staff_user, now=T0)
    claimed = scheduler.claim_queued(clock.advance(milliseconds=1))
    assert not claimed, "every slot is held"
    assert scheduler.carry.waiting_for_slots, "and the queued run waits for one"

    clock.advance(milliseconds=20)
    scheduler.hand_off_held()
    drain(scheduler, clock())
    running_pass(scheduler, clock())  # the slots are free: the manual run starts
    drain(scheduler, clock())
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert [r.status for job in ahead[:4] for r in runs_of(job)] == ["succeeded"] * 4


def test_a_run_of_the_job_started_since_sends_the_fire_back_to_planning(
    scheduler, make_job, clock, staff_user, gate_handler
):
    job, fire, manual = held_fire_beside_a_manual_run(scheduler, make_job, clock, staff_user)
    assert set(scheduler.pool.flights) == {manual.pk}

    # At its time the fire meets the live run: it is decided again, by the
    # job's overlap policy (skip), as it would have been without planning ahead.
    running_pass(scheduler, clock.advance(milliseconds=20))
    assert not Run.objects.filter(pk=fire.pk).exists()
    scheduled = [r for r in runs_of(job) if r.trigger == "schedule"]
    assert [(r.scheduled_at, r.status, r.skip_reason) for r in scheduled] == [
        (T0 + 30 * MS, "skipped", "overlap")
    ]
    assert set(scheduler.pool.flights) == {manual.pk}
    job.refresh_from_db()
    assert job.last_fire_at == T0 + 30 * MS and job.next_fire_at == T0 + timedelta(minutes=1)
    gate_handler.set()
    drain(scheduler, clock())


def test_an_edit_since_planning_drops_the_fire_sent_back(
    scheduler, make_job, clock, staff_user, gate_handler
):
    job, _fire, _manual = held_fire_beside_a_manual_run(scheduler, make_job, clock, staff_user)
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0 + timedelta(minutes=5), version=job.version + 1)
    running_pass(scheduler, clock.advance(milliseconds=20))
    assert [r.trigger for r in runs_of(job)] == ["manual"]
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(minutes=5), "the edit stands"
    gate_handler.set()
    drain(scheduler, clock())


def test_shutdown_hands_held_runs_back_to_the_queue_due_at_their_time(
    scheduler, make_scheduler, make_job, clock
):
    job = make_job(next_fire_at=T0 + 30 * MS)
    running_pass(scheduler, T0)
    scheduler.drain(grace=0)
    (run,) = runs_of(job)
    assert (run.status, run.worker_id, run.started_at, run.run_after) == ("queued", "", None, T0 + 30 * MS)

    after = make_scheduler(max_workers=4, clock=clock)
    after.run_pass(clock.advance(milliseconds=29))
    assert not after.pool.flights, "not before its time"
    after.run_pass(clock.advance(milliseconds=1))
    drain(after, clock())
    (run,) = runs_of(job)
    assert (run.status, run.started_at) == ("succeeded", T0 + 30 * MS)


def test_a_lost_claim_answer_does_not_requeue_held_runs(scheduler, make_job, clock):
    job = make_job(next_fire_at=T0 + 30 * MS)
    running_pass(scheduler, T0)
    # The pass after a database error requeues what this node marked running
    # and is not executing: not the runs it holds.
    scheduler.run_pass(clock.advance(milliseconds=5), claims_uncertain=True, running=True)
    (run,) = runs_of(job)
    assert run.status == "running"
    clock.advance(milliseconds=25)
    scheduler.hand_off_held()
    drain(scheduler, clock())
    assert [r.status for r in runs_of(job)] == ["succeeded"]


def test_the_setting_is_checked(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from config import settings as config_settings

    for value, message in (("-1", "at least 0"), ("1001", "at most 1000"), ("soon", "JOBS_PLAN_AHEAD_MS")):
        monkeypatch.setenv("JOBS_PLAN_AHEAD_MS", value)
        with pytest.raises(ImproperlyConfigured, match=message):
            config_settings._int("JOBS_PLAN_AHEAD_MS", 50, minimum=0, maximum=1000)


@pytest.mark.slow
def test_a_real_scheduler_never_starts_a_fire_before_its_time(tmp_path, migrated_sqlite):
    """A job every second on a real scheduler process: each fire runs once,
    at or after its time, and is written with the time it really started."""
    site = processes.SqliteSite(tmp_path, migrated_sqlite, "process")
    try:
        site.import_jobs(
            {
                "name": "tick",
                "handler": "demo.echo",
                "schedule_type": "cron",
                "cron_expression": "* * * * * *",
            }
        )
        site.start_scheduler()
        site.wait_for_rows(
            "SELECT scheduled_at, started_at, status FROM jobs_run WHERE status = 'succeeded'",
            lambda rows: len(rows) >= 4,
        )
    finally:
        site.stop_all(sig=signal.SIGTERM, timeout=20)
    rows = site.sql("SELECT scheduled_at, started_at, status FROM jobs_run ORDER BY scheduled_at")
    scheduled = [row[0] for row in rows]
    assert len(scheduled) == len(set(scheduled)), "no fire twice"
    for scheduled_at, started_at, status in rows:
        if status == "succeeded":
            assert datetime.fromisoformat(started_at) >= datetime.fromisoformat(scheduled_at), rows
    assert len(rows) >= 4


def test_each_held_run_starts_at_its_own_time(scheduler, make_job, clock):
    first, second = make_job(next_fire_at=T0 + 30 * MS), make_job(next_fire_at=T0 + 40 * MS)
    running_pass(scheduler, T0)
    clock.advance(milliseconds=35)
    scheduler.hand_off_held()
    assert list(scheduler.pool.flights) == [runs_of(first)[0].pk]
    clock.advance(milliseconds=5)
    scheduler.hand_off_held()
    assert len(scheduler.pool.flights) == 2
    drain(scheduler, clock())
    assert [(r.status, r.started_at) for job in (first, second) for r in runs_of(job)] == [
        ("succeeded", T0 + 35 * MS),
        ("succeeded", T0 + 40 * MS),
    ]


def test_a_fire_that_waits_for_admission_is_planned_at_its_time(scheduler, make_job):
    pools.save_pool(name="one", size=1)
    job = make_job(next_fire_at=T0 + 20 * MS, pool="one")
    done = running_pass(scheduler, T0)
    assert runs_of(job) == []
    assert done.next_fire.at == T0 + 20 * MS


def test_shutdown_within_the_grace_starts_held_runs_at_their_time(make_scheduler, make_job):
    """On the real clock: a run written running before the stop is run as planned."""
    from django.utils import timezone

    scheduler = make_scheduler(max_workers=4, clock=timezone.now)
    fire_at = timezone.now() + 30 * MS
    job = make_job(next_fire_at=fire_at)
    running_pass(scheduler, fire_at - 30 * MS)
    assert scheduler.starter.held
    scheduler.drain(grace=5)
    (run,) = runs_of(job)
    assert run.status == "succeeded" and run.started_at >= fire_at


def test_a_held_run_without_a_slot_at_its_time_goes_back_to_the_queue(scheduler, make_job, clock):
    jobs = [make_job(next_fire_at=T0 + 30 * MS) for _ in range(2)]
    running_pass(scheduler, T0)
    scheduler.pool.size = 1  # a slot the held runs kept is gone (as an abandoned handler's would be)
    clock.advance(milliseconds=30)
    assert scheduler.hand_off_held() is True, "a pass is due for the one requeued"
    assert not scheduler.starter.held and len(scheduler.pool.flights) == 1
    (requeued,), (started,) = sorted((runs_of(job) for job in jobs), key=lambda runs: runs[0].status)
    assert started.status == "running"
    assert (requeued.status, requeued.worker_id, requeued.run_after) == ("queued", "", T0 + 30 * MS)
    drain(scheduler, clock())
    scheduler.pool.size = 4
    running_pass(scheduler, clock())  # the claim starts it
    drain(scheduler, clock())
    assert sorted(r.status for job in jobs for r in runs_of(job)) == ["succeeded", "succeeded"]


def test_a_fire_recorded_meanwhile_is_not_sent_back(scheduler, make_job, clock, staff_user, gate_handler):
    job, fire, _manual = held_fire_beside_a_manual_run(scheduler, make_job, clock, staff_user)
    Run.objects.filter(pk=fire.pk).update(status="cancelled", finished_at=T0 + 20 * MS)
    clock.advance(milliseconds=20)
    scheduler.hand_off_held()
    fire.refresh_from_db()
    assert fire.status == "cancelled"
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(minutes=1), "not due again: its fire is recorded"
    gate_handler.set()
    drain(scheduler, clock())


def test_an_edit_that_keeps_the_schedule_leaves_the_fire_sent_back_to_be_decided(
    scheduler, make_job, clock, staff_user, gate_handler
):
    job, _fire, _manual = held_fire_beside_a_manual_run(scheduler, make_job, clock, staff_user)
    # A save that keeps the schedule: a new version, the same next fire.
    Job.objects.filter(pk=job.pk).update(description="edited", version=job.version + 1)
    running_pass(scheduler, clock.advance(milliseconds=20))
    scheduled = [(r.scheduled_at, r.status, r.skip_reason) for r in runs_of(job) if r.trigger == "schedule"]
    assert scheduled == [(T0 + 30 * MS, "skipped", "overlap")], "decided, not lost"
    gate_handler.set()
    drain(scheduler, clock())


def test_a_database_error_while_sending_a_fire_back_keeps_it_held(
    scheduler, make_job, clock, staff_user, gate_handler, monkeypatch
):
    from django.db import DatabaseError

    job, _fire, _manual = held_fire_beside_a_manual_run(scheduler, make_job, clock, staff_user)
    unplan = scheduler.starter.unplan

    def broken(held):
        raise DatabaseError("connection lost")

    monkeypatch.setattr(scheduler.starter, "unplan", broken)
    clock.advance(milliseconds=20)
    with pytest.raises(DatabaseError):
        scheduler.hand_off_held()
    assert [h.run.scheduled_at for h in scheduler.starter.held] == [T0 + 30 * MS]
    # The pass after the error requeues unconfirmed claims: not this one, and
    # the fire is still sent back, then skipped as an overlap.
    monkeypatch.setattr(scheduler.starter, "unplan", unplan)
    scheduler.run_pass(clock(), claims_uncertain=True, running=True)
    scheduled = [(r.status, r.skip_reason) for r in runs_of(job) if r.trigger == "schedule"]
    assert scheduled == [("skipped", "overlap")]
    assert len(scheduler.pool.flights) == 1, "the fire never ran beside the live run"
    gate_handler.set()
    drain(scheduler, clock())


def test_fires_past_a_full_batch_are_not_slept_past(scheduler, make_job, monkeypatch):
    from jobs.engine import planning

    monkeypatch.setattr(planning, "PLAN_BATCH", 3)
    monkeypatch.setattr(planning.due_jobs, "_compiled", None)  # compiled again with the smaller batch
    for i in range(4):
        make_job(next_fire_at=T0 + (10 + 10 * i) * MS)
    done = running_pass(scheduler, T0)
    assert len(scheduler.starter.held) == 3
    assert done.next_fire.at <= T0 + 40 * MS, "the fourth, which the batch left unread"
    monkeypatch.setattr(planning.due_jobs, "_compiled", None)


def test_a_backfill_run_of_the_job_does_not_send_its_fire_back(scheduler, make_job, clock, gate_handler):
    from jobs import backfills

    job = make_job(next_fire_at=T0 + 30 * MS, handler="test.gate")
    backfills.start_backfill(
        job=job, start=T0 - timedelta(seconds=90), end=T0 - timedelta(seconds=30), now=T0
    )
    for _ in range(3):
        running_pass(scheduler, clock.advance(milliseconds=1))
    (backfilled,) = [r for r in runs_of(job) if r.trigger == "backfill"]
    assert backfilled.pk in scheduler.pool.flights
    assert scheduler.starter.held, "a backfill's run does not hold up its job's schedule"
    clock.advance(milliseconds=30)
    scheduler.hand_off_held()
    (fire,) = [r for r in runs_of(job) if r.trigger == "schedule"]
    assert fire.pk in scheduler.pool.flights
    gate_handler.set()
    drain(scheduler, clock())
