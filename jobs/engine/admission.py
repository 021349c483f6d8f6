"""Admission: the step that lets waiting runs through (waiting → queued)
once their job, pool and backfill have room (the rule is jobs.admission's).

Every node runs it. On PostgreSQL the whole step is one short transaction
under a transaction-level advisory lock: the counts it reads are taken
after the lock, so every admission another node committed before is seen,
and no two nodes admit against the same count. Nothing is locked while a
run runs: the limit is enforced where a run becomes claimable, and the
claim (jobs.engine.starting) starts what admission let through.
On SQLite (one node, one writer) the transaction alone serialises it.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction

from jobs import admission
from jobs.engine.clock import Cadence
from jobs.engine.prepared import Prepared
from jobs.models import WAITING_RUN, Run

ADMIT_BATCH = 500
# pg_advisory_xact_lock's key for admission: "CBAD" (Cronboard admission).
ADVISORY_KEY = 0x43424144


def _waiting_due(now: datetime):
    return Run.objects.filter(WAITING_RUN, run_after__lte=now).order_by().only("id")[:1]


# Asked on every pass, so compiled once (jobs.engine.prepared).
_any_waiting = Prepared(_waiting_due)


@dataclass(frozen=True)
class Admitted:
    ids: list[int]  # the runs let through
    left: bool  # waiting runs may be left that a run's end would let through


class Admission:
    """The step, paced: while waiting runs are known to be left it runs on
    every pass (a run that ends frees its place at once); otherwise only when
    this node's planning wrote waiting runs, and once every `every` for what
    other processes wrote (a backfill, another node's fires). So a pass of a
    scheduler whose jobs never wait costs nothing more."""

    def __init__(self, *, every: timedelta):
        self.cadence = Cadence(every)
        self.left = True  # unknown at start

    def step(self, now: datetime, *, wrote_waiting: bool = False) -> list[int]:
        if not (self.left or wrote_waiting or self.cadence.due(now)):
            return []
        self.cadence.ran(now)
        admitted = admit_waiting(now)
        self.left = admitted.left
        return admitted.ids


def admit_waiting(now: datetime) -> Admitted:
    """Let through the waiting runs that have room, in fire order. Runs of a
    full pool or backfill are left out of the read, so a long backfill never
    hides the runs behind it."""
    if not _any_waiting(now):
        return Admitted(ids=[], left=False)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_KEY])
        backfills = set(
            Run.objects.filter(WAITING_RUN, backfill__isnull=False)
            .order_by()
            .values_list("backfill_id", flat=True)
            .distinct()
        )
        counts = admission.load(backfills=backfills)
        waiting = (
            Run.objects.filter(WAITING_RUN, run_after__lte=now)
            .exclude(job__pool__in=counts.full_pools())
            .exclude(backfill_id__in=counts.full_backfills())
            .select_related("job")
            .order_by("scheduled_at", "id")[:ADMIT_BATCH]
        )
        runs = list(waiting)
        counts.jobs.update(admission.load(jobs={run.job_id for run in runs if run.job_id}).jobs)
        admitted = []
        for run in runs:
            if admission.blocker(run, counts) is None:
                counts.admit(run)
                admitted.append(run.pk)
        if admitted:
            Run.objects.filter(pk__in=admitted, status=Run.Status.WAITING).update(status=Run.Status.QUEUED)
    excluded = bool(counts.full_pools() or counts.full_backfills())
    return Admitted(ids=admitted, left=excluded or len(runs) > len(admitted) or len(runs) == ADMIT_BATCH)
