"""The trends' rollup step (jobs.trends.roll_up), on the node that plans:
every ROLLUP_EVERY, the runs finished since the last step are added to
the hourly rollup; with history waiting (the first steps after an
upgrade), one more hour of it each pass until it has caught up."""

import logging
from datetime import datetime, timedelta

from jobs import trends
from jobs.engine.clock import Cadence
from jobs.engine.outcomes import is_connection_error

log = logging.getLogger("cronboard.scheduler")

ROLLUP_EVERY = timedelta(seconds=15)


class Rollup:
    def __init__(self):
        self.cadence = Cadence(ROLLUP_EVERY)

    def step(self, now: datetime) -> bool:
        """Whether it added a slice (the caller's pass did something)."""
        if not self.cadence.take(now):
            return False
        try:
            caught_up = trends.roll_up(now)
        except Exception as exc:
            if is_connection_error(exc):
                raise  # the loop backs off and tries again
            # Figures for the pages are not worth stopping the scheduler for;
            # the mark did not move, so the next step reads the slice again.
            log.exception("could not add finished runs to the trends' rollup")
            return False
        if not caught_up:
            self.cadence.again()  # more history: the next pass reads the next hour
        return True
