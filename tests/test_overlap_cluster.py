"""Overlap and pools across three real scheduler processes on one PostgreSQL
database. A concurrency pool's size holds cluster-wide: each node has one
worker slot, so without the pool three of the pool's runs would run at
once; with `heavy: 2`, never more than two are admitted or running, fires
and manual runs alike, and the others start as those end. A queue_one job's next fire waits behind its live
run on whichever node runs it, a further fire is skipped, and the waiting
run starts only once the live one has ended."""

import pytest

from tests.fixtures.processes import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

JOBS = 6
MANUAL = 2  # of the JOBS runs, started by hand rather than fired
LIVE_IN_POOL = (
    "SELECT count(*) FILTER (WHERE r.status = 'running'), count(*) FILTER (WHERE r.status IN ('queued', 'running')), "
    "count(*) FILTER (WHERE r.status = 'waiting'), count(*) FILTER (WHERE r.status = 'succeeded') "
    "FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id WHERE j.pool = 'heavy'"
)


def renewals(cluster) -> dict:
    return dict(cluster.sql("SELECT name, renewed_at FROM jobs_lease WHERE name LIKE 'node:%%'"))


def test_a_pool_of_two_never_runs_three_across_three_schedulers(cluster_factory, tmp_path):
    gates = tmp_path / "gates"
    gates.mkdir()
    cluster = cluster_factory(
        "pools",
        JOBS_HANDLER_MODULES="tests.pool_handlers",
        JOBS_MAX_CONCURRENT_RUNS="1",
        JOBS_LEASE_TTL_SECONDS="4",
        JOBS_LEASE_RENEW_SECONDS="1",
    )
    cluster.django(
        "from jobs import pools\n"
        "from jobs.models import Job\n"
        "pools.save_pool(name='heavy', size=2)\n"
        f"Job.objects.bulk_create([Job(name=f'{{kind}}-{{i}}', handler='test.file_gate', pool='heavy', "
        f"properties={{'dir': {str(gates)!r}}}, schedule_type='interval', interval_seconds=3600, "
        f"state='paused') for kind, i in [('heavy', i) for i in range({JOBS - MANUAL})] "
        f"+ [('manual', i) for i in range({MANUAL})]])\n"
    )
    for worker_id in ("n1", "n2", "n3"):
        cluster.start_node(worker_id)
    wait_for(cluster.leader, 30, "a leader")
    assert cluster.fire_all("heavy") == JOBS - MANUAL
    # Manual runs of the pool's jobs (Run now, the API) wait for it as fires do.
    cluster.django(
        "from jobs import services\n"
        "from jobs.models import Job\n"
        "for job in Job.objects.filter(name__startswith='manual-'):\n"
        "    services.run_now(job=job)\n"
    )

    peak = 0

    def state():
        nonlocal peak
        running, admitted, waiting, succeeded = cluster.sql(LIVE_IN_POOL)[0]
        peak = max(peak, running, admitted)
        return running, admitted, waiting, succeeded

    cluster.wait_for(lambda: state()[0] == 2 and state()[2] == JOBS - 2, 30, "two runs running, four waiting")
    # Each node renews its lease from its loop's pass: two renewals of all
    # three since now are passes of each, one of them with its slot free,
    # and still two run.
    for _round in range(2):
        mark = renewals(cluster)

        def passed(mark=mark) -> bool:
            running, admitted, _waiting, _done = state()
            assert running <= 2 and admitted <= 2, f"{admitted} of a pool of 2 admitted"
            return all(at > mark[name] for name, at in renewals(cluster).items())

        cluster.wait_for(passed, 30, "a pass of every node", every=0.1)
    started = {path.name for path in gates.glob("started-*")}
    assert len(started) == 2, started

    # End each run once it started; the waiting ones start as slots free up.
    released: set[str] = set()

    def release_started() -> bool:
        for name in {path.name for path in gates.glob("started-*")} - released:
            (gates / name.replace("started-", "release-")).touch()
            released.add(name)
        return state()[3] == JOBS

    cluster.wait_for(release_started, 60, "every run of the pool to end", every=0.1)
    assert peak <= 2, f"{peak} runs of a pool of 2 were admitted at once"
    # Their [start, end] intervals, by the database's clock: never three at once.
    intervals = cluster.sql(
        "SELECT r.started_at, r.finished_at, r.worker_id FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
        "WHERE j.pool = 'heavy' ORDER BY r.started_at"
    )
    events = sorted([(start, 1) for start, _end, _w in intervals] + [(end, -1) for _s, end, _w in intervals],
                    key=lambda e: (e[0], e[1]))  # fmt: skip
    overlap = top = 0
    for _at, change in events:
        overlap += change
        top = max(top, overlap)
    assert top <= 2
    assert len({worker for _s, _e, worker in intervals}) >= 2, "the runs were spread over the nodes"


def test_queue_one_across_three_schedulers_waits_skips_and_starts_after(cluster_factory, tmp_path):
    gates = tmp_path / "gates"
    gates.mkdir()
    cluster = cluster_factory(
        "queue_one", JOBS_HANDLER_MODULES="tests.pool_handlers", JOBS_MAX_CONCURRENT_RUNS="2"
    )
    cluster.create_jobs("q", 1, interval=5, enabled=False, handler="test.file_gate", dir=str(gates))
    cluster.sql("UPDATE jobs_job SET overlap_policy = 'queue_one' WHERE name = 'q-0'")
    for worker_id in ("n1", "n2", "n3"):
        cluster.start_node(worker_id)
    wait_for(cluster.leader, 30, "a leader")
    cluster.fire_all("q")

    def statuses():
        return [(status, skip) for _at, status, skip, _epoch, _worker in cluster.runs_of("q-0")]

    # The first run holds; the next fire waits behind it, the one after is skipped.
    cluster.wait_for(
        lambda: statuses()[:3] == [("running", ""), ("waiting", ""), ("skipped", "overlap")],
        40,
        "a run, one waiting behind it, one skipped",
    )
    assert [s for s, _ in statuses()].count("running") == 1
    (gates / "release-all").touch()
    cluster.wait_for(lambda: statuses()[1][0] == "succeeded", 30, "the waiting run to run after the first")
    first, second = cluster.sql(
        "SELECT r.started_at, r.finished_at FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
        "WHERE j.name = 'q-0' AND r.status = 'succeeded' ORDER BY r.scheduled_at LIMIT 2"
    )
    assert second[0] >= first[1], "the queued run started only after the live one ended"
