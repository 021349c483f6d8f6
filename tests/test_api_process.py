"""A client that is not the console drives a job's whole life over HTTP,
against a real web server (gunicorn) and a real scheduler process."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

MAKE_TOKEN = """
from django.contrib.auth import get_user_model
from jobs import tokens
user = get_user_model().objects.create_user("{name}", password="pw-{name}-123", is_staff={staff})
print(tokens.create_token(user=user, name="e2e")[1])
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self, tmp_path: Path):
        self.env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'e2e.sqlite3'}",
            "JOBS_WORKER_ID": "e2e",
            # gunicorn refuses to serve with a key drawn per process (config/wsgi.py).
            "SECRET_KEY": "e2e-" + "k" * 50,
            "JOBS_SHUTDOWN_GRACE": "2",
            "PYTHONUNBUFFERED": "1",
        }
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []
        self.manage("migrate", "--noinput", "-v0")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"

    def manage(self, *args):
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout

    def token(self, name: str, *, staff: bool) -> str:
        return self.manage("shell", "-c", MAKE_TOKEN.format(name=name, staff=staff)).strip().splitlines()[-1]

    def start(self, *command, name):
        log = open(self.tmp_path / f"{name}.log", "w")
        self.procs.append(
            subprocess.Popen(command, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        )

    def start_all(self):
        self.start(
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            "2",
            name="web",
        )
        self.start(sys.executable, "manage.py", "runscheduler", name="scheduler")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.base}/healthz", timeout=2)
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError("the web server did not start: " + (self.tmp_path / "web.log").read_text())

    def stop_all(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


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
def server(tmp_path):
    site = Server(tmp_path)
    yield site
    site.stop_all()


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
    assert run["status"] == "succeeded", (run, (server.tmp_path / "scheduler.log").read_text()[-2000:])
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
