"""Trends over days: the rollup of finished runs (jobs.models.trends) and
what the pages read from it.

`roll_up` adds the runs that finished in the next slice of time to the
rollup: one GROUP BY in the database per slice (counts by status, sums and
cumulative buckets of durations and lateness, by job and hour), merged into
the hour rows, and the mark moved past the slice, in one transaction, so a
run is counted once whatever stops the process. The scheduler calls it
(jobs.engine.rollup) ROLLUP_LAG behind the clock: a run's finished_at is
the time of the pass that wrote it, committed within that pass.

The readers: `window_trends` (the dashboard: runs by status per hour or day,
success rate, lateness p95, the slowest and the most-failing jobs) and
`job_trends` (a job's page: duration p50/p95 and success rate per day, and
the duration above which a run is marked slow)."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.core.cache import cache
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import (
    BigIntegerField,
    Case,
    CharField,
    DateTimeField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    OuterRef,
    Q,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, TruncDay, TruncHour

from jobs import access
from jobs.models import BOUNDS_MS, COUNTED, Job, JobRollup, JobWindowTotal, NamespaceRollup, RollupMark, Run
from jobs.models.trends import DURATION_BUCKETS, LATENESS_BUCKETS

ROLLUP_LAG = timedelta(seconds=30)
# One slice at most: a first roll-up after an upgrade reads the history an
# hour at a time (each step one GROUP BY of that hour's runs).
SLICE = timedelta(hours=1)
MARK = "runs"

WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
DEFAULT_WINDOW = "24h"
JOB_DAYS = 30
TOP_JOBS = 5
# The dashboard's lists of jobs read every job's rows in the window; they are
# kept this long per viewer's namespaces (the series are read every time).
TOP_LISTS_FOR = 300
# The columns of JobWindowTotal, each the sum of JobRollup's of that name.
TOTAL_COLUMNS = ("succeeded", "failed", "timed_out", "interrupted", "duration_count", "duration_ms_sum")
SLOW_FACTOR = 2  # a run slower than twice its job's usual (p50) time is marked slow
SLOW_MIN_RUNS = 5  # ... once the job has this many timed runs in JOB_DAYS


def hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _day_of(moment: datetime) -> datetime:
    return moment.replace(hour=0)


def window_start(window: str, now: datetime) -> datetime:
    """The first hour of `window` (WINDOWS) at `now`: 24 hours to this one,
    or 7 or 30 days (UTC) to today."""
    if window == "24h":
        return hour_of(now) - timedelta(hours=23)
    return _day_of(hour_of(now)) - timedelta(days=round(WINDOWS[window] / timedelta(days=1)) - 1)


def _window_mark(window: str) -> str:
    return f"window:{window}"


class LatenessMs(Func):
    """started_at - scheduled_at in whole milliseconds, in the database's own
    arithmetic. (Django's datetime difference on SQLite is a Python function
    called per row and per use: with 17 buckets it was most of a slice.)"""

    arity = 2
    output_field = BigIntegerField()

    def _operands(self, compiler):
        started, started_params = compiler.compile(self.source_expressions[0])
        scheduled, scheduled_params = compiler.compile(self.source_expressions[1])
        return started, scheduled, (*started_params, *scheduled_params)

    def as_sqlite(self, compiler, connection, **extra):
        started, scheduled, params = self._operands(compiler)
        return f"CAST(ROUND((julianday({started}) - julianday({scheduled})) * 86400000.0) AS INTEGER)", params

    def as_postgresql(self, compiler, connection, **extra):
        started, scheduled, params = self._operands(compiler)
        return f"CAST(ROUND(EXTRACT(EPOCH FROM ({started} - {scheduled})) * 1000) AS BIGINT)", params


class HourOf(TruncHour):
    """The UTC hour of a time; on SQLite with its own strftime rather than
    Django's per-row Python function."""

    def as_sqlite(self, compiler, connection, **extra):
        moment, params = compiler.compile(self.source_expressions[0])
        return f"strftime(%s, {moment})", ("%Y-%m-%d %H:00:00", *params)


class DayOf(TruncDay):
    """The UTC day of a rollup hour, as HourOf."""

    def as_sqlite(self, compiler, connection, **extra):
        moment, params = compiler.compile(self.source_expressions[0])
        return f"strftime(%s, {moment})", ("%Y-%m-%d 00:00:00", *params)


# The rollup's figure columns, summed by the readers.
FIGURE_COLUMNS = (*COUNTED, "duration_count", "duration_ms_sum", "lateness_count", "lateness_ms_sum")
FIGURE_COLUMNS += (*DURATION_BUCKETS, *LATENESS_BUCKETS)


def summed(rows, *, daily: bool):
    """`rows` (a rollup query) added up per hour, or per UTC day, in the
    database: a 30-day window is then 30 rows to read, not 720 per
    namespace. Each item a dict with `slot` and the FIGURE_COLUMNS."""
    slot = DayOf("hour", tzinfo=UTC) if daily else F("hour")
    return (
        rows.annotate(slot=slot)
        .values("slot")
        .order_by("slot")
        .annotate(**{f"sum_{name}": Sum(name) for name in FIGURE_COLUMNS})
    )


def _slice_runs(start: datetime, end: datetime, keys: dict):
    """The runs that finished in [start, end), a row each: the keys, `dur`
    (the duration of a run that started and ended, else NULL) and `lat`
    (the lateness of a scheduled fire's first attempt, else NULL), each
    computed once per run."""
    timed = Q(duration_ms__isnull=False, started_at__isnull=False)
    late = Q(started_at__isnull=False, attempt=1, trigger__in=[Run.Trigger.SCHEDULE, Run.Trigger.CATCH_UP])
    return (
        Run.objects.filter(finished_at__gte=start, finished_at__lt=end, job__isnull=False)
        .annotate(
            dur=Case(When(timed, then=F("duration_ms")), default=None, output_field=BigIntegerField()),
            lat=Case(
                When(late, then=LatenessMs("started_at", "scheduled_at")),
                default=None,
                output_field=BigIntegerField(),
            ),
            **{f"key_{column}": expression for column, expression in keys.items()},
        )
        .values(*(f"key_{column}" for column in keys), "status", "dur", "lat")
        .order_by()
    )


def _figures_sql(quote) -> dict[str, str]:
    """The rollup's columns as aggregates over _slice_runs' rows."""
    return {
        **{name: f"SUM(CASE WHEN r.{quote('status')} = '{name}' THEN 1 ELSE 0 END)" for name in COUNTED},
        "duration_count": "COUNT(r.dur)",
        "duration_ms_sum": "COALESCE(SUM(r.dur), 0)",
        "lateness_count": "COUNT(r.lat)",
        "lateness_ms_sum": "COALESCE(SUM(r.lat), 0)",
        **{
            name: f"SUM(CASE WHEN r.dur <= {int(bound)} THEN 1 ELSE 0 END)"
            for name, bound in zip(DURATION_BUCKETS, BOUNDS_MS, strict=True)
        },
        **{
            name: f"SUM(CASE WHEN r.lat <= {int(bound)} THEN 1 ELSE 0 END)"
            for name, bound in zip(LATENESS_BUCKETS, BOUNDS_MS, strict=True)
        },
    }


def _add_slice(
    model, keys: dict, conflict: tuple[str, ...], start: datetime, end: datetime, columns=None
) -> None:
    """One statement: the runs that finished in [start, end), grouped by
    `keys` (column → expression) and added to `model`'s rows (inserted, or
    summed into the row already there for the same keys); its figure
    `columns`, all of the rollup's unless told."""
    select, params = _slice_runs(start, end, keys).query.sql_with_params()
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    figures = _figures_sql(quote)
    if columns is not None:
        figures = {name: figures[name] for name in columns}
    key_columns = [f"r.{quote('key_' + column)}" for column in keys]
    aggregated = (
        f"SELECT {', '.join(key_columns)}, "
        + ", ".join(f"{sql} AS {quote(name)}" for name, sql in figures.items())
        + f" FROM ({select}) r GROUP BY {', '.join(key_columns)}"
    )
    _insert_or_add(table, [*keys, *figures], f"SELECT * FROM ({aggregated}) g", conflict, figures, params)


def _insert_or_add(table: str, columns, select: str, conflict, summed, params) -> None:
    """INSERT `select`'s rows into `columns` of `table` (quoted); a row whose
    `conflict` columns are taken adds its `summed` columns to the row there."""
    quote = connection.ops.quote_name
    added = ", ".join(f"{quote(c)} = {table}.{quote(c)} + excluded.{quote(c)}" for c in summed)
    # WHERE true: SQLite's parser needs it between a SELECT and ON CONFLICT.
    sql = (
        f"INSERT INTO {table} ({', '.join(quote(c) for c in columns)}) {select} WHERE true "
        f"ON CONFLICT ({', '.join(quote(c) for c in conflict)}) DO UPDATE SET {added}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _add_rollup_hours(window: str, start: datetime, end: datetime | None, sign: int) -> None:
    """One statement: the JobRollup rows of the hours from `start` to before
    `end` (or on), summed per job and namespace, added to (sign 1) or taken
    off (sign -1) `window`'s JobWindowTotal rows."""
    hours = JobRollup.objects.filter(hour__gte=start)
    if end is not None:
        hours = hours.filter(hour__lt=end)
    select, params = (
        hours.values("job_id", "namespace")
        .order_by()
        .annotate(**{f"t_{name}": Sum(name) * sign for name in TOTAL_COLUMNS})
        .query.sql_with_params()
    )
    quote = connection.ops.quote_name
    keys = ("window", "job_id", "namespace")
    values = ", ".join(f"g.{quote('t_' + name)}" for name in TOTAL_COLUMNS)
    _insert_or_add(
        quote(JobWindowTotal._meta.db_table),
        [*keys, *TOTAL_COLUMNS],
        f"SELECT %s, g.{quote('job_id')}, g.{quote('namespace')}, {values} FROM ({select}) g",
        keys,
        TOTAL_COLUMNS,
        (window, *params),
    )


def _move_window(window: str, now: datetime) -> datetime:
    """Bring `window`'s JobWindowTotal rows to its start at `now`: the hours
    that left it taken off; built afresh from the hourly rollup the first
    time, or when the rows may hold hours no longer there (retention cut
    into the window, or the clock went back). Returns the start they hold."""
    target = window_start(window, now)
    mark, _created = RollupMark.objects.get_or_create(name=_window_mark(window))
    held = mark.finished_before
    if held == target:
        return target
    if held is None or held > target:
        JobWindowTotal.objects.filter(window=window).delete()
        _add_rollup_hours(window, target, None, 1)
    else:
        _add_rollup_hours(window, held, target, -1)
    mark.finished_before = target
    mark.save(update_fields=["finished_before"])
    return target


@dataclass
class Figures:
    """One rollup row's figures, added up in Python."""

    counts: dict = field(default_factory=lambda: dict.fromkeys(COUNTED, 0))
    duration_count: int = 0
    duration_ms_sum: int = 0
    duration_buckets: list = field(default_factory=lambda: [0] * len(BOUNDS_MS))
    lateness_count: int = 0
    lateness_ms_sum: int = 0
    lateness_buckets: list = field(default_factory=lambda: [0] * len(BOUNDS_MS))

    @classmethod
    def of(cls, row) -> "Figures":
        return cls(
            counts={name: getattr(row, name) for name in COUNTED},
            duration_count=row.duration_count,
            duration_ms_sum=row.duration_ms_sum,
            duration_buckets=list(row.duration_buckets) or [0] * len(BOUNDS_MS),
            lateness_count=row.lateness_count,
            lateness_ms_sum=row.lateness_ms_sum,
            lateness_buckets=list(row.lateness_buckets) or [0] * len(BOUNDS_MS),
        )

    @classmethod
    def of_sums(cls, row: dict) -> "Figures":
        """From one of summed()'s rows."""
        return cls.of(_Sums(row))

    def add(self, other: "Figures") -> None:
        for name in COUNTED:
            self.counts[name] += other.counts[name]
        self.duration_count += other.duration_count
        self.duration_ms_sum += other.duration_ms_sum
        self.duration_buckets = [
            a + b for a, b in zip(self.duration_buckets, other.duration_buckets, strict=True)
        ]
        self.lateness_count += other.lateness_count
        self.lateness_ms_sum += other.lateness_ms_sum
        self.lateness_buckets = [
            a + b for a, b in zip(self.lateness_buckets, other.lateness_buckets, strict=True)
        ]

    @property
    def finished(self) -> int:
        return sum(self.counts.values())

    @property
    def failures(self) -> int:
        return sum(self.counts[s] for s in Run.FAILED_OUTCOMES)

    @property
    def success_rate(self) -> float | None:
        ended = self.counts[Run.Status.SUCCEEDED] + self.failures
        return round(100 * self.counts[Run.Status.SUCCEEDED] / ended, 1) if ended else None

    def duration(self, q: float) -> float | None:
        return percentile(self.duration_buckets, self.duration_count, q)

    def lateness(self, q: float) -> float | None:
        return percentile(self.lateness_buckets, self.lateness_count, q)


class _Sums:
    """One of summed()'s rows read as a rollup row."""

    def __init__(self, row: dict):
        self.__dict__.update({name: row[f"sum_{name}"] or 0 for name in FIGURE_COLUMNS})

    @property
    def duration_buckets(self) -> list[int]:
        return [getattr(self, name) for name in DURATION_BUCKETS]

    @property
    def lateness_buckets(self) -> list[int]:
        return [getattr(self, name) for name in LATENESS_BUCKETS]


def percentile(buckets: list, count: int, q: float) -> float | None:
    """The q-quantile of the values counted in cumulative `buckets`, to the
    bucket: the upper bound of the first bucket that holds it, interpolated
    linearly inside it (as Prometheus' histogram_quantile). Above the last
    bound: that bound. None when nothing was counted."""
    if not count:
        return None
    rank = q * count
    below, low = 0, 0
    for bound, cumulative in zip(BOUNDS_MS, buckets, strict=True):
        if cumulative >= rank:
            inside = cumulative - below
            return low + (bound - low) * ((rank - below) / inside if inside else 1)
        below, low = cumulative, bound
    return float(BOUNDS_MS[-1])


def roll_up(now: datetime, *, lag: timedelta = ROLLUP_LAG) -> bool:
    """Add the next slice of finished runs (at most SLICE, ending at most
    `lag` before `now`) to the rollup. Whether it read up to that end (False:
    more history is waiting, call again)."""
    end = now - lag
    with transaction.atomic():
        mark, _created = RollupMark.objects.select_for_update().get_or_create(name=MARK)
        start = mark.finished_before
        if start is None:
            first = (
                Run.objects.filter(finished_at__isnull=False)
                .order_by("finished_at")
                .values("finished_at")[:1]
            )
            start = hour_of(first[0]["finished_at"]) if first else end
        # Before the slice: a window built afresh reads the hourly rollup
        # without it, and the slice is added to it below like to the others.
        held = {window: _move_window(window, now) for window in WINDOWS}
        if start >= end:
            return True
        slice_end = min(end, start + SLICE)
        hour = HourOf("finished_at", tzinfo=UTC)
        by_job = {"job_id": F("job_id"), "namespace": F("job__namespace"), "hour": hour}
        _add_slice(JobRollup, by_job, ("job_id", "hour"), start, slice_end)
        by_namespace = {"namespace": F("job__namespace"), "hour": hour}
        _add_slice(NamespaceRollup, by_namespace, ("namespace", "hour"), start, slice_end)
        # A window's runs under the namespace of their hour's JobRollup row
        # (written above, kept from its first slice even if the job moved
        # since): the hours that leave the window are taken off under it.
        rollup_namespace = Subquery(
            JobRollup.objects.filter(
                job_id=OuterRef("job_id"),
                hour=HourOf(ExpressionWrapper(OuterRef("finished_at"), DateTimeField()), tzinfo=UTC),
            ).values("namespace")[:1]
        )
        for window, since in held.items():
            # The runs of the window's hours: those that finished from its start.
            if max(start, since) < slice_end:
                by_window = {
                    "window": Value(window, output_field=CharField()),
                    "job_id": F("job_id"),
                    "namespace": rollup_namespace,
                }
                conflict = ("window", "job_id", "namespace")
                _add_slice(JobWindowTotal, by_window, conflict, max(start, since), slice_end, TOTAL_COLUMNS)
        mark.finished_before = slice_end
        mark.save(update_fields=["finished_before"])
    return slice_end >= end


def delete_before(cutoff: datetime) -> int:
    """Rollup rows of hours before `cutoff` (sys.job.rollupRetentionDays).
    A window whose totals hold hours before it is built afresh by the next
    roll-up (its readers read the hourly rollup until then)."""
    with transaction.atomic():
        # The roll-up's lock: no step moves a window's totals meanwhile.
        RollupMark.objects.select_for_update().filter(name=MARK).first()
        marks = [_window_mark(window) for window in WINDOWS]
        RollupMark.objects.filter(name__in=marks, finished_before__lt=cutoff).delete()
        deleted = JobRollup.objects.filter(hour__lt=cutoff).delete()[0]
        return deleted + NamespaceRollup.objects.filter(hour__lt=cutoff).delete()[0]


@dataclass
class Point:
    """One hour or day of the dashboard's series."""

    at: datetime
    figures: Figures


def window_trends(user, window: str, *, now: datetime) -> dict:
    """The dashboard's trends over `window` (WINDOWS): runs by status per
    hour (24h) or day (7d, 30d, UTC days), the success rate and lateness
    p95 over the window, the slowest and the most-failing jobs. Reads the
    namespace rollup (a row per namespace and hour) and, for the lists of
    jobs, the job rollup (cached TOP_LISTS_FOR seconds)."""
    window = window if window in WINDOWS else DEFAULT_WINDOW
    hourly = window == "24h"
    # 24 hours to this one; or 7 or 30 days (UTC) to today.
    step = timedelta(hours=1) if hourly else timedelta(days=1)
    slots = round(WINDOWS[window] / step)
    start = window_start(window, now)
    points = {start + step * i: Figures() for i in range(slots)}
    total = Figures()
    rows = access.visible_by_namespace(user, NamespaceRollup.objects.filter(hour__gte=start))
    for row in summed(rows, daily=not hourly):
        figures = Figures.of_sums(row)
        slot = points.get(row["slot"])
        if slot is not None:
            slot.add(figures)
            total.add(figures)
    return {
        "window": window,
        "windows": list(WINDOWS),
        "hourly": hourly,
        "points": [Point(at, figures) for at, figures in points.items()],
        "total": total,
        "success_rate": total.success_rate,
        "lateness_p95_ms": total.lateness(0.95),
        **_top_jobs(user, window, start),
    }


def _top_jobs(user, window: str, start: datetime) -> dict:
    allowed = access.namespaces_for(user)
    key = (
        f"cronboard:trends:top:{window}:{start.isoformat()}:{sorted(allowed) if allowed is not None else '*'}"
    )
    found = cache.get(key)
    if found is None:
        slowest, failing = _top_rows(user, window, start)
        names = dict(
            Job.objects.filter(pk__in={row["job_id"] for row in [*slowest, *failing]}).values_list(
                "id", "name"
            )
        )
        found = {
            "slowest": [
                {
                    "job_id": row["job_id"],
                    "name": names.get(row["job_id"], ""),
                    "mean_ms": row["duration"] / row["timed"],
                    "runs": row["timed"],
                }
                for row in slowest
            ],
            "failing": [
                {
                    "job_id": row["job_id"],
                    "name": names.get(row["job_id"], ""),
                    "failed": row["failed"],
                    "runs": row["failed"] + row["succeeded"],
                }
                for row in failing
            ],
        }
        cache.set(key, found, TOP_LISTS_FOR)
    return found


def _top_rows(user, window: str, start: datetime) -> tuple[list, list]:
    """The slowest and the most-failing jobs over `window` from `start`
    (ties by job id): from the window's per-job totals when they hold that
    start, else (the seconds after a window moved, before the roll-up step
    moved its totals) from every hour of the hourly rollup.

    The roll-up step moves a window's start and its totals in one
    transaction, forward (back only when the clock went back): the totals
    read are that start's if the window's mark held it before and still
    holds it after them. If the step moved it meanwhile, the lists are read
    from the hours."""
    holds = RollupMark.objects.filter(name=_window_mark(window), finished_before=start)
    if holds.exists():
        lists = _ranked(user, JobWindowTotal.objects.filter(window=window))
        if holds.exists():
            return lists
    return _ranked(user, JobRollup.objects.filter(hour__gte=start))


def _count_sum(expression):
    """SUM of integers as a double, given back as an integer: PostgreSQL adds
    bigints as a slower `numeric`; a double adds them exactly to 2**53."""
    return Cast(Sum(Cast(expression, FloatField())), BigIntegerField())


def _ranked(user, rows) -> tuple[list, list]:
    rows = access.visible_by_namespace(user, rows).filter(job__deleted_at__isnull=True)
    sums = (
        rows.values("job_id")
        .order_by()
        .annotate(
            timed=_count_sum("duration_count"),
            duration=_count_sum("duration_ms_sum"),
            failed=_count_sum(F("failed") + F("timed_out") + F("interrupted")),
            succeeded=_count_sum("succeeded"),
        )
    )
    try:
        sql, params = sums.query.sql_with_params()
    except EmptyResultSet:  # a viewer of no namespace
        return [], []
    # Both lists from one reading of the sums: a CTE used twice is read once.
    columns, ratio = ("job_id", "timed", "duration", "failed", "succeeded"), "CAST({} AS FLOAT) / ({})"

    def top(kind: int, where: str, order: str) -> str:
        return (
            f"SELECT * FROM (SELECT {kind}, row_number() OVER (ORDER BY {order}), {', '.join(columns)} "
            f"FROM sums WHERE {where} ORDER BY {order} LIMIT {TOP_JOBS}) AS top{kind}"
        )

    slowest = top(0, "timed > 0", f"{ratio.format('duration', 'timed')} DESC, job_id")
    failing = top(
        1, "failed > 0", f"failed DESC, {ratio.format('failed', 'failed + succeeded')} DESC, job_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(f"WITH sums AS ({sql}) {slowest} UNION ALL {failing} ORDER BY 1, 2", params)
        found = cursor.fetchall()
    rows = [(kind, dict(zip(columns, values, strict=True))) for kind, _place, *values in found]
    return [row for kind, row in rows if kind == 0], [row for kind, row in rows if kind == 1]


@dataclass
class JobDay:
    day: datetime
    figures: Figures

    @property
    def p50(self):
        return self.figures.duration(0.5)

    @property
    def p95(self):
        return self.figures.duration(0.95)


def job_trends(job: Job, *, now: datetime) -> dict:
    """A job's last JOB_DAYS days (UTC): duration p50 and p95 and success
    rate per day, from at most 24 × JOB_DAYS rollup rows; and `slow_ms`, the
    duration above which one of its runs is marked slow (SLOW_FACTOR × its
    p50 over those days, once it has SLOW_MIN_RUNS timed runs)."""
    first = _day_of(hour_of(now)) - timedelta(days=JOB_DAYS - 1)
    days = {first + timedelta(days=i): Figures() for i in range(JOB_DAYS)}
    total = Figures()
    for row in summed(JobRollup.objects.filter(job=job, hour__gte=first), daily=True):
        figures = Figures.of_sums(row)
        if (day := days.get(row["slot"])) is not None:
            day.add(figures)
        total.add(figures)
    usual = total.duration(0.5)
    return {
        "days": [JobDay(day, figures) for day, figures in days.items()],
        "total": total,
        "p50_ms": usual,
        "p95_ms": total.duration(0.95),
        "success_rate": total.success_rate,
        "slow_ms": SLOW_FACTOR * usual
        if usual is not None and total.duration_count >= SLOW_MIN_RUNS
        else None,
    }
