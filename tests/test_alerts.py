"""Crash alerts with the locmem email backend: when an alert is written, who
gets it, what it says, and how the outbox records results. Delivery through
a real SMTP server is in test_alert_delivery.py."""

import random
import smtplib
from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail

from jobs import alerts
from jobs.config import set_setting
from jobs.core import mailfailures
from jobs.engine import outbox
from jobs.engine.deliveries import Delivery
from jobs.engine.loop import Scheduler
from jobs.engine.outbox import AlertSender
from jobs.forms import JobForm
from jobs.models import Alert, Job, Message, Run
from jobs.services import resume_job, run_now
from tests.fixtures.core import T0, drain

MINUTE = timedelta(minutes=1)


def finish_runs(scheduler: Scheduler, now: datetime) -> None:
    """Plan and start what is due at `now`, and write back every outcome."""
    scheduler.plan_due(now)
    scheduler.claim_queued(now)
    drain(scheduler, now)


def deliver(sender: AlertSender, now: datetime) -> bool:
    """One step, its send, and the write-back of the result."""
    did = sender.step(now)
    assert sender.wait_idle(10)
    sender.collect(now)
    return did


@pytest.fixture
def scheduler(db, make_scheduler):
    return make_scheduler(worker_id="test-node", max_workers=2)


@pytest.fixture
def failing_job(make_job, staff_user):
    return make_job(
        name="nightly-report",
        handler="demo.fail",
        properties={"message": "disk full on /var"},
        alert_threshold=2,
        alert_emails=["ops@example.com", "dev@example.com"],
        owner=staff_user,
        next_fire_at=T0,
    )


def crash(scheduler: Scheduler, job: Job, start: datetime) -> datetime:
    """Fail `job` fire after fire until it crashes; returns the time after."""
    now = start
    for _ in range(job.alert_threshold):
        finish_runs(scheduler, now)
        now += MINUTE
    job.refresh_from_db()
    assert job.state == Job.State.CRASHED
    return now


# -- one alert per crossing ------------------------------------------------------


def test_failures_below_the_threshold_write_no_alert(scheduler, failing_job):
    finish_runs(scheduler, T0)
    failing_job.refresh_from_db()
    assert failing_job.consecutive_failures == 1
    assert not Alert.objects.exists()
    assert not Message.objects.exists()


def test_crossing_the_threshold_writes_one_pending_alert(scheduler, failing_job):
    crash(scheduler, failing_job, T0)
    alert = Alert.objects.get()
    assert alert.kind == Alert.Kind.CRASH
    assert alert.status == Alert.Status.PENDING
    assert alert.next_attempt_at == T0 + MINUTE
    assert alert.created_at == T0 + MINUTE
    assert alert.recipients == ["ops@example.com", "dev@example.com"]
    assert alert.run == Run.objects.filter(job=failing_job).latest("scheduled_at")
    assert alert.message_id.startswith(f"<cronboard.alert.{failing_job.pk}.")
    assert alert.message_id.endswith("@localhost>")


def test_crash_reenable_crash_again_writes_two_alerts_and_failures_while_crashed_none(
    scheduler, failing_job, staff_user
):
    now = crash(scheduler, failing_job, T0)
    assert Alert.objects.count() == 1

    # While crashed nothing is scheduled; a manual run that fails is not a new crossing.
    run_now(job=failing_job, user=staff_user, now=now)
    finish_runs(scheduler, now)
    assert Run.objects.filter(trigger=Run.Trigger.MANUAL, status=Run.Status.FAILED).count() == 1
    assert Alert.objects.count() == 1

    resume_job(job=failing_job, user=staff_user, now=now)
    failing_job.refresh_from_db()
    crash(scheduler, failing_job, failing_job.next_fire_at)
    assert Alert.objects.filter(kind=Alert.Kind.CRASH).count() == 2
    assert len({a.message_id for a in Alert.objects.all()}) == 2


def test_a_second_alert_for_the_same_crossing_run_is_refused_by_the_database(scheduler, failing_job):
    from django.db import IntegrityError, transaction

    crash(scheduler, failing_job, T0)
    alert = Alert.objects.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        alerts.on_crash(job=failing_job, run=alert.run, now=T0 + MINUTE)


def test_alert_rolls_back_with_the_outcome_that_crossed(failing_job):
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        alerts.on_crash(job=failing_job, run=None, now=T0)
        raise RuntimeError("the outcome's transaction failed")
    assert not Alert.objects.exists()
    assert not Message.objects.exists()


# -- recipients --------------------------------------------------------------------


def test_job_recipients_win_over_the_setting(failing_job):
    set_setting("sys.job.alertEmails", "oncall@example.com")
    alert = alerts.on_crash(job=failing_job, run=None, now=T0)
    assert alert.recipients == ["ops@example.com", "dev@example.com"]


def test_job_without_recipients_falls_back_to_the_alert_emails_setting(make_job):
    set_setting("sys.job.alertEmails", "oncall@example.com; lead@example.com")
    job = make_job(alert_emails=[])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    assert alert.recipients == ["oncall@example.com", "lead@example.com"]
    assert alert.status == Alert.Status.PENDING


def test_invalid_stored_addresses_are_dropped_not_fatal(make_job):
    job = make_job(alert_emails=["not an address", "ops@example.com"])
    assert alerts.email_recipients(job) == ["ops@example.com"]


def test_no_recipients_anywhere_records_the_alert_undeliverable_and_visible(make_job, superuser):
    job = make_job(alert_emails=[])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    assert alert.status == Alert.Status.UNDELIVERABLE
    assert alert.next_attempt_at is None
    assert "No recipients" in alert.last_error
    # The superuser still hears about it, and learns that no email went out.
    message = Message.objects.get(user=superuser)
    assert "No recipients" in message.body
    # The sender has nothing to do with it.
    assert deliver(AlertSender(), T0 + MINUTE) is False
    assert mail.outbox == []


def test_in_site_messages_go_to_owner_and_active_superusers_only(
    failing_job, staff_user, superuser, viewer_user
):
    User = get_user_model()
    User.objects.create_superuser("gone", "gone@example.com", "pw", is_active=False)
    User.objects.create_user("other-staff", "o@example.com", "pw", is_staff=True)
    alerts.on_crash(job=failing_job, run=None, now=T0)
    assert sorted(Message.objects.values_list("user__username", flat=True)) == ["root", "staff"]
    message = Message.objects.get(user=staff_user)
    assert message.job == failing_job
    assert message.read_at is None
    assert "nightly-report" in message.subject
    assert f"http://localhost:8000/jobs/{failing_job.pk}/" in message.body


def test_owner_who_is_a_superuser_gets_one_message(make_job, superuser):
    job = make_job(owner=superuser, alert_emails=["ops@example.com"])
    alerts.on_crash(job=job, run=None, now=T0)
    assert Message.objects.filter(user=superuser).count() == 1


# -- recovered notice --------------------------------------------------------------


def test_reenabled_job_that_succeeds_sends_one_recovered_notice_when_asked(
    scheduler, failing_job, staff_user
):
    failing_job.notify_recovered = True
    failing_job.save(update_fields=["notify_recovered"])
    now = crash(scheduler, failing_job, T0)
    Job.objects.filter(pk=failing_job.pk).update(handler="demo.echo")
    failing_job.refresh_from_db()
    resume_job(job=failing_job, user=staff_user, now=now)
    failing_job.refresh_from_db()
    finish_runs(scheduler, failing_job.next_fire_at)
    finish_runs(scheduler, failing_job.next_fire_at + MINUTE)
    kinds = list(Alert.objects.order_by("created_at", "id").values_list("kind", flat=True))
    assert kinds == [Alert.Kind.CRASH, Alert.Kind.RECOVERED]
    recovered = Alert.objects.get(kind=Alert.Kind.RECOVERED)
    assert "recovered" in recovered.subject
    assert recovered.status == Alert.Status.PENDING


def test_no_recovered_notice_unless_the_job_asks(scheduler, failing_job, staff_user):
    now = crash(scheduler, failing_job, T0)
    Job.objects.filter(pk=failing_job.pk).update(handler="demo.echo")
    failing_job.refresh_from_db()
    resume_job(job=failing_job, user=staff_user, now=now)
    failing_job.refresh_from_db()
    finish_runs(scheduler, failing_job.next_fire_at)
    assert list(Alert.objects.values_list("kind", flat=True)) == [Alert.Kind.CRASH]


def test_job_form_offers_the_recovered_notice(make_job):
    job = make_job()
    form = JobForm(
        {
            "name": job.name,
            "kind": "python",
            "handler": "demo.echo",
            "schedule_type": "cron",
            "cron_expression": "0 * * * * *",
            "timezone": "UTC",
            "alert_threshold": 3,
            "notify_recovered": "on",
            "timeout_seconds": 600,
            "max_retries": 0,
            "retry_interval_seconds": 60,
        },
        instance=job,
    )
    assert form.is_valid(), form.errors
    assert form.save(commit=False).notify_recovered is True


# -- content ----------------------------------------------------------------------


def test_alert_email_has_both_parts_the_facts_the_link_and_the_stable_message_id(
    scheduler, failing_job, settings
):
    settings.CRONBOARD_BASE_URL = "https://cron.example.org"
    settings.DEFAULT_FROM_EMAIL = "cronboard@example.org"
    now = crash(scheduler, failing_job, T0)
    alert = Alert.objects.get()
    assert alert.message_id.endswith("@cron.example.org>")

    assert deliver(AlertSender(), now)
    (email,) = mail.outbox
    assert email.to == ["ops@example.com", "dev@example.com"]
    assert email.from_email == "cronboard@example.org"
    assert email.subject == "[Cronboard] Job “nightly-report” crashed after 2 consecutive failures"
    assert email.extra_headers["Message-ID"] == alert.message_id
    assert email.message()["Message-ID"] == alert.message_id
    link = f"https://cron.example.org/jobs/{failing_job.pk}/"
    for body in (email.body, email.alternatives[0].content):
        assert "nightly-report" in body
        assert "Crashed" in body
        assert "threshold of 2" in body
        assert body.count("disk full on /var") == 2  # both failed runs, with their error
        assert link in body
        assert "Re-enable" in body
    assert email.alternatives[0].mimetype == "text/html"
    assert f'<a href="{link}">' in email.alternatives[0].content

    alert.refresh_from_db()
    assert alert.status == Alert.Status.SENT
    assert alert.attempts == 1
    assert alert.sent_at == now


def test_html_part_escapes_what_jobs_and_errors_contain(make_job):
    job = make_job(name="<b>x</b>", alert_emails=["ops@example.com"])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    assert "<b>x</b>" not in alert.body_html
    assert "&lt;b&gt;x&lt;/b&gt;" in alert.body_html
    assert "<b>x</b>" in alert.body_text


# -- the outbox's bookkeeping ------------------------------------------------------------


def test_a_claim_is_a_compare_and_set(make_job):
    job = make_job(alert_emails=["ops@example.com"])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    first, second = AlertSender(), AlertSender()
    assert first.claim_due(T0).pk == alert.pk
    assert second.claim_due(T0) is None  # its lease holds it
    alert.refresh_from_db()
    assert alert.attempts == 1
    assert alert.next_attempt_at == T0 + outbox.claim_lease()
    assert second.claim_due(alert.next_attempt_at).pk == alert.pk  # the lease ran out


def test_a_late_failure_from_an_expired_claim_changes_nothing(make_job):
    job = make_job(alert_emails=["ops@example.com"])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    stale = AlertSender().claim_due(T0)
    current = AlertSender().claim_due(stale.next_attempt_at)
    sender = AlertSender()
    sender.record(
        Delivery(
            alert.pk,
            1,
            alert.created_at,
            stale.next_attempt_at,
            message=None,
            error=smtplib.SMTPDataError(554, b"no"),
        ),
        T0 + timedelta(minutes=5),
    )
    alert.refresh_from_db()
    assert alert.status == Alert.Status.PENDING
    assert alert.next_attempt_at == current.next_attempt_at


def test_temporary_failures_give_up_after_a_day(make_job):
    job = make_job(alert_emails=["ops@example.com"])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    sender = AlertSender(rng=random.Random(1))
    late = T0 + timedelta(hours=23, minutes=59)
    Alert.objects.filter(pk=alert.pk).update(next_attempt_at=late, attempts=20)
    claimed = sender.claim_due(late)
    error = smtplib.SMTPDataError(451, b"4.3.0 try later")
    sender.record(
        Delivery(alert.pk, claimed.attempts, claimed.created_at, claimed.next_attempt_at, None, error), late
    )
    alert.refresh_from_db()
    assert alert.status == Alert.Status.FAILED
    assert alert.next_attempt_at is None
    assert alert.last_error == "451 4.3.0 try later (gave up after 21 attempts)"


def test_retry_delay_doubles_with_jitter_and_is_capped():
    rng = random.Random(7)
    for attempts, full in [(1, 30), (2, 60), (3, 120), (7, 1920), (8, 3600), (30, 3600)]:
        for _ in range(20):
            delay = outbox.retry_delay(attempts, rng).total_seconds()
            assert full / 2 <= delay <= full


@pytest.mark.parametrize(
    ("exc", "permanent", "shown"),
    [
        (smtplib.SMTPDataError(550, b"5.7.1 rejected"), True, "550 5.7.1 rejected"),
        (smtplib.SMTPDataError(451, b"4.3.0 try later"), False, "451 4.3.0 try later"),
        (smtplib.SMTPSenderRefused(553, b"bad sender", "a@b"), True, "553 bad sender"),
        (smtplib.SMTPConnectError(421, b"too busy"), False, "421 too busy"),
        (smtplib.SMTPAuthenticationError(535, b"bad credentials"), True, "535 bad credentials"),
        (smtplib.SMTPRecipientsRefused({"a@x": (550, b"no such user")}), True, "a@x: 550 no such user"),
        (smtplib.SMTPRecipientsRefused({"a@x": (550, b"no"), "b@x": (450, b"busy")}), False, "b@x: 450 busy"),
        (ConnectionRefusedError(111, "Connection refused"), False, "Connection refused"),
        (TimeoutError("timed out"), False, "did not answer within"),
        (smtplib.SMTPServerDisconnected("Connection unexpectedly closed"), False, "unexpectedly closed"),
    ],
)
def test_failures_are_classified_by_the_reply(exc, permanent, shown):
    is_permanent, text = mailfailures.describe_failure(exc)
    assert is_permanent is permanent
    assert shown in text


def test_a_broken_email_backend_is_the_alerts_failure_not_the_schedulers(make_job, settings):
    settings.EMAIL_BACKEND = "no.such.Backend"
    job = make_job(alert_emails=["ops@example.com"])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    assert deliver(AlertSender(), T0)
    alert.refresh_from_db()
    assert (alert.status, alert.attempts) == (Alert.Status.PENDING, 1)
    assert "ModuleNotFoundError" in alert.last_error


def test_a_result_whose_write_fails_is_written_on_the_next_step(make_job, monkeypatch):
    from django.db import DatabaseError

    job = make_job(alert_emails=["ops@example.com"])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    sender = AlertSender()
    sender.step(T0)
    assert sender.wait_idle(10)
    real_record = AlertSender.record
    monkeypatch.setattr(
        AlertSender, "record", lambda *a: (_ for _ in ()).throw(DatabaseError("database is locked"))
    )
    with pytest.raises(DatabaseError):
        sender.collect(T0)
    monkeypatch.setattr(AlertSender, "record", real_record)
    assert sender.step(T0)
    alert.refresh_from_db()
    assert alert.status == Alert.Status.SENT
    assert len(mail.outbox) == 1
