"""The time a scheduler's steps judge by, and how far this node's clock is
from the database's.

On PostgreSQL several nodes share the fires, the runs and the leases, and a
time one node writes (a fire's due time, a run's heartbeat, when it started)
is compared by another. Their wall clocks may differ (a container whose
clock drifted, a host without NTP), so every time a step compares or writes
is the database's clock. Reading it once per row, or even once per pass,
would add a round trip to every fire; the `Clock` is this process's clock
plus an offset measured at every node lease renewal (`Clock.measure`), so
reading it costs what reading the process's clock does.

The offset is the bound the round trip allows, not its middle: the database
read its clock before its answer arrived here, so `database - received`
can only put this clock behind the database's (by at most the round trip),
never ahead of it, and a fire never starts before its time by the
database's clock. Of a few readings the one with the shortest round trip is
kept: a reading held up by a descheduled process or a busy server would put
the clock behind by its delay. Whether a queued run is due is judged by the
database's clock itself, in the claim's statement
(jobs.engine.starting.ClusterClaim): each node's estimate lags by
its own amount, and a run one node queued must be due on all of them; the
claim starts them from the later of the two. A pass that measures does so
first and judges by the new estimate throughout (jobs.engine.loop). A step
of this host's clock moves the engine's times until the next measurement
(JOBS_LEASE_RENEW_SECONDS).

On SQLite there is one scheduler, and the database's clock is this host's:
the process's clock is used as it is, and nothing is measured.

`Skew` judges a measurement against JOBS_MAX_CLOCK_SKEW: over it, the node
warns; over REFUSE_FACTOR times it, the node plans and claims nothing until
its clock is back within JOBS_MAX_CLOCK_SKEW (jobs.engine.loop), since a
clock that far off is a fault to fix, not a difference to correct for. It
judges by the least skew the reading allows (`Reading.least_skew_seconds`):
a slow round trip on a loaded machine is not skew.

Steps done every so often (the lease renewals, the sweep, the run
heartbeats, the schedule check, the outbox and next-queued reads, the
outgoing heartbeat, the alert watch) are due once their period has passed
since the last time, or at once when the engine's clock went back by more
than STEP_BACK (`due`; `Cadence` for a step that keeps when it last ran): a
host's clock stepped back would otherwise hold them until it caught up,
while a new measurement moving the offset back by a few milliseconds is no
reason to do them again.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from jobs.core.dbclock import REFUSE_FACTOR, database_now, describe, max_skew, refusal

log = logging.getLogger("cronboard.scheduler")

SAMPLES = 3  # readings per measurement; the one with the shortest round trip counts
STEP_BACK = timedelta(seconds=1)  # a step back of the engine's clock by more than this is a clock step


def due(last: datetime | None, now: datetime, every: timedelta) -> bool:
    """Whether a step done every `every`, last at `last` (None: never), is
    due at `now`: once `every` has passed, or at once when the clock went
    back by more than STEP_BACK (see the module's docstring)."""
    if last is None:
        return True
    elapsed = now - last
    return elapsed >= every or elapsed < -STEP_BACK


class Cadence:
    """A step done every `every`, and when it last was: `due(now)` by the
    rule of `due`, `ran(now)` once done."""

    def __init__(self, every: timedelta):
        self.every = every
        self.last: datetime | None = None  # None: due at the next step

    def due(self, now: datetime) -> bool:
        return due(self.last, now, self.every)

    def ran(self, now: datetime) -> None:
        self.last = now

    def take(self, now: datetime) -> bool:
        """Whether the step is due at `now`; if it is, it counts as done now."""
        if not self.due(now):
            return False
        self.last = now
        return True

    def again(self) -> None:
        """Due at the next step, whenever the last one was."""
        self.last = None

    @property
    def next_at(self) -> datetime | None:
        return None if self.last is None else self.last + self.every


@dataclass(frozen=True)
class Reading:
    """One measurement of this node's clock against the database's."""

    offset: timedelta  # add it to this process's clock to get the database's
    round_trip: timedelta  # of the reading kept: how uncertain the offset is

    @property
    def skew_seconds(self) -> float:
        """This node's clock minus the database's: positive when it is ahead."""
        return -self.offset.total_seconds()

    @property
    def least_skew_seconds(self) -> float:
        """The skew nearest zero this reading allows. The database read its
        clock some time within the round trip, before this node read its own:
        the skew lay between `skew_seconds - round trip` and `skew_seconds`
        (a slow round trip can only make a node look ahead)."""
        low = self.skew_seconds - self.round_trip.total_seconds()
        return min(0.0, self.skew_seconds) if low <= 0 else low


class Clock:
    """The engine's one clock: `clock()` is the database's time on PostgreSQL
    (this process's clock plus the last measured offset), this process's on
    SQLite. `local` is this process's clock (the tests' fixed one);
    `read_database` reads the database's, None where there is none to
    measure against; `counter` times the round trips."""

    def __init__(
        self,
        local: Callable[[], datetime] = timezone.now,
        *,
        read_database: Callable[[], datetime] | None = None,
        offset: timedelta = timedelta(0),
        counter: Callable[[], float] = time.perf_counter,
    ):
        self.local = local
        self.read_database = read_database
        self.offset = offset
        self.counter = counter  # times the round trips

    @classmethod
    def for_connection(cls, local: Callable[[], datetime] = timezone.now) -> "Clock":
        """The database's clock on PostgreSQL, the process's on SQLite."""
        return cls(local, read_database=database_now if connection.vendor == "postgresql" else None)

    def __call__(self) -> datetime:
        return self.local() + self.offset

    def measure(self) -> Reading | None:
        """Read the database's clock a few times, keep the reading with the
        shortest round trip, and judge by its offset from now on. None when
        there is no database clock to measure against (SQLite)."""
        if self.read_database is None:
            return None
        best: Reading | None = None
        for _ in range(SAMPLES):
            sent = self.counter()
            database = self.read_database()
            received = self.local()
            reading = Reading(offset=database - received, round_trip=timedelta(seconds=self.counter() - sent))
            if best is None or reading.round_trip < best.round_trip:
                best = reading
        self.offset = best.offset
        return best


class Skew:
    """What a node makes of its clock's readings: whether it is over
    JOBS_MAX_CLOCK_SKEW (warn) and over REFUSE_FACTOR times that (refuse to
    plan and claim), and what the node lease's info says of it for the
    cluster page, `manage.py cluster status` and `manage.py health`."""

    def __init__(self):
        self.reading: Reading | None = None
        self.refusing = False

    def judge(self, reading: Reading | None) -> "Judged":
        """Take a new reading; returns what changed, for the caller to log."""
        self.reading = reading
        if reading is None:
            return Judged()
        limit = max_skew()
        skew = abs(reading.least_skew_seconds)
        was_refusing = self.refusing
        # Once refusing, until back within the limit: a skew near the
        # refusal's threshold does not start and stop the node at every
        # measurement.
        self.refusing = skew > (limit if was_refusing else REFUSE_FACTOR * limit)
        return Judged(
            over=skew > limit,
            started_refusing=self.refusing and not was_refusing,
            stopped_refusing=was_refusing and not self.refusing,
        )

    def tell(self, judged: "Judged") -> None:
        """Log what the last reading made of the clock (`judged`), if anything
        is worth saying: over JOBS_MAX_CLOCK_SKEW, refusing, or back."""
        reading = self.reading
        if reading is None or not (judged.over or judged.stopped_refusing):
            return
        limit = max_skew()
        where = f"this node's clock is {describe(reading.skew_seconds)}"
        if judged.stopped_refusing:
            log.warning(
                "clock skew: %s, back within JOBS_MAX_CLOCK_SKEW (%g s): planning and claiming again",
                where,
                limit,
            )
        elif judged.started_refusing:
            log.error(
                "clock skew: %s (the runs it has go on); fix this host's time (NTP)",
                refusal(reading.skew_seconds),
            )
        elif self.refusing:
            log.error(
                "clock skew: this node's %s; still not planning or claiming", refusal(reading.skew_seconds)
            )
        else:
            log.warning(
                "clock skew: %s, more than JOBS_MAX_CLOCK_SKEW (%g s); the scheduler goes by the "
                "database's clock, but fix this host's time (NTP): at %s x JOBS_MAX_CLOCK_SKEW (%g s) "
                "this node stops planning and claiming",
                where,
                limit,
                REFUSE_FACTOR,
                REFUSE_FACTOR * limit,
            )

    def info(self) -> dict:
        """What the node lease's info says of this node's clock."""
        if self.reading is None:
            return {}
        return {
            "clock_skew_seconds": round(self.reading.skew_seconds, 3),
            "clock_round_trip_ms": round(self.reading.round_trip.total_seconds() * 1000, 3),
            "clock_refused": self.refusing,
        }


@dataclass(frozen=True)
class Judged:
    over: bool = False  # the skew is over JOBS_MAX_CLOCK_SKEW
    started_refusing: bool = False
    stopped_refusing: bool = False
