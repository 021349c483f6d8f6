"""Runs with parameters: "run now" with property overrides for that run only,
from the service, the API, the command line and the console; validated like
the job's own properties, recorded on the run and in the audit trail, seen by
the handler, and reused by a retry."""

import json
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from jobs import refusals, services
from jobs.engine.loop import Scheduler
from jobs.handlers import JobHandler, register
from jobs.handlers.registry import unregister
from jobs.models import AuditEvent, Job, Run

T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


@pytest.fixture
def seen():
    """A handler that records the properties it was given."""
    calls = []

    @register("test.props")
    class Props(JobHandler):
        def run(self, ctx):
            calls.append(dict(ctx.properties))
            return "ok"

    yield calls
    unregister("test.props")


def execute_queued(now=T0):
    s = Scheduler(worker_id="node-p", max_workers=2, clock=lambda: now, misfire_threshold=60)
    assert s.claim_queued(now)
    until = time.monotonic() + 5
    while s.pool.flights and time.monotonic() < until:
        s.collect(s.pool.wait(0.2), now)
    assert not s.pool.flights


def test_run_now_overrides_are_merged_over_the_jobs_properties_for_that_run_only(make_job, seen):
    job = make_job(handler="test.props", properties={"region": "eu", "day": "mon"})
    run, created = services.run_now(job=job, properties={"day": "tue", "extra": 5}, now=T0)
    assert created and run.properties == {"day": "tue", "extra": "5"}
    execute_queued()
    assert seen == [{"region": "eu", "day": "tue", "extra": "5"}]
    run.refresh_from_db()
    assert run.status == "succeeded" and run.properties == {"day": "tue", "extra": "5"}
    job.refresh_from_db()
    assert job.properties == {"region": "eu", "day": "mon"}, "the job itself is unchanged"
    # The next plain run sees the job's own properties again.
    services.run_now(job=job, now=T0)
    execute_queued()
    assert seen[-1] == {"region": "eu", "day": "mon"}


def test_overrides_are_in_the_audit_trail(make_job, staff_user):
    job = make_job(properties={"a": "1"})
    run, _ = services.run_now(job=job, user=staff_user, properties='{"a": "2"}')
    event = AuditEvent.objects.get(job=job, action="run-now")
    assert event.changes == {"run": [None, run.pk], "properties": [None, {"a": "2"}]}


@pytest.mark.parametrize(
    "value",
    ['{"a": {"nested": 1}}', "[1, 2]", "not json", '{"a": "1", "a": "2"}', {"": "x"}, {"k": "a\x00b"}],
)
def test_invalid_overrides_are_refused_and_nothing_is_written(make_job, value):
    job = make_job()
    with pytest.raises(ValidationError):
        services.run_now(job=job, properties=value)
    assert not Run.objects.filter(job=job).exists()
    assert not AuditEvent.objects.filter(job=job).exists()


def test_an_http_override_is_checked_by_the_fence_like_the_jobs_url(make_job):
    job = make_job(
        kind=Job.Kind.HTTP, handler="", properties={"url": "https://example.com/", "method": "GET"}
    )
    with pytest.raises(ValidationError) as info:
        services.run_now(job=job, properties={"url": "http://169.254.169.254/latest/meta-data"})
    assert info.value.code == "fence"
    with pytest.raises(ValidationError):
        services.run_now(job=job, properties={"method": "BREW"})
    assert not Run.objects.filter(job=job).exists()


def test_only_superusers_override_an_sql_jobs_properties(make_job, staff_user, superuser, settings):
    job = make_job(kind=Job.Kind.SQL, handler="", properties={"sql": "SELECT 1"})
    with pytest.raises(refusals.ForbiddenError):
        services.run_now(job=job, user=staff_user, properties={"sql": "DELETE FROM auth_user"})
    assert not Run.objects.filter(job=job).exists()


def test_retry_reuses_the_failed_runs_overrides(make_job, staff_client, seen):
    job = make_job(handler="test.props", properties={"a": "1"})
    failed = Run.objects.create(
        job=job, scheduled_at=T0, trigger=Run.Trigger.MANUAL, status=Run.Status.FAILED, properties={"a": "9"}
    )
    response = staff_client.post(f"/runs/{failed.pk}/retry/")
    assert response.status_code in (302, 303)
    new = Run.objects.filter(job=job, status="queued").get()
    assert new.properties == {"a": "9"}
    execute_queued(now=new.run_after + timedelta(seconds=1))
    assert seen == [{"a": "9"}]


def test_api_run_with_properties(staff_api, make_job):
    job = make_job(properties={"a": "1"})
    response = staff_api.post(f"/api/jobs/{job.pk}/run", {"properties": {"a": "2", "b": True}})
    assert response.status_code == 201, response.content
    assert response.json()["properties"] == {"a": "2", "b": "true"}
    assert Run.objects.get(job=job).properties == {"a": "2", "b": "true"}
    assert staff_api.get(f"/api/runs/{response.json()['id']}").json()["properties"] == {"a": "2", "b": "true"}


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"properties": {"a": [1]}}, "invalid", "properties"),
        ({"properties": "nope"}, "invalid", "properties"),
        ({"propertys": {"a": "1"}}, "unknown_field", "propertys"),
    ],
)
def test_api_run_with_bad_properties_is_400(staff_api, make_job, body, code, field):
    job = make_job()
    response = staff_api.post(f"/api/jobs/{job.pk}/run", body)
    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json()["field"]) == (code, field)
    assert not Run.objects.filter(job=job).exists()


def test_cli_run_with_set(make_job):
    job = make_job(name="nightly", properties={"a": "1"})
    out = StringIO()
    call_command("jobs", "run", "nightly", "--set", "a=2", "--set", "b=x=y", stdout=out)
    assert "queued" in out.getvalue()
    assert Run.objects.get(job=job).properties == {"a": "2", "b": "x=y"}
    assert AuditEvent.objects.get(job=job, action="run-now").via == "cli"


@pytest.mark.parametrize("bad", ["novalue", "=x"])
def test_cli_run_with_a_bad_set_is_a_clear_error(make_job, bad):
    make_job(name="nightly")
    with pytest.raises(CommandError):
        call_command("jobs", "run", "nightly", "--set", bad, stdout=StringIO())
    assert not Run.objects.exists()


def test_console_run_now_with_overrides_is_shown_in_the_run_viewer(make_job, staff_client):
    job = make_job(properties={"a": "1"})
    page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'name="properties"' in page
    staff_client.post(f"/jobs/{job.pk}/run/", {"properties": '{"a": "override-value"}'})
    run = Run.objects.get(job=job)
    assert run.properties == {"a": "override-value"}
    viewer = staff_client.get(f"/runs/{run.pk}/").content.decode()
    assert "Property overrides" in viewer and "override-value" in viewer


def test_console_run_now_with_bad_overrides_runs_nothing(make_job, staff_client):
    job = make_job()
    response = staff_client.post(f"/jobs/{job.pk}/run/", {"properties": "{bad"}, follow=True)
    assert not Run.objects.filter(job=job).exists()
    assert "not valid" in response.content.decode()


def test_api_run_with_a_form_body_is_400_not_a_silent_plain_run(staff_api, make_job):
    job = make_job()
    response = staff_api.client.post(
        f"/api/jobs/{job.pk}/run", {"properties": '{"a": "1"}'}, headers=staff_api.headers
    )
    assert response.status_code == 400 and response.json()["code"] == "invalid_json"
    assert not Run.objects.filter(job=job).exists()


@pytest.mark.parametrize("escape", ["\\u0000", "\\udfff"])
def test_overrides_given_as_json_text_refuse_unstorable_escapes(
    both_databases, make_job, staff_client, staff_api, escape
):
    """The console's box (JSON text) and the API's `properties` as a string
    were checked for NUL and lone surrogates before parsing, so the JSON
    escapes `\\u0000` / `\\udfff` got through into the run's properties:
    stored on SQLite, a 500 on PostgreSQL."""
    job = make_job()
    text = '{"region": "eu' + escape + '"}'
    console = staff_client.post(f"/jobs/{job.pk}/run/", {"properties": text}, follow=True)
    assert "not valid" in console.content.decode() and "cannot be stored" in console.content.decode()
    # The API takes `properties` as a JSON object (a string is a shape error);
    # the same escapes inside one are refused as unstorable.
    api = staff_api.post(f"/api/jobs/{job.pk}/run", {"properties": json.loads(text)})
    assert api.status_code == 400 and api.json()["code"] == "invalid_text", api.content
    api = staff_api.post(f"/api/jobs/{job.pk}/run", {"properties": text})
    assert api.status_code == 400 and api.json()["field"] == "properties", api.content
    with pytest.raises(ValidationError) as refused:
        services.run_now(job=job, properties=text)
    assert refused.value.code == "invalid_text"
    assert not Run.objects.filter(job=job).exists()
