"""Maintenance: what keeps the runs table true while the scheduler plans and
runs.

- `recover` (at start): runs this worker id left `running` (the process died
  or was killed) are recorded `interrupted`, retried if their job allows.
- `Sweep` (every SWEEP_EVERY): runs of any node whose heartbeat is older than
  STALE_AFTER and whose worker holds no node lease are `interrupted`, as are
  broadcast runs still queued for a node that holds none, or for one that
  refuses work for its clock after they waited past the misfire threshold.
- `requeue_unstarted_claims` (after a database error): runs marked running
  for this node by a claim whose commit answer was lost go back to the queue.
- `RunHeartbeat` (every HEARTBEAT_EVERY): touch this node's running runs,
  save their logs so far, act on cancel requests.
"""

import logging
from collections.abc import Collection
from datetime import datetime, timedelta

from django.db.models import Q

from jobs import cluster
from jobs.engine.clock import Cadence
from jobs.engine.execution.pool import Pool
from jobs.engine.outcomes import Recorded, Recorder, back_to_queue
from jobs.models import LIVE_RUN, QUEUED_RUN, Run, cap_message

log = logging.getLogger("cronboard.scheduler")

HEARTBEAT_EVERY = timedelta(seconds=2)
SWEEP_EVERY = timedelta(minutes=2)
STALE_AFTER = timedelta(minutes=5)


def recover(now: datetime, *, worker_id: str, executing: Collection[int], recorder: Recorder) -> Recorded:
    """Runs this worker left `running` (it died or was killed) are interrupted."""
    stale = list(
        Run.objects.filter(LIVE_RUN, status=Run.Status.RUNNING, worker_id=worker_id).select_related("job")
    )
    recorded = Recorded()
    for run in stale:
        if run.pk in executing:
            continue
        recorded |= recorder.record(
            run,
            Run.Status.INTERRUPTED,
            now,
            error="the scheduler stopped while this run was running (found at restart)",
        )
    if stale:
        log.warning("recovered %d run(s) left running by %s", len(stale), worker_id)
    return recorded


class Sweep:
    """Every SWEEP_EVERY: runs whose heartbeat is older than STALE_AFTER and
    whose worker holds no lease are interrupted."""

    def __init__(self, *, worker_id: str, recorder: Recorder, misfire_threshold: timedelta):
        self.worker_id = worker_id
        self.recorder = recorder
        self.misfire_threshold = misfire_threshold
        self.cadence = Cadence(SWEEP_EVERY)

    def step(self, now: datetime, *, executing: Collection[int]) -> Recorded:
        if not self.cadence.take(now):
            return Recorded()
        # This node's own runs are stale only if it is not executing them (a
        # claim whose commit was lost with the connection): its real flights
        # heartbeat every few seconds.
        refusals = cluster.node_refusals(now=now)
        alive_elsewhere = set(refusals) - {self.worker_id}
        stale = (
            # LIVE_RUN: read the small partial index, not the whole history.
            Run.objects.filter(LIVE_RUN, status=Run.Status.RUNNING, heartbeat_at__lt=now - STALE_AFTER)
            .exclude(worker_id__in=alive_elsewhere)
            .exclude(pk__in=list(executing))
            .select_related("job")
        )
        recorded = Recorded()
        for run in stale:
            recorded |= self.recorder.record(
                run,
                Run.Status.INTERRUPTED,
                now,
                error=f"worker {run.worker_id or '?'} stopped sending heartbeats (last {run.heartbeat_at.isoformat()})",
            )
        # A broadcast run still queued for a node that is gone, or that refuses
        # work for its clock, would wait for it (and hold its job's later
        # fires up as an overlap) for as long: it is interrupted, never moved
        # to another node; on a refusing node once it is later than a fire
        # may run late (the misfire threshold), as a stopped scheduler's is.
        refusing = {node for node, refused in refusals.items() if refused}
        stranded = (
            Run.objects.filter(QUEUED_RUN)
            .exclude(node="")
            .filter(
                ~Q(node__in=alive_elsewhere | {self.worker_id})
                | Q(node__in=refusing, run_after__lt=now - self.misfire_threshold)
            )
            .select_related("job")
        )
        for run in stranded:
            if run.node in refusing:
                error = (
                    f"node {run.node}, the only one this run may run on, refuses work: its clock is too far "
                    f"from the database's (JOBS_MAX_CLOCK_SKEW); the run waited more than the misfire "
                    f"threshold ({self.misfire_threshold.total_seconds():g} s)"
                )
            else:
                error = f"node {run.node}, the only one this run may run on, stopped before it started"
            recorded |= self.recorder.record(
                run, Run.Status.INTERRUPTED, now, error=error, was=Run.Status.QUEUED
            )
        if recorded.written:
            log.warning("sweep interrupted %d stale run(s)", recorded.written)
        return recorded


def requeue_unstarted_claims(now: datetime, *, worker_id: str, executing: Collection[int]) -> int:
    """After a database error: runs marked running by this worker that it is
    not executing were claimed by a commit whose answer was lost with the
    connection. Their handlers never started (a flight starts only after the
    claim's commit returns), so they go back to the queue instead of
    blocking their job as an overlap until the sweep. Returns how many."""
    count = (
        Run.objects.filter(status=Run.Status.RUNNING, worker_id=worker_id)
        .exclude(pk__in=list(executing))
        .update(**back_to_queue(now))
    )
    if count:
        log.warning("requeued %d run(s) whose claim was committed but never confirmed to this node", count)
    return count


class RunHeartbeat:
    """Every HEARTBEAT_EVERY: touch this node's running runs, save the logs
    they wrote since, and act on cancel requests."""

    def __init__(self, *, recorder: Recorder):
        self.recorder = recorder
        self.cadence = Cadence(HEARTBEAT_EVERY)

    @property
    def next_at(self) -> datetime | None:
        return self.cadence.next_at

    def step(self, now: datetime, pool: Pool) -> Recorded | None:
        """None when not due, or nothing is running; else what acting on the
        cancel requests recorded."""
        if not self.cadence.take(now):
            return None
        if not pool.flights:
            return None
        ids = list(pool.flights)
        Run.objects.filter(pk__in=ids, status=Run.Status.RUNNING).update(heartbeat_at=now)
        for flight in list(pool.flights.values()):
            written = flight.ctx.log_chars
            if written != flight.log_flushed:
                Run.objects.filter(pk=flight.run_id, status=Run.Status.RUNNING).update(
                    log=cap_message(flight.ctx.log_text(), self.recorder.cap)
                )
                flight.log_flushed = written
        recorded = Recorded()
        for run_id in Run.objects.filter(pk__in=ids, cancel_requested=True).values_list("pk", flat=True):
            flight = pool.flights.get(run_id)
            if flight is None:
                continue
            if flight.is_task:
                recorded |= self.recorder.stop_waiting(flight, pool, Run.Status.FAILED, now, "task cancelled")
            else:
                recorded |= self.recorder.stop_waiting(
                    flight, pool, Run.Status.CANCELLED, now, "cancelled by an admin"
                )
        return recorded
