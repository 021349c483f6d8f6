"""A client that is not the console drives a job's whole life over HTTP,
against a real web server (gunicorn) and a real scheduler process."""

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.fixtures import processes

pytestmark = pytest.mark.slow


class Server(processes.Site):
    def __init__(self, tmp_path: Path, migrated: Path):
        super().__init__(
            tmp_path,
            processes.copy_sqlite(migrated, tmp_path / "e2e.sqlite3"),
            JOBS_WORKER_ID="e2e",
            JOBS_SHUTDOWN_GRACE="2",
        )
        self.base = None

    def token(self, name: str, *, staff: bool) -> str:
        return self.create_token(name, staff=staff)

    def start_all(self):
        self.base = self.start_web()
        self.start_scheduler()


class Client:
    def __init__(self, base: str, token: str | None):
        self.base = base
        self.token = token

    def call(self, method: str, path: str, body=None) -> tuple[int, dict | None]:
        request = urllib.request.Request(self.base + path, method=method)
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, data=data, timeout=10) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        return status, (json.loads(raw) if raw else None)


@pytest.fixture
def server(tmp_path, migrated_sqlite):
    site = Server(tmp_path, migrated_sqlite)
    yield site
    site.stop_all(timeout=15)


def test_a_program_drives_a_job_from_creation_to_deletion(server):
    admin_token = server.token("ops", staff=True)
    viewer_token = server.token("watcher", staff=False)
    server.start_all()
    api = Client(server.base, admin_token)
    viewer = Client(server.base, viewer_token)

    assert Client(server.base, None).call("GET", "/api/jobs")[0] == 401
    status, handlers = api.call("GET", "/api/handlers")
    assert status == 200 and "demo.echo" in [h["name"] for h in handlers["results"]]
    status, preview = api.call(
        "POST", "/api/cron/preview", {"expression": "0 0 3 * * *", "timezone": "Europe/Berlin"}
    )
    assert status == 200 and len(preview["times"]) == 5

    status, job = api.call(
        "POST",
        "/api/jobs",
        {
            "name": "e2e echo",
            "handler": "demo.echo",
            "cron_expression": "0 0 3 * * *",
            "properties": {"greeting": "hello"},
        },
    )
    assert status == 201, job
    job_url = f"/api/jobs/{job['id']}"
    assert viewer.call("POST", f"{job_url}/run")[0] == 403

    status, run = api.call("POST", f"{job_url}/run")
    assert status == 201 and run["status"] == "queued"
    deadline = time.monotonic() + 30
    while run["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.3)
        _status, run = api.call("GET", f"/api/runs/{run['id']}")
    assert run["status"] == "succeeded", (run, server.log("scheduler")[-2000:])
    assert "greeting = hello" in run["log"] and run["result"] == "1 properties"

    status, page = viewer.call("GET", f"{job_url}/runs?status=succeeded&limit=5")
    assert status == 200 and [r["id"] for r in page["results"]] == [run["id"]]

    status, changed = api.call(
        "PATCH", job_url, {"description": "edited by a script", "version": job["version"]}
    )
    assert status == 200 and changed["version"] == job["version"] + 1
    status, error = api.call("PATCH", job_url, {"description": "stale", "version": job["version"]})
    assert status == 409 and error["code"] == "stale_version"

    status, paused = api.call("POST", f"{job_url}/toggle")
    assert status == 200 and paused["state"] == "paused" and paused["next_fire_at"] is None
    status, resumed = api.call("POST", f"{job_url}/toggle")
    assert resumed["state"] == "enabled" and resumed["next_fire_at"]

    status, _ = api.call("DELETE", job_url)
    assert status == 204
    status, error = api.call("GET", job_url)
    assert status == 404 and error["code"] == "not_found"
