"""What a read-only SQL job may not do beyond its own transaction (issue 14,
finding 2), on the real PostgreSQL server: run programs, touch server files,
signal other sessions, reload the configuration; and the loud warnings about
a powerful SQL role at start-up and on the settings page."""

import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.handlers.base import HandlerError, JobContext
from jobs.handlers.sql import SqlJobHandler, read_only_problem, role_warnings
from tests.fixtures.processes import copy_sqlite

REPO = Path(__file__).resolve().parent.parent


def run_sql(sql: str, *, write: bool = False) -> str:
    now = timezone.now()
    ctx = JobContext(
        run_id=1,
        fire_id="fire-1",
        attempt=1,
        scheduled_at=now,
        deadline=now + timedelta(seconds=20),
        properties={"sql": sql},
    )
    ctx.sql_write = write
    return SqlJobHandler().run(ctx)


# -- the text check, without a database ---------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "COPY (SELECT 1) TO PROGRAM 'id > /tmp/x'",
        "copy t from program 'cat /etc/passwd'",
        "COPY t TO '/tmp/t.csv'",
        "COPY (SELECT 'to stdout') TO '/tmp/t.csv'",
        "COPY t FROM '/etc/passwd'",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity",
        "SELECT pg_catalog.pg_cancel_backend(42)",
        'SELECT "pg_reload_conf"()',
        "select PG_READ_FILE('/etc/passwd')",
        "SELECT pg_read_binary_file('postgresql.conf')",
        "SELECT * FROM pg_ls_dir('.')",
        "SELECT lo_export(1, '/tmp/x')",
        "SELECT lo_import('/etc/passwd')",
        "SELECT pg_rotate_logfile()",
        "SELECT pg_notify('cronboard_jobs', '')",
        "SELECT query_to_xml('select pg_' || 'terminate_backend(1)', true, false, '')",
        "SELECT ts_stat('select 1')",
        "DO $$ BEGIN PERFORM 1; END $$",
        "EXECUTE stmt",
        "CALL proc()",
        "SELECT U&\"pg\\005fread_file\"('x')",
    ],
)
def test_read_only_jobs_may_not_act_outside_their_transaction(sql):
    assert read_only_problem(sql) is not None


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM pg_stat_activity",
        "COPY (SELECT 1) TO STDOUT WITH (FORMAT csv)",
        "SELECT 1 -- pg_terminate_backend in a comment",
        "SELECT backend_pid_note FROM t",
        "WITH x AS (SELECT 1) SELECT * FROM x",
    ],
)
def test_ordinary_reads_are_fine(sql):
    assert read_only_problem(sql) is None


# -- on the real server ----------------------------------------------------------------


@pytest.fixture
def pg(postgres_server, settings):
    postgres_server.create_database("readonly")
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = postgres_server.database_settings("readonly")
    return postgres_server


@pytest.mark.postgres
def test_copy_to_program_does_not_run(pg, tmp_path):
    marker = Path("/tmp") / f"cronboard-{uuid.uuid4().hex}"
    with pytest.raises(HandlerError, match="program"):
        run_sql(f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'")
    assert not marker.exists()
    # The premise: the superuser role would have run it had it been allowed.
    run_sql(f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'", write=True)
    assert marker.exists()
    marker.unlink()


@pytest.mark.postgres
def test_signalling_other_sessions_is_refused_and_they_live_on(pg):
    with pg.connect("readonly", application_name="cronboard-victim") as victim:
        for sql in (
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'cronboard-victim'",
            "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'cronboard-victim'",
        ):
            with pytest.raises(HandlerError, match="refused"):
                run_sql(sql)
        assert victim.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    ["SELECT pg_reload_conf()", "SELECT pg_read_file('postgresql.conf')", "SELECT * FROM pg_ls_dir('.')"],
)
def test_server_configuration_and_files_are_out_of_reach(pg, sql):
    with pytest.raises(HandlerError, match="refused"):
        run_sql(sql)


@pytest.mark.postgres
def test_ordinary_reads_still_run(pg):
    assert run_sql("SELECT count(*) FROM pg_stat_activity") == "1 row"


@pytest.mark.postgres
def test_saving_such_a_job_is_refused_over_the_api(pg, superuser_api):
    body = {
        "name": "sneaky",
        "kind": "sql",
        "handler": "",
        "cron_expression": "0 0 3 * * *",
        "properties": {"sql": "COPY (SELECT 1) TO PROGRAM 'id > /tmp/x'"},
    }
    response = superuser_api.post("/api/jobs", body)
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("invalid", "properties.sql")
    write = superuser_api.post("/api/jobs", {**body, "name": "admin-export", "sql_write": True})
    assert write.status_code == 201, write.content


# -- warnings about the role -----------------------------------------------------------


@pytest.mark.postgres
def test_a_superuser_role_is_warned_about(pg):
    warnings = role_warnings()
    assert any("SUPERUSER" in w for w in warnings), warnings


@pytest.mark.postgres
def test_roles_with_server_powers_are_warned_about(pg, settings):
    with pg.connect("readonly") as conn:
        conn.execute("DROP ROLE IF EXISTS cb_signaller")
        conn.execute("DROP ROLE IF EXISTS cb_reader")
        conn.execute("CREATE ROLE cb_signaller LOGIN")
        conn.execute("GRANT pg_signal_backend, pg_read_server_files TO cb_signaller")
        conn.execute("CREATE ROLE cb_reader LOGIN")
    try:
        settings.JOBS_SQL_DATABASE = {**pg.database_settings("readonly"), "USER": "cb_signaller"}
        warnings = role_warnings()
        assert len(warnings) == 1 and "pg_read_server_files, pg_signal_backend" in warnings[0], warnings
        settings.JOBS_SQL_DATABASE = {**pg.database_settings("readonly"), "USER": "cb_reader"}
        assert role_warnings() == []
    finally:
        with pg.connect("readonly") as conn:
            conn.execute("DROP ROLE cb_signaller")
            conn.execute("DROP ROLE cb_reader")


def test_no_warnings_when_sql_jobs_are_off(settings):
    settings.JOBS_SQL_ENABLED = False
    assert role_warnings() == []


@pytest.mark.postgres
def test_the_settings_page_shows_the_warning(pg, staff_client):
    html = staff_client.get("/settings/").content.decode()
    assert "sql-role-warning" in html and "SUPERUSER" in html


@pytest.mark.postgres
@pytest.mark.slow
def test_the_scheduler_warns_at_start_up(pg, migrated_sqlite, tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("JOBS_", "DATABASE_URL"))},
        "DATABASE_URL": copy_sqlite(migrated_sqlite, tmp_path / "db.sqlite3"),
        "JOBS_SQL_ENABLED": "true",
        "JOBS_SQL_DATABASE_URL": pg.url("readonly"),
    }

    def manage(*args):
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    started = manage("runscheduler", "--once")
    assert started.returncode == 0, started.stderr
    assert "WARNING: SQL jobs run as postgres, a SUPERUSER" in started.stderr
