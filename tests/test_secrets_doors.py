"""A reference to a secret that does not exist is refused at every door a
job is saved through (the console's form, the API, `jobs import`, JobScope,
a run's overrides), with the code unknown_secret and the secret's name; the
job, its export and its API answer keep the reference, never the value."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from jobs import secrets
from jobs.models import Job, Run
from jobs.scope import JobScope, JobValidationError
from tests.factories import job_data
from tests.fixtures.api import JOB, assert_error

pytestmark = pytest.mark.django_db
VALUE = "pa55-w0rd-zz9"
REFERENCE = "Bearer {{ secret.api.token }}"


def test_the_console_form_refuses_and_saves_nothing(staff_client):
    response = staff_client.post("/jobs/new/", job_data(properties=json.dumps({"auth": REFERENCE})))
    assert response.status_code == 200
    assert "No secret named “api.token” exists" in response.content.decode()
    assert not Job.objects.filter(name="report").exists()


def test_the_api_refuses_with_a_coded_400_and_answers_the_reference(staff_api):
    body = assert_error(
        staff_api.post("/api/jobs", {**JOB, "properties": {"auth": REFERENCE}}), 400, "unknown_secret"
    )
    assert "api.token" in body["message"]
    assert not Job.objects.filter(name=JOB["name"]).exists()
    secrets.set_secret(name="api.token", value=VALUE, via="cli")
    response = staff_api.post("/api/jobs", {**JOB, "properties": {"auth": REFERENCE}})
    assert response.status_code == 201, response.content
    assert response.json()["properties"] == {"auth": REFERENCE}
    listed = staff_api.get("/api/jobs?include=properties").content.decode()
    assert "secret.api.token" in listed and VALUE not in listed


def test_an_http_job_s_url_field_is_refused_under_its_own_name(staff_api, settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]
    spec = {**JOB, "kind": "http", "handler": "", "properties": {"url": "http://127.0.0.2/?k={{ secret.k }}"}}
    assert_error(staff_api.post("/api/jobs", spec), 400, "unknown_secret", "properties.url")


def test_jobs_import_refuses_and_export_keeps_the_reference(tmp_path):
    spec = {
        "name": "nightly",
        "handler": "demo.echo",
        "cron_expression": "30 2 * * *",
        "properties": {"auth": REFERENCE},
    }
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([spec]))
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("jobs", "import", str(path), stdout=StringIO(), stderr=err)
    assert "unknown_secret" in err.getvalue() and "api.token" in err.getvalue()
    assert not Job.objects.filter(name="nightly").exists()
    secrets.set_secret(name="api.token", value=VALUE, via="cli")
    call_command("jobs", "import", str(path), stdout=StringIO(), stderr=StringIO())
    out = StringIO()
    call_command("jobs", "export", "nightly", "--with-secrets", stdout=out)
    assert REFERENCE in out.getvalue() and VALUE not in out.getvalue()


def test_jobscope_refuses():
    from jobs.handlers import JobHandler, registry

    scope = JobScope("billing")
    scope.handler("tick")(type("Tick", (JobHandler,), {"run": lambda self, ctx: None}))
    try:
        with pytest.raises(JobValidationError) as info:
            scope.create(
                name="tick", handler="tick", cron_expression="0 * * * * *", properties={"auth": REFERENCE}
            )
    finally:
        registry.unregister("billing.tick")
    assert [e["code"] for e in info.value.errors] == ["unknown_secret"], info.value.errors


def test_a_run_s_overrides_are_refused_too(staff_api, make_job):
    job = make_job()
    response = staff_api.post(f"/api/jobs/{job.pk}/run", {"properties": {"auth": REFERENCE}})
    assert_error(response, 400, "unknown_secret", "properties")
    assert not Run.objects.filter(job=job).exists()
