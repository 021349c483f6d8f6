"""Muting a job's alerts until a chosen time, without pausing it: from the
job page (operators and up), audited; the alerts written meanwhile are
recorded as muted and not sent, by email, channel or in-site message."""

from datetime import UTC, timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs import alerts
from jobs.models import Alert, AlertDelivery, AuditEvent, Job, Message
from tests.fixtures.core import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(make_job):
    return make_job(
        name="noisy",
        timezone="Europe/Berlin",
        alert_emails=["ops@example.com"],
        state=Job.State.CRASHED,
        consecutive_failures=3,
    )


def signed_in(role: str) -> Client:
    client = Client()
    client.force_login(make_user(role, role))
    return client


def test_a_muted_job_s_alert_is_recorded_but_not_sent(job, staff_user):
    now = timezone.now()
    alerts.mute_alerts(job=job, until=now + timedelta(hours=2), now=now, user=staff_user)
    alert = alerts.on_crash(job=job, run=None, now=now)
    assert alert.status == Alert.Status.MUTED and alert.next_attempt_at is None
    assert "muted" in alert.last_error
    assert not AlertDelivery.objects.filter(alert=alert).exists()
    assert not Message.objects.exists()
    assert Job.objects.get(pk=job.pk).state == Job.State.CRASHED  # not paused, not changed
    # Once the time has passed, alerts go out again.
    later = now + timedelta(hours=3)
    Alert.objects.all().delete()
    assert alerts.on_crash(job=job, run=None, now=later).status == Alert.Status.PENDING


def test_an_operator_mutes_from_the_job_page_and_it_is_shown_and_audited(job):
    client = signed_in("operator")
    wall = (
        (timezone.now() + timedelta(days=30))
        .astimezone(job.zone)
        .replace(hour=8, minute=30, second=0, microsecond=0)
    )
    response = client.post(reverse("jobs:job_mute", args=[job.pk]), {"until": f"{wall:%Y-%m-%dT%H:%M}"})
    assert response.status_code == 302
    job.refresh_from_db()
    # Read in the job's zone.
    assert job.alerts_muted_until == wall
    assert job.state == Job.State.CRASHED
    event = AuditEvent.objects.get(action="mute-alerts")
    assert event.job_id == job.pk and event.changes["alerts_muted_until"] == [
        None,
        wall.astimezone(UTC).isoformat(),
    ]
    page = client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert 'id="alerts-muted"' in page and f"{wall:%Y-%m-%d} 08:30 {wall.tzname()}" in page
    assert "Unmute alerts" in page
    client.post(reverse("jobs:job_mute", args=[job.pk]), {"until": ""})
    job.refresh_from_db()
    assert job.alerts_muted_until is None
    assert AuditEvent.objects.filter(action="unmute-alerts").count() == 1


@pytest.mark.parametrize(
    "until", ["yesterday", "2001-01-01T00:00", "2099-01-01T00:00", "9999-12-31T23:59", "2099-13-01T00:00"]
)
def test_a_time_not_ahead_is_refused_and_changes_nothing(job, until):
    client = signed_in("operator")
    response = client.post(reverse("jobs:job_mute", args=[job.pk]), {"until": until}, follow=True)
    assert response.status_code == 200
    job.refresh_from_db()
    assert job.alerts_muted_until is None
    assert not AuditEvent.objects.filter(action="mute-alerts").exists()
    assert "flash error" in response.content.decode()


def test_a_viewer_cannot_mute(job):
    client = signed_in("viewer")
    response = client.post(reverse("jobs:job_mute", args=[job.pk]), {"until": "2026-12-24T08:30"})
    assert response.status_code == 403
    job.refresh_from_db()
    assert job.alerts_muted_until is None
    page = client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert "Mute alerts" not in page
