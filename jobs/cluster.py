"""The cluster as the console's cluster page and `manage.py cluster status`
show it: the scheduler nodes (from their `node:<worker id>` leases, whose
info says where each runs and how far its clock is from the database's),
the leader lease and the recent leadership changes; whether one node is
alive and working (`node_health`, for `manage.py health`). Read only: taking
and renewing the leases is the engine's (jobs.engine.leases)."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Count
from django.db.models.functions import Now

from jobs.core.dbclock import REFUSE_FACTOR, database_now, max_skew, refusal, refused_in, skew_in
from jobs.models import LeadershipChange, Lease, Run

NODE_PREFIX = "node:"
LEADER = "leader"


def node_lease_name(worker_id: str) -> str:
    return f"{NODE_PREFIX}{worker_id}"


def current(name: str, *, now: datetime) -> tuple[Lease | None, datetime]:
    """The lease row (None if never created) and the clock to judge it by."""
    qs = Lease.objects.filter(name=name)
    if connection.vendor == "postgresql":
        lease = qs.annotate(db_now=Now()).first()
        return lease, (lease.db_now if lease else database_now())
    return qs.first(), now


def live_node_holders(*, now: datetime) -> set[str]:
    return set(node_refusals(now=now))


def node_refusals(*, now: datetime) -> dict[str, bool]:
    """Each node whose lease is current → whether it refuses work: its clock
    is too far from the database's, so it plans and claims nothing
    (jobs.engine.clock), as its last lease renewal said."""
    return {
        holder: refused_in(info)
        for holder, info in Lease.objects.filter(
            name__startswith=NODE_PREFIX, holder__gt="", expires_at__gte=clock_for(now)
        ).values_list("holder", "info")
    }


@dataclass(frozen=True)
class NodeHealth:
    problem: str | None  # None: alive and working
    clock_skew: float | None = None  # its clock minus the database's, as it last measured (PostgreSQL)


def node_health(worker_id: str, *, now: datetime) -> NodeHealth:
    """Whether the scheduler running as `worker_id` holds its node lease
    (renewed every JOBS_LEASE_RENEW_SECONDS from its loop, so a hung or dead
    scheduler loses it within JOBS_LEASE_TTL_SECONDS), the same test of
    liveness as the sweep's (`Lease.is_live`), and does its work: one whose
    clock is too far from the database's plans and claims nothing
    (jobs.engine.clock). Else why not, and how far its clock is off."""
    lease, clock = current(node_lease_name(worker_id), now=now)
    if lease is None:
        return NodeHealth(f"no scheduler has ever run as {worker_id}")
    if not lease.holder:
        return NodeHealth(f"the scheduler {worker_id} stopped (it released its lease at shutdown)")
    if not lease.is_live(clock):
        last = lease.renewed_at.isoformat() if lease.renewed_at else "never"
        return NodeHealth(
            f"the scheduler {worker_id} has not renewed its lease since {last} (expired {lease.expires_at.isoformat()})"
        )
    skew = skew_in(lease.info)
    if refused_in(lease.info) and skew is not None:
        return NodeHealth(
            f"the scheduler {worker_id} plans and claims nothing: {refusal(skew)}; fix its time (NTP)",
            skew,
        )
    return NodeHealth(None, skew)


def clock_for(now: datetime):
    """The clock a lease is judged by in a query: the database's on PostgreSQL."""
    return Now() if connection.vendor == "postgresql" else now


@dataclass
class NodeStatus:
    worker_id: str
    host: str
    pid: int | None
    version: str
    started_at: str | None
    last_heartbeat: datetime | None
    expires_at: datetime | None
    running: int
    alive: bool
    is_leader: bool = False
    # This node's clock minus the database's, as it measured at its last
    # lease renewal (PostgreSQL; None on SQLite or before it measured), and
    # whether it is so far off that it plans and claims nothing
    # (jobs.engine.clock).
    clock_skew: float | None = None
    clock_refused: bool = False

    @property
    def clock_over_limit(self) -> bool:
        return self.clock_skew is not None and abs(self.clock_skew) > max_skew()


@dataclass
class ClusterStatus:
    now: datetime
    leader: str | None
    lease_expires_at: datetime | None
    epoch: int | None
    # The last holder, while the lease has lapsed and nobody took it yet.
    lapsed_holder: str | None
    nodes: list[NodeStatus] = field(default_factory=list)
    changes: list[LeadershipChange] = field(default_factory=list)

    @property
    def max_clock_skew(self) -> float:
        """JOBS_MAX_CLOCK_SKEW: a node's clock further off is shown as off."""
        return max_skew()

    @property
    def refused_clock_skew(self) -> float:
        """A node's clock further off than this makes it plan and claim nothing."""
        return REFUSE_FACTOR * max_skew()

    @property
    def live_nodes(self) -> list[NodeStatus]:
        return [n for n in self.nodes if n.alive]

    def as_json(self) -> dict:
        return {
            "leader": self.leader,
            "lease_expires_at": _iso(self.lease_expires_at),
            "epoch": self.epoch,
            "nodes": [
                {
                    "worker_id": n.worker_id,
                    "host": n.host,
                    "pid": n.pid,
                    "last_heartbeat": _iso(n.last_heartbeat),
                    "running": n.running,
                    "clock_skew_seconds": n.clock_skew,
                    "clock_refused": n.clock_refused,
                }
                for n in self.live_nodes
            ],
        }


def cluster_status(
    *, now: datetime, lost_for: timedelta = timedelta(hours=24), changes: int = 20
) -> ClusterStatus:
    """Live nodes (and those that stopped heartbeating without shutting down in
    the last `lost_for`), the leader lease, and recent leadership changes."""
    leader, clock = current(LEADER, now=now)
    live = leader is not None and leader.is_live(clock)
    running = dict(
        Run.objects.filter(status=Run.Status.RUNNING)
        .values("worker_id")
        .annotate(n=Count("id"))
        .values_list("worker_id", "n")
    )
    rows = Lease.objects.filter(name__startswith=NODE_PREFIX, holder__gt="", expires_at__gte=clock - lost_for)
    nodes = [
        NodeStatus(
            worker_id=row.holder,
            host=str(row.info.get("host", "")),
            pid=row.info.get("pid"),
            version=str(row.info.get("version", "")),
            started_at=row.info.get("started_at"),
            last_heartbeat=row.renewed_at,
            expires_at=row.expires_at,
            running=running.get(row.holder, 0),
            alive=row.is_live(clock),
            is_leader=live and row.holder == leader.holder,
            clock_skew=skew_in(row.info),
            clock_refused=refused_in(row.info),
        )
        for row in rows.order_by("holder")
    ]
    leader_id = leader.holder if live else None
    single = [n for n in nodes if n.alive]
    if not live and connection.vendor != "postgresql" and len(single) == 1:
        # SQLite is single-node: its one scheduler plans without a lease.
        single[0].is_leader = True
        leader_id = single[0].worker_id
    return ClusterStatus(
        now=clock,
        leader=leader_id,
        lease_expires_at=leader.expires_at if live else None,
        epoch=leader.epoch if live else None,
        lapsed_holder=leader.holder if leader is not None and leader.holder and not live else None,
        nodes=nodes,
        changes=list(LeadershipChange.objects.all()[:changes]),
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
