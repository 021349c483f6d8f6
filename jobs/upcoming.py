"""Upcoming fires across jobs: every fire of the next hour, 24 hours or 7
days, in time order, for GET /api/upcoming, and the same fires as the
console's Upcoming timeline shows them, where a job that fires more often
than every FREQUENT is one row (`Series`: "every 20 s, 180 fires").

A merge of each job's own sequence: jobs come from the database in
next_fire_at order (job_state_due_idx serves it), those overdue at the
start (whose fire is the start) by id, a batch at a time, and each job
taken off the heap pushes its following fire (Job.next_fire_after, the
scheduler's own rule). A page of N fires costs about N steps, whatever the
number of jobs; a series is counted by arithmetic: for an interval job
from its step, for a cron job from its fields day by day
(CronSchedule.count_between); by walking its fires (at most MAX_COUNTED)
for a cron job with jitter, a window with a clock change in the cron job's
zone, or an interval job with a calendar."""

import functools
import heapq
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from jobs import cron
from jobs.models import Job, parse_run_cursor, run_cursor

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7)}
# A job whose fires come closer together than this is one row of the
# timeline, not one row per fire.
FREQUENT = timedelta(minutes=5)
MAX_COUNTED = 1000
PAGE = 100
BATCH = 200


@dataclass(frozen=True)
class Fire:
    at: datetime  # UTC
    job: Job

    @property
    def local(self) -> datetime:
        return self.at.astimezone(self.job.zone)

    @property
    def dst(self) -> str | None:
        """ "repeated" when the local time happens twice (clocks fall back),
        "shifted" when the zone's offset differs an hour before: the fire is
        the first after clocks changed."""
        local = self.local
        zone = self.job.zone
        if local.replace(fold=1 - local.fold).utcoffset() != local.utcoffset():
            return "repeated"
        if (self.at - timedelta(hours=1)).astimezone(zone).utcoffset() != local.utcoffset():
            return "shifted"
        return None


def cursor_of(fire: Fire) -> str:
    """The page cursor after `fire`: the run-history cursor's format, with the job's id."""
    return run_cursor(fire.at, fire.job.pk)


def parse_cursor(value: str | None) -> tuple[datetime, int] | None:
    """(time, job id) from cursor_of's text; None for anything it never wrote."""
    return parse_run_cursor(value)


@functools.cache
def _fields() -> tuple[str, ...]:
    """The job fields the timeline reads, in the model's order (Job.from_db
    takes the values of a subset in that order): every field
    next_fire_after reads (Job.SCHEDULE_FIELDS), since one left out is a
    query per job that fires on the page."""
    wanted = {"id", "name", "namespace", "run_once", "next_fire_at", *Job.SCHEDULE_FIELDS}
    return tuple(field.attname for field in Job._meta.concrete_fields if field.attname in wanted)


def _rows(jobs, *, overdue: bool):
    """The rows (value tuples, _fields()) of one of the merge's two runs of
    jobs, in its order, read BATCH at a time from where the last batch ended
    (not by OFFSET, which reads every row before it again): the jobs overdue
    at the window's start, which all fire at the start, by id; the others
    by next fire, then id (job_state_due_idx's order)."""
    at_index = _fields().index("next_fire_at")
    order = ("id",) if overdue else ("next_fire_at", "id")
    rows = jobs.order_by(*order).values_list(*_fields())
    while True:
        batch = list(rows[:BATCH])
        yield from batch
        if len(batch) < BATCH:
            return
        at, pk = batch[-1][at_index], batch[-1][0]
        after = Q(pk__gt=pk) if overdue else Q(next_fire_at__gt=at) | Q(next_fire_at=at, pk__gt=pk)
        rows = jobs.filter(after).order_by(*order).values_list(*_fields())


def _merged(jobs, *, start: datetime, end: datetime, done: set[int]):
    """(time, job, its following fire or None) for every fire of `jobs`
    from `start` to before `end`, in time order (ties by job id); a job
    whose id the caller puts in `done` gives no further fires.

    The heap holds the next row of each run of jobs (_rows) and the
    following fire of each job taken off it, so a page of N fires reads
    about N rows, however many jobs are overdue; a Job is made of a row only
    when its first fire is taken."""
    scheduled = jobs.filter(state=Job.State.ENABLED, next_fire_at__isnull=False, next_fire_at__lt=end)
    fields = _fields()
    at_index = fields.index("next_fire_at")
    # (time, job id, the run the row came from or None, the row or the Job):
    # a job is in the heap once, so the first two decide every comparison.
    heap: list[tuple] = []

    def take(rows) -> None:
        row = next(rows, None)
        if row is not None:
            heapq.heappush(heap, (max(row[at_index], start), row[0], rows, row))

    take(_rows(scheduled.filter(next_fire_at__lt=start), overdue=True))
    take(_rows(scheduled.filter(next_fire_at__gte=start), overdue=False))
    while heap and heap[0][0] < end:
        at, job_id, rows, item = heapq.heappop(heap)
        job = item if rows is None else Job.from_db(scheduled.db, fields, item)
        following = None if job.run_once else job.next_fire_after(at, last_fire=at)
        if following is not None and following >= end:
            following = None
        yield at, job, following
        # After the yield: a caller that stops here reads no further batch.
        if rows is not None:
            take(rows)
        if following is not None and job_id not in done:
            heapq.heappush(heap, (following, job_id, None, job))


def upcoming_fires(
    jobs, *, start: datetime, end: datetime, limit: int = PAGE, after: tuple[datetime, int] | None = None
) -> tuple[list[Fire], bool]:
    """The fires of `jobs` (a queryset) from `start` to before `end`, in time
    order (ties by job id), at most `limit`, those up to `after` left out.
    Returns (fires, whether more follow)."""
    out: list[Fire] = []
    for at, job, _following in _merged(jobs, start=start, end=end, done=set()):
        if after is None or (at, job.pk) > after:
            if len(out) == limit:
                return out, True
            out.append(Fire(at=at, job=job))
    return out, False


@dataclass(frozen=True)
class Series:
    """A job that fires more often than every FREQUENT, as one row: its
    first fire in the window (`at`), its last, how many (`count`, at most
    MAX_COUNTED: `counted_all` says whether that is all of them) and the
    gap between its first two fires (`every`)."""

    at: datetime
    job: Job
    last: datetime
    count: int
    every: timedelta
    counted_all: bool = True


def _series(job: Job, first: datetime, following: datetime, end: datetime, every: timedelta) -> Series:
    if job.schedule_type == Job.ScheduleType.INTERVAL and not job.calendar:
        count = (end - first - timedelta(microseconds=1)) // every + 1
        return Series(at=first, job=job, last=first + every * (count - 1), count=count, every=every)
    if (
        job.schedule_type == Job.ScheduleType.CRON
        and not job.jitter_seconds
        and cron.plain_days(job.zone, first, end)
    ):
        # Counted from the fields, day by day (the walk's own count); a
        # window with a clock change in the job's zone is walked below, to
        # at most MAX_COUNTED fires (a day of a job every second walked fire
        # by fire takes seconds).
        counted, last = cron.parse(job.cron_expression, job.name).count_between(
            first, end, job.zone, days=job.day_rule()
        )
        return Series(at=first, job=job, last=last or first, count=counted + 1, every=every)
    count, last = 1, first
    while following is not None and following < end and count < MAX_COUNTED:
        count, last = count + 1, following
        following = job.next_fire_after(following, last_fire=following)
    return Series(
        at=first,
        job=job,
        last=last,
        count=count,
        every=every,
        counted_all=following is None or following >= end,
    )


def timeline(
    jobs, *, start: datetime, end: datetime, limit: int = PAGE, after: tuple[datetime, int] | None = None
) -> tuple[list[Fire | Series], bool]:
    """The Upcoming page's rows: the fires of `jobs` as upcoming_fires lists
    them, except that a job firing more often than every FREQUENT is one
    `Series` at its first fire in the window (it never shows again, on any
    page). Returns (rows, whether more follow); the cursor is cursor_of the
    last row, as for fires."""
    done: set[int] = set()
    out: list[Fire | Series] = []
    for at, job, following in _merged(jobs, start=start, end=end, done=done):
        gap = _gap(job, at, following, start)
        frequent = gap is not None and gap < FREQUENT
        if frequent:
            done.add(job.pk)
        if after is not None and (at, job.pk) <= after:
            continue
        if len(out) == limit:
            return out, True
        out.append(_series(job, at, following, end, gap) if frequent else Fire(at=at, job=job))
    return out, False


def _gap(job: Job, at: datetime, following: datetime | None, start: datetime) -> timedelta | None:
    """The time between the job's fires from `at`: to `following`, except
    for an overdue job, whose fire is shown at `start` ("now") while the next
    one keeps the schedule's time (a cron job every 5 minutes overdue at
    12:03:30 fires next at 12:05): then from `following` to the one after."""
    if following is None:
        return None
    if following - at < FREQUENT and at == start and job.next_fire_at < start:
        after_next = job.next_fire_after(following, last_fire=following)
        return None if after_next is None else after_next - following
    return following - at
