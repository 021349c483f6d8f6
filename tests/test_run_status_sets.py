"""The groups of run statuses that count as "failed", each named on the Run
model for one meaning, and what each door that asks does with them."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs import alerts
from jobs.engine.outcomes import Recorder
from jobs.models import Alert, Job, JobDependency, Run
from jobs.overview import dashboard_figures
from tests.fixtures.core import T0

pytestmark = pytest.mark.django_db

S = Run.Status


def test_each_set_of_failed_statuses_holds_exactly_its_meaning():
    assert set(Run.FAILED_OUTCOMES) == {S.FAILED, S.TIMED_OUT, S.INTERRUPTED}
    assert set(Run.COUNTED_FAILURES) == {S.FAILED, S.TIMED_OUT}
    assert set(Run.AUTO_RETRIED) == {S.FAILED, S.INTERRUPTED}
    assert set(Run.RETRYABLE) == {S.FAILED, S.TIMED_OUT, S.INTERRUPTED, S.CANCELLED}
    every_set = (Run.FAILED_OUTCOMES, Run.COUNTED_FAILURES, Run.AUTO_RETRIED, Run.RETRYABLE)
    assert all(set(group) <= set(Run.FINISHED) - {S.SUCCEEDED, S.SKIPPED} for group in every_set)


def test_the_dashboards_success_rate_counts_a_timed_out_and_an_interrupted_run_as_failed(
    staff_user, make_job
):
    job = make_job()
    now = timezone.now()
    for i, status in enumerate([S.SUCCEEDED, S.TIMED_OUT, S.INTERRUPTED, S.CANCELLED, S.SKIPPED]):
        Run.objects.create(
            job=job, scheduled_at=now - timedelta(minutes=i + 1), trigger="schedule", status=status
        )

    # One success of three failed outcomes; a cancelled or skipped run is neither.
    assert dashboard_figures(staff_user, now=now)["success_rate_24h"] == round(100 / 3, 1)


def test_a_dependency_on_failure_follows_each_failed_outcome_and_on_finish_a_cancellation_too():
    On = JobDependency.On
    assert JobDependency.MATCHES[On.FAILURE] == set(Run.FAILED_OUTCOMES)
    assert JobDependency.MATCHES[On.FINISH] == {S.SUCCEEDED, S.CANCELLED, *Run.FAILED_OUTCOMES}
    assert JobDependency.MATCHES[On.SUCCESS] == {S.SUCCEEDED}


def _running(job, minute, **fields):
    return Run.objects.create(
        job=job,
        scheduled_at=T0 + timedelta(minutes=minute),
        trigger="schedule",
        status="running",
        started_at=T0,
        **fields,
    )


def test_a_timed_out_fire_counts_towards_the_crash_and_an_interrupted_one_does_not(make_job):
    recorder = Recorder(worker_id="node-a", cap=1000)
    job = make_job(alert_threshold=5, consecutive_failures=0)

    recorder.record(_running(job, 0), S.TIMED_OUT, T0, error="slow")
    recorder.record(_running(job, 1), S.FAILED, T0, error="boom")
    recorder.record(_running(job, 2), S.INTERRUPTED, T0, error="node died")
    job.refresh_from_db()

    assert (job.consecutive_failures, job.last_status) == (2, "interrupted")


def test_the_failed_alert_is_written_for_a_counted_failure_only(make_job):
    job = make_job(alert_on=["failed"])
    timed_out, interrupted = (
        Run.objects.create(job=job, scheduled_at=T0 + timedelta(minutes=i), trigger="schedule", status=status)
        for i, status in enumerate((S.TIMED_OUT, S.INTERRUPTED))
    )

    assert alerts.on_failed(job=job, run=timed_out, now=T0) is not None
    assert alerts.on_failed(job=job, run=interrupted, now=T0) is None
    assert list(Alert.objects.values_list("kind", "run")) == [(Alert.Kind.FAILED, timed_out.pk)]


@pytest.mark.parametrize(
    ("status", "retried"), [(S.FAILED, True), (S.INTERRUPTED, True), (S.TIMED_OUT, False)]
)
def test_an_attempt_is_retried_within_its_fire_only_after_an_auto_retried_status(make_job, status, retried):
    recorder = Recorder(worker_id="node-a", cap=1000)
    run = _running(make_job(), 0, max_retries=1)

    recorded = recorder.record(run, status, T0, error="x")

    assert (recorded.queued_at is not None) is retried
    assert Run.objects.filter(attempt=2, fire_id=run.fire_id).exists() is retried


@pytest.mark.parametrize(
    ("status", "offered"), [(S.CANCELLED, True), (S.TIMED_OUT, True), (S.SUCCEEDED, False)]
)
def test_the_console_runs_again_a_retryable_run_only(staff_client, make_job, status, offered):
    job = make_job()
    run = Run.objects.create(job=job, scheduled_at=T0, trigger="schedule", status=status)

    staff_client.post(reverse("jobs:run_retry", args=[run.pk]))

    assert Run.objects.filter(job=job, trigger=Run.Trigger.MANUAL).exists() is offered
    assert Job.objects.get(pk=job.pk).state == Job.State.ENABLED
