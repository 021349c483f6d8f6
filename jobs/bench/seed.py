"""Bulk seeding: many rows in one INSERT … SELECT over a generated sequence
(a recursive CTE on SQLite, generate_series on PostgreSQL), never a Python
object per row.

Columns not given as SQL expressions get their model default (evaluated
once) or NULL, so columns other branches add with a default need no change
here.
"""

import time

from django.db import connection, transaction


def sequence_sql(count_param: str = "%s") -> tuple[str, str]:
    """(a WITH prefix, a FROM clause) yielding n = 1 … count."""
    if connection.vendor == "postgresql":
        return "", f"generate_series(1, {count_param}) AS seq(n)"
    return (
        f"WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {count_param}) ",
        "seq",
    )


def timestamp_sql(base_param: str, seconds_expr: str) -> str:
    """SQL for the datetime `base` minus `seconds_expr` seconds, in the form
    the ORM stores and compares (whole seconds)."""
    if connection.vendor == "postgresql":
        return f"(CAST({base_param} AS timestamptz) - ({seconds_expr}) * interval '1 second')"
    return f"strftime('%%Y-%%m-%%d %%H:%%M:%%S', {base_param}, (-({seconds_expr})) || ' seconds')"


def uuid_sql() -> str:
    if connection.vendor == "postgresql":
        return "gen_random_uuid()"
    return "lower(hex(randomblob(16)))"  # how Django stores a UUIDField on SQLite


def insert_select(
    model, count: int, expressions: dict[str, str], params: dict[str, object] | None = None
) -> float:
    """INSERT `count` rows of `model`; `expressions` maps field names to SQL
    over `n` (1 … count) and %(name)s params. Returns the seconds taken."""
    params = dict(params or {})
    columns, values = [], []
    for field in model._meta.concrete_fields:
        if field.primary_key:
            continue
        columns.append(connection.ops.quote_name(field.column))
        if field.name in expressions:
            values.append(expressions[field.name])
            continue
        default = field.get_default()  # "" for text fields without one, None for nullable ones
        key = f"default_{field.column}"
        params[key] = None if default is None else field.get_db_prep_save(default, connection)
        values.append(f"%({key})s")
    params["count"] = count
    with_sql, from_sql = sequence_sql("%(count)s")
    sql = (
        f"INSERT INTO {connection.ops.quote_name(model._meta.db_table)} ({', '.join(columns)}) "
        f"{with_sql}SELECT {', '.join(values)} FROM {from_sql}"
    )
    started = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
    return time.perf_counter() - started
