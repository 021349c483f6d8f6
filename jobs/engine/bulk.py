"""One statement for many rows: an INSERT of new rows, an UPDATE of rows
that each get their own values.

`insert_rows(objs)` writes new model rows in one `INSERT … VALUES (…), (…)
RETURNING pk` per chunk and sets their primary keys: what
`bulk_create(objs)` does, without building a Django query for each call.

The scheduler's hot paths write a batch of rows at a time: the fires a pass
claims (each job's next fire time moves from the value it read to its own
new one) and the runs a pass finishes (each with its own outcome). One
statement per batch, not one per row:

    WITH v(pk, m_<match>…, a_<assign>…) AS (VALUES (…), (…))
    UPDATE <table> SET <assign> = v.a_<assign>, … FROM v
    WHERE <table>.<pk> = v.pk AND <table>.<match> = v.m_<match> … [AND <where>]
    RETURNING <table>.<pk> [, <returning>…]

SQLite (3.33+ for UPDATE … FROM, 3.35+ for RETURNING) and PostgreSQL both
run it. On PostgreSQL every placeholder carries its column's type, since a
VALUES list gives its columns no type of its own.

What each statement costs besides the database's own work is kept small,
because the scheduler pays it on every pass: the SQL of each shape (model,
columns, number of rows) is built once, and each value is prepared for the
database by a function chosen once per field (`Preparer`): for the values
the scheduler writes (aware datetimes, UUIDs, integers, strings, booleans,
JSON objects) it gives what the field's `get_db_prep_save` (inserts) or
`get_db_prep_value` (updates) gives, without Django's dispatch through the
field, its lookups and the connection proxy (about a third of a pass went
there); any other value goes through the field's own method.
tests/test_prepared.py compares the two for every field of runs and jobs,
on both databases.
"""

import functools
import operator
import re
import uuid
import weakref
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import DateField, DateTimeField, Field, TimeField

# Rows per statement: well under SQLite's 32,766 bound parameters and
# PostgreSQL's 65,535 for the widest row written here.
CHUNK = 500


def database():
    """The connection the engine writes through: the default database's
    wrapper itself (not the `django.db.connection` proxy, which looks it up
    again on every attribute)."""
    return connections[DEFAULT_DB_ALIAS]


def fetch(conn, sql: str, params) -> list[tuple]:
    """Execute `sql` (Django's %s placeholders) with `params` on `conn` and
    return its rows.

    On SQLite the statement goes to the driver's own connection, its
    placeholders rewritten once per statement text: Django's cursor
    rewrites them on every execution (a regular expression over the whole
    text, which for a batch's INSERT is tens of kilobytes) and wraps each
    call in three layers. The same checks are made (a broken transaction
    refuses, errors come as Django's), and while anything watches the
    statements (a test capturing queries, DEBUG's query log, an execute
    wrapper) they go through Django's cursor; a wrapper that only counts
    them (`counts_only`, the metrics' count) is counted here instead."""
    wrappers = conn.execute_wrappers
    if (
        conn.vendor == "sqlite"
        and not conn.queries_logged
        and all(getattr(w, "counts_only", False) for w in wrappers)
    ):
        for wrapper in wrappers:
            wrapper.count()
        conn.close_if_health_check_failed()
        conn.ensure_connection()
        conn.validate_thread_sharing()
        conn.validate_no_broken_transaction()
        with conn.wrap_database_errors:
            return conn.connection.execute(_qmark(sql), params).fetchall()
    with conn.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# -- constants written into the statement (SQLite) ---------------------------------------

_PLACEHOLDER = re.compile(r"%%|%s")


def sql_literal(value) -> str | None:
    """`value` as an SQL literal (standard quoting, which both databases
    read), or None for a value kept as a parameter (None, a float, anything
    but a string, an integer or a boolean). Only for the engine's own
    constants: a state, a status, a limit."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        return "'" + str.replace(value, "'", "''") + "'"
    return None


def with_literals(sql: str, params: Sequence, keep: Iterable[int] = ()) -> tuple[str, list, list[int]]:
    """Statement `sql` (Django's %s placeholders) with each parameter not in
    `keep` (positions) written into it as a literal, where it has one
    (`sql_literal`): (the SQL, the parameters left, where each position
    of `keep` went among them).

    SQLite prepares a statement again on every execution when the value
    bound to one of its parameters might change the plan, which it decides
    while it checks whether a partial index applies: the due query, with
    the job's state bound, was prepared anew on every pass (0.36 ms of
    CPU; 0.02 ms with the state as a literal). The engine's statements
    bind only what changes between executions, and write their constants."""
    keep = set(keep)
    left: list = []
    moved: dict[int, int] = {}
    position = 0

    def place(match: re.Match) -> str:
        nonlocal position
        if match.group() == "%%":
            return "%%"
        value, position = params[position], position + 1
        literal = None if position - 1 in keep else sql_literal(value)
        if literal is None:
            moved[position - 1] = len(left)
            left.append(value)
            return "%s"
        return literal.replace("%", "%%")

    sql = _PLACEHOLDER.sub(place, sql)
    if position != len(params):
        raise ValueError(f"{len(params)} parameters for {position} placeholders")
    return sql, left, [moved[slot] for slot in sorted(keep)]


@functools.lru_cache(maxsize=512)
def _qmark(sql: str) -> str:
    """Django's "format" placeholders as SQLite's "qmark" ones, as Django's
    SQLite cursor converts them."""
    from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


# -- preparing values ---------------------------------------------------------------


def _field_prep(field, conn, *, save: bool) -> Callable:
    """A function value → the value as the database driver takes it: the
    field's own `get_db_prep_save` (`save`) or `get_db_prep_value`, with a
    fast path, for the types the engine writes, that gives the same result."""
    if save:
        django = functools.partial(_prep_save, field, conn)
    else:
        django = functools.partial(field.get_db_prep_value, connection=conn)
    kind = (field.target_field if field.is_relation else field).get_internal_type()
    sqlite = conn.vendor == "sqlite"
    if kind == "DateTimeField" and settings.USE_TZ:
        if sqlite:
            zone = conn.timezone
            last = [None, None]  # the last value and its text: a pass writes the same `now` many times

            def prep(value):
                if value is last[0] and value is not None:
                    return last[1]
                if type(value) is datetime and value.utcoffset() is not None:
                    # adapt_datetimefield_value: naive in the connection's zone, as text.
                    last[:] = value, str(value.astimezone(zone).replace(tzinfo=None))
                    return last[1]
                return None if value is None else django(value)

            return prep
        return lambda value: (
            value
            if value is None or (type(value) is datetime and value.utcoffset() is not None)
            else django(value)
        )
    if kind == "UUIDField":
        native = conn.features.has_native_uuid_field
        return lambda value: (value if native else value.hex) if type(value) is uuid.UUID else django(value)
    if kind in ("CharField", "TextField"):
        # A str as is, a choices enum member too (the field's to_python keeps any str).
        return lambda value: value if value is None or isinstance(value, str) else django(value)
    if kind == "BooleanField":
        return lambda value: value if value is None or type(value) is bool else django(value)
    if sqlite and kind in conn.ops.integer_field_ranges:
        # SQLite adapts no integer (PostgreSQL wraps each in its type): as is.
        return lambda value: value if value is None or type(value) is int else django(value)
    return django


def _prep_save(field, conn, value):
    return field.get_db_prep_save(value, conn)


class Preparer:
    """For fixed fields of a model on one connection: each field's value
    prepared for the driver (`values(row)`), or read off an instance and
    prepared as an INSERT prepares it (`of(obj)`: `pre_save` first, for a
    field that computes its value)."""

    def __init__(self, fields: Sequence[Field], conn, *, save: bool):
        self.fields = list(fields)
        self.preps = [_field_prep(field, conn, save=save) for field in self.fields]
        self.getters = [
            (lambda obj, f=field: f.pre_save(obj, True))
            if _computes_on_save(field)
            else operator.attrgetter(field.attname)
            for field in self.fields
        ]

    def values(self, row: Sequence) -> list:
        if len(row) != len(self.preps):
            raise ValueError(f"a row has {len(row)} values for {len(self.preps)} columns")
        return [prep(value) for prep, value in zip(self.preps, row, strict=True)]

    def of(self, obj) -> list:
        return [prep(get(obj)) for prep, get in zip(self.preps, self.getters, strict=True)]


def _computes_on_save(field) -> bool:
    """Whether the field's `pre_save` may give other than its attribute: it
    overrides Field's, and is not a date or time field's without auto_now
    or auto_now_add (which then reads the attribute)."""
    pre_save = type(field).pre_save
    if pre_save is Field.pre_save:
        return False
    dated = pre_save in (DateField.pre_save, DateTimeField.pre_save, TimeField.pre_save)
    return not dated or field.auto_now or field.auto_now_add


# Per connection object (each thread has its own; a test may switch the
# database): the preparers made for it, which hold it.
_preparers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def preparer(model, names: Sequence[str], *, save: bool = False, conn=None) -> Preparer:
    """The Preparer of `model`'s fields `names` ("pk" for the primary key)
    on the engine's connection (or `conn`)."""
    conn = conn or database()
    made = _preparers.setdefault(conn, {})
    key = (model, tuple(names), save)
    if key not in made:
        meta = model._meta
        fields = [meta.pk if name == "pk" else meta.get_field(name) for name in names]
        made[key] = Preparer(fields, conn, save=save)
    return made[key]


# -- INSERT -------------------------------------------------------------------------------


def insert_rows(objs: Sequence) -> list:
    """Insert model instances (one model, primary keys unset) and set their
    primary keys; returns them."""
    objs = list(objs)
    if not objs:
        return objs
    conn = database()
    model = type(objs[0])
    names = _insert_fields(model)
    prep = preparer(model, names, save=True, conn=conn)
    pk_attname = model._meta.pk.attname
    db = conn.alias
    for start in range(0, len(objs), CHUNK):
        chunk = objs[start : start + CHUNK]
        params: list = []
        for obj in chunk:
            params += prep.of(obj)
        keys = fetch(conn, _insert_sql(model, conn.vendor, len(chunk)), params)
        for obj, (key,) in zip(chunk, keys, strict=True):
            setattr(obj, pk_attname, key)
            obj._state.adding, obj._state.db = False, db
    return objs


@functools.cache
def _insert_fields(model) -> tuple:
    """The fields an insert writes: every concrete one but the primary key."""
    return tuple(f.name for f in model._meta.concrete_fields if not f.primary_key)


@functools.cache
def _insert_sql(model, vendor: str, rows: int) -> str:
    qn = database().ops.quote_name
    meta = model._meta
    columns = [meta.get_field(name).column for name in _insert_fields(model)]
    row_sql = "(" + ", ".join(["%s"] * len(columns)) + ")"
    return (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(c) for c in columns)}) "
        f"VALUES {', '.join([row_sql] * rows)} RETURNING {qn(meta.pk.column)}"
    )


# -- UPDATE … FROM (VALUES …) -----------------------------------------------------------


def update_from_values(
    model,
    rows: Iterable[Sequence],
    *,
    match: Sequence[str] = (),
    assign: Sequence[str],
    where: str = "",
    where_params: Sequence = (),
) -> set:
    """Update each row `(pk, *match values, *assign values)` of `model`: set
    the `assign` fields to the row's values where the primary key and every
    `match` field equal the row's. `where` (SQL, may name the table) is
    ANDed on. Returns the primary keys of the rows that changed."""
    return set(
        update_from_values_returning(
            model, rows, match=match, assign=assign, where=where, where_params=where_params
        )
    )


def update_from_values_returning(
    model,
    rows: Iterable[Sequence],
    *,
    match: Sequence[str] = (),
    assign: Sequence[str],
    where: str = "",
    where_params: Sequence = (),
    returning: Sequence[str] = (),
) -> dict:
    """`update_from_values`, which also returns, for each row that changed,
    the values of the `returning` SQL expressions (which may name the
    table) evaluated on the updated row: {pk: (value, …)}. One statement
    then both writes the rows and reads what follows from them."""
    rows = list(rows)
    if not rows:
        return {}
    conn = database()
    match, assign, returning = tuple(match), tuple(assign), tuple(returning)
    prep = preparer(model, ("pk", *match, *assign), conn=conn)
    changed: dict = {}
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        params: list = []
        for row in chunk:
            params += prep.values(row)
        sql = _update_sql(model, conn.vendor, match, assign, where, returning, len(chunk))
        changed.update((row[0], tuple(row[1:])) for row in fetch(conn, sql, [*params, *where_params]))
    return changed


@functools.cache
def _update_sql(
    model, vendor: str, match: tuple, assign: tuple, where: str, returning: tuple, rows: int
) -> str:
    values, update = _update_parts(model, vendor, match, assign, where, returning, rows, "v")
    return f"WITH {values} {update}"


def _update_parts(
    model, vendor: str, match: tuple, assign: tuple, where: str, returning: tuple, rows: int, alias: str
) -> tuple[str, str]:
    """(`alias(…) AS (VALUES …)`, `UPDATE … FROM alias … RETURNING …`)."""
    conn = database()
    qn = conn.ops.quote_name
    meta = model._meta
    table = qn(meta.db_table)
    pk_field = meta.pk
    fields = [pk_field, *(meta.get_field(n) for n in match), *(meta.get_field(n) for n in assign)]
    aliases = ["pk", *(f"m_{n}" for n in match), *(f"a_{n}" for n in assign)]
    if vendor == "postgresql":
        row_sql = "(" + ", ".join(f"%s::{f.db_type(conn)}" for f in fields) + ")"
    else:
        row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sets = ", ".join(f"{qn(meta.get_field(n).column)} = {alias}.{qn('a_' + n)}" for n in assign)
    conditions = [f"{table}.{qn(pk_field.column)} = {alias}.pk"]
    conditions += [f"{table}.{qn(meta.get_field(n).column)} = {alias}.{qn('m_' + n)}" for n in match]
    if where:
        conditions.append(f"({where})")
    return (
        f"{alias}({', '.join(qn(a) for a in aliases)}) AS (VALUES {', '.join([row_sql] * rows)})",
        f"UPDATE {table} SET {sets} FROM {alias} WHERE {' AND '.join(conditions)} "
        f"RETURNING {', '.join([f'{table}.{qn(pk_field.column)}', *returning])}",
    )


# -- UPDATE, then INSERT of the rows it allows, in one statement (PostgreSQL) -----------


def update_then_insert(
    model,
    rows: Sequence[Sequence],
    objs: Sequence,
    *,
    key: str,
    match: Sequence[str] = (),
    assign: Sequence[str],
    where: str = "",
    where_params: Sequence = (),
) -> tuple[set, list]:
    """PostgreSQL only: `update_from_values(model, rows, …)` and then
    `insert_rows` of those of `objs` whose `key` field (a foreign key to
    `model`, e.g. a run's job) points at a row the update changed, as ONE
    statement (data-modifying WITH): one round trip where there were two.
    Returns (the primary keys the update changed, the objs inserted, their
    primary keys set). At most CHUNK rows and CHUNK objs."""
    rows, objs = list(rows), list(objs)
    if not rows:
        return set(), []
    if len(rows) > CHUNK or len(objs) > CHUNK:
        raise ValueError(f"at most {CHUNK} rows and {CHUNK} objects in one statement")
    conn = database()
    if conn.vendor != "postgresql":
        raise ValueError("one statement for an update and an insert is PostgreSQL's")
    match, assign = tuple(match), tuple(assign)
    params: list = []
    prep = preparer(model, ("pk", *match, *assign), conn=conn)
    for row in rows:
        params += prep.values(row)
    params += where_params
    inserted_model = type(objs[0]) if objs else model
    names = _insert_fields(inserted_model)
    insert_prep = preparer(inserted_model, names, save=True, conn=conn)
    for obj in objs:
        params += insert_prep.of(obj)
    sql = _update_then_insert_sql(model, inserted_model, key, match, assign, where, len(rows), len(objs))
    changed: set = set()
    inserted: list = []
    for tag, pk, key_value in fetch(conn, sql, params):
        if tag == 0:
            changed.add(pk)
        else:
            inserted.append((pk, key_value))
    if not objs:
        return changed, []
    key_attname = inserted_model._meta.get_field(key).attname
    wanted = [obj for obj in objs if getattr(obj, key_attname) in changed]
    # RETURNING gives the rows in the order they were inserted, which the
    # SELECT orders as `objs` are: checked against the key of each.
    if [getattr(obj, key_attname) for obj in wanted] != [key_value for _pk, key_value in inserted]:
        raise RuntimeError("the inserted rows came back in another order than they were given")
    pk_attname, db = inserted_model._meta.pk.attname, conn.alias
    for obj, (pk, _key_value) in zip(wanted, inserted, strict=True):
        setattr(obj, pk_attname, pk)
        obj._state.adding, obj._state.db = False, db
    return changed, wanted


@functools.lru_cache(maxsize=128)  # keyed by row counts too: bounded
def _update_then_insert_sql(
    model, inserted_model, key: str, match: tuple, assign: tuple, where: str, rows: int, objs: int
) -> str:
    conn = database()
    qn = conn.ops.quote_name
    values, update = _update_parts(model, "postgresql", match, assign, where, (), rows, "v")
    sql = f"WITH {values}, u AS ({update})"
    if objs:
        meta = inserted_model._meta
        fields = [meta.get_field(name) for name in _insert_fields(inserted_model)]
        columns = [qn(field.column) for field in fields]
        key_column = qn(meta.get_field(key).column)
        table = qn(meta.db_table)
        pk_column = qn(meta.pk.column)
        row_sql = ", ".join(f"%s::{f.db_type(conn)}" for f in fields)
        values = ", ".join(f"({row_sql}, {n})" for n in range(objs))
        sql += (
            f", n({', '.join(columns)}, ord) AS (VALUES {values}), "
            f"i AS (INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(f'n.{c}' for c in columns)} "
            f"FROM n WHERE n.{key_column} IN (SELECT * FROM u) ORDER BY n.ord "
            f"RETURNING {table}.{pk_column}, {table}.{key_column}) "
            f"SELECT 0, u.*, NULL FROM u UNION ALL SELECT 1, i.* FROM i"
        )
    else:
        sql += " SELECT 0, u.*, NULL FROM u"
    return sql


def update_then_update(
    first,
    first_rows: Sequence[Sequence],
    second,
    second_rows: Sequence[Sequence],
    *,
    key: str,
    match: Sequence[str] = (),
    assign: Sequence[str],
    then_assign: Sequence[str],
    then_returning: Sequence[str] = (),
) -> tuple[set, dict]:
    """PostgreSQL only: `update_from_values(first, first_rows, match=…,
    assign=…)`, then `update_from_values_returning(second, second_rows,
    assign=then_assign, returning=then_returning)` of only the rows of
    `second` that the changed rows of `first` point at by their `key`
    field, as ONE statement: (the primary keys of `first` changed, {the
    primary key of each `second` row changed: its `then_returning` values}).
    At most CHUNK rows each."""
    first_rows, second_rows = list(first_rows), list(second_rows)
    if not first_rows:
        return set(), {}
    if len(first_rows) > CHUNK or len(second_rows) > CHUNK:
        raise ValueError(f"at most {CHUNK} rows of each in one statement")
    conn = database()
    if conn.vendor != "postgresql":
        raise ValueError("one statement for two updates is PostgreSQL's")
    match, assign, then_assign, then_returning = (
        tuple(match),
        tuple(assign),
        tuple(then_assign),
        tuple(then_returning),
    )
    params: list = []
    prep = preparer(first, ("pk", *match, *assign), conn=conn)
    for row in first_rows:
        params += prep.values(row)
    then_prep = preparer(second, ("pk", *then_assign), conn=conn)
    for row in second_rows:
        params += then_prep.values(row)
    sql = _update_then_update_sql(
        first, second, key, match, assign, then_assign, then_returning, len(first_rows), len(second_rows)
    )
    changed: set = set()
    then_changed: dict = {}
    for tag, pk, *values in fetch(conn, sql, params):
        if tag == 0:
            changed.add(pk)
        else:
            then_changed[pk] = tuple(values)
    return changed, then_changed


@functools.lru_cache(maxsize=128)  # keyed by row counts too: bounded
def _update_then_update_sql(
    first,
    second,
    key: str,
    match: tuple,
    assign: tuple,
    then_assign: tuple,
    then_returning: tuple,
    rows: int,
    then_rows: int,
) -> str:
    qn = database().ops.quote_name
    key_column = qn(first._meta.get_field(key).column)
    first_table = qn(first._meta.db_table)
    values, update = _update_parts(
        first, "postgresql", match, assign, "", (f"{first_table}.{key_column}",), rows, "v"
    )
    sql = f"WITH {values}, r AS ({update})"
    if then_rows:
        where = f"{qn(second._meta.db_table)}.{qn(second._meta.pk.column)} IN (SELECT r.{key_column} FROM r)"
        then_values, then_update = _update_parts(
            second, "postgresql", (), then_assign, where, then_returning, then_rows, "w"
        )
        nulls = "".join(", NULL" for _ in then_returning)
        sql += f", {then_values}, s AS ({then_update}) SELECT 0, r.{qn(first._meta.pk.column)}{nulls} FROM r UNION ALL SELECT 1, s.* FROM s"
    else:
        sql += f" SELECT 0, r.{qn(first._meta.pk.column)} FROM r"
    return sql
