"""One statement for many rows: an INSERT of new rows, an UPDATE of rows
that each get their own values.

`insert_rows(objs)` writes new model rows in one `INSERT … VALUES (…), (…)
RETURNING pk` per chunk and sets their primary keys: what
`bulk_create(objs)` does, without building a Django query for each call
(0.1 ms a call and 20 µs a row of the scheduler's pass went there). The
values are prepared by each field as `bulk_create` prepares them
(`pre_save`, `get_db_prep_save`).

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
"""

import functools
from collections.abc import Iterable, Sequence

from django.db import connection

# Rows per statement: well under SQLite's 32,766 bound parameters and
# PostgreSQL's 65,535 for the widest row written here.
CHUNK = 500


def insert_rows(objs: Sequence) -> list:
    """Insert model instances (one model, primary keys unset) and set their
    primary keys; returns them."""
    objs = list(objs)
    if not objs:
        return objs
    model = type(objs[0])
    fields, head = _insert_statement(model, connection.vendor)
    pk_attname = model._meta.pk.attname
    db = connection.alias
    for start in range(0, len(objs), CHUNK):
        chunk = objs[start : start + CHUNK]
        params: list = []
        for obj in chunk:
            params += [field.get_db_prep_save(field.pre_save(obj, True), connection) for field in fields]
        row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
        with connection.cursor() as cursor:
            cursor.execute(
                f"{head} VALUES {', '.join([row_sql] * len(chunk))} RETURNING {connection.ops.quote_name(model._meta.pk.column)}",
                params,
            )
            keys = cursor.fetchall()
        for obj, (key,) in zip(chunk, keys, strict=True):
            setattr(obj, pk_attname, key)
            obj._state.adding, obj._state.db = False, db
    return objs


@functools.cache
def _insert_statement(model, vendor: str) -> tuple[list, str]:
    """The fields an insert writes (every concrete one but the primary key)
    and `INSERT INTO <table> (<columns>)`."""
    qn = connection.ops.quote_name
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    return fields, f"INSERT INTO {qn(model._meta.db_table)} ({', '.join(qn(f.column) for f in fields)})"


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
    changed: dict = {}
    for start in range(0, len(rows), CHUNK):
        changed.update(
            _update_chunk(model, rows[start : start + CHUNK], match, assign, where, where_params, returning)
        )
    return changed


def _update_chunk(model, rows, match, assign, where, where_params, returning) -> dict:
    if not rows:
        return {}
    ops = connection.ops
    qn = ops.quote_name
    meta = model._meta
    table = qn(meta.db_table)
    pk_field = meta.pk
    fields = [pk_field, *(meta.get_field(n) for n in match), *(meta.get_field(n) for n in assign)]
    aliases = ["pk", *(f"m_{n}" for n in match), *(f"a_{n}" for n in assign)]
    if connection.vendor == "postgresql":
        row_sql = "(" + ", ".join(f"%s::{f.db_type(connection)}" for f in fields) + ")"
    else:
        row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
    params: list = []
    for row in rows:
        if len(row) != len(fields):
            raise ValueError(f"a row has {len(row)} values for {len(fields)} columns")
        params += [f.get_db_prep_value(value, connection) for f, value in zip(fields, row, strict=True)]
    sets = ", ".join(f"{qn(meta.get_field(n).column)} = v.{qn('a_' + n)}" for n in assign)
    conditions = [f"{table}.{qn(pk_field.column)} = v.pk"]
    conditions += [f"{table}.{qn(meta.get_field(n).column)} = v.{qn('m_' + n)}" for n in match]
    if where:
        conditions.append(f"({where})")
    statement = (
        f"WITH v({', '.join(qn(a) for a in aliases)}) AS (VALUES {', '.join([row_sql] * len(rows))}) "
        f"UPDATE {table} SET {sets} FROM v WHERE {' AND '.join(conditions)} "
        f"RETURNING {', '.join([f'{table}.{qn(pk_field.column)}', *returning])}"
    )
    with connection.cursor() as cursor:
        cursor.execute(statement, [*params, *where_params])
        return {row[0]: tuple(row[1:]) for row in cursor.fetchall()}
