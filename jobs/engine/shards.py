"""Sharded and broadcast fires: one fire written as several runs, and the
fire's one outcome once they have all ended.

A sharded job (`Job.shards` = N > 1) fires as N runs, shard 0 to N - 1,
which any node claims like other runs. A broadcast job fires as one run per
working node (a node lease that is current, jobs.cluster, of a node that
does not refuse work for its clock), each pinned to its node (`Run.node`):
only that node claims it, and it never moves. Both share
the fire's `fire_id` and `scheduled_at`, and the database allows one row per
fire, shard and attempt (run_unique_scheduled_shard_attempt), so a planner
that crashes at any moment never leaves two rows for one shard.

Each shard retries on its own. The fire ends when its last shard's last
attempt does (`fire_ended`): succeeded when every shard did, else failed as
its worst shard (a counted failure before an interruption or a cancel).
Only then does the fire count toward its job's consecutive failures and
alerts, and start the jobs that run after it: once, whatever the number of
shards. Whoever records a shard's end takes the job's row lock first, so of
two shards ending at once on two nodes exactly one sees the other ended.
"""

import copy
from collections.abc import Iterable
from datetime import datetime

from django.db.models.base import ModelState

from jobs import cluster
from jobs.models import Job, Run

# The worse status first: what a fire whose shards ended differently ended as.
WORST_FIRST = (
    Run.Status.FAILED,
    Run.Status.TIMED_OUT,
    Run.Status.INTERRUPTED,
    Run.Status.CANCELLED,
    Run.Status.SKIPPED,
)


def split(run: Run, job: Job, *, nodes: Iterable[str]) -> list[Run]:
    """The runs of one fire of `job`, from its first `run`: its shards, or
    for a broadcast job one per node of `nodes`, pinned to it (at least
    one: the planning node is always live)."""
    if job.broadcast:
        pinned = sorted(set(nodes))
        return [_piece(run, index, len(pinned), node=node) for index, node in enumerate(pinned)]
    if job.shards <= 1:
        return [run]
    return [_piece(run, index, job.shards) for index in range(job.shards)]


def live_nodes(worker_id: str, *, clustered: bool, now: datetime) -> set[str]:
    """The nodes a broadcast fire runs on: every node whose lease is current
    and that does not refuse work for its clock (it would claim nothing, and
    its run would hold the job's later fires up as an overlap), the planning
    one (`worker_id`) included; on one node, only that one."""
    if not clustered:
        return {worker_id}
    return {node for node, refusing in cluster.node_refusals(now=now).items() if not refusing} | {worker_id}


def _piece(run: Run, index: int, total: int, *, node: str = "") -> Run:
    # The first run's values, without a model's __init__ or copy.copy per
    # piece: a thousand of either cost a planning pass a fifth of its time.
    piece = Run.__new__(Run)
    piece.__dict__.update(run.__dict__)
    piece._state = ModelState()
    piece._state.fields_cache = run._state.fields_cache  # its job, as read
    piece.shard_index, piece.shard_total, piece.node = index, total, node
    return piece


def is_split(run: Run) -> bool:
    """Whether `run` is one piece of a fire of several (sharded or broadcast)."""
    return run.shard_total > 1 or bool(run.node)


def fire_ended(run: Run) -> Run | None:
    """After the final attempt of `run`'s shard was written (in the same
    transaction): the fire's outcome as a stand-in run, or None while
    another of its shards is live. The stand-in is `run` with the fire's
    status and, when the fire failed, its worst shard's id and error."""
    # The job's row lock orders the shards' ends (see the module's note).
    Job.objects.select_for_update().filter(pk=run.job_id).values_list("pk", flat=True).first()
    latest: dict[int, tuple[int, str, str, int]] = {}
    for index, attempt, status, error, pk in Run.objects.filter(
        job_id=run.job_id, scheduled_at=run.scheduled_at, fire_id=run.fire_id
    ).values_list("shard_index", "attempt", "status", "error", "pk"):
        if status in Run.LIVE:
            return None
        if index not in latest or attempt > latest[index][0]:
            latest[index] = (attempt, status, error, pk)
    ended = copy.copy(run)
    failed = [(index, status, error, pk) for index, (_attempt, status, error, pk) in sorted(latest.items())]
    failed = [item for item in failed if item[1] != Run.Status.SUCCEEDED]
    if not failed:
        ended.status = Run.Status.SUCCEEDED
        return ended
    index, status, error, pk = min(failed, key=lambda item: (_rank(item[1]), item[0]))
    # The worst shard stands for the fire: its alert and its downstream runs
    # (ctx.upstream) point at the run that ended as the fire did.
    ended.pk, ended.status = pk, status
    ended.error = (
        f"{len(failed)} of {len(latest)} shards did not succeed; shard {index} ended {status}: {error}"
    )
    return ended


def _rank(status: str) -> int:
    return WORST_FIRST.index(status) if status in WORST_FIRST else len(WORST_FIRST)
