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
  COMMIT inside a DO block or procedure is refused in a transaction block).
  SQLite opens the file with mode=ro and PRAGMA query_only.
- Timeout: a watchdog thread cancels the query (psycopg cancel / sqlite3
  interrupt) at the job's deadline or when the run is cancelled, so nothing
  the statement sets inside the session can outlive it.
- Read-only is about the database's tables, and PostgreSQL lets a read-only
  transaction do more: COPY to or from a program or a server file, signal
  other sessions (pg_terminate_backend killed the application's own
  connections), reload the configuration, read server files. A read-only
  job may not name those at all (`read_only_problem`, checked when the job
  is saved and again before every run), nor the ways to run SQL built from
  text (DO, EXECUTE, query_to_xml, ts_stat, dblink …) that would hide them.
  What that cannot cover — functions someone created in the database, and
  everything a powerful role may do — is why `role_warnings` warns at
  start-up and on the settings page when the SQL role is a superuser, holds
  pg_execute_server_program / pg_read_server_files /
  pg_write_server_files / pg_signal_backend, or is the application's own
  role. docs/handlers.md says what read-only guarantees.
"""

import logging
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import sqlparse
from django.conf import settings
from django.db import connections

from jobs.handlers.base import HandlerError, JobContext, JobHandler

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


def _sqlite_authorizer(action, arg1, *_):
    # ATTACH (and VACUUM INTO, which attaches its target) would create or
    # open other files; a plain VACUUM attaches "" and stays allowed.
    if action == sqlite3.SQLITE_ATTACH and arg1:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _sqlite_connect(db: dict, *, write: bool, timeout: float) -> sqlite3.Connection:
    name = str(db.get("NAME") or "")
    if not name or name == ":memory:":
        raise HandlerError("SQL jobs need a database file, not a private in-memory SQLite database")
    if name.startswith("file:"):
        uri = name  # already a URI (the test suite's shared in-memory database)
    else:
        uri = f"file:{quote(str(Path(name).resolve()))}?mode={'rw' if write else 'ro'}"
    conn = sqlite3.connect(
        uri, uri=True, isolation_level=None, check_same_thread=False, timeout=max(0.1, min(timeout, 30))
    )
    if not write:
        conn.execute("PRAGMA query_only = ON")
    conn.set_authorizer(_sqlite_authorizer)
    return conn


def _run_sqlite(db, sql, *, write, deadline, cancelled) -> Outcome:
    try:
        conn = _sqlite_connect(db, write=write, timeout=deadline - time.monotonic())
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
        raise HandlerError(f"the database refused the statement: {exc}") from None
    finally:
        conn.close()


def _cancelled_error(watchdog: Watchdog) -> HandlerError:
    if watchdog.fired == "timeout":
        return HandlerError("statement cancelled: the job's timeout was reached")
    return HandlerError("statement cancelled")


# --- what a read-only job may not do ---------------------------------------------

# Functions with effects outside the job's own transaction: signalling other
# sessions, server configuration and logs, server files and directories,
# large-object file transfer, backups, WAL and replication; and the ones that
# run SQL given as text, which would let a statement build any of these names.
_SIDE_EFFECT_FUNCTIONS = (
    r"pg_terminate_backend|pg_cancel_backend|pg_signal_backend|pg_notify|pg_reload_conf|pg_rotate_logfile"
    r"|pg_log_backend_memory_contexts|pg_promote|pg_switch_wal|pg_create_restore_point"
    r"|pg_(?:start|stop)_backup|pg_backup_(?:start|stop)|pg_wal_replay_(?:pause|resume)"
    r"|pg_read_file|pg_read_binary_file|pg_stat_file|pg_ls_\w+|pg_file_\w+|pg_logdir_ls"
    r"|lo_import|lo_export|pg_\w*replication\w*|pg_drop_replication_slot"
    r"|dblink\w*|query_to_xml\w*|query_to_xmlschema|cursor_to_xml\w*|ts_stat|ts_rewrite"
)
_FORBIDDEN_CALL = re.compile(rf"(?<![\w$])({_SIDE_EFFECT_FUNCTIONS})(?![\w$])", re.IGNORECASE)
# Statements that run other SQL (DO blocks, prepared statements, procedures).
_FORBIDDEN_STATEMENT = re.compile(r"^\s*(do|execute|call|prepare)(?![\w$])", re.IGNORECASE)
# Unicode-escaped identifiers and strings (U&"pg\005fread_file") would hide a name.
_UNICODE_ESCAPE = re.compile(r"(?<![\w$])u&[\"']", re.IGNORECASE)
_COPY = re.compile(r"^\s*copy(?![\w$])", re.IGNORECASE)
_COPY_TO_STDOUT = re.compile(r"(?<![\w$])to\s+stdout(?![\w$])", re.IGNORECASE)
_PROGRAM = re.compile(r"(?<![\w$])program(?![\w$])", re.IGNORECASE)


def read_only_problem(sql: str) -> str | None:
    """Why a read-only job may not run `sql`, or None. The whole text is
    searched, string literals included (they are how dynamic SQL spells a
    name), comments excluded; a false alarm is fixed by rewording or by a
    write job, a miss is not fixable afterwards."""
    text = sqlparse.format(sql, strip_comments=True)
    if _COPY.match(text):
        # The target is code, not a string: 'to stdout' in a literal must not count.
        code = " ".join(
            token.value
            for token in sqlparse.parse(text)[0].flatten()
            if token.ttype not in sqlparse.tokens.String and token.ttype not in sqlparse.tokens.Name
        )
        if _PROGRAM.search(text):
            return "A read-only job cannot COPY to or from a program."
        if not _COPY_TO_STDOUT.search(code):
            return "A read-only job can only COPY … TO STDOUT, not to or from a file on the database server."
    statement = _FORBIDDEN_STATEMENT.match(text)
    if statement:
        return f"A read-only job cannot use {statement[1].upper()}: it runs SQL this check cannot see."
    if _UNICODE_ESCAPE.search(text):
        return "A read-only job cannot use Unicode-escaped names or strings (U&'…')."
    call = _FORBIDDEN_CALL.search(text)
    if call:
        return (
            f"A read-only job cannot call {call[1].lower()}(): it acts outside the job's own "
            "read-only transaction (other sessions, server files, configuration or SQL run from text)."
        )
    return None


# --- the SQL role's powers ----------------------------------------------------------

POWERFUL_ROLES = (
    "pg_execute_server_program",
    "pg_read_server_files",
    "pg_write_server_files",
    "pg_signal_backend",
)


def role_warnings() -> list[str]:
    """Loud warnings about the role SQL jobs connect as (PostgreSQL only;
    [] when SQL jobs are off or the role has none of these powers)."""
    if not sql_enabled():
        return []
    try:
        db = database_settings()
        if _engine(db) != "postgresql":
            return []
    except HandlerError:
        return []
    import psycopg

    try:
        with _pg_connect(db, timeout=5) as conn:
            row = conn.execute(
                "SELECT current_user, rolsuper, ARRAY(SELECT r.rolname::text FROM pg_roles r "
                "WHERE r.rolname = ANY(%s) AND pg_has_role(current_user, r.oid, 'MEMBER') ORDER BY 1) "
                "FROM pg_roles WHERE rolname = current_user",
                [list(POWERFUL_ROLES)],
            ).fetchone()
    except psycopg.Error as exc:
        return [
            f"Could not check the privileges of the SQL job role ({describe_database(db)}): {_pg_message(exc)}"
        ]
    user, superuser, granted = row
    warnings = []
    if superuser:
        warnings.append(
            f"SQL jobs run as {user}, a SUPERUSER: a read-only job can still run programs, read and write "
            "server files and stop other sessions through functions this check does not know. "
            "Point JOBS_SQL_DATABASE_URL at a least-privilege role."
        )
    elif granted:
        warnings.append(
            f"SQL jobs run as {user}, which holds {', '.join(granted)}: "
            "that lets a statement run server programs, touch server files or signal other sessions. "
            "Point JOBS_SQL_DATABASE_URL at a least-privilege role."
        )
    app = connections["default"].settings_dict
    if (
        "postgresql" in app.get("ENGINE", "")
        and _same_server(db, app)
        and (db.get("USER") or "") == (app.get("USER") or "")
    ):
        warnings.append(
            f"SQL jobs run as the application's own database role ({user}): a statement can cancel or "
            "terminate Cronboard's connections, and a write job can change Cronboard's tables. "
            "Point JOBS_SQL_DATABASE_URL at a role of their own."
        )
    return warnings


def _same_server(a: dict, b: dict) -> bool:
    return (a.get("HOST") or "", str(a.get("PORT") or "")) == (b.get("HOST") or "", str(b.get("PORT") or ""))


def log_role_warnings() -> list[str]:
    warnings = role_warnings()
    for warning in warnings:
        log.warning("SQL JOBS: %s", warning)
    return warnings


# --- save-time validation -------------------------------------------------------


def _statements(sql: str) -> list[str]:
    return [s for s in sqlparse.split(sql) if sqlparse.format(s, strip_comments=True).strip(" \t\r\n;")]


def _database_check(sql: str) -> str | None:
    """Ask the database whether it parses `sql` as one statement, without
    running it. Only parse errors count; a database that cannot be reached
    or a table that does not exist yet does not stop a save."""
    try:
        db = database_settings()
        engine = _engine(db)
    except HandlerError as exc:
        return str(exc)
    if engine == "postgresql":
        import psycopg

        try:
            with _pg_connect(db, timeout=5) as conn:
                result = conn.pgconn.prepare(b"", sql.encode())
                if result.status == psycopg.pq.ExecStatus.COMMAND_OK:
                    return None
                error = psycopg.errors.error_from_result(result)
                if error.sqlstate == "42601":  # syntax error, and "multiple commands"
                    return f"The database refused it: {_pg_message(error)}"
        except psycopg.Error:
            return None
        return None
    if sql.lstrip()[:7].upper() == "EXPLAIN":
        return None
    try:
        conn = _sqlite_connect(db, write=False, timeout=5)
    except (sqlite3.Error, HandlerError):
        return None
    try:
        conn.execute("EXPLAIN " + sql)  # compiles without running
    except sqlite3.ProgrammingError as exc:
        return f"The database refused it: {exc}"
    except sqlite3.OperationalError as exc:
        if "syntax error" in str(exc) or "incomplete input" in str(exc):
            return f"The database refused it: {exc}"
    except sqlite3.Error:
        pass
    finally:
        conn.close()
    return None


def validate_sql_properties(props: dict, *, write: bool) -> dict[str, str]:
    """Field → human error for an SQL job ({} if fine). Superuser-only
    editing is the caller's rule; this checks the feature switch and that the
    text is one statement, asking the database itself where it can."""
    if not sql_enabled():
        return {"sql": f"{DISABLED_MESSAGE}."}
    sql = str(props.get("sql") or "").strip()
    if not sql:
        return {"sql": "Enter one SQL statement."}
    statements = _statements(sql)
    if len(statements) > 1:
        return {"sql": f"Exactly one statement per job; this text has {len(statements)}."}
    problem = _database_check(sql)
    if problem:
        return {"sql": problem}
    kind = sqlparse.parse(sql)[0].get_type() if statements else "UNKNOWN"
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
