"""A chain A → B (on success), A → C (on failure) on three real `runscheduler`
processes sharing a PostgreSQL database, with the leader killed mid-chain:
each finished A run starts B exactly once (none lost, none twice), C never."""

import pytest

from tests.fixtures.cluster import TICK
from tests.fixtures.processes import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def chain_rows(cluster):
    return cluster.sql(
        "SELECT a.id, a.status, b.id, j.name FROM jobs_run a JOIN jobs_job ja ON ja.id = a.job_id "
        "LEFT JOIN jobs_run b ON b.caused_by_id = a.id LEFT JOIN jobs_job j ON j.id = b.job_id "
        "WHERE ja.name = 'A' AND a.status IN ('succeeded', 'failed') ORDER BY a.id, b.id"
    )


def test_a_chain_survives_a_killed_leader_with_each_downstream_run_once(cluster_factory):
    cluster = cluster_factory("workflow_chain")
    cluster.django(
        "from jobs import imports\n"
        "imports.apply([\n"
        f"  {{'name': 'A', 'handler': 'demo.echo', 'schedule_type': 'interval', 'interval_seconds': {TICK}}},\n"
        "  {'name': 'B', 'handler': 'demo.echo', 'schedule_type': 'none', 'after': [{'job': 'A', 'on': 'success'}]},\n"
        "  {'name': 'C', 'handler': 'demo.echo', 'schedule_type': 'none', 'after': [{'job': 'A', 'on': 'failure'}]},\n"
        "])\n"
    )
    for worker_id in ("n1", "n2", "n3"):
        cluster.start_node(worker_id)
    leader, _epoch = wait_for(cluster.leader, 20, "a leader")
    wait_for(lambda: len({r[0] for r in chain_rows(cluster)}) >= 2, 4 * TICK, "two runs of A")
    cluster.kill_between_runs(leader)
    wait_for(lambda: (held := cluster.leader()) and held[0] != leader, 45, "a standby to take over")
    before = len({r[0] for r in chain_rows(cluster)})
    wait_for(
        lambda: len({r[0] for r in chain_rows(cluster)}) >= before + 2, 5 * TICK, "A under the new leader"
    )
    cluster.stop_all()

    rows = chain_rows(cluster)
    by_a = {}
    for a_id, _status, b_id, name in rows:
        by_a.setdefault(a_id, []).append((b_id, name))
    assert len(by_a) >= 4
    for a_id, caused in by_a.items():
        assert [name for _, name in caused] == ["B"], f"run {a_id} of A caused {caused}"
    assert cluster.sql(
        "SELECT count(*) FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id WHERE j.name = 'C'"
    ) == [(0,)]
    assert (
        cluster.sql(
            "SELECT caused_by_id FROM jobs_run WHERE caused_by_id IS NOT NULL AND attempt = 1 "
            "GROUP BY job_id, caused_by_id HAVING count(*) > 1"
        )
        == []
    )
