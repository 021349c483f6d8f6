"""A real `runscheduler` process on SQLite with poisoned jobs beside an
ordinary one keeps running and records them all.

The poison is written straight into the database, as data saved before the
input rule existed would be: a lone surrogate and a NUL in properties that
demo.echo logs and demo.fail raises. Regression: the outcome write raised
`UnicodeEncodeError` in the batched outcome write and the process exited,
again after every restart."""

import json

import pytest

from tests.fixtures.processes import SqliteSite

pytestmark = pytest.mark.slow

REPLACEMENT = "\ufffd"


@pytest.fixture
def site(tmp_path, migrated_sqlite):
    s = SqliteSite(tmp_path, migrated_sqlite)
    yield s
    s.stop_all()


def every_5_seconds(name: str, handler: str) -> dict:
    return {"name": name, "handler": handler, "schedule_type": "interval", "interval_seconds": 5}


def test_scheduler_process_keeps_running_and_recording_beside_poisoned_jobs(site):
    site.import_jobs(
        every_5_seconds("ordinary", "demo.echo"),
        every_5_seconds("poisoned-output", "demo.echo"),
        every_5_seconds("poisoned-error", "demo.fail"),
    )
    poison = {"surrogate": "a\udfffb", "nul": "a\x00b"}
    site.sql("UPDATE jobs_job SET properties = ? WHERE name = 'poisoned-output'", (json.dumps(poison),))
    site.sql(
        "UPDATE jobs_job SET properties = ? WHERE name = 'poisoned-error'",
        (json.dumps({"message": "bad \udfff and \x00 end"}),),
    )
    proc = site.start_scheduler()

    def runs(name: str, status: str):
        return site.sql(
            "SELECT r.result, r.error, r.log FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
            "WHERE j.name = ? AND r.status = ?",
            (name, status),
        )

    # Two finished runs of each: the process lived through the first poisoned
    # outcomes. Each job is waited for by itself: the three fire together, but
    # on a loaded machine one job's second run can still be going when
    # another's has been recorded.
    for name, status in (
        ("ordinary", "succeeded"),
        ("poisoned-output", "succeeded"),
        ("poisoned-error", "failed"),
    ):
        site.wait_for_rows(
            "SELECT COUNT(*) FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id WHERE j.name = ? AND r.status = ?",
            lambda rows: rows[0][0] >= 2,
            40,
            name,
            status,
        )
    assert proc.poll() is None, site.logs()[-3000:]

    output = runs("poisoned-output", "succeeded")
    assert len(output) >= 2
    result, _error, log = output[0]
    assert result == "2 properties"
    assert f"nul = a{REPLACEMENT}b" in log
    assert f"surrogate = a{REPLACEMENT}b" in log
    (_result, error, _log) = runs("poisoned-error", "failed")[0]
    assert error == f"bad {REPLACEMENT} and {REPLACEMENT} end"
    assert "Traceback" not in site.logs()


@pytest.mark.postgres
def test_postgresql_scheduler_process_records_a_binary_http_answer_and_keeps_going(
    postgres_server, migrated_postgres, tmp_path
):
    """Regression: a NUL byte in an HTTP job's response body made
    the outcome write fail on PostgreSQL, and the scheduler retried that batch
    forever, starting nothing else."""
    import threading
    from http.server import ThreadingHTTPServer

    from tests.fixtures.cluster import Cluster
    from tests.fixtures.http import BinaryHandler
    from tests.fixtures.processes import wait_for

    server = ThreadingHTTPServer(("127.0.0.2", 0), BinaryHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.2:{server.server_address[1]}/ok"
    cluster = Cluster(
        postgres_server, "poison_process", migrated_postgres, tmp_path, JOBS_HTTP_ALLOWED_HOSTS="127.0.0.2"
    )
    try:
        cluster.django(
            "from django.utils import timezone\n"
            "from jobs.models import Job\n"
            "now = timezone.now()\n"
            "Job.objects.create(name='ordinary', handler='demo.echo', schedule_type='interval', "
            "interval_seconds=5, next_fire_at=now)\n"
            f"Job.objects.create(name='binary', kind='http', properties={{'url': {url!r}}}, "
            "schedule_type='interval', interval_seconds=5, next_fire_at=now)\n"
        )
        node = cluster.start_node("n1")

        def finished(name):
            # Not a fire that fell due while the node was still booting: the
            # jobs were due at once, and such a fire is skipped as a misfire
            # by design (a busy machine boots slowly). Nor a fire skipped
            # because the previous run was still going (a loaded machine:
            # by design too, and no outcome to write).
            booted = cluster.sql("SELECT min(started_at) FROM jobs_run")[0][0]
            return [
                row
                for row in cluster.runs_of(name)
                if row[1] not in ("queued", "running")
                and row[2] != "overlap"
                and not (row[2] == "misfire" and (booted is None or row[0] < booted))
            ]

        wait_for(
            lambda: len(finished("ordinary")) >= 2 and len(finished("binary")) >= 2, 40, "two fires of each"
        )
        assert node.poll() is None, cluster.log("n1")[-3000:]
        assert {row[1] for row in finished("binary")} == {"succeeded"}, finished("binary")
        (result,) = cluster.sql(
            "SELECT r.result FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id WHERE j.name = 'binary' "
            "AND r.status = 'succeeded' ORDER BY r.id LIMIT 1"
        )[0]
        assert result.startswith("HTTP 200 OK") and REPLACEMENT in result and "tail-marker" in result
        assert "database error, retrying" not in cluster.log("n1")
    finally:
        for process in cluster.nodes.values():
            if process.poll() is None:
                process.kill()
                process.wait(10)
        server.shutdown()
        server.server_close()
