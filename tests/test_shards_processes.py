"""Sharded and broadcast jobs on three real `runscheduler` processes sharing a
real PostgreSQL server: a sharded fire spread over the nodes, one node
SIGKILLed mid-fire and its shards finished elsewhere, no shard run twice, the
fire's one outcome and its one alert; a broadcast job's one run per node
through a node's arrival and a node's death (its run interrupted, not moved).

tests/shard_hook.py, loaded into the schedulers, shortens the sweep's
5 minutes (a dead node's runs are interrupted once their heartbeat is
older) to a few seconds, and gives the handler "test.piece"."""

import json

import pytest

from tests.fixtures.cluster import TICK
from tests.fixtures.processes import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

# A node's lease lapses 6 s after its last renewal; its runs are stale after 3 s.
FAST_SWEEP = dict(
    JOBS_HANDLER_MODULES="tests.shard_hook",
    CRONBOARD_TEST_STALE_SECONDS="3",
    JOBS_LEASE_TTL_SECONDS="6",
    JOBS_LEASE_RENEW_SECONDS="2",
    JOBS_MAX_CONCURRENT_RUNS="4",
)


def create_job(cluster, name: str, **fields) -> int:
    out = cluster.django(
        "from django.utils import timezone\n"
        "from jobs.models import Job\n"
        f"job = Job.objects.create(name={name!r}, handler='test.piece', **{fields!r})\n"
        # An enabled job is due at once; a paused one waits for fire_all.
        "Job.objects.filter(pk=job.pk, state='enabled').update(next_fire_at=timezone.now())\n"
        "print(job.pk)\n"
    )
    return int(out.strip().splitlines()[-1])


def pieces(cluster, job_id: int) -> list[tuple]:
    """(shard, attempt, status, worker, node, scheduled_at) of the job's runs."""
    return cluster.sql(
        "SELECT shard_index, attempt, status, worker_id, node, scheduled_at FROM jobs_run "
        "WHERE job_id = %s AND trigger = 'schedule' ORDER BY scheduled_at, shard_index, attempt",
        [job_id],
    )


def test_a_sharded_fire_spreads_over_the_nodes_and_outlives_a_killed_one(cluster_factory):
    cluster = cluster_factory("shards_kill", **FAST_SWEEP)
    for worker_id in ("n1", "n2", "n3"):
        cluster.start_node(worker_id)
    leader, _epoch = wait_for(cluster.leader, 30, "a leader")
    job_id = create_job(
        cluster,
        "split-0",
        schedule_type="interval",
        interval_seconds=3600,
        state="paused",
        shards=9,
        properties={"seconds": "8", "fail": "4"},
        max_retries=1,
        retry_interval_seconds=0,
        alert_threshold=0,
        alert_on=["failed"],
    )
    cluster.fire_all("split")

    # A node other than the leader, running shards: it dies mid-fire.
    def victim():
        rows = cluster.sql(
            "SELECT worker_id, count(*) FROM jobs_run WHERE job_id = %s AND status = 'running' "
            "AND worker_id <> %s GROUP BY worker_id",
            [job_id, leader],
        )
        return rows[0][0] if rows else None

    try:
        killed = wait_for(victim, 60, "a node besides the leader to run shards")
    except AssertionError as exc:
        logs = "\n".join(f"--- {w}\n{cluster.log(w)[-3000:]}" for w in cluster.nodes)
        raise AssertionError(f"{exc}; runs: {pieces(cluster, job_id)}\n{logs}") from None
    cluster.kill(killed)
    cut_short = {
        shard
        for shard, _a, status, worker, *_ in pieces(cluster, job_id)
        if worker == killed and status == "running"
    }
    assert cut_short

    def ended():
        runs = pieces(cluster, job_id)
        return all(status not in ("waiting", "queued", "running") for _s, _a, status, *_ in runs) and runs

    try:
        runs = wait_for(ended, 120, "every shard to end", every=0.5)
    except AssertionError as exc:
        logs = "\n".join(f"--- {w}\n{cluster.log(w)[-3000:]}" for w in cluster.nodes)
        raise AssertionError(f"{exc}; runs: {pieces(cluster, job_id)}\n{logs}") from None

    by_shard = {}
    for shard, attempt, status, worker, _node, _at in runs:
        by_shard.setdefault(shard, []).append((attempt, status, worker))
    assert sorted(by_shard) == list(range(9))
    assert len({worker for _s, _a, _st, worker, *_ in runs}) == 3, "shards ran on every node"
    for shard, attempts in by_shard.items():
        if shard == 4:
            assert [(a, s) for a, s, _w in attempts][-1] == (2, "failed"), attempts
        elif shard in cut_short:
            # Interrupted with its node, then run once more, elsewhere.
            assert [(a, s) for a, s, _w in attempts] == [(1, "interrupted"), (2, "succeeded")], attempts
            assert attempts[1][2] != killed
        else:
            assert [(a, s) for a, s, _w in attempts] == [(1, "succeeded")], attempts
    # The database's one row per fire, shard and attempt; nothing ran twice.
    assert len({(s, a) for s, a, *_ in runs}) == len(runs)

    ((last_status, failures, last_error),) = cluster.sql(
        "SELECT last_status, consecutive_failures, last_error FROM jobs_job WHERE id = %s", [job_id]
    )
    assert (last_status, failures) == ("failed", 1)
    assert "shard 4 ended failed" in last_error
    alerts = cluster.sql("SELECT kind FROM jobs_alert WHERE job_id = %s", [job_id])
    assert alerts == [("failed",)]


def test_a_broadcast_job_runs_once_on_each_live_node_through_arrivals_and_deaths(cluster_factory):
    cluster = cluster_factory("broadcast_nodes", **FAST_SWEEP)
    for worker_id in ("n1", "n2"):
        cluster.start_node(worker_id)
    leader, _epoch = wait_for(cluster.leader, 30, "a leader")
    job_id = create_job(
        cluster,
        "everywhere",
        schedule_type="interval",
        interval_seconds=TICK,
        broadcast=True,
        properties={"seconds": "0.2"},
        max_retries=2,
        retry_interval_seconds=0,
    )

    def fires() -> dict:
        grouped = {}
        for _shard, attempt, status, worker, node, at in pieces(cluster, job_id):
            grouped.setdefault(at, []).append((node, worker, status, attempt))
        return grouped

    def fire_on(nodes: set[str]):
        """The first fire that ran, one run pinned to each of `nodes` and run there."""
        for at, runs in sorted(fires().items()):
            if {node for node, *_ in runs} == nodes and all(
                status == "succeeded" and node == worker for node, worker, status, _ in runs
            ):
                return at
        return None

    first = wait_for(lambda: fire_on({"n1", "n2"}), 60, "a fire on n1 and n2", every=0.5)

    cluster.start_node("n3")
    joined = wait_for(lambda: fire_on({"n1", "n2", "n3"}), 60, "a fire on all three nodes", every=0.5)
    assert joined > first

    # Runs long enough to be cut short: a node besides the leader dies running one.
    cluster.sql("UPDATE jobs_job SET properties = %s WHERE id = %s", [json.dumps({"seconds": "30"}), job_id])
    victim = "n3" if leader != "n3" else "n2"

    def running_on_victim():
        return cluster.sql(
            "SELECT scheduled_at FROM jobs_run WHERE job_id = %s AND node = %s AND status = 'running'",
            [job_id, victim],
        )

    ((cut_at,),) = wait_for(running_on_victim, 60, f"a run on {victim}", every=0.5)
    cluster.kill(victim)
    survivors = {"n1", "n2", "n3"} - {victim}
    cluster.sql("UPDATE jobs_job SET properties = %s WHERE id = %s", [json.dumps({"seconds": "0.2"}), job_id])

    try:
        wait_for(
            lambda: (
                any(at > cut_at for at, runs in fires().items() if {n for n, *_ in runs} == survivors)
                and fire_on(survivors)
            ),
            90,
            "a fire on the surviving nodes only",
            every=0.5,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}; fires: {fires()}") from None
    # The dead node's run was interrupted where it was, never retried or moved.
    cut = [run for run in fires()[cut_at] if run[0] == victim]
    assert cut == [(victim, victim, "interrupted", 1)]
    # The fires after it (once the sweep ended it) name only live nodes.
    later = [runs for at, runs in fires().items() if at > cut_at]
    assert all(victim not in {node for node, *_ in runs} for runs in later), later
