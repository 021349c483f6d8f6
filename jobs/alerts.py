"""What happens when a job crashes (its consecutive failed fires reached its
alert threshold). Called by the scheduler inside the transaction that records
the failing outcome, so the crash and its consequences commit together."""

import logging
from datetime import datetime

from jobs.models import Job, Run

log = logging.getLogger("cronboard.alerts")


def on_crash(*, job: Job, run: Run | None, now: datetime) -> None:
    log.warning(
        "job %s (%s) crashed after %s consecutive failed fires; last error: %s",
        job.pk,
        job.name,
        job.consecutive_failures,
        (job.last_error or "").splitlines()[0][:200] if job.last_error else "-",
    )
