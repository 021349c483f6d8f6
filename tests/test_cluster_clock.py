"""Scheduler nodes whose clocks disagree, as real processes on a real
PostgreSQL server: each node's wall clock is set off by tests/clock_hook.py
(a file holds its offset; SIGUSR1 steps it to a new one). Fires keep the
database's clock whichever node leads, and a node far off says so and stops
working until its clock comes back."""

import signal
import statistics
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.fixtures.processes import Site, stop

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TICK = 5  # seconds between fires: the shortest interval a job may have
# A fire's start, by the database's clock, at most this long after its time.
# Measured: tens of milliseconds. Three schedulers, their run processes and
# PostgreSQL on a loaded two-core machine can stall a pass for seconds; the
# bound leaves that room and is still far below the 25 s the slow node's
# fires were late by when the leader planned by its own clock. Never early
# stays strict.
LATE_BY_AT_MOST = timedelta(seconds=5)
# Leases of 6 s renewed every 2 s: a node measures its clock, and a standby
# takes over, within seconds.
FAST_LEASES = {"JOBS_LEASE_TTL_SECONDS": "6", "JOBS_LEASE_RENEW_SECONDS": "2"}


class Nodes:
    """Scheduler nodes of one site, each with a clock file for its offset."""

    def __init__(self, site: Site, folder: Path):
        self.site = site
        self.folder = folder

    def start(self, worker_id: str, *, offset: float = 0.0):
        self.clock_file(worker_id).write_text(str(offset))
        return self.site.start_scheduler(
            worker_id,
            JOBS_WORKER_ID=worker_id,
            CRONBOARD_TEST_CLOCK_FILE=str(self.clock_file(worker_id)),
        )

    def set_clock(self, worker_id: str, offset: float) -> None:
        """Step a running node's clock to `offset` seconds from the true time."""
        self.clock_file(worker_id).write_text(str(offset))
        self.site.processes[worker_id].send_signal(signal.SIGUSR1)

    def stop(self, worker_id: str) -> None:
        assert stop(self.site.processes[worker_id]) == 0, self.site.log(worker_id)[-3000:]

    def clock_file(self, worker_id: str) -> Path:
        return self.folder / f"{worker_id}.offset"

    def leader(self) -> tuple[str, int] | None:
        rows = self.site.sql(
            "SELECT holder, epoch FROM jobs_lease WHERE name = 'leader' AND holder <> '' AND expires_at > now()"
        )
        return rows[0] if rows else None

    def wait_for_leader(self, worker_id: str, timeout: float = 30) -> int:
        """The epoch of `worker_id`'s lease once it leads."""
        return self.site.wait_for(
            lambda: (held := self.leader()) and held[0] == worker_id and held[1],
            timeout,
            f"{worker_id} to lead",
        )

    def status(self) -> dict[str, dict]:
        """`manage.py cluster status --json`'s live nodes, by worker id."""
        import json

        done = self.site.manage("cluster", "status", "--json")
        return {node["worker_id"]: node for node in json.loads(done.stdout)["nodes"]}

    def fires(self, name: str) -> list[tuple]:
        """(scheduled_at, started_at as written, status, planned_epoch,
        worker_id, the database's clock when the handler started) of each
        run of the job, in fire order."""
        return self.site.sql(
            "SELECT r.scheduled_at, r.started_at, r.status, r.planned_epoch, r.worker_id, r.result "
            "FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id WHERE j.name = %s ORDER BY r.scheduled_at, r.id",
            [name],
        )

    def create_tick(self, name: str, *, handler: str = "test.database_time", **props: str) -> datetime:
        """A job every TICK seconds whose first fire is 2 s from now by the
        database's clock, on a whole second; returns that time."""
        self.site.django(
            "from jobs.models import Job\n"
            f"Job.objects.create(name={name!r}, handler={handler!r}, properties={props!r}, "
            f"schedule_type='interval', interval_seconds={TICK}, state='paused')\n"
        )
        return self.site.sql(
            "UPDATE jobs_job SET state = 'enabled', next_fire_at = date_trunc('second', now()) + interval '2 s' "
            "WHERE name = %s RETURNING next_fire_at",
            [name],
        )[0][0]


@pytest.fixture
def nodes(postgres_site, tmp_path):
    made = []

    def make(name: str, **env: str) -> Nodes:
        site = postgres_site(name, JOBS_HANDLER_MODULES="tests.clock_hook", LOG_LEVEL="INFO", **env)
        made.append(site)
        return Nodes(site, tmp_path)

    yield make
    for site in made:
        site.stop_all(sig=signal.SIGKILL, timeout=10)


def started_by_the_database(fire: tuple) -> datetime:
    return datetime.fromisoformat(fire[5])


def test_fires_start_on_time_by_the_databases_clock_whichever_node_leads(nodes):
    """Three nodes, one 25 s fast and one 25 s slow (both warn: the limit is
    5 s here, so neither stops working). Each leads in turn for three fires
    of a job every 5 s. By the database's clock, no fire starts before its
    time, and every fire due while a node leads starts within
    LATE_BY_AT_MOST (typically milliseconds) whichever it is. Planning by the
    leader's clock, as before, starts every fire 25 s early under the fast
    node and 25 s late under the slow one."""
    cluster = nodes("clock_leaders", JOBS_MAX_CLOCK_SKEW="5", **FAST_LEASES)
    site = cluster.site
    offsets = {"fast": 25.0, "slow": -25.0, "true": 0.0}
    cluster.start("fast", offset=offsets["fast"])
    epochs = {"fast": cluster.wait_for_leader("fast")}
    cluster.start("slow", offset=offsets["slow"])
    cluster.start("true")
    cluster.create_tick("tick")

    def fires_under(leader: str) -> list[tuple]:
        return [f for f in cluster.fires("tick") if f[3] == epochs[leader] and f[2] == "succeeded"]

    site.wait_for(lambda: len(fires_under("fast")) >= 3, 6 * TICK, "three fires under the fast node")

    # The slow node leads: the others stop (handing the lease back) and start again as standbys.
    cluster.stop("fast")
    cluster.stop("true")
    epochs["slow"] = cluster.wait_for_leader("slow")
    cluster.start("fast", offset=offsets["fast"])
    cluster.start("true")
    site.wait_for(lambda: len(fires_under("slow")) >= 3, 6 * TICK, "three fires under the slow node")

    # The node whose clock is right leads.
    cluster.stop("slow")
    cluster.stop("fast")
    epochs["true"] = cluster.wait_for_leader("true")
    cluster.start("slow", offset=offsets["slow"])
    site.wait_for(lambda: len(fires_under("true")) >= 2, 6 * TICK, "two fires under the true node")

    # Each skewed node measured its clock, warned, and shows its skew.
    # (A node is listed once its run processes are up: on a loaded machine, seconds.)
    status = site.wait_for(
        lambda: (nodes := cluster.status()).keys() == {"true", "slow"} and nodes, 60, "slow"
    )
    assert abs(status["slow"]["clock_skew_seconds"] - offsets["slow"]) < 0.5, status
    assert abs(status["true"]["clock_skew_seconds"]) < 0.5, status
    assert not any(node["clock_refused"] for node in status.values())
    assert (
        "this node's clock is 25 s ahead of the database's, more than JOBS_MAX_CLOCK_SKEW (5 s)"
        in site.log("fast")
    )
    assert "s behind the database's, more than JOBS_MAX_CLOCK_SKEW (5 s)" in site.log("slow")
    assert "clock skew" not in site.log("true")
    site.stop_all()

    fires = cluster.fires("tick")
    assert len({f[0] for f in fires}) == len(fires), f"a fire ran twice: {fires}"
    ran = [f for f in fires if f[2] == "succeeded"]
    for fire in ran:
        # Never early, by the database's clock (the handler read it) and by
        # what the node wrote (its clock corrected by the offset it measured).
        assert started_by_the_database(fire) >= fire[0], f"started before its time: {fire}"
        assert fire[1] >= fire[0], f"recorded as started before its time: {fire}"
    changes = dict(site.sql("SELECT epoch, acquired_at FROM jobs_leadershipchange"))
    steady = [f for f in ran if f[0] >= changes[f[3]]]  # due after its leader took over
    lateness = {
        leader: [started_by_the_database(f) - f[0] for f in steady if f[3] == epoch]
        for leader, epoch in epochs.items()
    }
    assert all(len(late) >= 2 for late in lateness.values()), lateness
    for leader, late in lateness.items():
        assert max(late) < LATE_BY_AT_MOST, f"fires late under {leader}: {late}"
        assert statistics.median(late) < LATE_BY_AT_MOST / 2, f"fires late under {leader}: {late}"


def test_a_node_whose_clock_is_far_off_stops_planning_and_claiming_until_it_comes_back(nodes):
    """The limit is 2 s (the default), so a node 30 s off refuses to work:
    it hands back the leader lease, plans and claims nothing, finishes the
    run it has, and says so in its log, in `cluster status` and in `manage.py
    health`. A node whose clock is right does the work meanwhile. When its
    clock is back, it plans and claims again."""
    cluster = nodes("clock_refusal", **FAST_LEASES)
    site = cluster.site
    cluster.start("drift")
    cluster.wait_for_leader("drift")
    cluster.create_tick("long", handler="demo.sleep", seconds="6")
    site.wait_for(
        lambda: [f for f in cluster.fires("long") if f[2] == "running" and f[4] == "drift"],
        30,
        "drift to run the long job",
    )

    cluster.set_clock("drift", 30)
    site.wait_for(
        lambda: "plans and claims nothing until it is back" in site.log("drift"), 30, "drift to refuse"
    )
    assert (
        "its clock is 30 s ahead of the database's: it went more than 10 x JOBS_MAX_CLOCK_SKEW (20 s) off"
        in (site.log("drift"))
    )
    site.wait_for(lambda: cluster.leader() is None, 20, "drift to hand back the leader lease")
    status = site.wait_for(
        lambda: (node := cluster.status().get("drift")) and node["clock_refused"] and node,
        10,
        "cluster status to show drift refusing",
    )
    assert abs(status["clock_skew_seconds"] - 30) < 0.5
    health = site.manage("health", check=False, JOBS_WORKER_ID="drift")
    assert health.returncode == 1
    assert health.stderr.startswith(
        "unhealthy: the scheduler drift plans and claims nothing: its clock is 30 s ahead of the database's"
    )

    # The run it has is finished and written; nothing new is planned or claimed.
    site.wait_for(
        lambda: [f for f in cluster.fires("long") if f[2] == "succeeded" and f[4] == "drift"],
        30,
        "drift to finish its run",
    )
    due = cluster.create_tick("tick")
    site.wait_for(
        lambda: site.sql("SELECT now() > %s", [due + timedelta(seconds=3)])[0][0],
        15,
        "the tick to be 3 s overdue",
    )
    assert cluster.fires("tick") == [] and cluster.leader() is None

    # A node whose clock is right takes over the work.
    cluster.start("steady")
    steady_epoch = cluster.wait_for_leader("steady")

    def claimed() -> list[tuple]:
        # A fire is claimed once it left the queue; the overdue first fire may
        # be skipped as a misfire, and on a loaded machine the newest may wait
        # queued for a free slot while the test looks.
        return [f for f in cluster.fires("tick") if f[2] not in ("skipped", "queued")]

    site.wait_for(lambda: claimed(), 6 * TICK, "steady to claim a fire of the tick")
    # Every fire that was claimed, steady claimed.
    assert {f[4] for f in claimed()} == {"steady"}
    assert {f[3] for f in cluster.fires("tick")} == {steady_epoch}

    # Drift's clock comes back: it plans and claims again.
    cluster.set_clock("drift", 0)
    site.wait_for(lambda: "planning and claiming again" in site.log("drift"), 30, "drift to work again")
    site.wait_for(lambda: not cluster.status()["drift"]["clock_refused"], 20, "cluster status to show it")
    assert site.manage("health", JOBS_WORKER_ID="drift").stdout.startswith("ok: scheduler drift is alive")
    cluster.stop("steady")
    drift_epoch = cluster.wait_for_leader("drift")
    site.wait_for(
        lambda: [f for f in cluster.fires("tick") if f[3] == drift_epoch and f[4] == "drift"],
        4 * TICK,
        "drift to fire the tick again",
    )
    site.stop_all()
    fires = cluster.fires("tick")
    assert len({f[0] for f in fires}) == len(fires), f"a fire ran twice: {fires}"
    for fire in fires:
        assert fire[2] == "skipped" or fire[1] >= fire[0], f"started before its time: {fire}"
