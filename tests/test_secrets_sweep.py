"""The issue's check, from outside: a secret's value is planted, used by
jobs whose runs write it (whole and in two pieces) and crash with it; then
every page, API answer, export, audit row, run log, alert and message is
searched for it, as a viewer, an operator, an editor of one namespace and
an administrator. The surfaces added since (the roles page, acknowledged
alerts, a secret's namespaces) are searched too; a channel's test reply is
searched in tests/test_alert_channels.py."""

import pytest
from django.test import Client
from django.urls import reverse

import tests.hostile_handlers  # noqa: F401  (registers hostile.leak, hostile.leak-pieces)
from jobs import secrets, tokens
from jobs.acknowledge import acknowledge_alert
from jobs.models import Alert, AuditEvent, Message, Run
from tests.fixtures.api import ApiClient
from tests.fixtures.core import T0, drain, make_user

pytestmark = pytest.mark.django_db(transaction=True)
PLANTED = "pl4nted-S3cret-Vx81"


@pytest.fixture
def world(make_job, make_scheduler, superuser):
    secrets.set_secret(
        name="billing.token", value=PLANTED, description="feed", namespaces=["billing"], via="cli"
    )
    users = {
        "viewer": make_user("vera", "viewer"),
        "operator": make_user("otto", "operator", namespace="billing"),
        "editor": make_user("eddie", "editor", namespace="billing"),
        "admin": make_user("ada", "admin"),
    }
    reference = {"token": "{{ secret.billing.token }}"}
    crashing = make_job(
        name="leaky",
        namespace="billing",
        handler="hostile.leak",
        properties={**reference, "mode": "handler-error"},
        alert_threshold=1,
        alert_emails=["ops@example.com"],
        owner=users["editor"],
        next_fire_at=T0,
    )
    pieces = make_job(
        name="pieces",
        namespace="billing",
        handler="hostile.leak-pieces",
        properties=reference,
        next_fire_at=T0,
    )
    scheduler = make_scheduler(worker_id="node-s", max_workers=2, executor="thread")
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    drain(scheduler, T0)
    assert Run.objects.get(job=crashing).status == "failed"
    assert Run.objects.get(job=pieces).status == "succeeded"
    alert = Alert.objects.get(job=crashing)
    acknowledge_alert(alert=alert, user=users["operator"])
    assert Message.objects.filter(user=users["editor"]).exists()
    return users, crashing, pieces, alert


def surfaces(user, crashing, pieces, alert) -> dict[str, str]:
    client = Client()
    client.force_login(user)
    api = ApiClient(tokens.create_token(user=user, name="sweep")[1])
    seen = {}
    for job in (crashing, pieces):
        run = Run.objects.get(job=job)
        for url in (
            reverse("jobs:job_detail", args=[job.pk]),
            reverse("jobs:job_alerts", args=[job.pk]),
            reverse("jobs:run_detail", args=[run.pk]),
            reverse("jobs:run_log", args=[run.pk]),
        ):
            seen[url] = client.get(url).content.decode()
        for url in (f"/api/jobs/{job.pk}", f"/api/runs/{run.pk}", f"/api/jobs/{job.pk}/runs"):
            seen[url] = api.get(url).content.decode()
    for name in ("dashboard", "job_list", "run_list", "upcoming", "alert_list", "messages", "job_export"):
        seen[name] = client.get(reverse(f"jobs:{name}")).content.decode()
    for url in ("/audit/", "/secrets/", "/secrets/?name=billing.token", "/roles/", "/profile/"):
        seen[url] = client.get(url).content.decode()
    for url in ("/api/jobs?include=properties", "/api/runs", "/api/secrets", "/api/dashboard"):
        seen[url] = api.get(url).content.decode()
    seen["acknowledge"] = api.post(f"/api/alerts/{alert.pk}/acknowledge").content.decode()
    return seen


@pytest.mark.parametrize("role", ["viewer", "operator", "editor", "admin"])
def test_no_page_answer_or_row_holds_the_planted_value(world, role):
    users, crashing, pieces, alert = world
    seen = surfaces(users[role], crashing, pieces, alert)
    assert [where for where, text in seen.items() if PLANTED in text] == []
    # The roles that see the job were shown its runs' redacted log.
    if role in ("operator", "editor", "admin"):
        assert "****" in seen[reverse("jobs:run_log", args=[Run.objects.get(job=pieces).pk])]


def test_no_stored_row_holds_it(world):
    import json

    users, crashing, pieces, alert = world
    stored = json.dumps(
        [
            list(Run.objects.values_list("log", "result", "error", "properties")),
            list(Alert.objects.values_list("subject", "body_text", "body_html", "last_error")),
            list(Message.objects.values_list("subject", "body")),
            list(AuditEvent.objects.values_list("changes", flat=True)),
        ],
        default=str,
    )
    assert PLANTED not in stored
    # In two pieces, the value's halves never stand side by side in a log.
    pieces_log = Run.objects.get(job=pieces).log
    assert PLANTED[: len(PLANTED) // 2] not in pieces_log
