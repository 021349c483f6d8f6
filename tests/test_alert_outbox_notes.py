"""The outbox's two review notes: a partial recipient refusal (against the
real aiosmtpd server in tests/fixtures/smtp.py) and claims judged by the
database's clock (PostgreSQL, through a real server in a subprocess)."""

import textwrap
from datetime import datetime, timedelta

import pytest

from jobs import alerts
from jobs.engine.outbox import AlertSender
from jobs.models import Alert
from tests.fixtures.core import T0
from tests.fixtures.smtp import use_smtp

LATER = timedelta(hours=2)


def deliver(sender: AlertSender, now: datetime) -> Alert:
    assert sender.step(now), "nothing was due"
    assert sender.wait_idle(30)
    sender.collect(now)
    return Alert.objects.get()


@pytest.fixture
def alert(make_job):
    job = make_job(name="nightly", alert_emails=["ok@example.com", "full@example.com", "gone@example.com"])
    return alerts.on_crash(job=job, run=None, now=T0)


def test_a_temporary_refusal_of_one_recipient_is_retried_for_that_recipient_alone(
    smtp_server, settings, alert
):
    use_smtp(settings, smtp_server.port)
    smtp_server.refuse("full@example.com", "452 4.2.2 mailbox full")
    sender = AlertSender()

    stored = deliver(sender, T0)
    assert stored.status == Alert.Status.PENDING, "a partial refusal is not 'sent'"
    assert stored.delivered_to == ["ok@example.com", "gone@example.com"]
    assert "full@example.com: 452" in stored.last_error
    (first,) = smtp_server.received
    assert sorted(first.rcpt_tos) == ["gone@example.com", "ok@example.com"]

    del smtp_server.handler.refuse["full@example.com"]
    stored = deliver(sender, T0 + LATER)
    assert stored.status == Alert.Status.SENT and stored.attempts == 2
    assert smtp_server.received[1].rcpt_tos == ["full@example.com"]
    assert smtp_server.received[1].message_id == first.message_id
    assert len(smtp_server.received) == 2


def test_a_permanent_refusal_of_one_recipient_stops_and_names_it(smtp_server, settings, alert):
    use_smtp(settings, smtp_server.port)
    smtp_server.refuse("gone@example.com", "550 5.1.1 no such user")
    stored = deliver(AlertSender(), T0)
    assert stored.status == Alert.Status.FAILED_PERMANENT
    assert "gone@example.com: 550" in stored.last_error
    assert "delivered to ok@example.com, full@example.com" in stored.last_error
    assert not AlertSender().step(T0 + LATER), "nothing more to send"
    assert len(smtp_server.received) == 1


# -- the database's clock -----------------------------------------------------------------

CLAIM_SCRIPT = textwrap.dedent(
    """
    from datetime import timedelta
    from django.utils import timezone
    from jobs import alerts
    from jobs.core.dbclock import database_time
    from jobs.models import Alert, Job
    from jobs.engine.outbox import AlertSender, claim_lease

    job = Job.objects.create(name="pg-claim", handler="demo.echo", cron_expression="0 * * * * *",
                             alert_emails=["ops@example.com"])
    db_now = database_time(timezone.now())
    alert = alerts.on_crash(job=job, run=None, now=db_now + timedelta(minutes=10))
    sender = AlertSender()
    # A host whose clock runs an hour fast must not claim an alert the database says is not due.
    fast = db_now + timedelta(hours=1)
    print("early", sender.claim_due(fast) is not None)
    Alert.objects.filter(pk=alert.pk).update(next_attempt_at=db_now - timedelta(seconds=1))
    # A host whose clock runs an hour slow still claims what is due, until the database's now + lease.
    slow = db_now - timedelta(hours=1)
    claimed = sender.claim_due(slow)
    print("due", claimed is not None)
    until = claimed.next_attempt_at
    print("lease", abs((until - db_now - claim_lease()).total_seconds()) < 30)
    """
)


@pytest.mark.postgres
@pytest.mark.slow
def test_outbox_claims_use_the_database_clock_on_postgresql(postgres_site):
    site = postgres_site("outbox_clock", SECRET_KEY="test-secret-key-outbox")
    answers = site.django(CLAIM_SCRIPT, timeout=180).split()
    assert answers == ["early", "False", "due", "True", "lease", "True"]
