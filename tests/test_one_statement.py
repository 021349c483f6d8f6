"""Two writes of a pass as one statement on PostgreSQL, each what the two
statements in one transaction wrote, in one round trip; SQLite keeps the
two: the claims of the due fires and the INSERT of their runs
(jobs.engine.claims, bulk.update_then_insert), and a batch of successes'
runs and jobs (outcomes.Recorder.record_batch, bulk.update_then_update)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.engine import planning
from jobs.engine.bulk import update_then_insert, update_then_update
from jobs.engine.execution.pool import Outcome
from jobs.engine.outcomes import Recorder
from jobs.engine.planning import Planner
from jobs.models import Job, Run
from tests.fixtures.core import T0

STEP = timedelta(seconds=5)


def _interval_job(make_job, **fields):
    job = make_job(schedule_type="interval", cron_expression="", interval_seconds=5, **fields)
    Job.objects.filter(pk=job.pk).update(next_fire_at=T0, last_fire_at=T0 - STEP)
    job.refresh_from_db()
    return job


def _planner() -> Planner:
    return Planner(
        worker_id="node-a", clustered=False, misfire_threshold=timedelta(minutes=1), clock=lambda: T0
    )


def _writes(queries) -> list[str]:
    return [q["sql"] for q in queries if "INSERT" in q["sql"] or "UPDATE" in q["sql"]]


def test_a_pass_claims_and_writes_its_runs_in_one_statement_on_postgresql(
    both_databases, make_job, monkeypatch
):
    """Three due jobs, one of them edited since the due query read it: the
    two others are claimed and get their runs (a sharded one all three), in
    one statement on PostgreSQL; the edited one gets none and stays due."""
    plain, sharded, edited = (
        _interval_job(make_job),
        _interval_job(make_job, shards=3),
        _interval_job(make_job),
    )
    due = planning.due_jobs(T0)
    assert [job.pk for job in due] == [plain.pk, sharded.pk, edited.pk]
    Job.objects.filter(pk=edited.pk).update(version=edited.version + 1)
    monkeypatch.setattr(planning, "due_jobs", lambda now: due)

    with CaptureQueriesContext(connection) as queries:
        planned = _planner().plan_due(T0, epoch=None, free_slots=0)

    writes = _writes(queries)
    if both_databases == "postgres":
        assert len(writes) == 1, writes
        assert "UPDATE" in writes[0] and "INSERT" in writes[0]
    else:
        assert len(writes) == 2, writes
    stored = {run.pk: run for run in Run.objects.all()}
    assert sorted(planned.queued) == sorted(stored), "the ids planning holds are the rows written"
    assert [(run.job_id, run.shard_index) for run in planned.written] == [
        (plain.pk, 0),
        (sharded.pk, 0),
        (sharded.pk, 1),
        (sharded.pk, 2),
    ]
    for run in planned.written:
        row = stored[run.pk]
        assert (row.job_id, row.shard_index, row.shard_total, row.status, row.scheduled_at) == (
            run.job_id,
            run.shard_index,
            run.shard_total,
            "queued",
            T0,
        )
    moved = dict(
        Job.objects.filter(pk__in=[plain.pk, sharded.pk, edited.pk]).values_list("pk", "next_fire_at")
    )
    assert moved == {plain.pk: T0 + STEP, sharded.pk: T0 + STEP, edited.pk: T0}
    assert planned.next_fire is None, "a refused claim: the next fire is asked for"


def test_a_fire_whose_run_exists_is_replanned_alone_and_the_others_go_through(both_databases, make_job):
    """The unique row stops the one statement as a whole: planning redoes the
    jobs one by one, the others get their runs, the duplicate's job moves on."""
    done, fresh = _interval_job(make_job), _interval_job(make_job)
    Run.objects.create(job=done, scheduled_at=T0, trigger="schedule", status="succeeded", finished_at=T0)

    _planner().plan_due(T0, epoch=None, free_slots=0)

    assert list(Run.objects.filter(job=done).values_list("status", flat=True)) == ["succeeded"]
    assert list(Run.objects.filter(job=fresh).values_list("scheduled_at", "status")) == [(T0, "queued")]
    assert set(Job.objects.filter(pk__in=[done.pk, fresh.pk]).values_list("next_fire_at", flat=True)) == {
        T0 + STEP
    }


def test_update_then_insert_inserts_only_the_rows_whose_update_moved(both_databases, make_job):
    if both_databases != "postgres":
        with pytest.raises(ValueError, match="PostgreSQL"):
            update_then_insert(Job, [(1, 1)], [], key="job", assign=["version"])
        return
    jobs = [make_job(next_fire_at=T0) for _ in range(3)]
    rows = [(job.pk, job.version if job is not jobs[1] else job.version + 7, job.version + 1) for job in jobs]
    runs = [
        Run(job=job, scheduled_at=T0 + timedelta(seconds=n), trigger="schedule")
        for job in jobs
        for n in (0, 1)
    ]

    changed, inserted = update_then_insert(Job, rows, runs, key="job", match=["version"], assign=["version"])

    assert changed == {jobs[0].pk, jobs[2].pk}
    assert inserted == [run for run in runs if run.job_id != jobs[1].pk]
    assert all(run.pk and not run._state.adding for run in inserted)
    assert all(run.pk is None for run in runs if run.job_id == jobs[1].pk)
    assert sorted(Run.objects.values_list("pk", "job_id", "scheduled_at")) == sorted(
        (run.pk, run.job_id, run.scheduled_at) for run in inserted
    )
    assert update_then_insert(Job, rows[:1], [], key="job", match=["version"], assign=["version"]) == (
        set(),
        [],
    )


def test_a_batch_of_successes_writes_its_runs_and_jobs_in_one_statement_on_postgresql(
    both_databases, make_job
):
    """Two running runs succeed and one was swept meanwhile: the two and
    their jobs are written (one statement on PostgreSQL), the swept run and
    its job stay as they were."""
    jobs = [make_job() for _ in range(3)]
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(consecutive_failures=2, last_status="failed")
    runs = [
        Run.objects.create(job=job, scheduled_at=T0, trigger="schedule", status="running", started_at=T0)
        for job in jobs
    ]
    Run.objects.filter(pk=runs[2].pk).update(status="interrupted", finished_at=T0)
    items = [(run, Outcome(run.pk, "succeeded", result=f"r{n}")) for n, run in enumerate(runs)]

    with CaptureQueriesContext(connection) as queries:
        recorded = Recorder(worker_id="node-a", cap=1000).record_batch(items, T0 + STEP)

    writes = _writes(queries)
    assert len(writes) == (1 if both_databases == "postgres" else 2), writes
    assert recorded.written == 2
    stored = {run.pk: run for run in Run.objects.all()}
    assert [(stored[run.pk].status, stored[run.pk].result) for run in runs] == [
        ("succeeded", "r0"),
        ("succeeded", "r1"),
        ("interrupted", ""),
    ]
    assert [
        Job.objects.filter(pk=job.pk).values_list("last_status", "consecutive_failures").get() for job in jobs
    ] == [("succeeded", 0), ("succeeded", 0), ("failed", 2)]


def test_update_then_update_updates_only_what_the_first_update_points_at(both_databases, make_job):
    if both_databases != "postgres":
        with pytest.raises(ValueError, match="PostgreSQL"):
            update_then_update(
                Run, [(1, "x")], Job, [], key="job", assign=["status"], then_assign=["version"]
            )
        return
    jobs = [make_job() for _ in range(2)]
    runs = [
        Run.objects.create(job=job, scheduled_at=T0, trigger="schedule", status="running") for job in jobs
    ]
    changed, then_changed = update_then_update(
        Run,
        [(runs[0].pk, "running", "failed"), (runs[1].pk, "queued", "failed")],
        Job,
        [(job.pk, 41) for job in jobs],
        key="job",
        match=["status"],
        assign=["status"],
        then_assign=["version"],
        then_returning=['"jobs_job"."name"'],
    )
    assert changed == {runs[0].pk}
    assert then_changed == {jobs[0].pk: (jobs[0].name,)}
    assert list(Job.objects.order_by("pk").values_list("version", flat=True)) == [41, jobs[1].version]
    assert update_then_update(Run, [], Job, [], key="job", assign=["status"], then_assign=["version"]) == (
        set(),
        {},
    )
