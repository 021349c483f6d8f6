"""Loaded into scheduler processes by test_cluster_clock.py (through
JOBS_HANDLER_MODULES); never by the application itself.

- When CRONBOARD_TEST_CLOCK_FILE is set, this process's wall clock is off by
  the seconds that file holds, as on a host whose clock drifted:
  time-machine moves time.time(), datetime.now() and their relatives (not
  time.monotonic()) from here on, in the run processes forked from it too.
  SIGUSR1 reads the file again and steps the clock to its new offset.
- `test.database_time`: a handler that returns the database's clock when it
  starts (ISO 8601), the start of a fire by the one clock the nodes share,
  whatever the clock of the node that ran it says.
"""

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

from django.db import connection

from jobs.handlers.base import JobContext, JobHandler
from jobs.handlers.registry import register

CLOCK_FILE = os.environ.get("CRONBOARD_TEST_CLOCK_FILE")


def _offset() -> float:
    return float(Path(CLOCK_FILE).read_text().strip() or 0)


if CLOCK_FILE:
    import time_machine

    _applied = _offset()
    _travel = time_machine.travel(time.time() + _applied, tick=True).start()
    time.time()  # time-machine's clock starts ticking at its first reading, not at start()

    def _step(*_args) -> None:
        global _applied
        new = _offset()
        _travel.shift(timedelta(seconds=new - _applied))
        _applied = new

    signal.signal(signal.SIGUSR1, _step)


@register("test.database_time")
class DatabaseTime(JobHandler):
    def run(self, ctx: JobContext) -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement_timestamp()")
            return cursor.fetchone()[0].isoformat()
