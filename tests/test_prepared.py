"""The scheduler's hot statements written without building a Django query
each time, checked against what Django itself does, on both databases:
jobs.engine.prepared (a queryset compiled once) and jobs.engine.bulk's
insert_rows (one INSERT for a pass's runs)."""

import uuid
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.functional import lazystr

from jobs.engine.bulk import insert_rows, preparer, with_literals
from jobs.engine.planning import due_jobs, due_query
from jobs.engine.prepared import MARKER, Prepared
from jobs.models import Job, Run
from tests.fixtures.core import T0

FIELDS = [field.attname for field in Job._meta.concrete_fields]


def _rows(jobs):
    """Each job's values with their types (True == 1, but a boolean column reads as a boolean)."""
    return [
        [
            (value, type(value))
            for value in (*(getattr(job, name) for name in FIELDS), job.busy, job.following)
        ]
        for job in jobs
    ]


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


def test_on_sqlite_the_prepared_due_query_binds_only_the_time(db, make_job):
    """SQLite prepares a statement again on each execution when a bound value
    might change its plan (it checks the job's state against the partial
    indexes): the constants are written into the statement, only the time
    is bound, and the rows are the queryset's."""
    make_job(next_fire_at=T0)
    make_job(next_fire_at=T0, state="paused")
    prepared = Prepared(due_query)
    assert [job.next_fire_at for job in prepared(T0)] == [T0]
    compiled = prepared._compiled
    marker = connections["default"].ops.adapt_datetimefield_value(MARKER)
    assert compiled.params == [marker, marker] and compiled.slots == [0, 1]
    assert "\"state\" = 'enabled'" in compiled.sql


def test_with_literals_writes_constants_and_keeps_the_rest_bound():
    sql, params, kept = with_literals(
        "SELECT 1 FROM t WHERE a = %s AND b LIKE '50%%' AND c = %s AND d = %s AND e = %s AND f = %s AND g = %s",
        ["it's", "2026-01-01", 7, True, None, "100%"],
        keep=[1],
    )
    assert sql == (
        "SELECT 1 FROM t WHERE a = 'it''s' AND b LIKE '50%%' AND c = %s AND d = 7 AND e = 1 "
        "AND f = %s AND g = '100%%'"
    )
    assert params == ["2026-01-01", None] and kept == [0]
    with pytest.raises(ValueError, match="2 parameters for 1 placeholders"):
        with_literals("SELECT %s", [1, 2])


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


def _values_for(field) -> list:
    """Values a field may be given: the types the scheduler writes, and
    others that must take the field's own way."""
    kind = (field.target_field if field.is_relation else field).get_internal_type()
    berlin = ZoneInfo("Europe/Berlin")
    common = [None]
    if kind == "DateTimeField":
        return [*common, T0, T0.astimezone(berlin), T0 + timedelta(microseconds=7), T0.isoformat()]
    if kind == "UUIDField":
        return [*common, uuid.UUID(int=5), str(uuid.UUID(int=6))]
    if kind in ("CharField", "TextField"):
        return [*common, "", "é \u2713 text", 5, lazystr("lazy")]
    if kind == "BooleanField":
        return [*common, True, False, 1, 0]
    if kind == "JSONField":
        return [*common, {}, {"é": [1, 2.5, None, True, "\u2713"]}, [1, "a"], "text", 5]
    return [*common, 0, 7, 2**40, "12", True]  # integers and keys


def _comparable(value):
    if hasattr(value, "obj") and hasattr(value, "dumps"):  # psycopg's Jsonb wrapper
        return ("Jsonb", value.obj)
    return (type(value).__name__, value)


@pytest.mark.parametrize("save", [True, False], ids=["insert", "update"])
@pytest.mark.parametrize("model", [Run, Job], ids=["run", "job"])
def test_values_are_prepared_as_each_field_prepares_them(both_databases, model, save):
    """jobs.engine.bulk's preparers against the fields' own get_db_prep_save
    (inserts) and get_db_prep_value (updates), for every field of the two
    tables the scheduler writes, on both databases."""
    from django.db import connection

    conn = connections["default"]
    checked = 0
    for field in model._meta.concrete_fields:
        if field.primary_key and save:
            continue
        name = "pk" if field.primary_key else field.name
        prep = preparer(model, [name], save=save)
        for value in _values_for(field):
            if field.primary_key and value is None:
                continue
            try:
                expected = (
                    field.get_db_prep_save(value, conn) if save else field.get_db_prep_value(value, conn)
                )
            except (TypeError, ValueError, ValidationError) as exc:
                with pytest.raises(type(exc)):
                    prep.values([value])
                continue
            assert _comparable(prep.values([value])[0]) == _comparable(expected), (field.name, value)
            checked += 1
    assert checked > 5 * len(model._meta.concrete_fields)
    assert connection.vendor in ("sqlite", "postgresql")


@pytest.mark.postgres
def test_the_cluster_claim_takes_what_the_orm_would_read_and_marks_it(postgres_database, make_job):
    """jobs.engine.starting's one-statement claim on PostgreSQL:
    the oldest queued runs due by the database's clock up to the limit,
    marked running on this node,
    each read back as `select_related("job")` reads it (its job cached, a
    task's None), oldest first; later, running and finished runs untouched."""
    from jobs.engine.starting import ClusterClaim

    job = make_job(properties={"é": [1, None, "\u2713"]}, last_fire_at=T0)
    other = make_job()

    def queued(**fields):
        return Run.objects.create(
            **{"job": job, "scheduled_at": T0, "trigger": "manual", "status": "queued", **fields}
        )

    second = queued(run_after=T0 - timedelta(seconds=1), trigger="schedule", properties={"x": 1})
    first = queued(run_after=T0 - timedelta(seconds=2), job=other, trigger="schedule")
    task = queued(run_after=T0 - timedelta(seconds=1), job=None, trigger="task", handler="demo.echo")
    fourth = queued(run_after=T0, trigger="schedule", scheduled_at=T0 + timedelta(seconds=1))
    later = queued(
        run_after=timezone.now() + timedelta(hours=1),  # not due by the database's clock
        trigger="schedule",
        scheduled_at=T0 + timedelta(seconds=2),
    )
    running = queued(
        status="running",
        run_after=T0 - timedelta(hours=1),
        trigger="schedule",
        scheduled_at=T0 - timedelta(hours=1),
    )
    started = timezone.now() + timedelta(seconds=30)  # the node's estimate, ahead of the database's
    claim = ClusterClaim()

    got = claim(3, worker_id="node-x", started=started)

    assert [run.pk for run in got] == [first.pk, second.pk, task.pk], "oldest first, up to the limit"
    stored = {run.pk: run for run in Run.objects.select_related("job").filter(pk__in=[r.pk for r in got])}
    for run in got:
        mine, theirs = [
            [getattr(r, f.attname) for f in Run._meta.concrete_fields] for r in (run, stored[run.pk])
        ]
        assert mine == theirs
        assert (run.status, run.worker_id, run.started_at, run.heartbeat_at) == (
            "running",
            "node-x",
            started,
            started,
        )
        assert not run._state.adding
    with CaptureQueriesContext(connections["default"]) as queries:
        jobs_read = [run.job for run in got]
    assert not queries, "each run's job came with it"
    assert jobs_read[2] is None
    for read in jobs_read[:2]:
        assert [getattr(read, f.attname) for f in Job._meta.concrete_fields] == [
            getattr(Job.objects.get(pk=read.pk), f.attname) for f in Job._meta.concrete_fields
        ]
    assert got[1].job.properties == {"é": [1, None, "\u2713"]} and got[1].properties == {"x": 1}
    assert {r.pk: r.status for r in Run.objects.filter(pk__in=[fourth.pk, later.pk, running.pk])} == {
        fourth.pk: "queued",
        later.pk: "queued",
        running.pk: "running",
    }
    # An estimate behind the database's clock: the run starts by the
    # database's, never before the time that found it due.
    before = timezone.now()
    (got_fourth,) = claim(5, worker_id="node-y", started=T0)
    assert got_fourth.pk == fourth.pk
    assert got_fourth.started_at == got_fourth.heartbeat_at >= before
    assert Run.objects.get(pk=fourth.pk).started_at == got_fourth.started_at
    assert claim(5, worker_id="node-y", started=started) == []


def test_the_engines_statements_are_seen_by_whoever_watches_and_keep_djangos_checks(both_databases, make_job):
    """jobs.engine.bulk.fetch sends SQLite statements to the driver itself,
    but not while statements are captured (tests, DEBUG's log, execute
    wrappers), and errors and a broken transaction come as Django's."""
    from django.db.transaction import TransactionManagementError

    job = make_job()
    run = dict(job=job, scheduled_at=T0, run_after=T0, trigger="schedule", status="queued", created_at=T0)
    with CaptureQueriesContext(connections["default"]) as queries:
        insert_rows([Run(**run)])
    assert [q["sql"] for q in queries if q["sql"].startswith('INSERT INTO "jobs_run"')], (
        queries.captured_queries
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows([Run(**run)])  # the same fire again
    with transaction.atomic():
        transaction.set_rollback(True)
        with pytest.raises(TransactionManagementError):
            insert_rows([Run(**run, attempt=2)])
    assert Run.objects.count() == 1
