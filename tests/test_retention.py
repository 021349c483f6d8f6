"""Retention: the built-in job that deletes old finished runs in batches."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs import refusals, services
from jobs.models import Job, Run
from tests.fixtures.core import T0

pytestmark = pytest.mark.django_db


# -- retention --------------------------------------------------------------------------------


def test_retention_deletes_old_finished_runs_and_keeps_the_rest(make_job, settings):
    from django.utils import timezone

    from jobs.config import set_setting
    from jobs.retention import delete_runs_before

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

    from jobs.models import Alert
    from jobs.retention import delete_runs_before

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

    from jobs import retention

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

    real_delete_runs = retention._delete_runs
    monkeypatch.setattr(retention, "_delete_runs", delete_runs)
    sizes, pauses = [], []
    deleted = retention.delete_runs_before(
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
    assert pauses[:2] == [0.080, retention.PAUSE]


def test_next_batch_size_aims_at_the_budget_within_bounds():
    from jobs.retention import MAX_BATCH, MIN_BATCH, next_batch_size

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

    from jobs.retention import delete_runs_before

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

    from jobs.retention import delete_runs_before

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


def test_retention_job_is_builtin_visible_and_scheduled(make_scheduler, db, clock):
    job = Job.objects.get(builtin=True, handler="cronboard.retention")
    assert job.cron_expression == "0 30 3 * * ?"
    make_scheduler(worker_id="a", clock=clock).schedule_unplanned(T0)
    job.refresh_from_db()
    assert job.next_fire_at == datetime(2026, 3, 3, 3, 30, tzinfo=UTC)
    with pytest.raises(refusals.ServiceError):
        services.delete_job(job=job)


def test_the_retention_log_sums_up_its_batches_with_their_transaction_times(monkeypatch):
    """The summary line `bench retention` reads its figures from."""
    from django.utils import timezone

    from jobs import retention
    from jobs.handlers.base import JobContext
    from jobs.handlers.builtin import Retention

    def delete_runs_before(cutoff, *, should_stop, on_batch):
        for ms in range(200, 0, -1):  # 200 batches that held the lock 200, 199, … 1 ms
            on_batch(10 + ms % 7, ms / 1000)
        return 2000

    monkeypatch.setattr(retention, "delete_runs_before", delete_runs_before)
    now = timezone.now()
    ctx = JobContext(run_id=1, fire_id="f", attempt=1, scheduled_at=now, deadline=now, properties={})
    assert Retention().run(ctx) == "deleted 2000 runs and 0 trend rows"
    assert (
        "200 batches of 10 to 16 runs, aimed at 6 ms each; batch transaction p50 101.0 ms, p99 199.0 ms; "
        "longest batch transaction 200.0 ms"
    ) in ctx.log_text()
