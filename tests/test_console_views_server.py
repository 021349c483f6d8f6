"""The console's cross-job views (runs across jobs, upcoming fires, dashboard
figures), through their API twins, against a real gunicorn on SQLite and on
PostgreSQL: the same answers, and hostile parameters a coded 400, never a
500. The console pages run the same queries (jobs.web, jobs.upcoming)."""

import json
from urllib.parse import urlencode

import pytest

from tests.fixtures import processes
from tests.fixtures.api import JOB

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def web(request, tmp_path):
    server = processes.Web.on_either_database(request, tmp_path, "console_views")
    yield server
    server.stop_all(timeout=15)


def test_runs_upcoming_and_dashboard_on_a_real_server(web):
    status, job = web.call("POST", "/api/jobs", json.dumps({**JOB, "cron_expression": "0 */10 * * * *"}))
    assert status == 201
    status, run = web.call("POST", f"/api/jobs/{job['id']}/run")
    assert status == 201

    status, page = web.call("GET", "/api/runs?" + urlencode({"status": "queued,running", "job": job["id"]}))
    assert status == 200 and [r["id"] for r in page["results"]] == [run["id"]]
    status, page = web.call("GET", "/api/upcoming?" + urlencode({"window": "24h", "limit": 5}))
    assert status == 200 and len(page["results"]) == 5 and page["next_cursor"]
    assert all(f["job"] == job["id"] for f in page["results"])
    status, more = web.call("GET", "/api/upcoming?" + urlencode({"limit": 5, "cursor": page["next_cursor"]}))
    assert status == 200 and more["results"][0]["at"] > page["results"][-1]["at"]
    status, figures = web.call("GET", "/api/dashboard")
    assert status == 200 and figures["running_count"] == 1 and figures["jobs_by_state"]["enabled"] >= 1

    hostile = [
        ("/api/runs", {"job": "1e9999"}),
        ("/api/runs", {"job": str(2**70)}),
        ("/api/runs", {"status": "queued'--"}),
        ("/api/runs", {"cursor": "%%%"}),
        ("/api/runs", {"from": "99999-01-01"}),
        ("/api/upcoming", {"window": "∞"}),
        ("/api/upcoming", {"cursor": "1." + "9" * 40}),
        ("/api/upcoming", {"limit": "-1"}),
    ]
    for path, params in hostile:
        status, answer = web.call("GET", f"{path}?{urlencode(params)}")
        assert status == 400 and answer["code"], (path, params, status, answer)
