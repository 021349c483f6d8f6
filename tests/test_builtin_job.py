"""The built-in Retention job: editable like any other job, except for what it
runs. Its kind and handler are refused in the console, the API and both
imports, with code `builtin_handler`, and a refused save changes nothing."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from jobs.models import Job
from tests.factories import edit_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def retention():
    return Job.objects.get(builtin=True, handler="cronboard.retention")


def unchanged(job: Job) -> bool:
    fresh = Job.objects.get(pk=job.pk)
    return (fresh.kind, fresh.handler, fresh.version, fresh.properties) == (
        job.kind,
        job.handler,
        job.version,
        job.properties,
    )


@pytest.mark.parametrize(
    "change",
    [
        {"handler": "demo.echo"},
        {"kind": "http", "handler": "", "url": "https://example.com/"},
    ],
)
def test_the_console_refuses_another_handler_or_kind(staff_client, retention, change):
    response = staff_client.post(
        reverse("jobs:job_edit", args=[retention.pk]), edit_form_data(retention, **change)
    )
    assert response.status_code == 200
    assert "is a built-in job: its kind and handler (cronboard.retention) cannot be changed" in (
        response.content.decode()
    )
    assert unchanged(retention)


def test_a_trusted_caller_is_refused_a_command_kind_too(settings, retention):
    from jobs.forms import JobForm
    from jobs.serializers import spec_to_form_data

    settings.JOBS_COMMAND_ENABLED = True
    data = spec_to_form_data({"kind": "command", "properties": {"command": "true"}}, instance=retention)
    form = JobForm(data, instance=retention, user=None)
    assert not form.is_valid()
    assert [(e["field"], e["code"]) for e in form.error_list()] == [("handler", "builtin_handler")]


def test_the_console_still_edits_its_schedule_and_timeout(staff_client, retention):
    response = staff_client.post(
        reverse("jobs:job_edit", args=[retention.pk]),
        edit_form_data(retention, cron_expression="0 15 4 * * ?", timeout_seconds="1800"),
    )
    assert response.status_code == 302, response.content.decode()
    fresh = Job.objects.get(pk=retention.pk)
    assert (fresh.cron_expression, fresh.timeout_seconds, fresh.handler) == (
        "0 15 4 * * ?",
        1800,
        "cronboard.retention",
    )


@pytest.mark.parametrize("method", ["patch", "put"])
def test_the_api_refuses_another_handler(staff_api, retention, method):
    body = {"handler": "demo.echo"}
    if method == "put":
        body |= {"name": retention.name, "cron_expression": retention.cron_expression}
    response = getattr(staff_api, method)(f"/api/jobs/{retention.pk}", body)
    assert response.status_code == 400, response.content
    assert (response.json()["code"], response.json()["field"]) == ("builtin_handler", "handler")
    assert unchanged(retention)


def test_the_api_refuses_another_kind(staff_api, retention):
    response = staff_api.patch(
        f"/api/jobs/{retention.pk}", {"kind": "http", "properties": {"url": "https://example.com/"}}
    )
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "builtin_handler"
    assert unchanged(retention)


def test_the_cli_import_refuses_another_handler(tmp_path, retention):
    path = tmp_path / "jobs.json"
    path.write_text(
        json.dumps(
            [{"name": "Retention", "handler": "demo.echo", "cron_expression": retention.cron_expression}]
        )
    )
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("jobs", "import", str(path), stdout=StringIO(), stderr=err)
    assert "builtin_handler" in err.getvalue() and "built-in job" in err.getvalue()
    assert unchanged(retention)


def test_the_console_import_refuses_another_handler(staff_client, retention):
    text = json.dumps(
        [{"name": "Retention", "handler": "demo.echo", "cron_expression": retention.cron_expression}]
    )
    response = staff_client.post(reverse("jobs:job_import"), {"text": text, "apply": "1"})
    assert response.status_code == 200
    assert "cannot be changed" in response.content.decode()
    assert unchanged(retention)
