"""A queryset compiled to SQL once, run many times.

Django compiles a queryset into SQL every time it is evaluated. For the
scheduler's due query, which runs on every pass, that compilation is most of
the query's cost (docs/benchmarks.md, "Where a fire's time goes").
`Prepared(build)` calls `build(marker)` once per database connection
with a marker datetime where each call's `now` goes, compiles it, and
remembers where the marker landed among the statement's parameters. A call
`prepared(now)` then only binds `now` there, executes the statement and
builds the rows: model instances with their annotations, converted by
their fields, as Django's own `ModelIterable` builds them (a test compares
the two).

Only the datetime is a call's own: whatever else `build` puts in the query
is fixed when it is compiled. The queryset must select its model's rows
(no `values()`, no `select_related`).
"""

import functools
import json
from collections.abc import Callable
from datetime import UTC, datetime

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import JSONField, QuerySet
from django.db.models.expressions import Col

from jobs.engine.bulk import fetch, with_literals

# A time no query of this project asks about, so that it is found only where
# the call's `now` goes.
MARKER = datetime(1901, 2, 3, 4, 5, 6, 789012, tzinfo=UTC)


class _Compiled:
    def __init__(self, queryset: QuerySet, connection):
        compiler = queryset.query.get_compiler(connection=connection)
        self.sql, params = compiler.as_sql()
        if compiler.klass_info is None or compiler.klass_info.get("related_klass_infos"):
            raise ValueError("a Prepared query selects its model's rows, without select_related")
        marker = connection.ops.adapt_datetimefield_value(MARKER)
        self.params = list(params)
        self.slots = [i for i, value in enumerate(self.params) if value == marker]
        if not self.slots:
            raise ValueError("the query does not use the time it is given as a parameter")
        if connection.vendor == "sqlite":
            # Everything but the time is fixed: written into the statement,
            # which SQLite then prepares once (bulk.with_literals).
            self.sql, self.params, self.slots = with_literals(self.sql, self.params, keep=self.slots)
        self.connection = connection
        self.converters = [
            (position, _converter(converters, expression, connection))
            for position, (converters, expression) in compiler.get_converters(
                [column for column, _sql, _alias in compiler.select[: compiler.col_count]]
            ).items()
        ]
        fields = compiler.klass_info["select_fields"]
        self.start, self.end = fields[0], fields[-1] + 1
        self.init_list = [
            column.target.attname for column, _sql, _alias in compiler.select[self.start : self.end]
        ]
        self.annotations = list(compiler.annotation_col_map.items())
        self.model = compiler.klass_info["model"]


class Prepared:
    def __init__(self, build: Callable[[datetime], QuerySet], *, using: str = DEFAULT_DB_ALIAS):
        self.build = build
        self.using = using
        self._compiled: _Compiled | None = None

    def __call__(self, now: datetime) -> list:
        """The rows `build(now)` would give, in its order."""
        connection = connections[self.using]
        compiled = self._compiled
        if compiled is None or compiled.connection is not connection:
            # Per connection object: each thread has its own, and the SQL is
            # the vendor's.
            compiled = self._compiled = _Compiled(self.build(MARKER), connection)
        params = list(compiled.params)
        value = connection.ops.adapt_datetimefield_value(now)
        for slot in compiled.slots:
            params[slot] = value
        rows = fetch(connection, compiled.sql, params)
        if compiled.converters:
            rows = [_converted(row, compiled.converters) for row in rows]
        model, start, end, init_list, annotations = (
            compiled.model,
            compiled.start,
            compiled.end,
            compiled.init_list,
            compiled.annotations,
        )
        objs = []
        for row in rows:
            obj = model.from_db(self.using, init_list, row[start:end])
            for attr, position in annotations:
                setattr(obj, attr, row[position])
            objs.append(obj)
        return objs


def _converted(row, converters: list) -> list:
    row = list(row)
    for position, convert in converters:
        row[position] = convert(row[position])
    return row


def _converter(converters: list, expression, connection) -> Callable:
    """One column's converters (Django's `get_converters`) as one function of
    the value, giving what `apply_converters` gives. The scheduler reads the
    due jobs on every pass, and for their columns (SQLite's datetimes and
    booleans, JSON) the same result comes without Django's call through
    each converter with its expression and connection (a test compares
    them: tests/test_prepared.py)."""
    ops = connection.ops
    if len(converters) == 1:
        (converter,) = converters
        method = getattr(converter, "__func__", None)
        owner = getattr(converter, "__self__", None)
        if (
            owner is ops
            and method is getattr(type(ops), "convert_datetimefield_value", None)
            and connection.vendor == "sqlite"
            and settings.USE_TZ
        ):
            zone = connection.timezone
            slow = functools.partial(converter, expression=expression, connection=connection)

            def convert_datetime(value):
                # A naive datetime, as SQLite's adapter parses it: made aware in the connection's zone.
                if type(value) is datetime and value.tzinfo is None:
                    return value.replace(tzinfo=zone)
                return slow(value)

            return convert_datetime
        if owner is ops and method is getattr(type(ops), "convert_booleanfield_value", None):
            return lambda value: bool(value) if value in (1, 0) else value
        if (
            type(owner) is JSONField
            and method is JSONField.from_db_value
            and owner.decoder is None
            and isinstance(expression, Col)
        ):

            def convert_json(value):
                if value is None:
                    return None
                if value == "[]":  # most of a job's lists, read on every pass: no parser for them
                    return []
                if value == "{}":
                    return {}
                try:
                    return json.loads(value)
                except json.JSONDecodeError:
                    return value

            return convert_json

    def convert(value):
        for converter in converters:
            value = converter(value, expression, connection)
        return value

    return convert
