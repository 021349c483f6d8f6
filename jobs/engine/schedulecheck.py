"""The schedule check: `ScheduleCheck` (every CHECK_EVERY, on the node that
plans) notices enabled jobs whose next fire is missing, stuck due, or
further than their interval, logs each, and sets it back on the job's
schedule by the rule a save uses; `schedule_unplanned` (at start) gives the
enabled jobs without a next fire time one by the same rule. Moved out of
jobs.engine.planning, whose planner records a stuck fire as a misfire.
"""

import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL

from jobs.core.logcontext import about
from jobs.engine.clock import Cadence
from jobs.engine.planning import Planner
from jobs.models import Job, Run

log = logging.getLogger("cronboard.scheduler")

# How often the node that plans checks the enabled jobs' next fires (one
# query), and how long a due fire may stay unclaimed, while planning keeps up,
# before it counts as stuck.
CHECK_EVERY = timedelta(seconds=30)
# A next fire an interval job's save wrote on another host, whose clock may be
# a little ahead of this one's, is not "ahead of its schedule" for that alone.
AHEAD_SLACK = timedelta(seconds=5)


class Problem:
    """What the schedule check finds wrong with an enabled job's next fire."""

    MISSING = "missing"  # none at all: the job would never fire again
    AHEAD = "ahead"  # an interval job's is more than an interval away: fires would be skipped
    STUCK = "stuck"  # due for longer than CHECK_EVERY and never claimed


@dataclass(frozen=True)
class Repair:
    """One job the schedule check set back on its schedule."""

    job_id: int
    problem: str  # a Problem
    was: datetime | None
    next_fire: datetime | None


@dataclass
class Checked:
    """What one schedule check did; `counts()` by problem is what a metrics
    counter would add up."""

    repairs: list[Repair] = field(default_factory=list)
    skipped: list[Run] = field(default_factory=list)  # the stuck fires, recorded as misfires

    def counts(self) -> Counter:
        return Counter(repair.problem for repair in self.repairs)


class ScheduleCheck:
    """Every CHECK_EVERY, on the node that plans: enabled jobs whose next fire
    is missing, ahead of their interval, or stuck due (`off_schedule`) are
    logged and set back on their schedule by the rule a save uses
    (Job.next_fire_on_schedule, docs/cron.md): an interval job's last fire
    plus the interval, or now plus the interval if that is past; a cron
    job's first fire time after now. A stuck fire is recorded as a skipped misfire first, so it is not
    lost without a trace. Whatever set them off did it without the planner:
    the warning is how it is noticed. The first step only starts the count
    (at start, `schedule_unplanned` has just run)."""

    def __init__(self, *, planner: Planner):
        self.planner = planner
        self.cadence = Cadence(CHECK_EVERY)

    def step(self, now: datetime) -> Checked | None:
        """None when not due; else what it repaired."""
        if self.cadence.last is None:
            self.cadence.ran(now)  # the first step starts the count
            return None
        if not self.cadence.take(now):
            return None
        checked = Checked()
        for job in off_schedule(now):
            repair = self.repair(job, now, checked.skipped)
            if repair is not None:
                checked.repairs.append(repair)
        return checked

    def repair(self, job: Job, now: datetime, skipped: list[Run] | None = None) -> Repair | None:
        was = job.next_fire_at
        if was is None:
            problem = Problem.MISSING
        elif was <= now - CHECK_EVERY:
            problem = Problem.STUCK
        else:
            problem = Problem.AHEAD
        new_next = job.next_fire_on_schedule(now)
        if new_next is None and was is None:
            return None  # a stored cron expression that no longer parses never fires (Job.next_fire_after)
        with transaction.atomic():
            # Only the row as it was read: an edit or a claim since wins.
            moved = (
                Job.objects.scheduled()
                .filter(pk=job.pk, version=job.version, next_fire_at=was)
                .update(next_fire_at=new_next)
            )
            if moved and problem == Problem.STUCK:
                message = (
                    f"missed: due since {was.isoformat()} but never claimed by the scheduler; "
                    f"the schedule check moved the job on"
                )
                misfire = self.planner.skipped(job, was, Run.SkipReason.MISFIRE, now, message)
                Run.objects.bulk_create([misfire], ignore_conflicts=True)
                if skipped is not None:
                    skipped.append(misfire)
        if not moved:
            return None
        log.warning(
            "job %s (%s) was off its schedule (%s: next fire %s, last fire %s); next fire set to %s",
            job.pk,
            job.name,
            problem,
            was.isoformat() if was else "none",
            job.last_fire_at.isoformat() if job.last_fire_at else "none",
            new_next.isoformat() if new_next else "none",
            extra=about(job=job),
        )
        return Repair(job_id=job.pk, problem=problem, was=was, next_fire=new_next)


def off_schedule(now: datetime):
    """Enabled jobs with a schedule whose next fire is missing, stuck due, or
    (interval jobs without a calendar) further away than their interval. One query; the last
    part is arithmetic on two columns, in each database's own terms."""
    table = connection.ops.quote_name(Job._meta.db_table)
    if connection.vendor == "postgresql":
        ahead = f"{table}.next_fire_at > %s + ({table}.interval_seconds + %s) * interval '1 second'"
    else:
        ahead = f"(julianday({table}.next_fire_at) - julianday(%s)) * 86400.0 > {table}.interval_seconds + %s"
    params = (connection.ops.adapt_datetimefield_value(now), AHEAD_SLACK.total_seconds())
    return (
        Job.objects.scheduled()
        .exclude(schedule_type=Job.ScheduleType.NONE)
        .filter(
            Q(next_fire_at__isnull=True, run_once=False)
            | Q(next_fire_at__lte=now - CHECK_EVERY)
            # A calendar moves an interval job's fire past the dates it refuses.
            | Q(schedule_type=Job.ScheduleType.INTERVAL, calendar="", next_fire_at__gt=now)
            & Q(RawSQL(ahead, params, output_field=BooleanField()))
        )
        .order_by("pk")
    )


def schedule_unplanned(now: datetime) -> bool:
    """Enabled jobs without a next fire time (seeded by a migration, written
    by hand) get one, by the rule of a save and of the schedule check
    (Job.next_fire_on_schedule): an interval job stays on its grid."""
    did = False
    for job in Job.objects.live().filter(state=Job.State.ENABLED, next_fire_at__isnull=True, run_once=False):
        next_fire = job.next_fire_on_schedule(now)
        if next_fire is not None:
            Job.objects.filter(pk=job.pk, next_fire_at__isnull=True, state=Job.State.ENABLED).update(
                next_fire_at=next_fire
            )
            did = True
    return did
