"""A real `runscheduler` process on SQLite with poisoned jobs beside an
ordinary one keeps running and records them all (issue 13).

The poison is written straight into the database, as data saved before the
input rule existed would be: a lone surrogate and a NUL in properties that
demo.echo logs and demo.fail raises. Regression: the outcome write raised
`UnicodeEncodeError` in jobs/bulk.py and the process exited, again after
every restart."""

import json

import pytest

from tests.test_scheduler_process import Site

pytestmark = pytest.mark.slow

REPLACEMENT = "\ufffd"


@pytest.fixture
def site(tmp_path):
    s = Site(tmp_path)
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
    site.query("UPDATE jobs_job SET properties = ? WHERE name = 'poisoned-output'", json.dumps(poison))
    site.query(
        "UPDATE jobs_job SET properties = ? WHERE name = 'poisoned-error'",
        json.dumps({"message": "bad \udfff and \x00 end"}),
    )
    proc = site.start_scheduler()

    def runs(name: str, status: str):
        return site.query(
            "SELECT r.result, r.error, r.log FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
            "WHERE j.name = ? AND r.status = ?",
            name,
            status,
        )

    # Two fires of each: the process lived through the first poisoned outcomes.
    site.wait_for(
        "SELECT COUNT(*) FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
        "WHERE j.name = 'ordinary' AND r.status = 'succeeded'",
        lambda rows: rows[0][0] >= 2,
        40,
    )
    site.wait_for(
        "SELECT COUNT(*) FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
        "WHERE j.name = 'poisoned-error' AND r.status = 'failed'",
        lambda rows: rows[0][0] >= 2,
        20,
    )
    assert proc.poll() is None, site.log_text()[-3000:]

    output = runs("poisoned-output", "succeeded")
    assert len(output) >= 2
    result, _error, log = output[0]
    assert result == "2 properties"
    assert f"nul = a{REPLACEMENT}b" in log
    assert f"surrogate = a{REPLACEMENT}b" in log
    (_result, error, _log) = runs("poisoned-error", "failed")[0]
    assert error == f"bad {REPLACEMENT} and {REPLACEMENT} end"
    assert "Traceback" not in site.log_text()
