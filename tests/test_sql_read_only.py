"""What a read-only SQL job may not do beyond reading what it is meant to.

On the real PostgreSQL server: run programs, touch server files, signal
other sessions, reload the configuration, write through CTEs or functions,
lift its own read-only transaction. The text check is an early warning that
comments and empty statements must not blind; the guarantee is the role's
(no superuser, no server powers: refused at save and before every run) and
the transaction's, so the attacks are also tried with the text check off.
The loud warnings about a powerful role at start-up and on the settings page.

On SQLite: the file opened read-only, and the tables that hold sessions,
users, tokens and secrets out of reach through any route SQLite has (views,
subqueries, CTEs, pragmas), as sqlite3's authorizer enforces."""

import os
import re
import sqlite3
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from jobs.handlers.base import HandlerError, JobContext
from jobs.handlers.sql import SqlJobHandler, read_only_problem, role_warnings, validate_sql_properties
from tests.fixtures.core import T0, drain
from tests.fixtures.databases import default_database
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


@pytest.fixture
def without_text_check(monkeypatch):
    """The text check blinded, as a check that misses a spelling would be:
    what is refused then is refused by the database."""
    monkeypatch.setattr("jobs.handlers.sql.read_only_problem", lambda sql: None)


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
        # Cronboard's graph lock is an advisory lock: holding it stops every save.
        "SELECT pg_advisory_lock(3580668139898189876), pg_sleep(3600)",
        "SELECT pg_advisory_xact_lock(1)",
        "select PG_TRY_ADVISORY_XACT_LOCK_SHARED(1, 2)",
        "SELECT pg_try_advisory_lock(1)",
        "SELECT query_to_xml('select pg_' || 'terminate_backend(1)', true, false, '')",
        "SELECT ts_stat('select 1')",
        "DO $$ BEGIN PERFORM 1; END $$",
        "EXECUTE stmt",
        "CALL proc()",
        "SELECT U&\"pg\\005fread_file\"('x')",
        # PostgreSQL nests block comments and skips empty statements.
        "/* /* */ */ DO $$BEGIN EXECUTE 'COPY (SELECT 1) TO PROG' || 'RAM ''id'''; END$$",
        "/* a /* b */ c */ COPY (SELECT 1) TO PROGRAM 'id'",
        ";DO $$BEGIN EXECUTE 'SELECT pg_' || 'terminate_backend(1)'; END$$",
        "; ;\n; COPY (SELECT 1) TO PROGRAM 'id'",
        "/**/;/* /* */ ; */ EXECUTE stmt",
        "-- DO\n;CALL proc()",
        "/* /* */ SELECT 1; */ DO $$ $$",
        "SELECT $q$ -- $q$, pg_read_file('x')",
        "SELECT E'\\' -- ', pg_read_file('x')",
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
        "; SELECT 1",
        "/* /* DO */ pg_read_file() */ SELECT 1 -- EXECUTE",
        "COPY (SELECT 1) /* TO PROGRAM */ TO STDOUT",
    ],
)
def test_ordinary_reads_are_fine(sql):
    assert read_only_problem(sql) is None


# -- on the real server ----------------------------------------------------------------


@pytest.fixture
def pg(postgres_server, settings):
    """A database with a table t of three rows, and SQL jobs pointed at it
    as a least-privilege role (which may write t: only the read-only
    transaction stops a read-only job from doing so)."""
    postgres_server.create_database("readonly")
    with postgres_server.connect("readonly") as conn:
        conn.execute("CREATE TABLE t (x integer)")
        conn.execute("INSERT INTO t VALUES (1), (2), (3)")
        conn.execute("CREATE SEQUENCE s")
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = postgres_server.create_role("readonly")
    return postgres_server


def as_superuser(pg, settings):
    settings.JOBS_SQL_DATABASE = pg.database_settings("readonly")


def rows_in_t(pg) -> int:
    with pg.connect("readonly") as conn:
        return conn.execute("SELECT count(*) FROM t").fetchone()[0]


@pytest.fixture
def marker():
    path = Path("/tmp") / f"cronboard-{uuid.uuid4().hex}"
    yield path
    path.unlink(missing_ok=True)


def program_attacks(marker: Path) -> list[str]:
    """COPY … TO PROGRAM, plain and through DO … EXECUTE behind the comments
    and empty statements that blinded the text check."""
    # The program reads its input: `touch` alone may exit before COPY has written (a broken pipe).
    program = f"cat >/dev/null; touch {marker}"
    dynamic = f"DO $$BEGIN EXECUTE 'COPY (SELECT 1) TO PROG' || 'RAM ''{program}'''; END$$"
    return [
        f"COPY (SELECT 1) TO PROGRAM '{program}'",
        f"/* /* */ */ {dynamic}",
        f"; {dynamic}",
        f"/* /* */ ; */ ;; {dynamic}",
    ]


@pytest.mark.postgres
@pytest.mark.parametrize("attack", range(4))
@pytest.mark.parametrize("check", ["text check", "database alone"])
def test_programs_do_not_run(pg, settings, marker, monkeypatch, attack, check):
    sql = program_attacks(marker)[attack]
    if check == "database alone":
        monkeypatch.setattr("jobs.handlers.sql.read_only_problem", lambda sql: None)
    for role in ("least privilege", "superuser"):
        if role == "superuser":
            as_superuser(pg, settings)
        with pytest.raises(HandlerError, match="refused"):
            run_sql(sql)
        assert not marker.exists(), role
    # The premise: the superuser would have run it, had it been a write job.
    run_sql(sql, write=True)
    assert marker.exists()


@pytest.mark.postgres
@pytest.mark.parametrize("check", ["text check", "database alone"])
def test_signalling_other_sessions_is_refused_and_they_live_on(pg, settings, monkeypatch, check):
    if check == "database alone":
        monkeypatch.setattr("jobs.handlers.sql.read_only_problem", lambda sql: None)
    victims = "FROM pg_stat_activity WHERE application_name = 'cronboard-victim'"
    quoted = victims.replace("'", "''")
    attacks = [
        f"SELECT pg_terminate_backend(pid) {victims}",
        f"/* /* */ */ DO $$BEGIN EXECUTE 'SELECT pg_' || 'terminate_backend(pid) {quoted}'; END$$",
        f";DO $$BEGIN PERFORM pg_cancel_backend(pid) {victims}; END$$",
    ]
    with pg.connect("readonly", application_name="cronboard-victim") as victim:
        for role in ("least privilege", "superuser"):
            if role == "superuser":
                as_superuser(pg, settings)
            for sql in attacks:
                with pytest.raises(HandlerError, match="refused"):
                    run_sql(sql)
        assert victim.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT pg_reload_conf()",
        "SELECT pg_read_file('postgresql.conf')",
        "SELECT * FROM pg_ls_dir('.')",
        "/* /* */ */ DO $$BEGIN EXECUTE 'SELECT pg_' || 'read_file(''postgresql.conf'')'; END$$",
        ";DO $$BEGIN PERFORM pg_read_file('postgresql.conf'); END$$",
        "SELECT lo_import('/etc/hostname')",
    ],
)
@pytest.mark.parametrize("check", ["text check", "database alone"])
def test_server_configuration_and_files_are_out_of_reach(pg, monkeypatch, sql, check):
    if check == "database alone":
        monkeypatch.setattr("jobs.handlers.sql.read_only_problem", lambda sql: None)
    with pytest.raises(HandlerError, match="refused"):
        run_sql(sql)


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "WITH d AS (DELETE FROM t RETURNING x) SELECT * FROM d",
        "WITH i AS (INSERT INTO t VALUES (4) RETURNING x) SELECT count(*) FROM i",
        "SELECT wipe()",
        "SELECT lift_and_wipe()",
        "SELECT nextval('s')",
        "SELECT setval('s', 42)",
        "SET TRANSACTION READ WRITE; DELETE FROM t",
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; DELETE FROM t",
        "RESET ALL; DELETE FROM t",
        "RESET transaction_read_only; DELETE FROM t",
        "COMMIT; SET TRANSACTION READ WRITE; DELETE FROM t",
        "DO $$BEGIN COMMIT; DELETE FROM t; END$$",
        "/* /* */ */ DO $$BEGIN EXECUTE 'DELE' || 'TE FROM t'; END$$",
        "; CALL wipe_procedure()",
    ],
)
def test_writes_through_ctes_functions_and_lifted_transactions_fail(pg, without_text_check, sql):
    with pg.connect("readonly") as conn:
        conn.execute("CREATE FUNCTION wipe() RETURNS bigint LANGUAGE sql AS 'DELETE FROM t RETURNING 1'")
        conn.execute(
            "CREATE FUNCTION lift_and_wipe() RETURNS void LANGUAGE plpgsql AS "
            "$$BEGIN PERFORM set_config('transaction_read_only', 'off', true); DELETE FROM t; END$$"
        )
        conn.execute(
            "CREATE PROCEDURE wipe_procedure() LANGUAGE plpgsql AS "
            "$$BEGIN COMMIT; SET TRANSACTION READ WRITE; DELETE FROM t; COMMIT; END$$"
        )
    with pytest.raises(HandlerError, match="refused"):
        run_sql(sql)
    assert rows_in_t(pg) == 3
    with pg.connect("readonly") as conn:
        assert conn.execute("SELECT last_value, is_called FROM s").fetchone() == (1, False)


@pytest.mark.postgres
def test_ordinary_reads_still_run(pg):
    assert run_sql("SELECT count(*) FROM pg_stat_activity") == "1 row"
    assert run_sql("/* /* */ */ ; SELECT x FROM t") == "3 rows"


# -- the role: refused at save and before every run -----------------------------------------


@pytest.mark.postgres
def test_a_superuser_role_is_refused_before_anything_runs(pg, settings):
    as_superuser(pg, settings)
    with pytest.raises(HandlerError) as refused:
        run_sql("SELECT 1")
    assert str(refused.value) == (
        "refused: Read-only SQL jobs may not run as postgres, which is a SUPERUSER: connect them "
        "(JOBS_SQL_DATABASE_URL) as a role of their own that has none of these, e.g. CREATE ROLE "
        "cronboard_sql LOGIN PASSWORD '…' NOSUPERUSER, then GRANT it SELECT on the tables the jobs "
        "read (docs/operations.md, “A role for SQL jobs”)."
    )
    assert validate_sql_properties({"sql": "SELECT 1"}, write=False)["sql"].startswith(
        "Read-only SQL jobs may not run as postgres, which is a SUPERUSER:"
    )
    # A write job has its role's full power, and says so in the docs.
    assert validate_sql_properties({"sql": "SELECT 1"}, write=True) == {}


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("grant", "named"),
    [
        ("GRANT pg_execute_server_program TO {role}", "holds pg_execute_server_program"),
        (
            "GRANT pg_read_server_files, pg_signal_backend TO {role}",
            "holds pg_read_server_files, pg_signal_backend",
        ),
        ("GRANT pg_write_server_files TO cb_team; GRANT cb_team TO {role}", "holds pg_write_server_files"),
        (
            "GRANT pg_execute_server_program TO cb_team; GRANT cb_team TO {role}; ALTER ROLE {role} NOINHERIT",
            "holds pg_execute_server_program",
        ),
        ("GRANT cb_admin TO {role}", "belongs to the superuser role cb_admin"),
        ("GRANT EXECUTE ON FUNCTION pg_read_file(text) TO {role}", "may execute pg_read_file()"),
        # Not inherited, but SET ROLE cb_team (or set_config('role', …)) reaches it.
        (
            "GRANT EXECUTE ON FUNCTION pg_read_file(text) TO cb_team; GRANT cb_team TO {role}; "
            "ALTER ROLE {role} NOINHERIT",
            "may execute pg_read_file()",
        ),
        ("GRANT EXECUTE ON FUNCTION lo_export(oid, text) TO {role}", "may execute lo_export()"),
        ("GRANT EXECUTE ON FUNCTION pg_reload_conf() TO {role}", "may execute pg_reload_conf()"),
        # Installed, dblink is PUBLIC's: its connections are not read-only.
        ("CREATE EXTENSION dblink", "may execute dblink(), dblink_connect(), dblink_exec()"),
    ],
)
def test_roles_with_server_powers_are_refused_at_save_and_before_every_run(
    pg, settings, marker, without_text_check, grant, named
):
    role = settings.JOBS_SQL_DATABASE["USER"]
    sql = "SELECT x FROM t"
    assert validate_sql_properties({"sql": sql}, write=False) == {}
    assert run_sql(sql) == "3 rows"
    # Granted after the job was saved: the next run is refused all the same.
    with pg.connect("readonly") as conn:
        conn.execute("DROP ROLE IF EXISTS cb_team")
        conn.execute("CREATE ROLE cb_team NOLOGIN")
        conn.execute("DROP ROLE IF EXISTS cb_admin")
        conn.execute("CREATE ROLE cb_admin NOLOGIN SUPERUSER")
        for statement in grant.format(role=role).split("; "):
            conn.execute(statement)
    try:
        with pytest.raises(HandlerError) as refused:
            run_sql(f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'")
        assert not marker.exists()
        message = str(refused.value)
        assert message.startswith(f"refused: Read-only SQL jobs may not run as {role}, which {named}"), (
            message
        )
        assert "CREATE ROLE cronboard_sql" in message and "docs/operations.md" in message
        with pytest.raises(HandlerError, match=re.escape(f"which {named}")):
            run_sql(sql)
        assert validate_sql_properties({"sql": sql}, write=False)["sql"].startswith(
            f"Read-only SQL jobs may not run as {role}, which {named}"
        )
    finally:
        with pg.connect("readonly") as conn:
            conn.execute("DROP OWNED BY cb_team")  # and its privileges
            conn.execute("DROP ROLE cb_team")
            conn.execute("DROP ROLE cb_admin")


@pytest.mark.postgres
def test_the_applications_own_role_is_refused(pg, settings):
    # Cronboard on PostgreSQL as the same role: a statement could terminate its connections.
    role = settings.JOBS_SQL_DATABASE["USER"]
    app = {**connections["default"].settings_dict, **settings.JOBS_SQL_DATABASE}
    with default_database(app):
        with pytest.raises(HandlerError, match=f"is, or belongs to, Cronboard's own database role {role}"):
            run_sql("SELECT 1")
        member = pg.create_role("readonly", grant=(role,))
        settings.JOBS_SQL_DATABASE = member
        with pytest.raises(HandlerError, match=f"Cronboard's own database role {role}"):
            run_sql("SELECT 1")
        settings.JOBS_SQL_DATABASE = pg.create_role("readonly")
        assert run_sql("SELECT 1") == "1 row"


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_refused_run_is_recorded_as_failed(pg, settings, make_job, make_scheduler, marker):
    as_superuser(pg, settings)
    scheduler = make_scheduler(
        worker_id="node-a", max_workers=2, clock=lambda: T0, misfire_threshold=60, max_message_chars=262144
    )
    # Saved before these rules, so only the checks at run time stand in the way.
    attack = make_job(
        kind="sql",
        handler="",
        properties={"sql": f"/* /* */ */ COPY (SELECT 1) TO PROGRAM 'touch {marker}'"},
        next_fire_at=T0,
    )
    plain = make_job(kind="sql", handler="", properties={"sql": "SELECT count(*) FROM t"}, next_fire_at=T0)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    drain(scheduler, T0, timeout=10)
    (run,) = attack.runs.all()
    assert run.status == "failed"
    assert run.error.startswith("refused: A read-only job cannot COPY to or from a program."), run.error
    assert not marker.exists()
    (run,) = plain.runs.all()
    assert run.status == "failed"
    assert run.error.startswith("refused: Read-only SQL jobs may not run as postgres, which is a SUPERUSER")


@pytest.mark.postgres
def test_saving_such_a_job_is_refused_over_the_api(pg, superuser_api):
    body = {
        "name": "sneaky",
        "kind": "sql",
        "handler": "",
        "cron_expression": "0 0 3 * * *",
        "properties": {"sql": "/* /* */ */ ; COPY (SELECT 1) TO PROGRAM 'id > /tmp/x'"},
    }
    response = superuser_api.post("/api/jobs", body)
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("invalid", "properties.sql")
    assert "program" in response.json()["message"]
    write = superuser_api.post("/api/jobs", {**body, "name": "admin-export", "sql_write": True})
    assert write.status_code == 201, write.content


@pytest.mark.postgres
def test_saving_a_read_only_job_for_a_powerful_role_is_refused_over_the_api(pg, settings, superuser_api):
    as_superuser(pg, settings)
    body = {
        "name": "count",
        "kind": "sql",
        "handler": "",
        "cron_expression": "0 0 3 * * *",
        "properties": {"sql": "SELECT count(*) FROM t"},
    }
    response = superuser_api.post("/api/jobs", body)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "properties.sql"
    assert "may not run as postgres, which is a SUPERUSER" in response.json()["message"]


# -- warnings about the role -----------------------------------------------------------


@pytest.mark.postgres
def test_a_superuser_role_is_warned_about(pg, settings):
    as_superuser(pg, settings)
    (warning,) = role_warnings()
    assert warning.startswith(
        "SQL jobs run as postgres, which is a SUPERUSER. Read-only SQL jobs are refused"
    )


@pytest.mark.postgres
def test_roles_with_server_powers_are_warned_about(pg, settings):
    assert role_warnings() == []
    settings.JOBS_SQL_DATABASE = pg.create_role(
        "readonly", grant=("pg_signal_backend", "pg_read_server_files")
    )
    (warning,) = role_warnings()
    assert "holds pg_read_server_files, pg_signal_backend" in warning


def test_no_warnings_when_sql_jobs_are_off(settings):
    settings.JOBS_SQL_ENABLED = False
    assert role_warnings() == []


@pytest.mark.postgres
def test_read_only_jobs_stored_before_the_role_rule_are_listed(pg, settings, make_job):
    """Before this release a read-only job ran under any role, Cronboard's
    own included (the default without JOBS_SQL_DATABASE_URL)."""
    from jobs.checks import stored_refusals

    for name in ("report", "totals"):
        make_job(name=name, kind="sql", handler="", properties={"sql": "SELECT x FROM t"})
    make_job(name="cleanup", kind="sql", handler="", sql_write=True, properties={"sql": "DELETE FROM t"})
    assert stored_refusals() == []
    as_superuser(pg, settings)
    (listed,) = stored_refusals()
    assert listed.startswith(
        "2 read-only SQL job(s) are refused because SQL jobs run as postgres: report, totals;"
    )
    assert "JOBS_SQL_DATABASE_URL" in listed and "cleanup" not in listed


@pytest.mark.postgres
def test_the_settings_page_shows_the_warning(pg, settings, staff_client):
    as_superuser(pg, settings)
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
    assert "WARNING: SQL jobs run as postgres, which is a SUPERUSER" in started.stderr


# -- SQLite: the file read-only, secrets out of reach ---------------------------------------


@pytest.fixture
def cronboard_sqlite(migrated_sqlite, tmp_path, settings):
    """A copy of Cronboard's own database, with a user, a session, an API
    token, a setting and a job with an alert channel in it, as SQL jobs'
    database: what JOBS_SQL_DATABASE_URL is when it is not set."""
    path = tmp_path / "cronboard.sqlite3"
    copy_sqlite(migrated_sqlite, path)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO auth_user (id, password, is_superuser, username, first_name, last_name, email, "
            "is_staff, is_active, date_joined) VALUES (1, 'pbkdf2_sha256$secret-hash', 1, 'root', '', '', '', "
            "1, 1, '2026-01-01')"
        )
        conn.execute("INSERT INTO django_session VALUES ('session-key', 'session-data', '2099-01-01')")
        conn.execute(
            "INSERT INTO jobs_apitoken (user_id, name, prefix, token_hash, created_at) "
            "VALUES (1, 't', 'cb_abc', 'token-hash', '2026-01-01')"
        )
    conn.close()
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(path)}
    return path


DENIED_READS = [
    ("SELECT password FROM auth_user", "auth_user"),
    ("SELECT * FROM AUTH_USER", "auth_user"),
    ('SELECT username FROM main."auth_user"', "auth_user"),
    ("SELECT count(*) FROM django_session", "django_session"),
    ("SELECT (SELECT session_data FROM django_session LIMIT 1) AS s", "django_session"),
    ("SELECT 1 WHERE EXISTS (SELECT 1 FROM jobs_apitoken WHERE token_hash LIKE 't%')", "jobs_apitoken"),
    ("WITH x AS (SELECT token_hash FROM jobs_apitoken) SELECT * FROM x", "jobs_apitoken"),
    ("SELECT name FROM jobs_job UNION ALL SELECT password FROM auth_user", "auth_user"),
    ("SELECT value FROM jobs_setting", "jobs_setting"),
    ("SELECT token FROM jobs_secret", "jobs_secret"),
    ("SELECT alert_channels FROM jobs_job", "jobs_job.alert_channels"),
    ("SELECT * FROM jobs_job", "jobs_job.alert_channels"),
    ("SELECT channel FROM jobs_alertdelivery", "jobs_alertdelivery.channel"),
    ("SELECT * FROM axes_accessattempt", "axes_accessattempt"),
    ("SELECT * FROM auth_user_groups", "auth_user_groups"),
    ("PRAGMA table_info(auth_user)", "auth_user"),
    ("SELECT * FROM pragma_table_info('django_session')", "django_session"),
    ("/* x */ ; SELECT password FROM auth_user", "auth_user"),
    # The pages of each table: how many sessions, tokens, users there are, and how they grow.
    ("SELECT name, pgsize FROM dbstat", "dbstat"),
    ("SELECT count(*) FROM dbstat('main') WHERE name = 'django_session'", "dbstat"),
]


@pytest.mark.parametrize(("sql", "table"), DENIED_READS)
def test_sqlite_secret_tables_are_refused_at_save_and_at_run(cronboard_sqlite, sql, table):
    with pytest.raises(HandlerError) as refused:
        run_sql(sql)
    message = str(refused.value)
    assert message.startswith(
        f"refused: A read-only job may not read {table} (JOBS_SQL_SQLITE_DENY_TABLES)"
    ), message
    if "pragma_table_info" in sql:
        return  # SQLite asks about a table-valued pragma's argument when it runs, not when it compiles
    saved = validate_sql_properties({"sql": sql}, write=False)
    assert saved["sql"].startswith(f"A read-only job may not read {table}"), saved


def test_sqlite_secret_tables_are_refused_through_a_view(cronboard_sqlite):
    run_sql("CREATE VIEW people AS SELECT username, password FROM auth_user", write=True)
    with pytest.raises(HandlerError, match=r"may not read auth_user \(JOBS_SQL_SQLITE_DENY_TABLES\)"):
        run_sql("SELECT * FROM people")
    with pytest.raises(HandlerError, match="may not read auth_user"):
        run_sql("SELECT username FROM people")


def test_sqlite_attach_of_the_same_file_is_refused(cronboard_sqlite):
    with pytest.raises(HandlerError, match="not authorized"):
        run_sql(f"ATTACH 'file:{cronboard_sqlite}?mode=ro' AS copy")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT name FROM jobs_job",
        "SELECT count(*) FROM jobs_run",
        "SELECT count(*) FROM jobs_job",
        "SELECT name FROM sqlite_master WHERE name = 'auth_user'",
    ],
)
def test_sqlite_other_tables_read_as_before(cronboard_sqlite, sql):
    assert re.fullmatch(r"\d+ rows?", run_sql(sql))
    assert validate_sql_properties({"sql": sql}, write=False) == {}


def test_sqlite_the_operator_lists_what_is_denied(cronboard_sqlite, settings):
    settings.JOBS_SQL_SQLITE_DENY_TABLES = ["django_session"]
    assert run_sql("SELECT username FROM auth_user") == "1 row"
    with pytest.raises(HandlerError, match="may not read django_session"):
        run_sql("SELECT * FROM django_session")
    settings.JOBS_SQL_SQLITE_DENY_TABLES = []
    assert run_sql("SELECT session_key FROM django_session") == "1 row"


def test_sqlite_write_jobs_are_not_limited_by_the_list(cronboard_sqlite):
    assert run_sql("SELECT username FROM auth_user", write=True) == "1 row"


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO jobs_setting (key, value, updated_at) VALUES ('x', '1', '2026-01-01')",
        "UPDATE auth_user SET password = 'known'",
        "WITH d AS (SELECT 1) DELETE FROM jobs_job",
        "CREATE TEMP TABLE stolen AS SELECT 1",
        "PRAGMA user_version = 7",
        "REPLACE INTO jobs_setting (key, value, updated_at) VALUES ('x', '1', '2026-01-01')",
    ],
)
def test_sqlite_writes_are_refused(cronboard_sqlite, sql):
    with pytest.raises(HandlerError, match="refused"):
        run_sql(sql)
    with sqlite3.connect(cronboard_sqlite) as conn:
        assert conn.execute("SELECT password FROM auth_user").fetchone() == ("pbkdf2_sha256$secret-hash",)
        assert conn.execute("PRAGMA user_version").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM jobs_setting WHERE key = 'x'").fetchone() == (0,)
    conn.close()


def test_sqlite_a_uri_is_opened_read_only_too(tmp_path, settings):
    missing = tmp_path / "missing.sqlite3"
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = {"ENGINE": "django.db.backends.sqlite3", "NAME": f"file:{missing}?mode=rwc"}
    with pytest.raises(HandlerError, match="could not open"):
        run_sql("SELECT 1")
    assert not missing.exists()


@pytest.mark.django_db
def test_sqlite_a_refused_read_is_recorded_as_failed(settings, make_job, make_scheduler):
    # Cronboard's own database, as when JOBS_SQL_DATABASE_URL is not set.
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = None
    scheduler = make_scheduler(
        worker_id="node-a", max_workers=2, clock=lambda: T0, misfire_threshold=60, max_message_chars=262144
    )
    job = make_job(
        kind="sql", handler="", properties={"sql": "SELECT password FROM auth_user"}, next_fire_at=T0
    )
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    drain(scheduler, T0, timeout=10)
    (run,) = job.runs.all()
    assert run.status == "failed"
    assert run.error.startswith("refused: A read-only job may not read auth_user"), run.error
    assert run.result == ""


@pytest.mark.postgres
def test_the_documented_role_recipe_makes_a_role_read_only_jobs_accept(postgres_server, settings):
    text = (REPO / "docs" / "operations.md").read_text()
    section = text[text.index("### A role for SQL jobs") :]
    recipe = section[section.index("```sql\n") + 7 : section.index("```", section.index("```sql\n") + 7)]
    postgres_server.create_database("reports")
    with postgres_server.connect("reports") as conn:
        conn.execute("CREATE TABLE sales (amount integer)")
        conn.execute("INSERT INTO sales VALUES (5), (7)")
    database = "postgres"
    try:
        for line in recipe.splitlines():
            if line.startswith("\\c "):
                database = line.split()[1]
            elif line.strip() and not line.startswith("--"):
                with postgres_server.connect(database) as conn:
                    conn.execute(line)
        settings.JOBS_SQL_ENABLED = True
        settings.JOBS_SQL_DATABASE = {**postgres_server.database_settings("reports"), "USER": "cronboard_sql"}
        assert validate_sql_properties({"sql": "SELECT sum(amount) FROM sales"}, write=False) == {}
        assert run_sql("SELECT sum(amount) FROM sales") == "1 row"
        assert role_warnings() == []
    finally:
        with postgres_server.connect("reports") as conn:
            conn.execute("DROP OWNED BY cronboard_sql")
        with postgres_server.connect() as conn:
            conn.execute("DROP OWNED BY cronboard_sql")
            conn.execute("DROP ROLE cronboard_sql")


@pytest.mark.parametrize(
    ("value", "denied"), [("a.b.c", None), ("", []), (" Auth_* , x.Secret ", ["auth_*", "x.secret"])]
)
def test_the_deny_list_is_read_strictly(tmp_path, value, denied):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOBS_", "DJANGO_", "DATABASE_URL"))}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        DJANGO_SETTINGS_MODULE="config.settings",
        JOBS_SQL_SQLITE_DENY_TABLES=value,
    )
    shown = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.conf import settings; print(settings.JOBS_SQL_SQLITE_DENY_TABLES)",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if denied is None:
        assert shown.returncode != 0
        assert (
            "Configuration error: JOBS_SQL_SQLITE_DENY_TABLES: 'a.b.c' is not a table or table.column pattern"
            in shown.stderr
        )
    else:
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.strip().splitlines()[-1] == str(denied)


def test_sqlite_saving_a_read_of_a_secret_table_is_refused_over_the_api(settings, superuser_api):
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = None  # Cronboard's own database
    body = {
        "name": "who",
        "kind": "sql",
        "handler": "",
        "cron_expression": "0 0 3 * * *",
        "properties": {"sql": "SELECT username FROM jobs_job JOIN auth_user ON 1"},
    }
    response = superuser_api.post("/api/jobs", body)
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "properties.sql"
    assert response.json()["message"].startswith(
        "A read-only job may not read auth_user (JOBS_SQL_SQLITE_DENY_TABLES)"
    )
    listed = superuser_api.post("/api/jobs", {**body, "properties": {"sql": "SELECT count(*) FROM jobs_job"}})
    assert listed.status_code == 201, listed.content
