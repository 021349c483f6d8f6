"""The read-only guard of SQL jobs (jobs.handlers.sql runs them).

Read-only is about the database's tables, and PostgreSQL lets a read-only
transaction do more: COPY to or from a program or a server file, signal
other sessions (the application's own connections too), reload the
configuration, read server files. What stops that is the role: a read-only
job is refused, when saved and again on its own connection before every run
(`RolePowers.read_only_refusal`), unless its role is no superuser, holds
none of POWERFUL_ROLES, may execute none of SERVER_FUNCTIONS and is not
Cronboard's own role. `read_only_problem` is an early warning in words: it
refuses those names and the ways to run SQL built from text (DO, EXECUTE,
query_to_xml, ts_stat, dblink …), reading comments and quotes as the server
does.

Secrets on SQLite: SQLite has no roles, so `SqliteGuard`, the connection's
authorizer, refuses a read-only job every read of the tables and columns
JOBS_SQL_SQLITE_DENY_TABLES names, by whatever route (views, subqueries,
pragmas): SQLite itself reports each table and column a statement reads.
"""

import fnmatch
import re
import sqlite3
from dataclasses import dataclass

from django.db import connections

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


def lex_sql(sql: str) -> tuple[str, str]:
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


def skip_leading(text: str) -> str:
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
    text, code = lex_sql(sql)
    text, code = skip_leading(text), skip_leading(code)
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
