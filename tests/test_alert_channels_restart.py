"""A channel delivery across process deaths: the real `manage.py
runscheduler` on a file SQLite database, a webhook receiver on loopback that
is down when the job crashes, and a scheduler killed with SIGKILL after its
failed attempt. The webhook arrives once, from the next scheduler."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.processes import copy_sqlite

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

SETUP = """
from django.utils import timezone
from jobs import channels
from jobs.models import AlertChannel, Job

AlertChannel.objects.create(name="hook", url=channels.encrypt("{url}"))
Job.objects.create(
    name="nightly-report",
    handler="demo.fail",
    cron_expression="* * * * * *",
    alert_threshold=1,
    alert_channels=["hook"],
    next_fire_at=timezone.now(),
)
"""


def run(env, *args):
    subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True, timeout=120
    )


def delivery(db) -> dict | None:
    with sqlite3.connect(db, timeout=10) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT status, attempts, last_error FROM jobs_alertdelivery").fetchone()
    return dict(row) if row else None


def wait_for(predicate, timeout, what, log):
    until = time.monotonic() + timeout
    while time.monotonic() < until:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; scheduler log:\n{log.read_text()}")


def test_a_webhook_down_at_the_crash_arrives_once_after_a_restart(tmp_path, webhook_server, migrated_sqlite):
    db, log = tmp_path / "cronboard.sqlite3", tmp_path / "scheduler.log"
    copy_sqlite(migrated_sqlite, db)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JOBS_", "DATABASE_URL"))}
    env = {
        **base,
        "DATABASE_URL": f"sqlite:///{db}",
        "SECRET_KEY": "restart-channel-key",
        "JOBS_HTTP_ALLOWED_HOSTS": "127.0.0.1",
        "ALERT_CHANNEL_TIMEOUT": "2",
        "JOBS_WORKER_ID": "channel-restart",
        "JOBS_SHUTDOWN_GRACE": "2",
        "PYTHONUNBUFFERED": "1",
    }
    run(env, "shell", "-c", SETUP.format(url=webhook_server.url("/hooks/ops")))
    webhook_server.stop()

    def start():
        with log.open("a") as out:
            return subprocess.Popen(
                [sys.executable, "manage.py", "runscheduler"], cwd=ROOT, env=env, stdout=out, stderr=out
            )

    first = start()
    try:
        failed = wait_for(
            lambda: (d := delivery(db)) and d["attempts"] == 1 and d["last_error"] and d,
            60,
            "a failed attempt",
            log,
        )
        assert failed["status"] == "pending"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(10)

    webhook_server.start()
    second = start()
    try:
        # The retry is due after its backoff (15-30 s for the first).
        sent = wait_for(lambda: (d := delivery(db))["status"] == "sent" and d, 60, "the webhook", log)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
    assert sent["attempts"] == 2
    (hook,) = webhook_server.received
    assert "nightly-report" in hook.json["message"] and "/jobs/" in hook.json["message"]
