"""Who may use a secret: the namespaces whose jobs may reference it (none
named: every namespace). A job of another namespace is refused at every
door it is saved through (the console, the API, `jobs import`, a run's
overrides) with the code secret_not_allowed naming the secret; a run whose
job's namespace the secret no longer allows fails with a clear error. The
namespaces are set in the console, the API and the command, and audited."""

import io
import json
import sys
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

import tests.hostile_handlers  # noqa: F401  (registers hostile.leak)
from jobs import secrets
from jobs.engine.execution.pool import HandlerRef, run_handler
from jobs.handlers.base import RunContext
from jobs.models import AuditEvent, Job, Run, Secret
from tests.factories import job_data
from tests.fixtures.api import JOB, assert_error

VALUE = "sc0ped-v4lue-77"
REFERENCE = "Bearer {{ secret.billing.token }}"


def billing_only(**kwargs):
    return secrets.set_secret(name="billing.token", value=VALUE, namespaces=["billing"], via="cli", **kwargs)


def test_a_job_of_another_namespace_may_not_reference_it(both_databases):
    from jobs.forms import JobForm

    billing_only()
    for namespace, allowed in (("billing", True), ("ops", False), ("", False)):
        form = JobForm(
            data=job_data(
                name=f"j-{namespace}", namespace=namespace, properties=json.dumps({"auth": REFERENCE})
            )
        )
        assert form.is_valid() is allowed, (namespace, form.errors)
        if not allowed:
            (error,) = form.errors.as_data()["properties"]
            assert error.code == "secret_not_allowed" and "billing.token" in error.message
    Secret.objects.filter(name="billing.token").update(namespaces=[])
    form = JobForm(data=job_data(name="j-any", namespace="ops", properties=json.dumps({"auth": REFERENCE})))
    assert form.is_valid(), form.errors


@pytest.mark.django_db
def test_the_api_and_the_console_refuse_with_the_code_and_save_nothing(staff_api, staff_client):
    billing_only()
    body = assert_error(
        staff_api.post("/api/jobs", {**JOB, "namespace": "ops", "properties": {"auth": REFERENCE}}),
        400,
        "secret_not_allowed",
    )
    assert "billing.token" in body["message"] and VALUE not in json.dumps(body)
    page = staff_client.post(
        "/jobs/new/", job_data(namespace="ops", properties=json.dumps({"auth": REFERENCE}))
    )
    assert "may not be used by jobs in namespace “ops”" in page.content.decode()
    assert not Job.objects.filter(properties__has_key="auth").exists()
    response = staff_api.post("/api/jobs", {**JOB, "namespace": "billing", "properties": {"auth": REFERENCE}})
    assert response.status_code == 201, response.content


@pytest.mark.django_db
def test_jobs_import_and_a_runs_overrides_are_refused(tmp_path, staff_api, make_job):
    billing_only()
    spec = {"name": "nightly", "handler": "demo.echo", "cron_expression": "30 2 * * *", "namespace": "ops"}
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([{**spec, "properties": {"auth": REFERENCE}}]))
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("jobs", "import", str(path), stdout=StringIO(), stderr=err)
    assert "secret_not_allowed" in err.getvalue() and "billing.token" in err.getvalue()
    job = make_job(namespace="ops")
    response = staff_api.post(f"/api/jobs/{job.pk}/run", {"properties": {"auth": REFERENCE}})
    assert_error(response, 400, "secret_not_allowed", "properties")
    assert not Run.objects.filter(job=job).exists()


def run_of(job) -> RunContext:
    now = timezone.now()
    return RunContext(
        run_id=1,
        fire_id="f",
        attempt=1,
        scheduled_at=now,
        deadline=now + timedelta(seconds=30),
        properties=dict(job.properties),
        job=job,
        job_id=job.pk,
    )


@pytest.mark.django_db
def test_a_run_fails_clearly_once_its_namespace_is_no_longer_allowed(make_job):
    secrets.set_secret(name="billing.token", value=VALUE, via="cli")
    job = make_job(
        namespace="ops", handler="hostile.leak", properties={"token": "{{ secret.billing.token }}"}
    )
    assert run_handler(run_of(job), HandlerRef("python", "hostile.leak")).status == "succeeded"
    billing_only()
    outcome = run_handler(run_of(job), HandlerRef("python", "hostile.leak"))
    assert outcome.status == "failed"
    assert "'billing.token' may not be used by jobs in namespace 'ops'" in outcome.error
    assert VALUE not in outcome.error


@pytest.mark.django_db
def test_the_namespaces_are_set_in_the_api_console_and_command_and_audited(staff_api, staff_client):
    response = staff_api.put(
        "/api/secrets/billing.token", {"value": VALUE, "namespaces": ["billing", "ops", "billing"]}
    )
    assert response.status_code == 201 and response.json()["namespaces"] == ["billing", "ops"]
    kept = staff_api.put("/api/secrets/billing.token", {"value": VALUE})
    assert kept.json()["namespaces"] == ["billing", "ops"]
    assert_error(
        staff_api.put("/api/secrets/billing.token", {"value": VALUE, "namespaces": ["Not A Namespace"]}),
        400,
        "invalid",
        "namespaces",
    )
    assert Secret.objects.get().namespaces == ["billing", "ops"]

    page = staff_client.get("/secrets/?name=billing.token").content.decode()
    assert 'value="billing, ops"' in page
    staff_client.post("/secrets/", {"name": "billing.token", "value": VALUE, "namespaces": "ops"})
    assert Secret.objects.get().namespaces == ["ops"]
    assert '<span class="tag">ops</span>' in staff_client.get("/secrets/").content.decode()

    stdin, sys.stdin = sys.stdin, io.TextIOWrapper(io.BytesIO(VALUE.encode()))
    try:
        call_command("secrets", "set", "billing.token", "--namespaces", "", stdout=StringIO())
    finally:
        sys.stdin = stdin
    assert Secret.objects.get().namespaces == []
    out = StringIO()
    call_command("secrets", "list", stdout=out)
    assert "every namespace" in out.getvalue()

    changes = [
        e.changes.get("namespaces") for e in AuditEvent.objects.filter(subject="secrets").order_by("pk")
    ]
    assert changes == [
        [None, ["billing", "ops"]],
        None,
        [["billing", "ops"], ["ops"]],
        [["ops"], []],
    ]
    assert VALUE not in json.dumps([e.changes for e in AuditEvent.objects.all()])


def test_a_list_of_namespaces_is_counted_as_sent_before_repeats_are_dropped():
    """The API document's maxItems is the list as sent: 101 items are refused
    even when they are one name repeated (Schemathesis found it accepted)."""
    from django.core.exceptions import ValidationError

    from jobs import secrets

    with pytest.raises(ValidationError, match="at most 100 namespaces"):
        secrets.check_namespaces([""] * (secrets.MAX_NAMESPACES + 1))
    assert secrets.check_namespaces(["ops", "ops"]) == ["ops"]


# -- environment secrets: the namespaces are the operator's setting -----------------

ENV_REFERENCE = "Bearer {{ env:BILLING_TOKEN }}"


def test_an_environment_secret_is_for_jobs_outside_namespaces_unless_the_setting_gives_it(
    both_databases, settings
):
    from jobs.forms import JobForm

    def valid(namespace: str) -> bool:
        form = JobForm(
            data=job_data(
                name=f"j-{namespace or 'none'}",
                namespace=namespace,
                properties=json.dumps({"auth": ENV_REFERENCE}),
            )
        )
        if not form.is_valid():
            (error,) = form.errors.as_data()["properties"]
            assert error.code == "secret_not_allowed" and "BILLING_TOKEN" in error.message
            assert "CRONBOARD_ENV_SECRET_NAMESPACES" in error.message
        return form.is_valid()

    settings.CRONBOARD_ENV_SECRET_NAMESPACES = {}
    assert [valid(ns) for ns in ("", "billing", "ops")] == [True, False, False]
    settings.CRONBOARD_ENV_SECRET_NAMESPACES = {"BILLING_TOKEN": frozenset({"billing"})}
    assert [valid(ns) for ns in ("", "billing", "ops")] == [True, True, False]
    settings.CRONBOARD_ENV_SECRET_NAMESPACES = {"BILLING_TOKEN": frozenset({"*"})}
    assert [valid(ns) for ns in ("", "billing", "ops")] == [True, True, True]


@pytest.mark.django_db
def test_the_api_refuses_an_environment_secret_the_namespace_is_not_given(staff_api, settings):
    settings.CRONBOARD_ENV_SECRET_NAMESPACES = {"BILLING_TOKEN": frozenset({"billing"})}
    body = assert_error(
        staff_api.post("/api/jobs", {**JOB, "namespace": "ops", "properties": {"auth": ENV_REFERENCE}}),
        400,
        "secret_not_allowed",
    )
    assert "BILLING_TOKEN" in body["message"]
    assert not Job.objects.filter(namespace="ops").exists()


@pytest.mark.django_db
def test_a_run_fails_clearly_when_the_setting_no_longer_gives_its_namespace(make_job, settings, monkeypatch):
    monkeypatch.setenv("CRONBOARD_SECRET_BILLING_TOKEN", VALUE)
    settings.CRONBOARD_ENV_SECRET_NAMESPACES = {"BILLING_TOKEN": frozenset({"ops"})}
    job = make_job(namespace="ops", handler="hostile.leak", properties={"token": "{{ env:BILLING_TOKEN }}"})
    assert run_handler(run_of(job), HandlerRef("python", "hostile.leak")).status == "succeeded"
    settings.CRONBOARD_ENV_SECRET_NAMESPACES = {}
    outcome = run_handler(run_of(job), HandlerRef("python", "hostile.leak"))
    assert outcome.status == "failed"
    assert "'BILLING_TOKEN' may not be used by jobs in namespace 'ops'" in outcome.error
    assert VALUE not in outcome.error
