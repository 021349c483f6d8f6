"""Leadership: the leases one scheduler process holds, who it is, and the
PostgreSQL session it keeps.

- **The node lease** (`node:<worker id>`), renewed every
  JOBS_LEASE_RENEW_SECONDS: this process is alive and owns its worker id (the
  sweep leaves its runs alone; `manage.py health` asks it). Its `info` says
  where it runs (host, pid, version, start, runs in flight) for the cluster
  page. A renewal that finds the lease taken by another process under the
  same worker id means this one stalled past its lease and was replaced:
  `renew_node` says so and the loop stops.
- **The leader lease** (PostgreSQL, several nodes): `lead` renews it, or tries
  to take it, once per renew period; only the leader plans fires, and its
  claims carry the lease's epoch (jobs.engine.planning), so a belief gone
  stale by a stall claims nothing. On SQLite the one scheduler always leads.
- **Identity** (`check_identity`, before start): another live process
  holding this worker id's node lease is refused with `WorkerIdInUse`.
- **The session** (PostgreSQL): the loop's connection ends a transaction left
  idle for a lease TTL, and the scheduler's tables are analyzed once if the
  planner has no statistics for them yet.

The lease primitives (take, renew, release, the epoch fence) are
jobs.engine.leases.
"""

import logging
import os
import socket
import threading
from datetime import datetime

from django.db import connection, transaction
from django.db.backends.signals import connection_created

import jobs
from jobs import cluster
from jobs.engine import leases
from jobs.engine.clock import Cadence
from jobs.models import Job, LeadershipChange, Run

log = logging.getLogger("cronboard.scheduler")

KEEP_CHANGES = 100  # leadership changes kept for the cluster page


class WorkerIdInUse(Exception):
    """Another live scheduler process runs under this JOBS_WORKER_ID."""


class Leadership:
    """The leases of one scheduler process, and what it believes of them."""

    def __init__(self, worker_id: str, *, clustered: bool):
        self.worker_id = worker_id
        self.clustered = clustered
        self.lease_ttl = leases.lease_ttl()
        self.lease_renew = leases.renew_period()
        self.leading = Cadence(self.lease_renew)  # the leader lease's renewals (or tries to take it)
        self.node_renewal = Cadence(self.lease_renew)
        self.leader_epoch: int | None = None
        self.node_epoch: int | None = None
        self.node_info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": jobs.__version__,
            "started_at": None,
        }

    def started(self, now: datetime) -> None:
        """The scheduler starts: its node lease's info says since when."""
        self.node_info["started_at"] = now.isoformat()

    # -- the leader lease ------------------------------------------------------

    def is_leader(self) -> bool:
        """SQLite is single-node (the process lock in runscheduler makes sure),
        so this process plans. On PostgreSQL: whether we held the leader lease
        at the last renewal. That belief may be stale by the time we claim (a
        stall); the claims themselves check the lease (jobs.engine.planning)."""
        return not self.clustered or self.leader_epoch is not None

    def lead(self, now: datetime) -> bool:
        """PostgreSQL, every lease-renew interval: renew the leader lease if we
        hold it, else try to take it. True when we just became leader."""
        if not self.clustered:
            return False
        if not self.leading.take(now):
            return False
        with transaction.atomic():
            grant = leases.acquire(
                cluster.LEADER, self.worker_id, epoch=self.leader_epoch, now=now, ttl=self.lease_ttl
            )
            if grant is not None and grant.taken:
                record_leadership(grant, self.worker_id)
        if grant is None:
            if self.leader_epoch is not None:
                log.warning(
                    "lost the leader lease (epoch %d); planning stops on this node", self.leader_epoch
                )
            self.leader_epoch = None
            return False
        if grant.taken:
            log.info(
                "leader now (epoch %d, lease until %s by the database clock)",
                grant.epoch,
                grant.expires_at.isoformat(),
            )
        self.leader_epoch = grant.epoch
        return grant.taken

    def lost_leader(self) -> None:
        """Planning found its claims refused because the lease is gone: plan no
        more until `lead` takes it again."""
        self.leader_epoch = None

    def step_down(self) -> None:
        """Hand the leader lease back (shutdown) so a standby takes it at its
        next try instead of waiting for it to expire."""
        if self.clustered and self.leader_epoch is not None:
            leases.release(cluster.LEADER, self.worker_id, epoch=self.leader_epoch)
            log.info("released the leader lease (epoch %d)", self.leader_epoch)
            self.leader_epoch = None

    # -- the node lease --------------------------------------------------------

    def node_renew_due(self, now: datetime) -> bool:
        """Once per renew period, and at once if the clock went back (this
        host's was stepped, or a new measurement moved the database's
        offset): waiting for it to catch up could let the lease lapse."""
        return self.node_renewal.due(now)

    def renew_node(self, now: datetime, *, running: int, clock: dict | None = None) -> bool:
        """Renew (or, the first time, take) this process's node lease, its
        info saying how many runs are in flight and what `clock` says of this
        node's clock (jobs.engine.clock.Skew.info). False when another
        process took over our worker id (we stalled past our node lease and
        it started meanwhile): it owns the id and our runs now, so we hand
        back the leader lease and the caller stops."""
        info = {**self.node_info, "running": running, **(clock or {})}
        name = cluster.node_lease_name(self.worker_id)
        grant = leases.acquire(
            name, self.worker_id, epoch=self.node_epoch, now=now, ttl=self.lease_ttl, info=info
        )
        self.node_renewal.ran(now)
        if grant is not None:
            self.node_epoch = grant.epoch
            return True
        if not self.clustered:
            return True
        log.error("another process took over worker id %s; stopping this one", self.worker_id)
        self.step_down()
        return False

    def release_node(self) -> None:
        leases.release(cluster.node_lease_name(self.worker_id), self.worker_id, epoch=self.node_epoch)

    # -- identity ----------------------------------------------------------------

    def check_identity(self, now: datetime) -> None:
        """Before start (runscheduler, PostgreSQL): refuse (WorkerIdInUse) when
        another live process holds this worker id's node lease. A process on
        this host that is gone (killed with -9, so it never released the
        lease) does not hold us up."""
        lease, clock = cluster.current(cluster.node_lease_name(self.worker_id), now=now)
        if lease is None or not lease.is_live(clock):
            return
        host, pid = lease.info.get("host"), lease.info.get("pid")
        if host == self.node_info["host"] and isinstance(pid, int) and not scheduler_process_alive(pid):
            log.warning(
                "worker id %s was held by pid %s on this host, which is gone; taking over",
                self.worker_id,
                pid,
            )
            return
        raise WorkerIdInUse(
            f"Another scheduler is running as JOBS_WORKER_ID={self.worker_id} (host {host or '?'}, pid {pid or '?'}, "
            f"last heartbeat {lease.renewed_at.isoformat() if lease.renewed_at else '?'}). Every scheduler node needs its "
            f"own worker id. If that process is gone, its lease lapses by {lease.expires_at.isoformat()}; start again then."
        )

    # -- the PostgreSQL session ----------------------------------------------------

    def tune_session(self) -> None:
        """At start: on PostgreSQL, limit idle transactions (clustered) and
        analyze the scheduler's tables if they never were."""
        if self.clustered:
            self.limit_idle_transactions()
        analyze_unanalyzed_tables()

    def untune_session(self) -> None:
        connection_created.disconnect(dispatch_uid=self._idle_limit_uid)

    def limit_idle_transactions(self) -> None:
        """A scheduler stalled inside one of its (short) transactions would hold
        row locks, and could commit a claim after waking. PostgreSQL ends such a
        session after a lease TTL of idleness, so the claim rolls back and the
        locks go. Only this thread's connections: handler threads are free to
        hold their own transactions."""
        seconds = int(self.lease_ttl.total_seconds())
        thread = threading.get_ident()

        def apply(sender=None, connection=connection, **kwargs):
            if connection.vendor == "postgresql" and threading.get_ident() == thread:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT set_config('idle_in_transaction_session_timeout', %s, false)", [f"{seconds}s"]
                    )

        connection_created.connect(apply, weak=False, dispatch_uid=self._idle_limit_uid)
        if connection.connection is not None:
            apply(connection=connection)

    @property
    def _idle_limit_uid(self) -> str:
        return f"cronboard-idle-transactions-{id(self)}"


def record_leadership(grant: leases.Grant, worker_id: str, *, keep: int = KEEP_CHANGES) -> None:
    """History for the cluster page: one row per new leader epoch."""
    LeadershipChange.objects.create(
        epoch=grant.epoch, worker_id=worker_id, host=socket.gethostname(), acquired_at=grant.acquired_at
    )
    old = LeadershipChange.objects.order_by("-acquired_at", "-id").values_list("id", flat=True)[
        keep : keep + 1000
    ]
    if old:
        LeadershipChange.objects.filter(id__in=list(old)).delete()


def analyze_unanalyzed_tables() -> None:
    """PostgreSQL plans from table statistics, and a table that was never
    analyzed (a new database, jobs just imported) looks nearly empty to
    it: the batched fire claim then walks every enabled job once per row
    of the batch instead of looking each up by its key, and fires start
    late. Autovacuum analyzes such a table, but only a minute or so
    later; the scheduler's own tables are analyzed here, once, if they
    never were (no ANALYZE and no autoanalyze in pg_stat_user_tables).
    Not `reltuples < 0`: CREATE INDEX sets reltuples too (a migration
    does, with the built-in job as the only row), without statistics."""
    if connection.vendor != "postgresql":
        return
    tables = [Job._meta.db_table, Run._meta.db_table]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE relid = ANY(%s::regclass[]) "
            "AND last_analyze IS NULL AND last_autoanalyze IS NULL",
            [tables],
        )
        never = [name for (name,) in cursor.fetchall()]
        for table in never:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(table)}")
    if never:
        log.info("analyzed %s: the planner had no statistics for them yet", ", ".join(never))


def scheduler_process_alive(pid: int) -> bool:
    """Whether `pid` on this host is a live scheduler process. Our own pid is an
    earlier life of this container (pid numbers restart with it); a pid reused
    by some other program, or a zombie, does not count."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"runscheduler" in f.read()
    except OSError:
        return True
