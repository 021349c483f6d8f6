"""The scheduler's hot statements written without building a Django query
each time, checked against what Django itself does, on both databases:
jobs.engine.prepared (a queryset compiled once) and jobs.engine.bulk's
insert_rows (one INSERT for a pass's runs)."""

import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, connections, transaction

from jobs.engine.bulk import insert_rows
from jobs.engine.planning import due_jobs, due_query
from jobs.engine.prepared import Prepared
from jobs.models import Job, Run
from tests.fixtures.core import T0

FIELDS = [field.attname for field in Job._meta.concrete_fields]


def _rows(jobs):
    return [(tuple(getattr(job, name) for name in FIELDS), job.busy, job.following) for job in jobs]


def test_the_prepared_due_query_gives_what_the_queryset_gives(both_databases, make_job):
    busy = make_job(
        next_fire_at=T0,
        properties={"text": "é \u00e9 ✓", "nested": {"n": [1, 2.5, None, True]}},
        sql_write=True,
        last_fire_at=T0 - timedelta(minutes=1),
    )
    Run.objects.create(job=busy, scheduled_at=T0, trigger="schedule", status="running", started_at=T0)
    make_job(next_fire_at=T0 + timedelta(seconds=30), run_once=True)
    make_job(next_fire_at=T0 + timedelta(minutes=5), schedule_type="cron", cron_expression="0 */5 * * * *")
    make_job(next_fire_at=T0 - timedelta(hours=1), state="paused")
    prepared = Prepared(due_query)
    for now in (T0 - timedelta(seconds=1), T0, T0 + timedelta(seconds=30), T0 + timedelta(hours=1)):
        expected = list(due_query(now))
        got = prepared(now)
        assert _rows(got) == _rows(expected), now
        assert all(isinstance(job, Job) and not job._state.adding for job in got)
    got = prepared(T0 + timedelta(seconds=30))
    assert [job.busy for job in got] == [True, False], "the overlap rule's column, as a boolean"
    assert got[0].following == T0 + timedelta(minutes=5)
    assert got[0].properties["nested"] == {"n": [1, 2.5, None, True]}
    assert prepared(T0 + timedelta(hours=1))[0].following is None, "no fire after: None, not a string"


def test_the_due_jobs_of_the_planner_follow_the_connection(both_databases, make_job):
    """Compiled per connection: the same statement on SQLite and PostgreSQL
    would be wrong for one of them (the tests switch Django's default)."""
    make_job(next_fire_at=T0)
    assert [job.next_fire_at for job in due_jobs(T0)] == [T0]
    assert due_jobs._compiled.connection is connections["default"]


def test_a_query_that_ignores_the_time_or_follows_relations_is_refused(db):
    with pytest.raises(ValueError, match="does not use the time"):
        Prepared(lambda now: Job.objects.all())(T0)
    with pytest.raises(ValueError, match="select_related"):
        Prepared(lambda now: Run.objects.filter(run_after__lte=now).select_related("job"))(T0)


def test_insert_rows_writes_what_bulk_create_writes(both_databases, make_job):
    """jobs.engine.bulk.insert_rows: the planner's one INSERT of a pass."""
    job = make_job()

    def runs(offset: timedelta) -> list[Run]:
        return [
            Run(
                job=job,
                fire_id=uuid.uuid4(),
                scheduled_at=T0 + offset + timedelta(seconds=i),
                run_after=T0,
                trigger="schedule",
                status=status,
                started_at=T0 if status == "running" else None,
                properties={"é": [1, None, "\u2713"]} if i else {},
                planned_epoch=7 if i else None,
                created_at=T0,
                **job.run_policy(),
            )
            for i, status in enumerate(["queued", "running", "skipped"])
        ]

    ours, django = runs(timedelta(0)), runs(timedelta(hours=1))
    assert insert_rows(ours) is not None and all(run.pk and not run._state.adding for run in ours)
    Run.objects.bulk_create(django)
    columns = [
        f.attname for f in Run._meta.concrete_fields if f.attname not in ("id", "scheduled_at", "fire_id")
    ]
    stored = {run.pk: run for run in Run.objects.all()}
    assert len(stored) == 6
    for mine, theirs in zip(ours, django, strict=True):
        assert [getattr(stored[mine.pk], c) for c in columns] == [
            getattr(stored[theirs.pk], c) for c in columns
        ]
        assert stored[mine.pk].fire_id == mine.fire_id and stored[mine.pk].scheduled_at == mine.scheduled_at
    assert insert_rows([]) == []


def test_insert_rows_stops_at_the_unique_fire(both_databases, make_job):
    job = make_job()
    run = dict(job=job, scheduled_at=T0, run_after=T0, trigger="schedule", status="queued", created_at=T0)
    insert_rows([Run(**run)])
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows([Run(**run, attempt=2), Run(**run)])
    assert Run.objects.count() == 1, "nothing of the refused statement is written"
