"""Upcoming fires across jobs: every fire of the next 24 hours (or 7 days),
in time order, for the console's Upcoming page and GET /api/upcoming.

A merge of each job's own sequence: jobs come from the database in
next_fire_at order (job_state_due_idx serves it), a batch at a time, and each job
taken off the heap pushes its following fire (Job.next_fire_after, the
scheduler's own rule). A page of N fires costs about N steps, whatever the
number of jobs."""

import heapq
from dataclasses import dataclass
from datetime import datetime, timedelta

from jobs.models import Job, parse_run_cursor, run_cursor

WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7)}
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


def upcoming_fires(
    jobs, *, start: datetime, end: datetime, limit: int = PAGE, after: tuple[datetime, int] | None = None
) -> tuple[list[Fire], bool]:
    """The fires of `jobs` (a queryset) from `start` to before `end`, in time
    order (ties by job id), at most `limit`, those up to `after` left out.
    Returns (fires, whether more follow)."""
    scheduled = (
        jobs.filter(state=Job.State.ENABLED, next_fire_at__isnull=False, next_fire_at__lt=end)
        .only(
            "id",
            "name",
            "timezone",
            "schedule_type",
            "cron_expression",
            "interval_seconds",
            "run_once",
            "next_fire_at",
        )
        .order_by("next_fire_at", "id")
    )
    heap: list[tuple[datetime, int, Job]] = []
    offset, exhausted, fetched_until = 0, False, start

    def fetch():
        nonlocal offset, exhausted, fetched_until
        rows = list(scheduled[offset : offset + BATCH])
        offset += len(rows)
        exhausted = len(rows) < BATCH
        for job in rows:
            heapq.heappush(heap, (max(job.next_fire_at, start), job.pk, job))
        fetched_until = rows[-1].next_fire_at if rows else end

    fetch()
    out: list[Fire] = []
    while True:
        # A job not fetched yet cannot fire before the last one fetched.
        if not exhausted and (not heap or heap[0][0] >= fetched_until):
            fetch()
            continue
        if not heap or heap[0][0] >= end:
            return out, False
        at, job_id, job = heapq.heappop(heap)
        if after is None or (at, job_id) > after:
            if len(out) == limit:
                return out, True
            out.append(Fire(at=at, job=job))
        if not job.run_once:
            following = job.next_fire_after(at, last_fire=at)
            if following is not None and following < end:
                heapq.heappush(heap, (following, job_id, job))
