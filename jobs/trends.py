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
from django.db import transaction
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.db.models.functions import TruncHour

from jobs import access
from jobs.models import BOUNDS_MS, COUNTED, Job, JobRollup, NamespaceRollup, RollupMark, Run

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
SLOW_FACTOR = 2  # a run slower than twice its job's usual (p50) time is marked slow
SLOW_MIN_RUNS = 5  # ... once the job has this many timed runs in JOB_DAYS


def hour_of(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _slice_rows(start: datetime | None, end: datetime) -> list[dict]:
    """The runs that finished in [start, end), grouped by job, hour and status."""
    runs = Run.objects.filter(finished_at__isnull=False, finished_at__lt=end, job__isnull=False)
    if start is not None:
        runs = runs.filter(finished_at__gte=start)
    timed = Q(duration_ms__isnull=False, started_at__isnull=False)
    late = Q(started_at__isnull=False, attempt=1, trigger__in=[Run.Trigger.SCHEDULE, Run.Trigger.CATCH_UP])
    lateness = ExpressionWrapper(F("started_at") - F("scheduled_at"), output_field=DurationField())
    return list(
        runs.annotate(hour=TruncHour("finished_at"), lateness=lateness)
        .values("job_id", "job__namespace", "hour", "status")
        .order_by()
        .annotate(
            n=Count("id"),
            timed=Count("id", filter=timed),
            duration_sum=Sum("duration_ms", filter=timed),
            late_n=Count("id", filter=late),
            late_sum=Sum("lateness", filter=late),
            **{
                f"d{i}": Count("id", filter=timed & Q(duration_ms__lte=bound))
                for i, bound in enumerate(BOUNDS_MS)
            },
            **{
                f"l{i}": Count("id", filter=late & Q(lateness__lte=timedelta(milliseconds=bound)))
                for i, bound in enumerate(BOUNDS_MS)
            },
        )
    )


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

    def add_group(self, group: dict) -> None:
        if group["status"] in self.counts:
            self.counts[group["status"]] += group["n"]
        self.duration_count += group["timed"]
        self.duration_ms_sum += int(group["duration_sum"] or 0)
        self.duration_buckets = [a + group[f"d{i}"] for i, a in enumerate(self.duration_buckets)]
        self.lateness_count += group["late_n"]
        self.lateness_ms_sum += _milliseconds(group["late_sum"])
        self.lateness_buckets = [a + group[f"l{i}"] for i, a in enumerate(self.lateness_buckets)]

    def write_to(self, row) -> None:
        for name in COUNTED:
            setattr(row, name, self.counts[name])
        row.duration_count, row.duration_ms_sum = self.duration_count, self.duration_ms_sum
        row.duration_buckets = self.duration_buckets
        row.lateness_count, row.lateness_ms_sum = self.lateness_count, self.lateness_ms_sum
        row.lateness_buckets = self.lateness_buckets

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


def _milliseconds(value) -> int:
    """A lateness sum as the database returns it: a timedelta (PostgreSQL,
    SQLite through Django) or microseconds."""
    if value is None:
        return 0
    if isinstance(value, timedelta):
        return round(value.total_seconds() * 1000)
    return round(value / 1000)


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


def _merge(model, key_fields: tuple[str, ...], found: dict[tuple, Figures], extra: dict[tuple, dict]) -> None:
    if not found:
        return
    hours = {key[-1] for key in found}
    firsts = {key[0] for key in found}
    existing = {
        tuple(getattr(row, f) for f in key_fields): row
        for row in model.objects.filter(hour__in=hours, **{f"{key_fields[0]}__in": firsts})
    }
    created, updated = [], []
    for key, figures in found.items():
        row = existing.get(key)
        if row is None:
            row = model(**dict(zip(key_fields, key, strict=True)), **extra.get(key, {}))
            figures.write_to(row)
            created.append(row)
        else:
            total = Figures.of(row)
            total.add(figures)
            total.write_to(row)
            updated.append(row)
    model.objects.bulk_create(created)
    fields = [*COUNTED, "duration_count", "duration_ms_sum", "duration_buckets"]
    fields += ["lateness_count", "lateness_ms_sum", "lateness_buckets"]
    model.objects.bulk_update(updated, fields)


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
        if start >= end:
            return True
        slice_end = min(end, start + SLICE)
        by_job: dict[tuple, Figures] = {}
        by_namespace: dict[tuple, Figures] = {}
        namespaces: dict[tuple, dict] = {}
        for group in _slice_rows(start, slice_end):
            hour, namespace = group["hour"], group["job__namespace"] or ""
            by_job.setdefault((group["job_id"], hour), Figures()).add_group(group)
            namespaces[(group["job_id"], hour)] = {"namespace": namespace}
            by_namespace.setdefault((namespace, hour), Figures()).add_group(group)
        _merge(JobRollup, ("job_id", "hour"), by_job, namespaces)
        _merge(NamespaceRollup, ("namespace", "hour"), by_namespace, {})
        mark.finished_before = slice_end
        mark.save(update_fields=["finished_before"])
    return slice_end >= end


def delete_before(cutoff: datetime) -> int:
    """Rollup rows of hours before `cutoff` (sys.job.rollupRetentionDays)."""
    deleted = JobRollup.objects.filter(hour__lt=cutoff).delete()[0]
    return deleted + NamespaceRollup.objects.filter(hour__lt=cutoff).delete()[0]


@dataclass
class Point:
    """One hour or day of the dashboard's series."""

    at: datetime
    figures: Figures


def _day_of(moment: datetime) -> datetime:
    return moment.replace(hour=0)


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
    start = (hour_of(now) if hourly else _day_of(hour_of(now))) - step * (slots - 1)
    points = {start + step * i: Figures() for i in range(slots)}
    total = Figures()
    rows = access.visible_by_namespace(user, NamespaceRollup.objects.filter(hour__gte=start))
    for row in rows:
        figures = Figures.of(row)
        slot = points.get(row.hour if hourly else _day_of(row.hour))
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
        rows = access.visible_by_namespace(user, JobRollup.objects.filter(hour__gte=start)).filter(
            job__deleted_at__isnull=True
        )
        sums = (
            rows.values("job_id")
            .order_by()
            .annotate(
                timed=Sum("duration_count"),
                duration=Sum("duration_ms_sum"),
                failed=Sum("failed") + Sum("timed_out") + Sum("interrupted"),
                succeeded=Sum("succeeded"),
            )
        )
        slowest = sorted(
            (row for row in sums if row["timed"]),
            key=lambda row: row["duration"] / row["timed"],
            reverse=True,
        )[:TOP_JOBS]
        failing = sorted(
            (row for row in sums if row["failed"]),
            key=lambda row: (row["failed"], row["failed"] / (row["failed"] + row["succeeded"])),
            reverse=True,
        )[:TOP_JOBS]
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
    for row in JobRollup.objects.filter(job=job, hour__gte=first):
        figures = Figures.of(row)
        if (day := days.get(_day_of(row.hour))) is not None:
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
