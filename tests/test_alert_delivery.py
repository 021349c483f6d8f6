"""Alert delivery through a real SMTP server on loopback (tests/fixtures/smtp.py).

The sender step is driven with a fixed clock: retries are due when the test
says the time has come, so nobody sleeps through a backoff. Only the SMTP
conversation itself runs in real time."""

import time
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from jobs import alerts
from jobs.engine import outbox
from jobs.engine.outbox import AlertSender
from jobs.models import Alert, Run
from tests.fixtures.core import T0
from tests.fixtures.smtp import use_smtp

LATER = timedelta(hours=2)  # past any backoff the step could have chosen


def deliver(sender: AlertSender, now: datetime) -> Alert:
    """One step, its send, the write-back; returns the alert as stored."""
    assert sender.step(now), "nothing was due"
    assert sender.wait_idle(30)
    sender.collect(now)
    return Alert.objects.get()


@pytest.fixture
def crashed_alert(make_job, staff_user):
    job = make_job(
        name="nightly-report",
        alert_emails=["ops@example.com", "dev@example.com"],
        owner=staff_user,
        last_error="disk full on /var",
    )
    Run.objects.create(
        job=job,
        scheduled_at=T0 - timedelta(minutes=1),
        trigger=Run.Trigger.SCHEDULE,
        status=Run.Status.FAILED,
        error="disk full on /var",
        finished_at=T0,
    )
    return alerts.on_crash(job=job, run=None, now=T0)


def test_alert_arrives_with_its_recipients_both_parts_the_link_and_its_message_id(
    smtp_server, settings, crashed_alert
):
    use_smtp(settings, smtp_server.port)
    alert = deliver(AlertSender(), T0)

    assert alert.status == Alert.Status.SENT
    (received,) = smtp_server.received
    assert received.mail_from == settings.DEFAULT_FROM_EMAIL
    assert sorted(received.rcpt_tos) == ["dev@example.com", "ops@example.com"]
    message = received.message
    assert message["Message-ID"] == alert.message_id
    assert message["To"] == "ops@example.com, dev@example.com"
    assert (
        message["Subject"].strip() == "[Cronboard] Job “nightly-report” crashed after 0 consecutive failures"
    )
    assert message["Auto-Submitted"] == "auto-generated"
    text = message.get_body(("plain",)).get_content()
    html = message.get_body(("html",)).get_content()
    link = f"http://localhost:8000/jobs/{crashed_alert.job_id}/"
    for body in (text, html):
        assert "nightly-report" in body
        assert "disk full on /var" in body
        assert link in body
        assert "Re-enable" in body


def test_451_451_250_is_delivered_once_after_three_attempts(smtp_server, settings, crashed_alert):
    use_smtp(settings, smtp_server.port)
    smtp_server.script("451 4.3.0 greylisted, try again later", "451 4.3.0 greylisted, try again later")
    sender = AlertSender()

    alert = deliver(sender, T0)
    assert alert.status == Alert.Status.PENDING
    assert alert.attempts == 1
    assert alert.last_error == "451 4.3.0 greylisted, try again later"
    assert T0 + timedelta(seconds=15) <= alert.next_attempt_at <= T0 + timedelta(seconds=30)
    assert sender.step(T0 + timedelta(seconds=14)) is False  # not due yet

    alert = deliver(sender, alert.next_attempt_at)
    assert (alert.status, alert.attempts) == (Alert.Status.PENDING, 2)
    second_try = alert.last_attempt_at
    assert second_try + timedelta(seconds=30) <= alert.next_attempt_at <= second_try + timedelta(seconds=60)

    alert = deliver(sender, alert.next_attempt_at)
    assert (alert.status, alert.attempts) == (Alert.Status.SENT, 3)
    assert alert.sent_at == alert.last_attempt_at
    assert smtp_server.handler.attempts == 3
    assert len(smtp_server.received) == 1
    assert sender.step(alert.sent_at + LATER) is False


def test_550_marks_the_alert_failed_permanent_with_the_reply(smtp_server, settings, crashed_alert):
    use_smtp(settings, smtp_server.port)
    smtp_server.script("550 5.7.1 relaying denied")
    sender = AlertSender()

    alert = deliver(sender, T0)
    assert alert.status == Alert.Status.FAILED_PERMANENT
    assert alert.last_error == "550 5.7.1 relaying denied"
    assert alert.next_attempt_at is None
    assert sender.step(T0 + LATER) is False
    assert smtp_server.handler.attempts == 1


def test_server_down_then_up_delivers_after_it_returns(smtp_server, settings, crashed_alert):
    use_smtp(settings, smtp_server.port)
    smtp_server.stop()
    sender = AlertSender()

    alert = deliver(sender, T0)
    assert (alert.status, alert.attempts) == (Alert.Status.PENDING, 1)
    assert "Connection refused" in alert.last_error

    alert = deliver(sender, T0 + LATER)
    assert (alert.status, alert.attempts) == (Alert.Status.PENDING, 2)

    smtp_server.start()
    alert = deliver(sender, T0 + 2 * LATER)
    assert (alert.status, alert.attempts) == (Alert.Status.SENT, 3)
    assert [r.message_id for r in smtp_server.received] == [alert.message_id]


def test_silent_server_times_out_while_the_scheduler_keeps_firing_jobs(
    blackhole_smtp, settings, crashed_alert, make_job, make_scheduler
):
    """The send hangs in the greeting for EMAIL_TIMEOUT; meanwhile passes
    return and jobs fire. Proved by order, not by a stopwatch: the send is
    still stuck after the pass returned and after the job finished."""
    timeout = 10  # long enough that a loaded machine runs the job first
    use_smtp(settings, blackhole_smtp, timeout=timeout)
    # This test runs on the real clock: the alert is written now, not at T0
    # (an alert older than a day is given up, not retried).
    Alert.objects.update(created_at=timezone.now(), next_attempt_at=timezone.now())
    echo = make_job(name="heartbeat", handler="demo.echo", next_fire_at=timezone.now())
    scheduler = make_scheduler(worker_id="test-node", max_workers=2)

    started = time.monotonic()
    scheduler.run_pass(timezone.now())
    assert scheduler.alert_sender.in_flight is not None, "a pass waited on the mail server"

    # The job fired and finished while the send hangs.
    while not Run.objects.filter(job=echo, status=Run.Status.SUCCEEDED).exists():
        assert scheduler.alert_sender.in_flight is not None, "the job did not run while the send was stuck"
        scheduler.collect(scheduler.pool.wait(0.1), timezone.now())
        scheduler.run_pass(timezone.now())
    assert scheduler.alert_sender.in_flight is not None, "the job did not run while the send was stuck"

    # The send gives up at EMAIL_TIMEOUT and is scheduled for another try.
    assert scheduler.alert_sender.wait_idle(3 * timeout)
    assert time.monotonic() - started >= timeout - 0.1
    now = timezone.now()
    scheduler.run_pass(now)
    alert = Alert.objects.get()
    assert (alert.status, alert.attempts) == (Alert.Status.PENDING, 1)
    assert alert.last_error == f"timed out: the mail server did not answer within {timeout} s"
    assert alert.next_attempt_at > now
    assert scheduler.next_wakeup(now) <= alert.next_attempt_at
    scheduler.alert_sender.stop(timezone.now, wait=0)


def test_a_dead_senders_claim_expires_and_the_alert_goes_out_with_the_same_message_id(
    blackhole_smtp, smtp_server, settings, crashed_alert
):
    use_smtp(settings, blackhole_smtp, timeout=5)
    dead = AlertSender()
    assert dead.step(T0)  # claimed, then "the process dies" mid-send: nobody collects
    lease_end = T0 + outbox.claim_lease()

    use_smtp(settings, smtp_server.port)
    restarted = AlertSender()
    assert restarted.step(lease_end - timedelta(seconds=1)) is False  # still held by the dead claim
    alert = deliver(restarted, lease_end)
    assert (alert.status, alert.attempts) == (Alert.Status.SENT, 2)
    assert [r.message_id for r in smtp_server.received] == [crashed_alert.message_id]


def test_a_send_that_outlives_its_claim_is_abandoned_and_retried(
    blackhole_smtp, smtp_server, settings, crashed_alert
):
    use_smtp(settings, blackhole_smtp, timeout=5)
    sender = AlertSender()
    assert sender.step(T0)
    stuck = sender.in_flight

    use_smtp(settings, smtp_server.port)
    alert = deliver(sender, stuck.claimed_until)
    assert sender.in_flight is None
    assert (alert.status, alert.attempts) == (Alert.Status.SENT, 2)
    assert len(smtp_server.received) == 1


def test_scheduler_wakes_for_the_next_due_alert(crashed_alert, make_scheduler):
    scheduler = make_scheduler(worker_id="test-node", max_workers=1)
    Alert.objects.update(next_attempt_at=T0 + timedelta(milliseconds=300))
    assert scheduler.next_wakeup(T0) == T0 + timedelta(milliseconds=300)
