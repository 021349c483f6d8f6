"""Alert channels on PostgreSQL (a real server, tests/fixtures/postgres.py),
driven through `manage.py shell` in a process of its own: hostile channel
input changes nothing, the URL is encrypted in its column, and two
senders claim a channel's deliveries without overlap."""

import json
import textwrap

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SCRIPT = textwrap.dedent(
    """
    import json
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.utils import timezone
    from jobs import alerts, channels
    from jobs.models import AlertChannel, AlertDelivery, Job
    from jobs.engine.outbox import AlertSender

    user = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    from jobs.models import RoleGrant
    RoleGrant.objects.create(user=user, role="admin")
    client = Client()
    client.force_login(user)
    job = {"name": "pg", "handler": "demo.echo", "cron_expression": "0 * * * * *"}
    bad = ["json://example.com/\\u0000", "json://127.0.0.1/x", "bogus://x", "json://" + "a" * 3000,
           "json://example.com/****", "mailto://a:b@example.com"]
    answers = []
    for url in bad:
        r = client.put("/api/channels/pg-hook", data=json.dumps({"url": url}), content_type="application/json")
        answers.append([r.status_code, [e["code"] for e in r.json().get("errors") or [r.json()]]])
    for extra in ({"alert_on": ["nope"]}, {"late_after_seconds": 10**12}, {"alert_on": "late"},
                  {"long_running_seconds": 600}, {"alert_channels": [None]}):
        r = client.post("/api/jobs", data=json.dumps({**job, **extra}), content_type="application/json")
        answers.append([r.status_code, sorted({e["field"] for e in r.json()["errors"]})])
    saved_after_bad = Job.objects.filter(name="pg").exists() or AlertChannel.objects.exists()

    secret = "json://u:S3CRETpw@203.0.113.9/x/S3CRETpath"
    client.put("/api/channels/pg-hook", data=json.dumps({"url": secret}), content_type="application/json")
    r = client.post("/api/jobs", data=json.dumps({**job, "alert_channels": ["pg-hook"]}), content_type="application/json")
    created = r.status_code
    with connection.cursor() as cursor:
        cursor.execute("SELECT url FROM jobs_alertchannel WHERE name = 'pg-hook'")
        raw = cursor.fetchone()[0]
    shown = json.dumps([client.get("/api/jobs/%d" % r.json()["id"]).json(), client.get("/api/channels").json()])
    saved = Job.objects.get(name="pg")
    now = timezone.now()
    for _ in range(3):
        alerts.on_crash(job=saved, run=None, now=now)
    first, second = AlertSender().claim_channel(now), AlertSender().claim_channel(now)
    print(json.dumps({
        "answers": answers, "saved_after_bad": saved_after_bad, "created": created,
        "secret_in_db": "S3CRET" in raw, "secret_shown": "S3CRET" in shown,
        "first": len(first.ids) if first else 0, "second": len(second.ids) if second else 0,
        "rows": AlertDelivery.objects.count(),
    }))
    """
)


def test_channels_on_postgresql(postgres_site):
    site = postgres_site("channels_pg", SECRET_KEY="pg-channel-key", ALLOWED_HOSTS="testserver")
    result = json.loads(site.django(SCRIPT, timeout=180).strip().splitlines()[-1])
    assert [status for status, _ in result["answers"]] == [400] * 11
    assert [codes for _, codes in result["answers"]][6:] == [
        ["alert_on"],
        ["late_after_seconds"],
        ["alert_on"],
        ["long_running_seconds"],
        ["alert_channels"],
    ]
    assert [codes for _, codes in result["answers"]][:6] == [
        ["invalid_text"],  # a NUL is refused by the text rule before the channel is parsed
        ["fenced_channel"],
        ["invalid_channel"],
        ["invalid_channel"],
        ["masked_channel"],
        ["invalid_channel"],
    ]
    assert result["saved_after_bad"] is False
    assert result["created"] == 201
    assert result["secret_in_db"] is False and result["secret_shown"] is False
    # Three alerts on one channel: one claim takes all three (one storm message), the other none.
    assert (result["rows"], result["first"], result["second"]) == (3, 3, 0)
