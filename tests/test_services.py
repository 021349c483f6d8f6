"""jobs.services: manual runs and one-off tasks; saving, pausing, resuming and
deleting jobs."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction

from jobs import services
from jobs.models import Job, Run
from tests.fixtures.core import T0, drain, runs_of

pytestmark = pytest.mark.django_db


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
    drain(scheduler, clock())
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


def test_finished_task_key_can_be_enqueued_again(make_scheduler, db, clock):
    scheduler = make_scheduler(worker_id="a", max_workers=1, clock=clock)
    task = services.enqueue("demo.echo", key="once", properties={"x": "y"})
    scheduler.claim_queued(timezone_now_after(task))
    drain(scheduler, clock())
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
    job = make_job(next_fire_at=T0 + timedelta(minutes=30), consecutive_failures=2)
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
