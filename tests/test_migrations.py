from io import StringIO

from django.core.management import call_command


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
        sql, params = Run.objects.filter(job_id=1).values("id").query.sql_with_params()
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = " ".join(str(row) for row in cursor.fetchall())
        assert "USING" in plan and "INDEX" in plan and "(job_id=?)" in plan, plan
