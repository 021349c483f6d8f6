from io import StringIO

from django.core.management import call_command

from tests.fixtures.databases import query_plan


def test_migrations_match_models(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=StringIO())
    # --check exits non-zero (SystemExit) when a migration is missing.


def test_runs_of_a_job_are_found_through_the_history_index_not_an_index_of_their_own(db):
    from django.db import connection

    from jobs.models import Run

    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, Run._meta.db_table)
    job_first = {
        name: spec["columns"]
        for name, spec in indexes.items()
        if spec["index"] and spec["columns"][:1] == ["job_id"]
    }
    # No index on job_id alone: it would be a fifth index entry to write on
    # every insert and delete of a run, for lookups the history index serves.
    own = [
        name for name, columns in job_first.items() if columns == ["job_id"] and not indexes[name]["unique"]
    ]
    assert not own, job_first
    assert "run_history_idx" in job_first
    if connection.vendor == "sqlite":
        plan = " ".join(query_plan(Run.objects.filter(job_id=1).values("id")))
        assert "USING" in plan and "INDEX" in plan and "(job_id=?)" in plan, plan


def _index_sql(connection, name: str) -> str:
    query = (
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = %s"
        if connection.vendor == "sqlite"
        else "SELECT indexdef FROM pg_indexes WHERE indexname = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(query, [name])
        row = cursor.fetchone()
    return row[0] if row else ""


def test_runs_index_their_upstream_run_and_their_user_only_when_they_have_one(both_databases):
    """Most runs have neither an upstream run nor a user who started them: the
    indexes on those foreign keys hold only the runs that have one (an insert
    writes no entry), and the lookups that need them (a run's downstream
    runs; the SET NULL when a run or a user is deleted) use them."""
    from django.db import connection

    from jobs.models import Run

    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, Run._meta.db_table)
    on = {
        column: sorted(
            name for name, spec in indexes.items() if spec["index"] and spec["columns"] == [column]
        )
        for column in ("caused_by_id", "created_by_id")
    }
    assert on == {"caused_by_id": ["run_caused_by_idx"], "created_by_id": ["run_created_by_idx"]}, on
    for name, column in (("run_caused_by_idx", "caused_by_id"), ("run_created_by_idx", "created_by_id")):
        condition = _index_sql(connection, name).replace('"', "").partition(" WHERE ")[2]
        assert condition.strip("()") == f"{column} IS NOT NULL", (name, condition)
    downstream = " ".join(query_plan(Run.objects.filter(caused_by_id=7).values("id")))
    set_null = " ".join(
        query_plan("UPDATE jobs_run SET created_by_id = NULL WHERE created_by_id IN (%s, %s)", (1, 2))
    )
    assert "run_caused_by_idx" in downstream, downstream
    assert "run_created_by_idx" in set_null, set_null


def test_a_runs_fire_id_has_no_index_of_its_own(both_databases):
    """No query looks runs up by their fire id (it is the handlers'
    idempotency key): an index on it cost every run's insert an entry at a
    random place. Migration 0017 drops it by name on both databases."""
    from django.db import connection

    from jobs.models import Run

    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, Run._meta.db_table)
    on_fire_id = [name for name, spec in indexes.items() if "fire_id" in spec["columns"]]
    assert on_fire_id == [], on_fire_id


def test_the_runs_text_search_triggers_survive_every_migration(db):
    """SQLite rebuilds a table for some changes (a foreign key added, a
    constraint swapped) and a rebuilt table loses its triggers: after every
    migration, the three that keep the runs' FTS5 index (0029) are there."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'jobs_run'")
        triggers = {name for (name,) in cursor.fetchall()}
    assert {"jobs_run_fts_insert", "jobs_run_fts_delete", "jobs_run_fts_update"} <= triggers
