"""A storm by email: alerts for the same recipients that are due together go
out as one email listing the jobs, and the recipients get at most one alert
email a minute. Against the real aiosmtpd server (tests/fixtures/smtp.py)."""

from datetime import datetime, timedelta

from jobs import alerts
from jobs.engine.outbox import AlertSender
from jobs.models import Alert
from tests.fixtures.core import T0
from tests.fixtures.smtp import use_smtp


def step(sender: AlertSender, now: datetime) -> bool:
    did = sender.step(now)
    assert sender.wait_idle(30)
    sender.collect(now)
    return did


def crash(make_job, name, emails, now):
    job = make_job(name=name, alert_emails=emails)
    return alerts.on_crash(job=job, run=None, now=now)


def test_a_storm_is_one_email_listing_the_jobs_then_one_a_minute(make_job, smtp_server, settings):
    use_smtp(settings, smtp_server.port)
    settings.CRONBOARD_BASE_URL = "https://cron.example.com"
    storm = [crash(make_job, f"job-{i}", ["ops@example.com"], T0) for i in range(3)]
    other = crash(make_job, "elsewhere", ["dev@example.com"], T0)
    sender = AlertSender()

    while step(sender, T0):
        pass
    assert len(smtp_server.received) == 2, "one email per set of recipients"
    to_ops = next(r for r in smtp_server.received if r.rcpt_tos == ["ops@example.com"])
    text = to_ops.message.get_body(("plain",)).get_content()
    assert to_ops.message["Subject"] == "[Cronboard] 3 alerts for 3 jobs"
    for alert in storm:
        assert alert.job.name in text and f"https://cron.example.com/jobs/{alert.job_id}/" in text
    assert Alert.objects.filter(status="sent").count() == 4
    assert (
        next(r for r in smtp_server.received if r.rcpt_tos == ["dev@example.com"]).message_id.strip()
        == other.message_id
    )

    late = crash(make_job, "job-late", ["ops@example.com"], T0 + timedelta(seconds=20))
    assert not step(sender, T0 + timedelta(seconds=21)), "within the minute: it waits"
    late.refresh_from_db()
    assert late.status == "pending" and late.next_attempt_at == T0 + timedelta(minutes=1)
    assert step(sender, T0 + timedelta(seconds=61))
    assert len(smtp_server.received) == 3
    assert smtp_server.received[2].message_id.strip() == late.message_id, "alone, it is the alert's own email"


def test_a_storm_email_that_fails_is_retried_whole_with_the_same_message_id(make_job, smtp_server, settings):
    use_smtp(settings, smtp_server.port)
    smtp_server.script("451 try later")
    for i in range(2):
        crash(make_job, f"job-{i}", ["ops@example.com"], T0)
    sender = AlertSender()
    step(sender, T0)
    assert set(Alert.objects.values_list("status", "attempts")) == {("pending", 1)}
    step(sender, T0 + timedelta(hours=2))
    assert set(Alert.objects.values_list("status", "attempts")) == {("sent", 2)}
    (received,) = smtp_server.received
    assert received.message["Subject"] == "[Cronboard] 2 alerts for 2 jobs"
    assert smtp_server.handler.attempts == 2
