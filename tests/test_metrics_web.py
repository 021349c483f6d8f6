"""The web process's /metrics (access, request counts by view, the
database-wide gauges) and the request id a request carries into its audit
rows and log lines. The real gunicorn, scraped by a real Prometheus, is
test_metrics_process.py."""

import json
import logging

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobs.models import AuditEvent, Job, Run
from tests.fixtures.core import T0

pytestmark = pytest.mark.django_db

TOKEN = "scrape-token-0123456789"


def samples(text: str) -> dict:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.parametrize(
    ("token", "allow", "headers", "status"),
    [
        ("", [], {}, 403),
        (TOKEN, [], {}, 401),
        (TOKEN, [], {"Authorization": "Bearer not-the-token-at-all"}, 401),
        (TOKEN, [], {"Authorization": f"Bearer {TOKEN}"}, 200),
        ("", ["192.0.2.0/24"], {}, 403),
        ("", ["127.0.0.1/32"], {}, 200),
    ],
)
def test_metrics_answer_only_a_token_or_an_allowed_address(client, settings, token, allow, headers, status):
    settings.JOBS_METRICS_TOKEN, settings.JOBS_METRICS_ALLOW = token, allow
    response = client.get("/metrics", headers=headers)
    assert response.status_code == status
    assert (b"cronboard_jobs" in response.content) == (status == 200), "a refusal carries no figures"
    if status == 401:
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_an_allowed_address_is_the_connecting_one_never_a_forwarded_header(client, settings):
    """Behind a proxy too: X-Forwarded-For is anyone's to send, so it never
    opens /metrics (the console's sign-in throttling may read it, not this)."""
    settings.JOBS_METRICS_ALLOW, settings.CRONBOARD_PROXY_COUNT = ["10.0.0.0/8"], 1
    response = client.get("/metrics", HTTP_X_FORWARDED_FOR="10.1.2.3", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 403 and b"cronboard_jobs" not in response.content
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200


def test_metrics_are_served_whatever_the_host_header(client, settings):
    """Prometheus scrapes by address: /metrics is answered before the host check."""
    settings.JOBS_METRICS_ALLOW, settings.ALLOWED_HOSTS = ["127.0.0.1/32"], ["cron.example.com"]
    assert client.get("/metrics", HTTP_HOST="10.1.2.3:8000").status_code == 200


def test_database_gauges_and_requests_by_view(staff_client, settings, make_job):
    settings.JOBS_METRICS_TOKEN = TOKEN
    job = make_job(namespace="billing")
    make_job(namespace="billing", state="crashed")
    Run.objects.create(job=job, scheduled_at=T0, trigger="manual", status="queued", run_after=T0)
    staff_client.get("/")
    staff_client.get("/")
    got = samples(staff_client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).content.decode())
    assert got[("cronboard_jobs", (("namespace", "billing"), ("state", "enabled")))] == 1
    assert got[("cronboard_jobs_crashed", (("namespace", "billing"),))] == 1
    assert got[("cronboard_oldest_due_fire_seconds", ())] > 0, "the queued run has been due since T0"
    assert got[("cronboard_alerts_undelivered", (("type", "email"),))] == 0
    views = {labels for name, labels in got if name == "cronboard_http_requests_total"}
    dashboard = [dict(labels) for labels in views if dict(labels)["view"] == "jobs:dashboard"]
    assert dashboard, views
    counted = sum(
        value
        for (name, labels), value in got.items()
        if name == "cronboard_http_requests_total" and dict(labels)["view"] == "jobs:dashboard"
    )
    assert counted >= 2


def test_a_request_id_is_taken_from_the_header_or_made_and_sent_back(client):
    assert client.get("/login/", headers={"X-Request-ID": "abc-123"})["X-Request-ID"] == "abc-123"
    made = client.get("/login/", headers={"X-Request-ID": "bad id\nwith a newline"})["X-Request-ID"]
    assert made != "bad id\nwith a newline" and len(made) == 32
    assert client.get("/login/")["X-Request-ID"] != made


def test_the_request_id_reaches_the_audit_row(staff_client, make_job):
    job = make_job()
    response = staff_client.post(f"/jobs/{job.pk}/pause/", headers={"X-Request-ID": "req-42"})
    assert response.status_code in (200, 302)
    row = AuditEvent.objects.get(job=job, action="pause")
    assert row.request_id == "req-42"
    # A row written outside a request (a command, the scheduler) has none.
    assert AuditEvent.objects.exclude(pk=row.pk).filter(request_id="req-42").count() == 0


def test_json_log_lines_carry_the_context(capsys, settings):
    """CRONBOARD_LOG_FORMAT=json's formatter and filter, as config/logs.py sets them up."""
    from logging.config import dictConfig

    from config.logs import base_config
    from jobs.core import logcontext

    config = base_config("json")
    config["loggers"] = {"cronboard.jsontest": {"handlers": ["console"], "level": "INFO", "propagate": False}}
    dictConfig(config)
    try:
        log = logging.getLogger("cronboard.jsontest")
        with logcontext.bound(request_id="r-1", worker_id="node-a"):
            log.warning("fire of %s late", "backup", extra={"job_id": 7, "job_name": "backup"})
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("it failed")
    finally:
        dictConfig(settings.LOGGING)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    first, second = lines
    assert {
        k: first[k] for k in ("level", "logger", "message", "request_id", "worker_id", "job_id", "job_name")
    } == {
        "level": "WARNING",
        "logger": "cronboard.jsontest",
        "message": "fire of backup late",
        "request_id": "r-1",
        "worker_id": "node-a",
        "job_id": 7,
        "job_name": "backup",
    }
    assert first["time"].endswith("+00:00")
    assert "request_id" not in second, "the context ended with its block"
    assert "ValueError: boom" in second["exc_info"]


def test_the_request_id_is_on_the_log_lines_the_request_causes(staff_client):
    from jobs.core.logcontext import ContextFilter

    records = []
    handler = logging.Handler()
    handler.emit = records.append
    handler.addFilter(ContextFilter())
    logger = logging.getLogger("django.request")
    logger.addHandler(handler)
    try:
        response = staff_client.get("/jobs/999999/", headers={"X-Request-ID": "req-404"})
    finally:
        logger.removeHandler(handler)
    assert response.status_code == 404
    assert [r.request_id for r in records] == ["req-404"], "Django's 'Not Found' line"


def test_the_database_figures_read_the_same_on_both_databases(both_databases, make_job):
    from datetime import timedelta

    from jobs import figures

    ops = make_job(namespace="ops", next_fire_at=T0 - timedelta(seconds=30))  # due, not planned
    make_job(state="crashed", namespace="ops")
    deleted = make_job(namespace="ops")
    Job.objects.filter(pk=deleted.pk).update(deleted_at=T0)
    for status in ("succeeded", "failed", "failed"):
        Run.objects.create(job=ops, scheduled_at=T0 - timedelta(minutes=1), trigger="manual", status=status)
    Run.objects.create(job=ops, scheduled_at=T0 - timedelta(minutes=10), trigger="manual", status="failed")
    Run.objects.create(
        job=None,
        scheduled_at=T0,
        trigger="task",
        handler="demo.echo",
        status="queued",
        run_after=T0 - timedelta(seconds=90),
    )

    read = figures.read(T0)

    ops_jobs = {key: n for key, n in read.jobs.items() if key[0] == "ops"}  # not the built-in retention job
    assert ops_jobs == {("ops", "enabled"): 1, ("ops", "crashed"): 1}, "the deleted job left out"
    assert read.runs == {("ops", "succeeded"): 1, ("ops", "failed"): 2, ("", "queued"): 1}, (
        "the last 5 minutes"
    )
    assert read.oldest_due_seconds == 90, "the queued task's 90 s, older than the job's 30 s"
    assert read.undelivered == {"email": 0, "channel": 0}
