"""jobs.services: manual runs and one-off tasks; saving, pausing, resuming and
deleting jobs."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction

from jobs import refusals, services, tasks
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


def test_run_now_racing_a_run_that_finished_meanwhile_starts_a_new_one(make_job, monkeypatch):
    """The other request's run was live when this one inserted (the unique
    index refused it) and finished before this one looked for it: nothing
    live is left, so this request runs the job instead of failing (a 500)."""
    job = make_job(next_fire_at=T0)
    other = Run.objects.create(job=job, scheduled_at=T0, trigger="manual")
    looks = []
    real = services._live_manual_run

    def live_run(job):
        looks.append(1)
        if len(looks) == 1:
            return None  # looked before the other request inserted its run
        Run.objects.filter(pk=other.pk).update(status=Run.Status.SUCCEEDED)  # and it finished
        return real(job)

    monkeypatch.setattr(services, "_live_manual_run", live_run)
    run, created = services.run_now(job=job)
    assert created and run.pk != other.pk and run.status == Run.Status.QUEUED


def test_manual_run_executes_like_a_fire(make_job, scheduler, clock):
    job = make_job(next_fire_at=T0 + timedelta(hours=1), properties={"a": "1"})
    run, _ = services.run_now(job=job, now=T0)
    scheduler.claim_queued(T0)
    drain(scheduler, clock())
    run.refresh_from_db()
    assert (run.status, run.result) == ("succeeded", "1 properties")


def test_enqueue_returns_the_live_task_for_the_same_key(db):
    first = tasks.enqueue("demo.echo", key="note:42", properties={"n": "1"})
    again = tasks.enqueue("demo.echo", key="note:42", properties={"n": "2"})
    other = tasks.enqueue("demo.echo", key="note:43")
    assert first.pk == again.pk != other.pk
    assert first.trigger == "task" and first.status == "queued"


def test_batch_enqueue_deduplicates_inside_the_batch(db):
    requests = [
        tasks.TaskRequest("demo.echo", "k1"),
        tasks.TaskRequest("demo.echo", "k2"),
        tasks.TaskRequest("demo.echo", "k1"),
    ]
    runs = tasks.enqueue_many(requests)
    assert runs[0].pk == runs[2].pk != runs[1].pk
    assert Run.objects.filter(trigger="task").count() == 2


def test_enqueue_of_an_unknown_handler_is_refused(db):
    with pytest.raises(ValueError, match="not registered"):
        tasks.enqueue("no.such", key="x")
    assert not Run.objects.exists()


def test_finished_task_key_can_be_enqueued_again(make_scheduler, db, clock):
    scheduler = make_scheduler(worker_id="a", max_workers=1, clock=clock)
    task = tasks.enqueue("demo.echo", key="once", properties={"x": "y"})
    scheduler.claim_queued(timezone_now_after(task))
    drain(scheduler, clock())
    task.refresh_from_db()
    assert task.status == "succeeded"
    assert tasks.enqueue("demo.echo", key="once").pk != task.pk


def test_cancelled_queued_task_is_recorded_failed(db):
    task = tasks.enqueue("demo.echo", key="c")
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
    with pytest.raises(refusals.StaleJobError):
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


def test_bulk_pause_leaves_a_job_that_crashed_since_it_was_loaded_crashed_and_says_it_skipped_it(make_job):
    """Whether a job has crashed is pause_job's to judge, on the row as it
    is: the bulk pause asks it instead of reading the loaded job's state."""
    crashed = make_job(name="import-orders")
    fine = make_job(name="billing-sync")
    loaded = list(Job.objects.filter(pk__in=[crashed.pk, fine.pk]).order_by("name"))
    Job.objects.filter(pk=crashed.pk).update(state=Job.State.CRASHED, consecutive_failures=3)
    outcome = services.pause_jobs(jobs=loaded)
    assert [job.name for job in outcome.done] == ["billing-sync"]
    assert [job.name for job in outcome.skipped] == ["import-orders"]
    assert outcome.refused == [] and outcome.unchanged == []
    crashed.refresh_from_db()
    assert crashed.state == Job.State.CRASHED and crashed.consecutive_failures == 3


def test_pausing_a_crashed_job_alone_is_refused_as_crashed(make_job):
    job = make_job(state=Job.State.CRASHED)
    with pytest.raises(refusals.JobCrashed, match="stays crashed until it is re-enabled"):
        services.pause_job(job=job)
    assert Job.objects.get(pk=job.pk).state == Job.State.CRASHED


def test_bulk_resume_leaves_enabled_jobs_unchanged_and_re_enables_crashed_ones(make_job):
    enabled = make_job(name="a")
    crashed = make_job(name="b", state=Job.State.CRASHED, consecutive_failures=2)
    outcome = services.resume_jobs(jobs=[enabled, crashed])
    assert outcome.unchanged == [enabled] and outcome.done == [crashed]
    crashed.refresh_from_db()
    assert (crashed.state, crashed.consecutive_failures) == (Job.State.ENABLED, 0)


def test_bulk_run_skips_a_job_whose_manual_run_is_already_queued(make_job):
    busy, idle = make_job(name="busy", next_fire_at=T0), make_job(name="idle", next_fire_at=T0)
    services.run_now(job=busy)
    outcome = services.run_jobs(jobs=[busy, idle])
    assert outcome.skipped == [busy] and outcome.done == [idle]


def test_bulk_delete_refuses_a_built_in_job_and_deletes_the_rest(make_job):
    builtin, plain = make_job(name="builtin", builtin=True), make_job(name="plain")
    outcome = services.delete_jobs(jobs=[builtin, plain])
    assert outcome.done == [plain]
    assert [(job, "cannot be deleted" in why) for job, why in outcome.refused] == [(builtin, True)]
    assert not Job.objects.get(pk=builtin.pk).is_deleted


@pytest.mark.parametrize("status", [Run.Status.SUCCEEDED, Run.Status.RUNNING, Run.Status.QUEUED])
def test_only_a_run_that_failed_is_retried(make_job, status):
    job = make_job(next_fire_at=T0)
    run = Run.objects.create(job=job, scheduled_at=T0, status=status)
    with pytest.raises(refusals.NotRetryable, match="only a failed run of a job can be retried"):
        services.retry_run(run=run)
    assert job.runs.count() == 1


def test_a_retry_queues_a_manual_run_of_the_job(make_job):
    job = make_job(next_fire_at=T0)
    run = Run.objects.create(job=job, scheduled_at=T0, status=Run.Status.FAILED)
    new, created = services.retry_run(run=run)
    assert created and new.job_id == job.pk and new.trigger == Run.Trigger.MANUAL


def test_a_copy_gets_the_first_copy_name_no_live_job_has(make_job):
    make_job(name="nightly")
    make_job(name="nightly (copy)")
    make_job(name="nightly (copy 2)", deleted_at=T0)
    assert services.clone_name("nightly") == "nightly (copy 2)"
    assert services.clone_name("weekly") == "weekly (copy)"


def test_marking_messages_read_touches_only_the_users_own_unread_ones(viewer_user, superuser):
    from jobs.models import Message

    mine = [Message.objects.create(user=viewer_user, subject=f"m{i}") for i in range(3)]
    theirs = Message.objects.create(user=superuser, subject="theirs")
    assert services.mark_messages_read(user=viewer_user, message_id=theirs.pk) == 0
    assert services.mark_messages_read(user=viewer_user, message_id=mine[0].pk, now=T0) == 1
    assert services.mark_messages_read(user=viewer_user) == 2
    assert services.mark_messages_read(user=viewer_user) == 0
    assert Message.objects.get(pk=mine[0].pk).read_at == T0
    assert Message.objects.get(pk=theirs.pk).read_at is None


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


# -- saves that meet other writers' locks (PostgreSQL) ------------------------------


@pytest.fixture
def other_session(postgres_database, postgres_server):
    """A second session on the test's PostgreSQL database: the scheduler, a
    long import, an SQL job. Its own transaction, never committed unless the
    test does; closed (rolled back) at the end."""
    from tests.fixtures.databases import DATABASE

    conn = postgres_server.connect(DATABASE, autocommit=False)
    conn.execute("SET lock_timeout = '20s'")
    conn.commit()
    yield conn
    conn.close()


def _in_thread(func):
    """Run `func` in a thread (with its own database connection); returns
    (thread, outcome) where outcome gets "result" or "error"."""
    import threading

    from django.db import connection

    outcome = {}

    def target():
        try:
            outcome["result"] = func()
        except Exception as exc:  # reported by the test
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def _wait_for_lock_wait(conn, timeout: float = 30.0) -> None:
    """Until some other session of the database waits for a lock."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        conn.execute("SELECT pg_stat_clear_snapshot()")  # else read once per transaction
        waiting = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        ).fetchone()[0]
        if waiting:
            return
        time.sleep(0.02)
    raise AssertionError("no session waited for a lock")


@pytest.mark.postgres
def test_a_save_that_waits_for_the_graph_lock_too_long_is_answered_busy_and_writes_nothing(
    postgres_database, staff_api, make_job, other_session, monkeypatch
):
    """A long `jobs import` (or an SQL job) holds the graph lock: an edit
    gives up after GRAPH_LOCK_TIMEOUT with a 409, not a wait without end."""
    import threading

    from jobs import workflows

    monkeypatch.setattr(workflows, "GRAPH_LOCK_TIMEOUT", "300ms")
    job = make_job(name="edited")
    other_session.execute("SELECT pg_advisory_xact_lock(%s)", [workflows.GRAPH_LOCK_KEY])
    # Without a timeout the save would wait for good: let go eventually, so
    # that such a save ends (and the test fails) instead of hanging.
    release = threading.Timer(30, other_session.rollback)
    release.start()
    try:
        response = staff_api.patch(f"/api/jobs/{job.pk}", {"description": "changed"})
    finally:
        release.cancel()
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "busy"
    job.refresh_from_db()
    assert job.description != "changed" and job.version == 1


@pytest.mark.postgres
def test_an_edit_does_not_wait_for_a_run_being_inserted_for_the_job(
    postgres_database, make_job, other_session, monkeypatch
):
    """Each new run takes a KEY SHARE lock on its job's row; an edit changes
    no key of the row, so it locks it FOR NO KEY UPDATE and goes ahead."""
    from jobs import workflows

    monkeypatch.setattr(workflows, "GRAPH_LOCK_TIMEOUT", "2s")
    job = make_job(name="busy job")
    # What the foreign key check of a run being inserted for it takes.
    other_session.execute("SELECT 1 FROM jobs_job WHERE id = %s FOR KEY SHARE", [job.pk])
    try:
        job.description = "changed"
        services.save_job(job=job)
    finally:
        other_session.rollback()
    job.refresh_from_db()
    assert job.description == "changed"


@pytest.mark.postgres
def test_a_rename_and_the_scheduler_locking_the_same_jobs_do_not_deadlock(
    postgres_database, make_job, other_session
):
    """The scheduler's claim updates many job rows in one statement: it may
    hold a downstream job while it waits for its upstream. A rename of the
    upstream rewrites the downstream's `after`: it locks both rows in one
    statement in id order, so it never holds the upstream while waiting for
    the downstream, and both finish."""
    from jobs.models import JobDependency

    downstream = make_job(name="downstream")
    upstream = make_job(name="upstream")
    Job.objects.filter(pk=downstream.pk).update(after=[{"job": "upstream", "on": "success"}])
    JobDependency.objects.create(upstream=upstream, downstream=downstream)
    assert downstream.pk < upstream.pk

    other_session.execute("UPDATE jobs_job SET version = version + 1 WHERE id = %s", [downstream.pk])
    upstream.name = "renamed"
    thread, outcome = _in_thread(lambda: services.save_job(job=upstream))
    _wait_for_lock_wait(other_session)
    other_session.execute("UPDATE jobs_job SET version = version + 1 WHERE id = %s", [upstream.pk])
    other_session.commit()
    thread.join(60)

    assert "error" not in outcome, outcome
    downstream.refresh_from_db()
    assert downstream.after == [{"job": "renamed", "on": "success"}]
    assert Job.objects.get(pk=upstream.pk).name == "renamed"


class _Deadlock(Exception):
    sqlstate = "40P01"


def _lose_a_deadlock(monkeypatch):
    """The database picks the save as the loser of a deadlock."""
    from django.db import OperationalError

    from jobs import workflows

    def lock_graph():
        raise OperationalError("deadlock detected") from _Deadlock()

    monkeypatch.setattr(workflows, "lock_graph", lock_graph)


def test_a_save_that_loses_a_deadlock_is_a_conflict_at_every_door(make_job, staff_api, monkeypatch):
    from jobs import imports

    job = make_job(name="contended")
    _lose_a_deadlock(monkeypatch)
    response = staff_api.patch(f"/api/jobs/{job.pk}", {"description": "changed"})
    assert (response.status_code, response.json()["code"]) == (409, "busy")
    with pytest.raises(imports.ImportFailed) as failed:
        imports.apply([{"name": "contended", "handler": "demo.echo", "description": "changed"}])
    assert [(e["job"], e["code"]) for e in failed.value.errors] == [("contended", "busy")]
    job.refresh_from_db()
    assert job.description != "changed" and job.version == 1


def test_an_import_of_a_job_deleted_after_the_file_was_checked_fails_and_saves_nothing(make_job, monkeypatch):
    from jobs import imports

    job = make_job(name="going")
    other = make_job(name="staying")
    planned = imports.plan

    def plan_then_delete(specs, **kwargs):
        out = planned(specs, **kwargs)
        services.delete_job(job=Job.objects.get(pk=job.pk))  # another admin, meanwhile
        return out

    monkeypatch.setattr(imports, "plan", plan_then_delete)
    specs = [
        {"name": "staying", "handler": "demo.echo", "description": "changed"},
        {"name": "going", "handler": "demo.echo", "description": "changed"},
    ]
    with pytest.raises(imports.ImportFailed) as failed:
        imports.apply(specs)
    assert [(e["job"], e["code"]) for e in failed.value.errors] == [("going", "stale_version")]
    assert "deleted" in failed.value.errors[0]["message"]
    other.refresh_from_db()
    assert other.description != "changed"
