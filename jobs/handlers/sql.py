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
  SQLite opens the file with mode=ro and PRAGMA query_only.
- Timeout: a watchdog thread cancels the query (psycopg cancel / sqlite3
  interrupt) at the job's deadline or when the run is cancelled, so nothing
  the statement sets inside the session can outlive it.
- Read-only is about the database's tables, and PostgreSQL lets a read-only
  transaction do more: COPY to or from a program or a server file, signal
  other sessions (the application's own connections too), reload the
  configuration, read server files. What stops that is the role: a
  read-only job is refused, when saved and again on its own connection
  before every run (`RolePowers.read_only_refusal`), unless its role is no
  superuser, holds none of POWERFUL_ROLES, may execute none of
  SERVER_FUNCTIONS and is not Cronboard's own role. `read_only_problem` is
  an early warning in words: it refuses those names and the ways to run SQL
  built from text (DO, EXECUTE, query_to_xml, ts_stat, dblink …), reading
  comments and quotes as the server does.
- Secrets on SQLite: SQLite has no roles, so `SqliteGuard`, the connection's
  authorizer, refuses a read-only job every read of the tables and columns
  JOBS_SQL_SQLITE_DENY_TABLES names, by whatever route (views, subqueries,
  pragmas): SQLite itself reports each table and column a statement reads.
docs/handlers.md says what read-only guarantees.
"""

import fnmatch
import logging
import re
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

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


class SqliteGuard:
    """sqlite3's authorizer on a job's connection, consulted by SQLite itself
    for every table and column a statement reads, through views, subqueries,
    CTEs and table-valued pragmas alike. It refuses ATTACH of another file
    (and VACUUM INTO, which attaches its target; a plain VACUUM attaches ""),
    and for a read-only job every read of a table or column that
    JOBS_SQL_SQLITE_DENY_TABLES names, and pragmas about such a table.
    `refused` keeps what it refused, for the message."""

    def __init__(self, deny: list[str]):
        self.deny = [pattern.partition(".")[::2] for pattern in deny]
        self.refused: list[str] = []

    def __call__(self, action, arg1, arg2, _db, _source):
        if action == sqlite3.SQLITE_ATTACH and arg1:
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_READ and arg1:
            hit = self._denied(arg1, arg2 or "")
        elif action == sqlite3.SQLITE_PRAGMA and arg2:
            hit = self._denied(arg2, "")
        else:
            return sqlite3.SQLITE_OK
        if hit is None:
            return sqlite3.SQLITE_OK
        if hit not in self.refused:
            self.refused.append(hit)
        return sqlite3.SQLITE_DENY

    def _denied(self, table: str, column: str) -> str | None:
        table, column = table.lower(), column.lower()
        for table_pattern, column_pattern in self.deny:
            if not fnmatch.fnmatchcase(table, table_pattern):
                continue
            if not column_pattern:
                return table
            if column and fnmatch.fnmatchcase(column, column_pattern):
                return f"{table}.{column}"
        return None

    def refusal(self) -> str | None:
        if not self.refused:
            return None
        return (
            f"A read-only job may not read {', '.join(self.refused)} (JOBS_SQL_SQLITE_DENY_TABLES): "
            "they hold sessions, passwords, tokens or secrets. Name only the columns and tables you need, "
            "or ask the operator to take the table off that list."
        )


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


# --- what a read-only job may not do ---------------------------------------------

# Functions with effects outside the job's own transaction: signalling other
# sessions, server configuration and logs, server files and directories,
# large-object file transfer, backups, WAL and replication, advisory locks
# (Cronboard's own graph lock, jobs.workflows.GRAPH_LOCK_KEY, is one: a job
# holding it would stop every save of a job); and the ones that run SQL given
# as text, which would let a statement build any of these names.
_SIDE_EFFECT_FUNCTIONS = (
    r"pg_terminate_backend|pg_cancel_backend|pg_signal_backend|pg_notify|pg_reload_conf|pg_rotate_logfile"
    r"|pg_(?:try_)?advisory\w*"
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


# A dollar-quote opener: $$ or $tag$ (a tag does not start with a digit).
_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_\u0080-\uffff][\w\u0080-\uffff]*)?\$")
_WORD_CHAR = re.compile(r"[\w$\u0080-\uffff]")


def _lex(sql: str) -> tuple[str, str]:
    """`sql` read as PostgreSQL's lexer reads it: (the text without comments,
    string literals kept; the code alone, literals and quoted names blanked).
    Block comments nest (/* /* */ */ is one comment), -- runs to the end of
    the line, '…' doubles its quotes, E'…' also takes backslash escapes,
    "…" is a name and $tag$…$tag$ a string. sqlparse does not nest comments,
    so what it strips and what the server runs could differ."""
    text: list[str] = []
    code: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
            text.append(" ")
            code.append(" ")
        elif sql.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            text.append(" ")
            code.append(" ")
        elif c in "'\"":
            escapes = (
                c == "'" and i > 0 and sql[i - 1] in "eE" and not (i > 1 and _WORD_CHAR.match(sql[i - 2]))
            )
            j = i + 1
            while j < n:
                if escapes and sql[j] == "\\":
                    j += 2
                elif sql[j] == c:
                    if sql.startswith(c * 2, j):
                        j += 2
                    else:
                        break
                else:
                    j += 1
            text.append(sql[i : j + 1])
            code.append(f" {c}{c} ")
            i = j + 1
        elif (
            c == "$"
            and not (i > 0 and _WORD_CHAR.match(sql[i - 1]))
            and (quote := _DOLLAR_QUOTE.match(sql, i))
        ):
            end = sql.find(quote[0], quote.end())
            end = n if end < 0 else end + len(quote[0])
            text.append(sql[i:end])
            code.append(" '' ")
            i = end
        else:
            text.append(c)
            code.append(c)
            i += 1
    return "".join(text), "".join(code)


def _leading(text: str) -> str:
    """`text` without the empty statements and blanks before its first word:
    the server skips a leading `;`, so the checks must too."""
    return text.lstrip(" \t\r\n\f\v;")


def read_only_problem(sql: str) -> str | None:
    """Why a read-only job may not run `sql`, or None. An early, friendly
    warning: the guarantee is the database's (a read-only transaction under
    a role without server powers, `RolePowers.read_only_refusal`; on SQLite
    the file opened read-only and `SqliteGuard`). The whole text is searched, string literals included (they
    are how dynamic SQL spells a name), comments excluded; a false alarm is
    fixed by rewording or by a write job."""
    text, code = _lex(sql)
    text, code = _leading(text), _leading(code)
    if _COPY.match(text):
        # The target is code, not a string: 'to stdout' in a literal must not count.
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
# Functions that read or write server files, change the server's state or
# run SQL on a connection of their own (dblink's is not read-only). None is
# executable by PUBLIC on a fresh server (dblink's only once installed), but
# any may have been granted to the role without the roles above.
SERVER_FUNCTIONS = (
    "pg_read_file", "pg_read_binary_file", "pg_ls_dir", "pg_stat_file", "lo_import", "lo_export",
    "pg_reload_conf", "pg_rotate_logfile", "pg_promote", "pg_file_write", "pg_file_rename",
    "pg_file_unlink", "pg_file_sync", "dblink", "dblink_exec", "dblink_connect", "dblink_connect_u",
    "dblink_send_query", "dblink_open",
)  # fmt: skip
ROLE_RECIPE = (
    "connect them (JOBS_SQL_DATABASE_URL) as a role of their own that has none of these, e.g. "
    "CREATE ROLE cronboard_sql LOGIN PASSWORD '…' NOSUPERUSER, then GRANT it SELECT on the tables "
    "the jobs read (docs/operations.md, “A role for SQL jobs”)"
)
# MEMBER, not USAGE: a member without INHERIT can still SET ROLE, and
# set_config('role', …) does that inside a single SELECT. So the functions
# too: EXECUTE held by any role it is a member of (itself included), since
# has_function_privilege(f) alone asks only what it inherits.
_ROLE_QUERY = """
SELECT current_user::text,
  ARRAY(SELECT s.rolname::text FROM pg_roles s
        WHERE s.rolsuper AND pg_has_role(current_user, s.oid, 'MEMBER') ORDER BY 1),
  ARRAY(SELECT p.rolname::text FROM pg_roles p
        WHERE p.rolname = ANY(%(roles)s) AND pg_has_role(current_user, p.oid, 'MEMBER') ORDER BY 1),
  ARRAY(SELECT DISTINCT f.proname::text FROM pg_proc f
        WHERE f.proname = ANY(%(functions)s) AND EXISTS(
          SELECT 1 FROM pg_roles m
          WHERE pg_has_role(current_user, m.oid, 'MEMBER') AND has_function_privilege(m.oid, f.oid, 'EXECUTE'))
        ORDER BY 1),
  EXISTS(SELECT 1 FROM pg_roles a WHERE a.rolname = %(app)s AND pg_has_role(current_user, a.oid, 'MEMBER'))
"""


@dataclass
class RolePowers:
    """What the role SQL jobs connect as may do beyond reading its tables."""

    user: str
    superuser_roles: list[str]  # itself, if a superuser, and superuser roles it belongs to
    roles: list[str]  # POWERFUL_ROLES it holds, directly or through membership
    functions: list[str]  # SERVER_FUNCTIONS it may execute
    application_role: str | None  # Cronboard's own role, if it is or belongs to it

    def problems(self) -> list[str]:
        if self.user in self.superuser_roles:
            return ["is a SUPERUSER"]
        problems = []
        if self.superuser_roles:
            problems.append(f"belongs to the superuser role {', '.join(self.superuser_roles)}")
        if self.roles:
            problems.append(
                f"holds {', '.join(self.roles)} (programs, server files or other sessions' signals)"
            )
        if self.functions:
            problems.append(
                f"may execute {', '.join(f + '()' for f in self.functions)} (server files, server state "
                "or SQL on other connections)"
            )
        if self.application_role:
            problems.append(
                f"is, or belongs to, Cronboard's own database role {self.application_role} "
                "(a statement could cancel or terminate Cronboard's connections)"
            )
        return problems

    def read_only_refusal(self) -> str | None:
        """The sentence a read-only job is refused with, or None."""
        problems = self.problems()
        if not problems:
            return None
        return f"Read-only SQL jobs may not run as {self.user}, which {'; '.join(problems)}: {ROLE_RECIPE}."


def _application_role() -> str | None:
    app = connections["default"].settings_dict
    if "postgresql" not in app.get("ENGINE", "") or not app.get("USER"):
        return None
    return app["USER"]


def role_powers(conn) -> RolePowers:
    """Asks the server, on the job's own connection, what its role may do."""
    app = _application_role()
    user, superusers, roles, functions, is_app = conn.execute(
        _ROLE_QUERY, {"roles": list(POWERFUL_ROLES), "functions": list(SERVER_FUNCTIONS), "app": app}
    ).fetchone()
    return RolePowers(user, list(superusers), list(roles), list(functions), app if is_app else None)


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
    return [s for s in sqlparse.split(_lex(sql)[0]) if s.strip(" \t\r\n;")]


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
    statements = _statements(sql)
    if len(statements) > 1:
        return {"sql": f"Exactly one statement per job; this text has {len(statements)}."}
    problem = _database_check(sql, write=write)
    if problem:
        return {"sql": problem}
    text = _leading(_lex(sql)[0])
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
