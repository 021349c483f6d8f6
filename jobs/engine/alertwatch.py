"""The scheduler's watch for late fires, long runs and calendars running
out of data, a step of its loop;
what an alert says and to whom is jobs.alerts."""

from datetime import datetime, timedelta

from jobs import alerts
from jobs.engine.clock import Cadence

WATCH_EVERY = timedelta(seconds=5)


class AlertWatch:
    """A step of the scheduler loop, every WATCH_EVERY: late fires and long
    runs of the jobs that asked for those alerts. Returns whether it wrote an
    alert (the send step then reads the outbox at once)."""

    def __init__(self):
        self.cadence = Cadence(WATCH_EVERY)

    def step(self, now: datetime) -> bool:
        if not self.cadence.take(now):
            return False
        # `now` is the engine's clock: the database's on PostgreSQL, so every
        # node judges lateness by the same clock (jobs.engine.clock).
        wrote = alerts.check_late(now)
        wrote += alerts.check_long_running(now)
        wrote += alerts.check_calendar(now)
        return wrote > 0
