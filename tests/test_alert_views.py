"""The console's alert pages and the "send test email" action, through HTTP."""

import pytest
from django.test import Client
from django.urls import reverse

from jobs import alerts
from jobs.config import set_setting
from jobs.models import Alert
from tests.fixtures.core import T0
from tests.fixtures.smtp import use_smtp


@pytest.fixture
def two_alerts(make_job):
    job = make_job(name="nightly-report", alert_emails=["ops@example.com"])
    refused = alerts.on_crash(job=job, run=None, now=T0)
    Alert.objects.filter(pk=refused.pk).update(
        status=Alert.Status.FAILED_PERMANENT,
        attempts=1,
        next_attempt_at=None,
        last_error="550 5.7.1 relaying denied",
    )
    lonely = make_job(name="orphan", alert_emails=[])
    alerts.on_crash(job=lonely, run=None, now=T0)
    return job, lonely


def test_recent_alerts_show_delivery_state_attempts_and_last_error(viewer_client, two_alerts):
    job, lonely = two_alerts
    page = viewer_client.get(reverse("jobs:alert_list")).content.decode()
    assert "nightly-report" in page and "orphan" in page
    assert f'href="/jobs/{job.pk}/"' in page
    assert "Refused" in page and "550 5.7.1 relaying denied" in page
    assert "No recipients" in page  # undeliverable is shown, not hidden


def test_recent_alerts_filter_by_state(viewer_client, two_alerts):
    page = viewer_client.get(reverse("jobs:alert_list"), {"status": "undeliverable"}).content.decode()
    assert "orphan" in page
    assert "nightly-report" not in page


def test_alert_pages_need_a_signed_in_user(client, two_alerts):
    job, _ = two_alerts
    for url in (reverse("jobs:alert_list"), reverse("jobs:job_alerts", args=[job.pk])):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")


def test_job_alerts_fragment_lists_only_that_jobs_alerts(viewer_client, two_alerts):
    job, _ = two_alerts
    response = viewer_client.get(reverse("jobs:job_alerts", args=[job.pk]))
    page = response.content.decode()
    assert 'id="job-alerts"' in page
    assert "550 5.7.1 relaying denied" in page
    assert "No recipients" not in page


def test_job_alerts_of_a_deleted_or_unknown_job_is_404(viewer_client, two_alerts):
    job, _ = two_alerts
    job.deleted_at = T0
    job.save(update_fields=["deleted_at"])
    assert viewer_client.get(reverse("jobs:job_alerts", args=[job.pk])).status_code == 404
    assert viewer_client.get(reverse("jobs:job_alerts", args=[99999])).status_code == 404


def test_send_test_email_reaches_the_smtp_server(staff_client, smtp_server, settings):
    use_smtp(settings, smtp_server.port)
    response = staff_client.post(
        reverse("jobs:send_test_email"), {"to": "ops@example.com"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert page.lstrip().startswith('<div id="test-email">')
    assert "Sent to ops@example.com" in page
    (received,) = smtp_server.received
    assert received.rcpt_tos == ["ops@example.com"]
    assert "test email from Cronboard, sent by staff" in received.message.get_body(("plain",)).get_content()


def test_send_test_email_defaults_to_the_alert_emails_setting(staff_client, mailoutbox):
    set_setting("sys.job.alertEmails", "oncall@example.com")
    staff_client.post(reverse("jobs:send_test_email"), {"to": ""})
    (email,) = mailoutbox
    assert email.to == ["oncall@example.com"]


def test_send_test_email_shows_the_servers_refusal(staff_client, smtp_server, settings):
    use_smtp(settings, smtp_server.port)
    smtp_server.script("550 5.7.1 relaying denied")
    page = staff_client.post(reverse("jobs:send_test_email"), {"to": "ops@example.com"}).content.decode()
    assert "The mail server did not take it: 550 5.7.1 relaying denied" in page


def test_send_test_email_shows_a_dead_server(staff_client, blackhole_smtp, settings):
    use_smtp(settings, blackhole_smtp, timeout=1)
    page = staff_client.post(reverse("jobs:send_test_email"), {"to": "ops@example.com"}).content.decode()
    assert "did not answer within 1 s" in page


def test_send_test_email_refuses_a_bad_address(staff_client, mailoutbox):
    page = staff_client.post(reverse("jobs:send_test_email"), {"to": "not an address"}).content.decode()
    assert "is not a valid email address" in page
    assert mailoutbox == []


def test_send_test_email_is_for_staff_only(viewer_client, mailoutbox):
    assert viewer_client.post(reverse("jobs:send_test_email"), {"to": "ops@example.com"}).status_code == 403
    assert mailoutbox == []


def test_send_test_email_is_post_only_and_needs_the_csrf_token(staff_user, mailoutbox):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    assert client.get(reverse("jobs:send_test_email")).status_code == 405
    assert client.post(reverse("jobs:send_test_email"), {"to": "ops@example.com"}).status_code == 403
    assert mailoutbox == []
