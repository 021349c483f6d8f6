"""Loaded into scheduler processes by test_cluster_processes.py (through
JOBS_HANDLER_MODULES); never by the application itself.

When the file named by CRONBOARD_TEST_STALL_FILE appears, the next time the
scheduler starts planning *as the leader* it stops itself with SIGSTOP right
there: after it decided it leads (the loop plans only then), before its
claims. That is the window the epoch fence exists for, and an outside SIGSTOP
almost never lands in it (a woken node renews, or fails to renew, its lease
before it plans again).
"""

import os
import signal

from jobs.engine.planning import Planner

TRIGGER = os.environ.get("CRONBOARD_TEST_STALL_FILE")

if TRIGGER:
    _plan_due = Planner.plan_due

    def plan_due(self, now, **kwargs):
        if os.path.exists(TRIGGER):
            os.unlink(TRIGGER)
            os.kill(os.getpid(), signal.SIGSTOP)
        return _plan_due(self, now, **kwargs)

    Planner.plan_due = plan_due
