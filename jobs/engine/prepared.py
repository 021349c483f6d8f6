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

from collections.abc import Callable
from datetime import UTC, datetime

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet

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
        self.compiler = compiler
        self.converters = compiler.get_converters(
            [column for column, _sql, _alias in compiler.select[: compiler.col_count]]
        )
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
            rows = compiled.compiler.apply_converters(rows, compiled.converters)
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
