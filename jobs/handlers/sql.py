"""SQL jobs: exactly one statement, on a connection of their own, read-only
unless the job is a write job, cancelled from outside at the deadline.

Off unless JOBS_SQL_ENABLED: whoever may edit SQL jobs has the power of the
database role they run as, so JOBS_SQL_DATABASE_URL should name a
least-privilege role (the default is the main database's own settings).

Why each rule holds:
- One statement: PostgreSQL gets the text through the extended protocol
  (a prepared statement), which refuses more than one command; sqlite3's
  execute() refuses a second statement before running the first.
- Read-only: PostgreSQL runs the statement inside `BEGIN READ ONLY` in a
  session whose default is read-only; a single statement cannot both lift
  that and write (SET TRANSACTION READ WRITE after a snapshot fails, and
  COMMIT inside a DO block or procedure is refused in a transaction block),
  and the connection closes after it, rolling back.
  SQLite opens the file with mode=ro and PRAGMA query_only. What else a
  read-only job may not do (the role's powers, SQLite's denied tables) is
  jobs.handlers.sqlguard's.
- Timeout: a watchdog thread cancels the query (psycopg cancel / sqlite3
  interrupt) at the job's deadline or when the run is cancelled, so nothing
  the statement sets inside the session can outlive it.
docs/handlers.md says what read-only guarantees.
"""

import logging
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

import sqlparse
from django.conf import settings
from django.db import connections

from jobs.handlers.base import HandlerError, JobContext, JobHandler, with_shard
from jobs.handlers.sqlguard import (
    ROLE_RECIPE,
    RolePowers,
    SqliteGuard,
    lex_sql,
    read_only_problem,
    role_powers,
    skip_leading,
)

log = logging.getLogger(__name__)

MAX_ROWS = 50
MAX_CELL_CHARS = 200
CONNECT_TIMEOUT_SECONDS = 10
# Server-side backstop, should this process die mid-query; the watchdog acts first.
SERVER_TIMEOUT_GRACE_MS = 5000
DISABLED_MESSAGE = "SQL jobs are disabled on this server (set JOBS_SQL_ENABLED=true to allow them)"
WRITE_TYPES = {"INSERT", "UPDATE", "DELETE", "REPLACE", "MERGE", "CREATE", "DROP", "ALTER", "TRUNCATE"}
# libpq parameters worth passing on from a Django OPTIONS dict.
LIBPQ_OPTIONS = {
    "sslmode", "sslrootcert", "sslcert", "sslkey", "sslcrl", "sslpassword", "service",
    "passfile", "target_session_attrs", "options", "gssencmode", "channel_binding",
}  # fmt: skip


def sql_enabled() -> bool:
    return bool(settings.JOBS_SQL_ENABLED)


def database_settings() -> dict:
    """JOBS_SQL_DATABASE, else the default database's live settings."""
    if settings.JOBS_SQL_DATABASE:
        return dict(settings.JOBS_SQL_DATABASE)
    return dict(connections["default"].settings_dict)


def _engine(db: dict) -> str:
    engine = db.get("ENGINE", "")
    if "postgresql" in engine or "postgis" in engine:
        return "postgresql"
    if "sqlite" in engine or "spatialite" in engine:
        return "sqlite"
    raise HandlerError(f"SQL jobs support PostgreSQL and SQLite, not {engine or 'an unset ENGINE'}")


def describe_database(db: dict) -> str:
    """Where the SQL runs, without the password."""
    if _engine(db) == "sqlite":
        return f"SQLite {db.get('NAME')}"
    return f"PostgreSQL {db.get('USER') or '(default user)'}@{db.get('HOST') or 'localhost'}:{db.get('PORT') or 5432}/{db.get('NAME')}"


# --- outcome and formatting -------------------------------------------------


@dataclass
class Outcome:
    columns: list[str] | None = None  # None: the statement returns no rows
    rows: list[tuple] = field(default_factory=list)
    more_rows: bool = False
    rowcount: int = -1
    status: str = ""

    def summary(self) -> str:
        if self.columns is not None:
            if self.more_rows:
                return f"more than {MAX_ROWS} rows; the first {MAX_ROWS} are in the log"
            return f"{len(self.rows)} row{'s' if len(self.rows) != 1 else ''}"
        if self.rowcount >= 0:
            return f"{self.rowcount} row{'s' if self.rowcount != 1 else ''} affected"
        return self.status or "statement executed"

    def log_lines(self) -> list[str]:
        if self.columns is None:
            return [self.status] if self.status else []
        lines = [" | ".join(self.columns)]
        lines += [" | ".join(_cell(value) for value in row) for row in self.rows]
        if self.more_rows:
            lines.append(f"… stopped after {MAX_ROWS} rows")
        return lines


def _cell(value) -> str:
    text = "NULL" if value is None else str(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= MAX_CELL_CHARS else text[:MAX_CELL_CHARS] + "…"


# --- the watchdog -------------------------------------------------------------


class Watchdog:
    """Calls `cancel()` once the deadline passes or `cancelled` is set, and
    again every half second until the statement ends (a cancel that lands
    between two commands is otherwise lost)."""

    def __init__(self, cancel, *, deadline: float, cancelled: threading.Event):
        self._cancel = cancel
        self._deadline = deadline
        self._cancelled = cancelled
        self._done = threading.Event()
        self.fired: str | None = None  # "timeout" or "cancelled"
        self._thread = threading.Thread(target=self._watch, name="sql-watchdog", daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join(timeout=5)

    def _watch(self):
        while not self._done.wait(0.05):
            if self.fired is None:
                if time.monotonic() >= self._deadline:
                    self.fired = "timeout"
                elif self._cancelled.is_set():
                    self.fired = "cancelled"
                else:
                    continue
            try:
                self._cancel()
            except Exception:  # a failed cancel is retried; the statement's own error is what we report
                pass
            if self._done.wait(0.5):
                return


# --- PostgreSQL -----------------------------------------------------------------


def _pg_connect(db: dict, *, timeout: float):
    import psycopg

    params = {
        "host": db.get("HOST"),
        "port": str(db["PORT"]) if db.get("PORT") else None,
        "dbname": db.get("NAME"),
        "user": db.get("USER"),
        "password": db.get("PASSWORD"),
    }
    params.update({k: v for k, v in (db.get("OPTIONS") or {}).items() if k in LIBPQ_OPTIONS})
    params = {k: v for k, v in params.items() if v not in (None, "")}
    params["connect_timeout"] = max(1, int(min(timeout, CONNECT_TIMEOUT_SECONDS)))
    params["application_name"] = "cronboard-sql-job"
    return psycopg.connect(autocommit=True, **params)


def _run_postgresql(db, sql, *, write, deadline, cancelled) -> Outcome:
    import psycopg

    try:
        conn = _pg_connect(db, timeout=deadline - time.monotonic())
    except psycopg.Error as exc:
        raise HandlerError(f"could not connect to {describe_database(db)}: {_pg_message(exc)}") from None
    watchdog = Watchdog(lambda: conn.cancel_safe(timeout=5), deadline=deadline, cancelled=cancelled)
    try:
        with watchdog:
            if not write:
                # Before anything of the job's runs: the guarantee is the role's
                # and the transaction's, and the role may have changed since save.
                try:
                    refusal = role_powers(conn).read_only_refusal()
                except psycopg.Error as exc:
                    raise HandlerError(
                        f"could not check the SQL role's privileges: {_pg_message(exc)}"
                    ) from None
                if refusal:
                    raise HandlerError(f"refused: {refusal}")
            server_ms = int((deadline - time.monotonic()) * 1000) + SERVER_TIMEOUT_GRACE_MS
            conn.execute(f"SET statement_timeout = {max(server_ms, 1)}")
            if not write:
                conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
                conn.execute("BEGIN READ ONLY")
            # Parse (extended protocol): more than one command is refused here.
            prepared = conn.pgconn.prepare(b"cronboard_job", sql.encode())
            if prepared.status != psycopg.pq.ExecStatus.COMMAND_OK:
                raise psycopg.errors.error_from_result(prepared)
            described = conn.pgconn.describe_prepared(b"cronboard_job")
            columns = [described.fname(i).decode() for i in range(described.nfields)]
            cur = conn.cursor()
            if columns and not write:
                # Streamed so a huge result is never loaded; closing the
                # stream early cancels the rest, which is fine for a read.
                rows, more = [], False
                stream = cur.stream(sql)
                try:
                    for row in stream:
                        if len(rows) == MAX_ROWS:
                            more = True
                            break
                        rows.append(row)
                finally:
                    stream.close()
                return Outcome(columns=columns, rows=rows, more_rows=more)
            cur.execute(sql, prepare=True)
            if columns:
                rows = cur.fetchmany(MAX_ROWS + 1)
                return Outcome(columns=columns, rows=rows[:MAX_ROWS], more_rows=len(rows) > MAX_ROWS)
            return Outcome(rowcount=cur.rowcount, status=cur.statusmessage or "")
    except psycopg.Error as exc:
        if watchdog.fired:
            raise _cancelled_error(watchdog) from None
        raise HandlerError(f"the database refused the statement: {_pg_message(exc)}") from None
    finally:
        # Closing rolls back whatever is still open (the read-only transaction).
        conn.close()


def _pg_message(exc) -> str:
    sqlstate = getattr(exc, "sqlstate", None)
    message = (getattr(getattr(exc, "diag", None), "message_primary", None) or str(exc)).strip()
    return f"{message} (SQLSTATE {sqlstate})" if sqlstate else message


# --- SQLite -----------------------------------------------------------------------


def _read_only_uri(uri: str) -> str:
    """A `file:` URI opened read-only: mode=ro, unless it names an in-memory
    database (the test suite's shared one), which has no file to protect."""
    path, _, query = uri.partition("?")
    params = parse_qsl(query, keep_blank_values=True)
    if ("mode", "memory") in params:
        return uri
    return f"{path}?{urlencode([(k, v) for k, v in params if k != 'mode'] + [('mode', 'ro')])}"


def _sqlite_connect(db: dict, *, write: bool, timeout: float) -> tuple[sqlite3.Connection, SqliteGuard]:
    name = str(db.get("NAME") or "")
    if not name or name == ":memory:":
        raise HandlerError("SQL jobs need a database file, not a private in-memory SQLite database")
    if name.startswith("file:"):
        uri = name if write else _read_only_uri(name)
    else:
        uri = f"file:{quote(str(Path(name).resolve()))}?mode={'rw' if write else 'ro'}"
    conn = sqlite3.connect(
        uri, uri=True, isolation_level=None, check_same_thread=False, timeout=max(0.1, min(timeout, 30))
    )
    if not write:
        conn.execute("PRAGMA query_only = ON")
    guard = SqliteGuard([] if write else list(settings.JOBS_SQL_SQLITE_DENY_TABLES))
    conn.set_authorizer(guard)
    return conn, guard


def _run_sqlite(db, sql, *, write, deadline, cancelled) -> Outcome:
    try:
        conn, guard = _sqlite_connect(db, write=write, timeout=deadline - time.monotonic())
    except sqlite3.Error as exc:
        raise HandlerError(f"could not open {describe_database(db)}: {exc}") from None
    watchdog = Watchdog(conn.interrupt, deadline=deadline, cancelled=cancelled)
    try:
        with watchdog:
            cur = conn.execute(sql)  # refuses a second statement before running the first
            if cur.description is not None:
                rows = cur.fetchmany(MAX_ROWS + 1)
                columns = [c[0] for c in cur.description]
                return Outcome(columns=columns, rows=rows[:MAX_ROWS], more_rows=len(rows) > MAX_ROWS)
            return Outcome(rowcount=cur.rowcount)
    except sqlite3.Error as exc:
        if watchdog.fired:
            raise _cancelled_error(watchdog) from None
        if guard.refusal():
            raise HandlerError(f"refused: {guard.refusal()}") from None
        raise HandlerError(f"the database refused the statement: {exc}") from None
    finally:
        conn.close()


def _cancelled_error(watchdog: Watchdog) -> HandlerError:
    if watchdog.fired == "timeout":
        return HandlerError("statement cancelled: the job's timeout was reached")
    return HandlerError("statement cancelled")


def configured_role_powers() -> RolePowers | None:
    """What the role SQL jobs connect as may do (None when SQL jobs are off
    or not on PostgreSQL); psycopg.Error when the server cannot be asked."""
    if not sql_enabled():
        return None
    try:
        db = database_settings()
    except HandlerError:
        return None
    if _engine(db) != "postgresql":
        return None
    with _pg_connect(db, timeout=5) as conn:
        return role_powers(conn)


def role_warnings() -> list[str]:
    """Loud warnings about the role SQL jobs connect as (PostgreSQL only;
    [] when SQL jobs are off or the role has none of these powers)."""
    try:
        on_postgresql = sql_enabled() and _engine(database_settings()) == "postgresql"
    except HandlerError:
        on_postgresql = False
    if not on_postgresql:
        # Nothing to ask, and psycopg (9 MB) stays unloaded in a scheduler
        # that never talks to PostgreSQL.
        return []
    import psycopg

    try:
        powers = configured_role_powers()
    except psycopg.Error as exc:
        return [
            "Could not check the privileges of the SQL job role "
            f"({describe_database(database_settings())}): {_pg_message(exc)}"
        ]
    if powers is None:
        return []
    problems = powers.problems()
    if not problems:
        return []
    return [
        f"SQL jobs run as {powers.user}, which {'; '.join(problems)}. Read-only SQL jobs are refused "
        f"until they run as another role, and write jobs have all of these powers: {ROLE_RECIPE}."
    ]


def log_role_warnings() -> list[str]:
    warnings = role_warnings()
    for warning in warnings:
        log.warning("SQL JOBS: %s", warning)
    return warnings


# --- save-time validation -------------------------------------------------------


def _statements(sql: str) -> list[str]:
    """The statements of `sql`, split by sqlparse once the comments are gone
    (sqlparse does not nest them; PostgreSQL does)."""
    return [s for s in sqlparse.split(lex_sql(sql)[0]) if s.strip(" \t\r\n;")]


def _database_check(sql: str, *, write: bool) -> str | None:
    """Ask the database whether it parses `sql` as one statement, without
    running it, and for a read-only job whether its guarantee holds: on
    PostgreSQL the role's powers, on SQLite the denied tables. Only those
    count; a database that cannot be reached or a table that does not exist
    yet does not stop a save (the run checks again)."""
    try:
        db = database_settings()
        engine = _engine(db)
    except HandlerError as exc:
        return str(exc)
    if engine == "postgresql":
        import psycopg

        try:
            with _pg_connect(db, timeout=5) as conn:
                if not write:
                    refusal = role_powers(conn).read_only_refusal()
                    if refusal:
                        return refusal
                result = conn.pgconn.prepare(b"", sql.encode())
                if result.status == psycopg.pq.ExecStatus.COMMAND_OK:
                    return None
                error = psycopg.errors.error_from_result(result)
                if error.sqlstate == "42601":  # syntax error, and "multiple commands"
                    return f"The database refused it: {_pg_message(error)}"
        except psycopg.Error:
            return None
        return None
    sql = _sqlite_leading(sql)
    if sql[:7].upper() == "EXPLAIN":
        return None
    try:
        conn, guard = _sqlite_connect(db, write=write, timeout=5)
    except (sqlite3.Error, HandlerError):
        return None
    try:
        conn.execute("EXPLAIN " + sql)  # compiles without running; the authorizer is asked
    except sqlite3.Error as exc:
        if guard.refusal():
            return guard.refusal()
        if (
            isinstance(exc, sqlite3.ProgrammingError)
            or "syntax error" in str(exc)
            or "incomplete input" in str(exc)
        ):
            return f"The database refused it: {exc}"
    finally:
        conn.close()
    return None


def _sqlite_leading(sql: str) -> str:
    """`sql` from its first word, as SQLite reads it: blanks, empty
    statements and comments skipped (SQLite's block comments do not nest)."""
    while True:
        sql = sql.lstrip(" \t\r\n\f\v;")
        if sql.startswith("--"):
            end = sql.find("\n")
            sql = "" if end < 0 else sql[end:]
        elif sql.startswith("/*"):
            end = sql.find("*/", 2)
            sql = "" if end < 0 else sql[end + 2 :]
        else:
            return sql


def validate_sql_properties(props: dict, *, write: bool) -> dict[str, str]:
    """Field → human error for an SQL job ({} if fine). Superuser-only
    editing is the caller's rule; this checks the feature switch and that the
    text is one statement, asking the database itself where it can."""
    if not sql_enabled():
        return {"sql": f"{DISABLED_MESSAGE}."}
    sql = str(props.get("sql") or "").strip()
    if not sql:
        return {"sql": "Enter one SQL statement."}
    # Checked as a run sends it: the shard placeholders are numbers by then.
    sql = with_shard(sql, index=0, total=1, style="colon")
    statements = _statements(sql)
    if len(statements) > 1:
        return {"sql": f"Exactly one statement per job; this text has {len(statements)}."}
    problem = _database_check(sql, write=write)
    if problem:
        return {"sql": problem}
    text = skip_leading(lex_sql(sql)[0])
    kind = sqlparse.parse(text)[0].get_type() if text else "UNKNOWN"
    if not write and kind in WRITE_TYPES:
        return {"sql": f"This {kind} statement writes; mark the job as a write job to allow it."}
    if not write:
        problem = read_only_problem(sql)
        if problem:
            return {"sql": problem}
    return {}


# --- the handler ----------------------------------------------------------------


class SqlJobHandler(JobHandler):
    label = "SQL statement"
    description = "Runs one SQL statement on the SQL job database; read-only unless marked as a write job."
    properties_help = {"sql": "exactly one statement; results: the first rows, or the affected row count"}

    def run(self, ctx: JobContext) -> str:
        if not sql_enabled():
            raise HandlerError(DISABLED_MESSAGE)
        sql = str(ctx.properties.get("sql") or "").strip()
        if not sql:
            raise HandlerError("property 'sql' is empty")
        sql = with_shard(sql, index=ctx.shard_index, total=ctx.shard_total, style="colon")
        write = bool(getattr(ctx, "sql_write", False))
        if not write:
            # Again at run time: the job may have been saved before this rule.
            problem = read_only_problem(sql)
            if problem:
                raise HandlerError(f"refused: {problem}")
        remaining = ctx.remaining_seconds
        if remaining <= 0:
            raise HandlerError("the job's deadline passed before the statement started")
        deadline = time.monotonic() + remaining
        db = database_settings()
        run = _run_postgresql if _engine(db) == "postgresql" else _run_sqlite
        ctx.log(f"{'write' if write else 'read-only'} statement on {describe_database(db)}")
        outcome = run(db, sql, write=write, deadline=deadline, cancelled=ctx.cancelled)
        for line in outcome.log_lines():
            ctx.log(line)
        return outcome.summary()
