"""SQL jobs (jobs/handlers/sql.py) on SQLite and on a real PostgreSQL server:
one statement only, read-only unless marked write, cancelled from outside at
the deadline, off unless enabled. Every escape attempt leaves the data as it
was."""

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.handlers.base import HandlerError, JobContext
from jobs.handlers.sql import DISABLED_MESSAGE, MAX_ROWS, SqlJobHandler, sql_enabled, validate_sql_properties
from tests.fixtures.core import T0, drain


def make_ctx(sql: str, *, write: bool = False, seconds: float = 10) -> JobContext:
    now = timezone.now()
    ctx = JobContext(
        run_id=1,
        fire_id="fire-1",
        attempt=1,
        scheduled_at=now,
        deadline=now + timedelta(seconds=seconds),
        properties={"sql": sql},
    )
    ctx.sql_write = write
    return ctx


def run_sql(sql: str, **kwargs) -> tuple[str, JobContext]:
    ctx = make_ctx(sql, **kwargs)
    return SqlJobHandler().run(ctx), ctx


# --- both databases ---------------------------------------------------------------


def test_query_rows_go_to_the_log(database):
    result, ctx = run_sql("SELECT x, x * 10 AS tens FROM t ORDER BY x")
    assert result == "3 rows"
    lines = [line.split(" ", 1)[1] for line in ctx.log_text().splitlines()]
    assert lines[1:] == ["x | tens", "1 | 10", "2 | 20", "3 | 30"]
    assert "read-only statement on" in lines[0]


def test_a_sharded_run_reads_its_shard_numbers_where_the_statement_names_them(database):
    ctx = make_ctx("SELECT :shard_index AS i, :shard_total AS n, ':shard_indexes' AS text")
    ctx.shard_index, ctx.shard_total = 3, 8
    assert SqlJobHandler().run(ctx) == "1 row"
    assert ctx.log_text().splitlines()[-1].split(" ", 1)[1] == "3 | 8 | :shard_indexes"
    assert (
        validate_sql_properties({"sql": "SELECT x FROM t WHERE x % :shard_total = :shard_index"}, write=False)
        == {}
    )


def test_rows_are_capped(database):
    result, ctx = run_sql(database.sql["many_rows"])
    assert result == f"more than {MAX_ROWS} rows; the first {MAX_ROWS} are in the log"
    lines = ctx.log_text().splitlines()
    assert lines[-2].endswith(f" {MAX_ROWS}")
    assert lines[-1].endswith(f"stopped after {MAX_ROWS} rows")


def test_long_cells_are_cut(database):
    _, ctx = run_sql(database.sql["long_cell"])
    cell = ctx.log_text().splitlines()[-1].split(" ", 1)[1]
    assert cell == "y" * 200 + "…"


def test_write_job_reports_affected_rows(database):
    result, _ = run_sql("DELETE FROM t WHERE x >= 2", write=True)
    assert result == "2 rows affected"
    assert database.count() == 1


def test_read_only_job_cannot_write(database):
    with pytest.raises(HandlerError, match="the database refused the statement"):
        run_sql("DELETE FROM t")
    assert database.count() == 3


@pytest.mark.parametrize("write", [False, True])
def test_multi_statement_text_is_refused_by_the_database(database, write):
    with pytest.raises(HandlerError, match="refused") as info:
        run_sql("SELECT 1; DELETE FROM t", write=write)
    assert database.count() == 3
    message = str(info.value)
    assert "multiple commands" in message or "one statement at a time" in message


def test_timeout_cancels_the_statement_from_outside(database):
    started = time.monotonic()
    with pytest.raises(HandlerError, match="statement cancelled: the job's timeout was reached"):
        run_sql(database.sql["forever"], seconds=1)
    assert time.monotonic() - started < 10  # the statement never ends by itself


def test_cancelling_the_run_stops_the_statement(database):
    ctx = make_ctx(database.sql["forever"], seconds=30)
    threading.Timer(0.3, ctx.cancelled.set).start()
    started = time.monotonic()
    with pytest.raises(HandlerError, match="^statement cancelled$"):
        SqlJobHandler().run(ctx)
    assert time.monotonic() - started < 10  # the statement never ends by itself


def test_disabled_sql_fails_with_a_clear_message(database, settings):
    settings.JOBS_SQL_ENABLED = False
    assert not sql_enabled()
    with pytest.raises(HandlerError, match="SQL jobs are disabled"):
        run_sql("DELETE FROM t", write=True)
    assert database.count() == 3
    assert validate_sql_properties({"sql": "SELECT 1"}, write=False) == {"sql": f"{DISABLED_MESSAGE}."}


def test_validation_accepts_one_statement(database):
    assert validate_sql_properties({"sql": "SELECT x FROM t;  -- the lot"}, write=False) == {}
    assert validate_sql_properties({"sql": "DELETE FROM t WHERE x = 1"}, write=True) == {}


def test_validation_refuses_several_statements(database):
    errors = validate_sql_properties({"sql": "SELECT 1; DELETE FROM t"}, write=False)
    assert errors == {"sql": "Exactly one statement per job; this text has 2."}


def test_validation_asks_the_database_not_just_a_splitter(database, monkeypatch):
    # Were the statement splitter fooled, the database still refuses.
    monkeypatch.setattr("jobs.handlers.sql._statements", lambda sql: [sql])
    errors = validate_sql_properties({"sql": "SELECT 1; DELETE FROM t"}, write=True)
    assert errors["sql"].startswith("The database refused it:")
    assert database.count() == 3


def test_validation_reports_syntax_errors(database):
    errors = validate_sql_properties({"sql": "SELEC 1"}, write=False)
    assert errors["sql"].startswith("The database refused it:")
    assert "syntax error" in errors["sql"]


def test_validation_wants_write_jobs_marked(database):
    errors = validate_sql_properties({"sql": "UPDATE t SET x = 0"}, write=False)
    assert errors == {"sql": "This UPDATE statement writes; mark the job as a write job to allow it."}
    assert validate_sql_properties({"sql": "   "}, write=False) == {"sql": "Enter one SQL statement."}


# --- SQLite escapes -------------------------------------------------------------------


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA query_only = OFF; DELETE FROM t",
        "COMMIT; DELETE FROM t",
        "BEGIN; DELETE FROM t; COMMIT",
        "SELECT 1 /* ; */; DELETE FROM t",
        "INSERT INTO t VALUES (4)",
        "DROP TABLE t",
        "WITH d AS (SELECT 1) DELETE FROM t",
    ],
)
def test_sqlite_escapes_leave_data_untouched(sqlite_db, sql):
    with pytest.raises(HandlerError):
        run_sql(sql)
    assert sqlite_db.count() == 3


def test_sqlite_jobs_cannot_create_other_files(sqlite_db, tmp_path):
    for sql in [f"ATTACH '{tmp_path / 'new.db'}' AS other", f"VACUUM INTO '{tmp_path / 'copy.db'}'"]:
        for write in (False, True):
            with pytest.raises(HandlerError, match="not authorized|authorization denied"):
                run_sql(sql, write=write)
    assert not (tmp_path / "new.db").exists()
    assert not (tmp_path / "copy.db").exists()


def test_sqlite_read_only_opens_the_file_read_only(sqlite_db, settings, tmp_path):
    settings.JOBS_SQL_DATABASE = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(tmp_path / "missing.sqlite3"),
    }
    with pytest.raises(HandlerError, match="could not open|unable to open"):
        run_sql("SELECT 1")
    assert not (tmp_path / "missing.sqlite3").exists(), "a mistyped path must not create an empty database"


@pytest.mark.django_db
def test_defaults_to_the_main_database(settings):
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = None
    result, ctx = run_sql("SELECT 41 + 1 AS answer")
    assert result == "1 row"
    assert ctx.log_text().splitlines()[-1].endswith(" 42")


# --- PostgreSQL escapes -------------------------------------------------------------

PG_ESCAPES = [
    "SET TRANSACTION READ WRITE; DELETE FROM t",
    "COMMIT; DELETE FROM t",
    "ROLLBACK; DELETE FROM t",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; DELETE FROM t",
    "SET default_transaction_read_only = off; COMMIT; DELETE FROM t",
    "SELECT 1 /* ; */; DELETE FROM t",
    "DELETE FROM t",
    "TRUNCATE t",
    "WITH d AS (DELETE FROM t RETURNING x) SELECT * FROM d",
    "DO $$BEGIN COMMIT; SET TRANSACTION READ WRITE; DELETE FROM t; END$$",
    "DO $$BEGIN PERFORM set_config('transaction_read_only', 'off', true); DELETE FROM t; END$$",
    "DO $$BEGIN SET TRANSACTION READ WRITE; DELETE FROM t; END$$",
    "CREATE TABLE stolen AS SELECT * FROM t",
]


@pytest.mark.postgres
@pytest.mark.parametrize("sql", PG_ESCAPES)
def test_postgres_escapes_leave_data_untouched(postgres_db, postgres_server, sql):
    with pytest.raises(HandlerError, match="refused"):
        run_sql(sql)
    assert postgres_db.count() == 3
    with postgres_server.connect("sqljobs") as conn:
        assert conn.execute("SELECT to_regclass('stolen')").fetchone()[0] is None


@pytest.mark.postgres
def test_postgres_lifting_read_only_alone_achieves_nothing(postgres_db):
    result, _ = run_sql("SET TRANSACTION READ WRITE")
    assert result == "SET"
    with pytest.raises(HandlerError, match="read-only transaction"):
        run_sql("DELETE FROM t")
    assert postgres_db.count() == 3


@pytest.mark.postgres
def test_postgres_session_is_read_only(postgres_db):
    _, ctx = run_sql(
        "SELECT current_setting('transaction_read_only') AS ro, current_setting('application_name') AS app"
    )
    assert ctx.log_text().splitlines()[-1].split(" ", 1)[1] == "on | cronboard-sql-job"


@pytest.mark.postgres
def test_postgres_statement_timeout_escape_is_refused_before_running(postgres_db):
    started = time.monotonic()
    with pytest.raises(HandlerError, match="cannot insert multiple commands"):
        run_sql("SET statement_timeout=0; SELECT pg_sleep(60)", seconds=120)
    assert time.monotonic() - started < 10  # refused, not slept through


@pytest.mark.postgres
def test_postgres_watchdog_beats_a_timeout_set_inside_the_statement(postgres_db):
    started = time.monotonic()
    with pytest.raises(HandlerError, match="the job's timeout was reached"):
        run_sql("SELECT set_config('statement_timeout', '0', false), pg_sleep(60)", seconds=1)
    assert 0.9 < time.monotonic() - started < 10  # far below the sleep's 60 s


@pytest.mark.postgres
def test_postgres_write_returning_rows(postgres_db):
    result, ctx = run_sql("DELETE FROM t WHERE x = 2 RETURNING x", write=True)
    assert result == "1 row"
    assert ctx.log_text().splitlines()[-1].endswith(" 2")
    assert postgres_db.count() == 2


@pytest.mark.postgres
def test_postgres_statements_without_rows_report_their_status(postgres_db):
    result, ctx = run_sql("CREATE TABLE made (id int)", write=True)
    assert result == "CREATE TABLE"


@pytest.mark.postgres
def test_postgres_unreachable_database_is_a_clear_failure(postgres_db, postgres_server, settings):
    settings.JOBS_SQL_DATABASE = {**settings.JOBS_SQL_DATABASE, "PORT": 1}
    role = settings.JOBS_SQL_DATABASE["USER"]
    with pytest.raises(HandlerError, match=f"could not connect to PostgreSQL {role}@127.0.0.1:1/sqljobs"):
        run_sql("SELECT 1")


@pytest.mark.postgres
def test_postgres_server_fixture_creates_databases_and_survives_a_restart(postgres_server):
    url = postgres_server.create_database("fixture_check")
    assert url == f"postgres://postgres@127.0.0.1:{postgres_server.port}/fixture_check"
    postgres_server.restart()
    assert postgres_server.is_running()
    with postgres_server.connect("fixture_check") as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("fixture_check",)


@pytest.mark.django_db
def test_sql_jobs_run_through_the_scheduler(make_job, sqlite_db, make_scheduler):
    scheduler = make_scheduler(
        worker_id="node-a", max_workers=2, clock=lambda: T0, misfire_threshold=60, max_message_chars=262144
    )
    writer = make_job(
        kind="sql",
        handler="",
        properties={"sql": "DELETE FROM t WHERE x = 1"},
        sql_write=True,
        next_fire_at=T0,
    )
    reader = make_job(kind="sql", handler="", properties={"sql": "DELETE FROM t"}, next_fire_at=T0)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    drain(scheduler, T0, timeout=5)
    (write_run,), (read_run,) = writer.runs.all(), reader.runs.all()
    assert (write_run.status, write_run.result) == ("succeeded", "1 row affected")
    assert read_run.status == "failed"
    assert "readonly database" in read_run.error
    assert sqlite_db.count() == 2
