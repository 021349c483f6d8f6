"""Loaded into scheduler processes by test_shards_processes.py (through
JOBS_HANDLER_MODULES); never by the application itself.

The sweep interrupts a dead node's runs once their heartbeat is older than
STALE_AFTER (5 minutes) and looks every SWEEP_EVERY (2 minutes): right for a
cluster, minutes too long for a test. CRONBOARD_TEST_STALE_SECONDS shortens
both, before the scheduler builds its sweep. The handler "test.piece" sleeps
`seconds` and fails the shards listed in `fail` ("1,4"): what each shard did
is in its run row (its shard, node and status)."""

import os
import time
from datetime import timedelta

from jobs.engine import maintenance
from jobs.handlers import HandlerError, JobHandler, register

STALE = os.environ.get("CRONBOARD_TEST_STALE_SECONDS")

if STALE:
    maintenance.STALE_AFTER = timedelta(seconds=float(STALE))
    maintenance.SWEEP_EVERY = timedelta(seconds=1)


@register("test.piece")
class Piece(JobHandler):
    def run(self, ctx):
        until = time.monotonic() + float(ctx.properties.get("seconds") or "1")
        while time.monotonic() < until:
            ctx.check_cancelled()
            time.sleep(0.1)
        failing = {int(n) for n in str(ctx.properties.get("fail") or "").split(",") if n}
        if ctx.shard_index in failing:
            raise HandlerError(f"shard {ctx.shard_index} of {ctx.shard_total} failed")
        return f"shard {ctx.shard_index} of {ctx.shard_total}"
