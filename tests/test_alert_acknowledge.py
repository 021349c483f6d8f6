"""Acknowledging an alert: operators (and above) of the alert's job's
namespace, in the console and the API; who and when are shown and
audited; others are refused (404 outside their namespaces, 403 inside)."""

import pytest
from django.test import Client
from django.urls import reverse

from jobs import tokens
from jobs.models import Alert, AuditEvent, Message
from tests.fixtures.api import ApiClient, assert_error
from tests.fixtures.core import make_user


def console(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api(user) -> ApiClient:
    return ApiClient(tokens.create_token(user=user, name="tests")[1])


def make_alert(job) -> Alert:
    return Alert.objects.create(
        job=job,
        kind="crash",
        status="sent",
        subject=f"{job.name} crashed",
        body_text="x",
        message_id=f"<{job.pk}@c>",
    )


@pytest.fixture
def alert(make_job):
    return make_alert(make_job(name="billing-sync", namespace="team-a"))


def test_an_operator_acknowledges_in_the_console_and_the_page_says_who_and_when(both_databases, alert):
    client = console(make_user("opal", "operator", namespace="team-a"))
    page = client.get(reverse("jobs:alert_list")).content.decode()
    assert reverse("jobs:alert_acknowledge", args=[alert.pk]) in page
    response = client.post(reverse("jobs:alert_acknowledge", args=[alert.pk]), follow=True)
    assert response.status_code == 200 and "Alert acknowledged." in response.content.decode()
    alert.refresh_from_db()
    assert alert.acknowledged_by == "opal" and alert.acknowledged_at is not None
    page = client.get(reverse("jobs:alert_list")).content.decode()
    assert "by opal" in page and reverse("jobs:alert_acknowledge", args=[alert.pk]) not in page
    fragment = client.get(reverse("jobs:job_alerts", args=[alert.job_id])).content.decode()
    assert "by opal" in fragment
    (event,) = AuditEvent.objects.filter(action="acknowledge")
    assert (event.job_id, event.username, event.via) == (alert.job_id, "opal", "console")
    assert event.changes == {"alert": [None, f"crash #{alert.pk}"]}
    # Again: the first acknowledgement stands, and nothing more is audited.
    other = make_user("otto", "operator")
    response = console(other).post(reverse("jobs:alert_acknowledge", args=[alert.pk]), follow=True)
    assert "opal acknowledged this alert already." in response.content.decode()
    alert.refresh_from_db()
    assert alert.acknowledged_by == "opal"
    assert AuditEvent.objects.filter(action="acknowledge").count() == 1


def test_a_viewer_is_refused_and_another_namespace_answers_404(db, alert):
    viewer = console(make_user("vera", "viewer", namespace="team-a"))
    assert reverse("jobs:alert_acknowledge", args=[alert.pk]) not in viewer.get("/alerts/").content.decode()
    assert viewer.post(reverse("jobs:alert_acknowledge", args=[alert.pk])).status_code == 403
    elsewhere = console(make_user("otto", "operator", namespace="team-b"))
    assert elsewhere.post(reverse("jobs:alert_acknowledge", args=[alert.pk])).status_code == 404
    assert viewer.get(reverse("jobs:alert_acknowledge", args=[alert.pk])).status_code == 405
    alert.refresh_from_db()
    assert alert.acknowledged_at is None
    assert not AuditEvent.objects.filter(action="acknowledge").exists()


def test_acknowledging_is_not_reading_a_message(db, alert):
    operator = make_user("opal", "operator", namespace="team-a")
    message = Message.objects.create(user=operator, job=alert.job, subject="billing-sync crashed")
    console(operator).post(reverse("jobs:alert_acknowledge", args=[alert.pk]))
    message.refresh_from_db()
    assert message.read_at is None


def test_the_api_acknowledges_for_an_operator_and_refuses_others(both_databases, alert):
    path = f"/api/alerts/{alert.pk}/acknowledge"
    response = api(make_user("vera", "viewer", namespace="team-a")).post(path)
    assert_error(response, 403, "forbidden")
    assert_error(api(make_user("otto", "operator", namespace="team-b")).post(path), 404, "not_found")
    assert_error(
        api(make_user("opal", "operator", namespace="team-a")).post("/api/alerts/999999/acknowledge"),
        404,
        "not_found",
    )
    body = api(make_user("olga", "operator", namespace="team-a")).post(path).json()
    assert (
        body["id"] == alert.pk and body["acknowledged_by"] == "olga" and body["acknowledged_at"].endswith("Z")
    )
    assert AuditEvent.objects.get(action="acknowledge").via == "api"
