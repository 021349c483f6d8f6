"""The outbox across process deaths: the real `manage.py runscheduler`
against a file SQLite database and a loopback SMTP server."""

import signal
from pathlib import Path

import pytest

from tests.fixtures import processes
from tests.fixtures.processes import stop

pytestmark = pytest.mark.slow


SETUP = """
from django.contrib.auth import get_user_model
from django.utils import timezone
from jobs.models import Job

get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-123")
Job.objects.create(
    name="nightly-report",
    handler="demo.fail",
    properties={"message": "disk full on /var"},
    cron_expression="* * * * * *",
    alert_threshold=1,
    alert_emails=["ops@example.com"],
    next_fire_at=timezone.now(),
)
"""


ALERT_COLUMNS = ("status", "attempts", "message_id", "last_error")


class Site(processes.Site):
    """A scratch deployment: its own database file and environment."""

    def __init__(self, tmp_path: Path, migrated: Path, smtp_url: str):
        super().__init__(
            tmp_path,
            processes.copy_sqlite(migrated, tmp_path / "cronboard.sqlite3"),
            EMAIL_URL=smtp_url,
            EMAIL_TIMEOUT="1",
            JOBS_WORKER_ID="restart-test",
            JOBS_SHUTDOWN_GRACE="2",
        )

    def alert(self) -> dict | None:
        rows = self.sql(f"SELECT {', '.join(ALERT_COLUMNS)} FROM jobs_alert")
        return dict(zip(ALERT_COLUMNS, rows[0], strict=True)) if rows else None

    def wait_for(self, check, timeout: float, what: str):
        return super().wait_for(check, timeout, what, every=0.05)


@pytest.fixture
def site(tmp_path, migrated_sqlite, smtp_server):
    site = Site(tmp_path, migrated_sqlite, smtp_server.url)
    site.manage("shell", "-c", SETUP)
    yield site
    site.stop_all(timeout=20)


def test_scheduler_killed_mid_send_sends_after_restart_once_more_with_the_same_message_id(site, smtp_server):
    # The server takes the message and kills the scheduler before it answers
    # "250": the scheduler dies before it can write that the alert was sent.
    smtp_server.handler.on_accept = lambda: first.send_signal(signal.SIGKILL)
    first = site.start_scheduler()
    try:
        assert smtp_server.handler.arrived.wait(60), site.log("scheduler")
        first.wait(10)
    finally:
        stop(first)
    alert = site.alert()
    assert (alert["status"], alert["attempts"]) == (
        "pending",
        1,
    )  # committed with the crash, claim unfinished

    smtp_server.handler.on_accept = None
    second = site.start_scheduler()
    try:
        # The dead claim's lease (5 × EMAIL_TIMEOUT + 5 s) runs out, then it goes again.
        alert = site.wait_for(
            lambda: (a := site.alert())["status"] == "sent" and a, 40, "the alert to be sent"
        )
    finally:
        stop(second)
    assert alert["attempts"] == 2
    assert [r.message_id for r in smtp_server.received] == [alert["message_id"]] * 2
    assert all(r.rcpt_tos == ["ops@example.com"] for r in smtp_server.received)


def test_alert_committed_by_a_scheduler_that_stopped_is_sent_by_the_next_one(site, smtp_server):
    # --once: the job fails and crashes after this pass's send step, and the
    # process exits. The alert waits in the outbox.
    site.manage("runscheduler", "--once")
    alert = site.alert()
    assert (alert["status"], alert["attempts"]) == ("pending", 0)
    assert smtp_server.received == []

    process = site.start_scheduler()
    try:
        alert = site.wait_for(
            lambda: (a := site.alert())["status"] == "sent" and a, 30, "the alert to be sent"
        )
    finally:
        stop(process)
    assert alert["attempts"] == 1
    (received,) = smtp_server.received
    assert received.message_id == alert["message_id"]
    assert "disk full on /var" in received.message.get_body(("plain",)).get_content()
