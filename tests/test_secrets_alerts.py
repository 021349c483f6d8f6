"""An alert about a run that wrote a secret's value carries `****`: the run's
error and log are redacted before they are stored, and alerts are written
from what is stored. An environment-backed secret ({{ env:NAME }}) here."""

import pytest

import tests.hostile_handlers  # noqa: F401  (registers hostile.leak)
from jobs.models import Alert, Message, Run
from tests.fixtures.core import T0, drain

pytestmark = pytest.mark.django_db
VALUE = "env-s3cret-41x"


def test_the_crash_alert_and_message_hold_no_value(make_job, make_scheduler, monkeypatch, staff_user):
    monkeypatch.setenv("CRONBOARD_SECRET_ALERT_TOKEN", VALUE)
    job = make_job(
        name="leaky",
        handler="hostile.leak",
        properties={"token": "{{ env:ALERT_TOKEN }}", "mode": "handler-error"},
        alert_threshold=1,
        alert_emails=["ops@example.com"],
        owner=staff_user,
        next_fire_at=T0,
    )
    scheduler = make_scheduler(worker_id="test-node", max_workers=1, executor="thread")
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    drain(scheduler, T0)
    run = Run.objects.get(job=job)
    assert run.status == "failed" and run.error == "refused with ****"
    alert = Alert.objects.get()
    text = " ".join([alert.subject, alert.body_text, alert.body_html])
    text += " ".join(f"{m.subject} {m.body}" for m in Message.objects.all())
    assert "****" in text and VALUE not in text
