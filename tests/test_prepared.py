"""jobs.engine.prepared: a queryset compiled once gives the rows the queryset
itself gives, on both databases, whatever time it is called with."""

from datetime import timedelta

import pytest
from django.db import connections

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
