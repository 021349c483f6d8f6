"""Several real `runscheduler` processes on a real PostgreSQL server: kill -9,
SIGSTOP/SIGCONT, a database restart, and runs counted per fire.

Each test gets its own database on the session's server; the database restart
comes last in the file since it disconnects everyone.
"""

import itertools
import os
import signal
import time
from datetime import timedelta

import pytest

from tests.fixtures.cluster import TICK, process_state
from tests.fixtures.processes import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def assert_one_row_per_slot(runs: list[tuple], *, gaps_allowed: bool = False) -> None:
    """Scheduled times are pairwise distinct and on the job's 5-second grid;
    without `gaps_allowed`, no slot is missing either. (While no node leads,
    fires are missed; the next leader records the first one skipped/misfire
    and runs the latest, and the slots in between have no row at all.)"""
    times = [r[0] for r in runs]
    assert len(times) == len(set(times)), f"a fire was planned twice: {times}"
    gaps = {b - a for a, b in itertools.pairwise(times)}
    if gaps_allowed:
        assert all(gap % timedelta(seconds=TICK) == timedelta(0) for gap in gaps), (
            f"off the grid: {sorted(gaps)}"
        )
    else:
        assert gaps <= {timedelta(seconds=TICK)}, f"fires are not every {TICK} s: {sorted(gaps)}"


def test_worker_identity_on_postgresql(cluster_factory):
    # A node lease of 90 s: waiting it out would take 80 s or more, far beyond
    # a restart on a busy machine.
    cluster = cluster_factory("cluster_identity", JOBS_LEASE_TTL_SECONDS="90")

    missing = cluster.manage("runscheduler", timeout=30, check=False)
    assert missing.returncode != 0 and "JOBS_WORKER_ID is not set" in missing.stderr

    first = cluster.start_node("n1")
    wait_for(lambda: cluster.leader(), 20, "n1 to start and lead")
    twin = cluster.manage("runscheduler", timeout=30, check=False, JOBS_WORKER_ID="n1")
    assert twin.returncode != 0
    assert (
        f"Another scheduler is running as JOBS_WORKER_ID=n1 (host {os.uname().nodename}, pid {first.pid}"
        in twin.stderr
    )

    disabled = cluster.manage(
        "runscheduler", timeout=30, check=False, JOBS_WORKER_ID="n2", JOBS_SCHEDULER_ENABLED="false"
    )
    assert disabled.returncode != 0 and "serves pages only" in disabled.stderr

    # kill -9 leaves n1's node lease live for up to 90 s: a restart on this
    # host sees its pid is gone and does not wait for the lease to lapse.
    cluster.kill("n1")
    started = time.monotonic()
    second = cluster.start_node("n1")
    wait_for(
        lambda: cluster.sql(
            "SELECT 1 FROM jobs_lease WHERE name = 'node:n1' AND (info->>'pid')::int = %s", [second.pid]
        ),
        40,
        "the restarted n1 to hold its node lease",
    )
    assert time.monotonic() - started < 40
    assert "which is gone; taking over" in cluster.log("n1")


def test_lease_times_come_from_the_database_clock_not_the_hosts(cluster_factory):
    """Host `b` runs an hour fast and host `c` an hour slow: neither changes
    what the lease says, so `b` cannot take `a`'s live lease early."""
    cluster = cluster_factory("cluster_clock")
    out = cluster.django(
        "from datetime import timedelta\n"
        "from django.utils import timezone\n"
        "from jobs.engine import leases\n"
        "from jobs.core.dbclock import database_now\n"
        "hour = timedelta(hours=1)\n"
        "a = leases.acquire('leader', 'a', now=timezone.now())\n"
        "b = leases.acquire('leader', 'b', now=timezone.now() + hour)\n"
        "c = leases.acquire('leader', 'a', epoch=a.epoch, now=timezone.now() - hour)\n"
        "db_now = database_now()\n"
        "print(b is None, c.epoch == a.epoch, abs((c.expires_at - db_now) - leases.lease_ttl()) < timedelta(seconds=2))\n"
    )
    assert out.split() == ["True", "True", "True"]


def test_a_scheduler_stalled_inside_a_transaction_has_it_ended_by_the_server(cluster_factory):
    """Its own connections (not its handlers') end transactions left idle for
    a lease TTL, so a claim made before a stall rolls back and frees its row
    locks instead of committing after the node wakes."""
    cluster = cluster_factory("cluster_idle")
    out = cluster.django(
        "import threading\n"
        "from django.db import connection\n"
        "from jobs.engine.leadership import Leadership\n"
        "Leadership('probe', clustered=True).limit_idle_transactions()\n"
        "connection.close()\n"
        "def show():\n"
        "    from django.db import connection\n"
        "    with connection.cursor() as cursor:\n"
        "        cursor.execute('SHOW idle_in_transaction_session_timeout')\n"
        "        print(cursor.fetchone()[0])\n"
        "    connection.close()\n"
        "show()\n"
        "handler = threading.Thread(target=show)\n"
        "handler.start(); handler.join()\n"
    )
    assert out.split() == ["30s", "0"]


def test_three_schedulers_plan_each_fire_once_and_a_standby_replaces_a_killed_leader(cluster_factory):
    cluster = cluster_factory("cluster_kill")
    for worker_id in ("n1", "n2", "n3"):
        cluster.start_node(worker_id)
    leader, epoch = wait_for(cluster.leader, 20, "a leader")
    cluster.create_jobs("tick", 1, interval=TICK, enabled=True)

    wait_for(lambda: len(cluster.runs_of("tick-0")) >= 3, 4 * TICK, "three fires")
    runs = cluster.runs_of("tick-0")
    assert_one_row_per_slot(runs)
    assert {r[3] for r in runs} == {epoch}, "only the leader plans"

    killed_at = time.monotonic()
    cluster.kill_between_runs(leader)
    new_leader, new_epoch = wait_for(
        lambda: (held := cluster.leader()) and held[0] != leader and held, 45, "a standby to take over"
    )
    assert time.monotonic() - killed_at <= 41
    assert new_epoch == epoch + 1

    try:
        wait_for(
            lambda: (
                sum(1 for r in cluster.runs_of("tick-0") if r[3] == new_epoch and r[1] == "succeeded") >= 3
            ),
            5 * TICK,
            "the job to keep firing under the new leader",
        )
    except AssertionError as exc:
        logs = "\n".join(f"--- {w}\n{cluster.log(w)[-3000:]}" for w in cluster.nodes)
        raise AssertionError(f"{exc}; runs: {cluster.runs_of('tick-0')}\n{logs}") from None
    codes = cluster.stop_all()
    assert [codes[w] for w in sorted(codes) if w != leader] == [0, 0]

    runs = cluster.runs_of("tick-0")
    assert_one_row_per_slot(runs, gaps_allowed=True)
    assert cluster.duplicate_fires() == []
    # Fires missed while nobody led are recorded, not replayed (misfire rules).
    # A fire that falls due while the job's previous run is still live is
    # skipped by the overlap rule: on a busy machine a run can outlast a tick.
    assert {(r[1], r[2]) for r in runs} <= {("succeeded", ""), ("skipped", "misfire"), ("skipped", "overlap")}
    assert {r[3] for r in runs} == {epoch, new_epoch}


def test_a_leader_stalled_past_its_lease_claims_nothing_when_it_wakes(cluster_factory, tmp_path):
    """Phase 1 stops the leader exactly between deciding it leads and claiming
    (tests/stall_hook.py), lets another node take the lease, makes 300 jobs
    due as of just before the stall (so the woken node, whose `now` is from
    before its stall, sees them due too) and wakes it: it tries to claim (its
    log says so) and the epoch fence refuses every claim. Remove the lease
    condition from the planner's claims (jobs.engine.planning) and this
    fails: the woken node plans the 300 under its old epoch.
    Phase 2 is the black-box version: SIGSTOP the leader from outside past its
    lease, SIGCONT, and check nothing it planned is dated after its successor
    took over."""
    ttl, renew = 4, 1
    cluster = cluster_factory(
        "cluster_stall",
        JOBS_LEASE_TTL_SECONDS=str(ttl),
        JOBS_LEASE_RENEW_SECONDS=str(renew),
        JOBS_HANDLER_MODULES="tests.stall_hook",
    )
    cluster.create_jobs("burst", 300, interval=3600, enabled=False)
    for worker_id in ("n1", "n2", "n3"):
        cluster.start_node(worker_id, CRONBOARD_TEST_STALL_FILE=str(tmp_path / f"stall-{worker_id}"))
    stalled, old_epoch = wait_for(cluster.leader, 20, "a leader")
    cluster.create_jobs("tick", 1, interval=TICK, enabled=True)
    pid = cluster.nodes[stalled].pid

    ((before_stall,),) = cluster.sql("SELECT now() - interval '1 second'")
    (tmp_path / f"stall-{stalled}").touch()
    wait_for(lambda: process_state(pid) == "T", 10, "the leader to stall before claiming")
    successor, new_epoch = wait_for(
        lambda: (held := cluster.leader()) and held[0] != stalled and held, ttl + renew + 5, "a successor"
    )
    assert cluster.fire_all("burst", at=before_stall) == 300
    os.kill(pid, signal.SIGCONT)

    wait_for(
        lambda: cluster.sql("SELECT count(DISTINCT job_id) FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
                            "WHERE j.name LIKE 'burst-%%'")[0][0] == 300,
        30,
        "every burst job to fire",
    )  # fmt: skip
    by_epoch = dict(
        cluster.sql(
            "SELECT r.planned_epoch, count(*) FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
            "WHERE j.name LIKE 'burst-%%' GROUP BY r.planned_epoch"
        )
    )
    assert old_epoch not in by_epoch, (
        f"the stalled leader planned {by_epoch.get(old_epoch)} fires after waking"
    )
    assert sum(by_epoch.values()) == 300
    assert wait_for(lambda: "fire claims refused" in cluster.log(stalled), 20, "the woken node to try")
    assert cluster.nodes[stalled].poll() is None, "the woken node keeps running, as a standby"

    # Phase 2: an outside SIGSTOP of whoever leads now.
    stopped, stopped_epoch = cluster.leader()
    os.kill(cluster.nodes[stopped].pid, signal.SIGSTOP)
    _, next_epoch = wait_for(
        lambda: (held := cluster.leader()) and held[0] != stopped and held, ttl + renew + 5, "a successor"
    )
    (took_over,) = cluster.sql(
        "SELECT acquired_at FROM jobs_leadershipchange WHERE epoch = %s", [next_epoch]
    )[0]
    time.sleep(1)
    os.kill(cluster.nodes[stopped].pid, signal.SIGCONT)
    wait_for(
        lambda: cluster.sql(
            "SELECT 1 FROM jobs_run WHERE planned_epoch = %s AND scheduled_at > %s", [next_epoch, took_over]
        ),
        2 * TICK + 2,
        "the job to fire under the successor",
    )
    time.sleep(TICK)
    late = cluster.sql(
        "SELECT scheduled_at FROM jobs_run WHERE planned_epoch = %s AND scheduled_at > %s",
        [stopped_epoch, took_over],
    )
    assert late == [], "the leader stopped from outside planned fires after its successor took over"
    assert cluster.duplicate_fires() == []
    assert_one_row_per_slot(cluster.runs_of("tick-0"), gaps_allowed=True)


def test_a_thousand_jobs_due_at_once_fire_exactly_once_across_three_nodes(cluster_factory):
    cluster = cluster_factory("cluster_thousand")
    cluster.create_jobs("many", 1000, interval=3600, enabled=False, handler="demo.sleep", seconds="0.05")
    for worker_id in ("n1", "n2", "n3"):
        cluster.start_node(worker_id)
    _, epoch = wait_for(cluster.leader, 20, "a leader")

    assert cluster.fire_all("many") == 1000
    wait_for(
        lambda: cluster.sql("SELECT count(*) FROM jobs_run WHERE status = 'succeeded'")[0][0] >= 1000,
        90,
        "1,000 runs to succeed",
        every=0.5,
    )

    ((runs, jobs, fires, workers, epochs),) = cluster.sql(
        "SELECT count(*), count(DISTINCT job_id), count(DISTINCT (job_id, scheduled_at)), "
        "count(DISTINCT worker_id), count(DISTINCT planned_epoch) FROM jobs_run"
    )
    assert (runs, jobs, fires) == (1000, 1000, 1000)
    assert cluster.duplicate_fires() == []
    assert epochs == 1
    assert workers >= 2, "runs are executed by every node, not only the leader"


def start_listener(server, dbname: str, on_wake, **kwargs):
    """A wake-up listener on a new database of the test server, started."""
    from jobs.engine.listener import WakeListener

    server.create_database(dbname)
    params = {"host": server.host, "port": server.port, "user": server.user, "dbname": dbname}
    listener = WakeListener(params, on_wake, **kwargs)
    listener.start()
    return listener


def test_the_wake_up_listener_hears_notify_and_reconnects_after_a_restart(postgres_server):
    import threading

    from jobs.core.wakeup import CHANNEL

    woken = threading.Event()
    listener = start_listener(postgres_server, "cluster_listen", woken.set)
    try:
        for _ in range(2):
            assert listener.listening.wait(20)
            woken.clear()
            with postgres_server.connect("cluster_listen") as conn:
                conn.execute(f"NOTIFY {CHANNEL}")
            assert woken.wait(2), "no wake-up for a NOTIFY"
            postgres_server.restart()
    finally:
        listener.stop()


def test_the_wake_up_listener_ignores_its_own_schedulers_notifications(postgres_server):
    import threading

    from jobs.core.wakeup import CHANNEL

    woken = threading.Event()
    listener = start_listener(postgres_server, "cluster_listen_self", woken.set, ignore_sender="n1")
    try:
        assert listener.listening.wait(20)
        # The wake-up every (re)connect gives, just after it starts listening.
        assert woken.wait(10)
        woken.clear()
        with postgres_server.connect("cluster_listen_self") as conn:
            conn.execute("SELECT pg_notify(%s, 'n1')", [CHANNEL])
        assert not woken.wait(1), "woken by its own scheduler's notification"
        with postgres_server.connect("cluster_listen_self") as conn:
            conn.execute("SELECT pg_notify(%s, 'n2')", [CHANNEL])
        assert woken.wait(2), "no wake-up for another scheduler's notification"
    finally:
        listener.stop()


def test_a_scheduler_analyzes_its_tables_if_the_planner_has_no_statistics_yet(cluster_factory):
    """A new database's tables have none until autovacuum comes round; the
    batched fire claim then walks every job per row instead of using keys."""
    cluster = cluster_factory("cluster_analyze")
    # Autovacuum analyzes a table with 50 new rows when it next comes round,
    # which could be before the first check below: here only the scheduler may.
    for table in ("jobs_job", "jobs_run"):
        cluster.sql(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    cluster.create_jobs("idle", 50, interval=3600, enabled=False)
    # Never analyzed, although the migrations' CREATE INDEX set reltuples.
    never = (
        "SELECT relname FROM pg_stat_user_tables WHERE relname IN ('jobs_job', 'jobs_run') "
        "AND last_analyze IS NULL AND last_autoanalyze IS NULL ORDER BY 1"
    )
    assert cluster.sql(never) == [("jobs_job",), ("jobs_run",)]
    cluster.start_node("n1")
    wait_for(lambda: not cluster.sql(never), 20, "n1 to analyze its tables")
    jobs = cluster.sql("SELECT count(*) FROM jobs_job")[0][0]  # 50 and the built-in retention job
    assert cluster.sql("SELECT reltuples FROM pg_class WHERE relname = 'jobs_job'") == [(float(jobs),)]
    # Logged once both ANALYZEs have returned, a moment after the view shows the first.
    wait_for(lambda: "analyzed jobs_" in cluster.log("n1"), 10, "n1 to log what it analyzed")


def test_schedulers_ride_out_a_database_restart_without_losing_or_repeating_a_fire(
    cluster_factory, postgres_server
):
    cluster = cluster_factory("cluster_restart")
    for worker_id in ("n1", "n2", "n3"):
        cluster.start_node(worker_id)
    wait_for(cluster.leader, 20, "a leader")
    cluster.create_jobs("tick", 1, interval=TICK, enabled=True)
    wait_for(lambda: len(cluster.runs_of("tick-0")) >= 2, 3 * TICK, "two fires")

    (restarted_at,) = cluster.sql("SELECT now()")[0]
    postgres_server.restart()
    wait_for(
        lambda: any(r[0] > restarted_at and r[1] == "succeeded" for r in cluster.runs_of("tick-0")),
        3 * TICK,
        "a fire after the restart",
    )
    # And an outage that lasts: every connection fails for a few seconds.
    postgres_server.stop()
    time.sleep(3)
    postgres_server.start()
    (restarted_at,) = cluster.sql("SELECT now()")[0]

    try:
        wait_for(
            lambda: (
                sum(1 for r in cluster.runs_of("tick-0") if r[0] > restarted_at and r[1] == "succeeded") >= 3
            ),
            6 * TICK,
            "three fires after the restart",
            every=0.5,
        )
    except AssertionError as exc:
        logs = "\n".join(f"--- {w}\n{cluster.log(w)[-3000:]}" for w in cluster.nodes)
        raise AssertionError(f"{exc}; runs: {cluster.runs_of('tick-0')}\n{logs}") from None
    assert all(process.poll() is None for process in cluster.nodes.values()), (
        "a scheduler died with the database"
    )
    assert cluster.stop_all() == {"n1": 0, "n2": 0, "n3": 0}

    runs = cluster.runs_of("tick-0")
    assert_one_row_per_slot(runs)
    assert cluster.duplicate_fires() == []
    # A tick due early in the outage can be reached only after the next one is
    # due too (the loop retries after 0.5, 1, 2 and 4 s): it is recorded
    # skipped/misfire and the later tick runs, by design. A non-leader whose
    # outcome write waited out the outage skips the next fire as an overlap.
    assert {r[1] for r in runs if r[1] != "skipped"} == {"succeeded"}, runs
    assert {r[2] for r in runs if r[1] == "skipped"} <= {"misfire", "overlap"}, runs
