"""Credentials typed in clear (HTTP headers Authorization, Cookie, X-Api-Key;
any header, property or variable named with token, secret, password or key)
are masked for users without edit rights: on the job page, in the export
and in the API. Staff, who may edit the job, see them; references are
shown as written to everyone."""

import json

import pytest

from jobs import secrets, services
from jobs.models import Job

pytestmark = pytest.mark.django_db
CLEAR = "Bearer clear-7x9q"
PROPERTIES = {
    "headers": f"Authorization: {CLEAR}\nAccept: text/plain",
    "env": json.dumps({"DB_PASSWORD": "pw-clear-3k", "REGION": "eu"}),
    "api_key": "key-clear-8m",
    "region": "eu-west",
    "auth": "{{ secret.ref }}",
}
HIDDEN = ("clear-7x9q", "pw-clear-3k", "key-clear-8m")


def test_mask_credentials_hides_values_by_name_and_keeps_references():
    shown = secrets.mask_credentials(
        {**PROPERTIES, "headers2": "x", "password": "{{ secret.ref }}", "Cookie": "c=1"}
    )
    assert shown["headers"] == "Authorization: ****\nAccept: text/plain"
    assert json.loads(shown["env"]) == {"DB_PASSWORD": "****", "REGION": "eu"}
    assert shown["api_key"] == "****" and shown["Cookie"] == "****"
    assert shown["password"] == "{{ secret.ref }}", "a reference is no credential"
    assert (shown["region"], shown["headers2"]) == ("eu-west", "x")
    header_json = secrets.mask_credentials({"headers": json.dumps({"X-Api-Key": "k-1", "X-Trace": "t"})})
    assert json.loads(header_json["headers"]) == {"X-Api-Key": "****", "X-Trace": "t"}


@pytest.fixture
def job(make_job):
    secrets.set_secret(name="ref", value="stored-value", via="cli")
    return make_job(name="creds", properties=PROPERTIES)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("{{ secret.api_token }}", True),
        ("Bearer {{ secret.api_token }}", True),
        ("{{ env:USER }}:{{ secret.pw }}", True),
        ("Bearer REALVALUE {{ env:X }}", False),
        ("session=REALVALUE; x={{ secret.a }}", False),
        ("REALVALUE", False),
    ],
)
def test_only_a_value_made_of_references_is_shown_beside_a_credential_name(value, shown):
    """Text typed beside a reference may be a credential: it is masked, and
    the strict mode takes it as typed in clear."""
    masked = secrets.mask_credentials({"headers": f"Authorization: {value}"})["headers"]
    assert (masked == f"Authorization: {value}") is shown
    assert (secrets.clear_credentials({"headers": f"Authorization: {value}"}) == []) is shown


def test_a_viewer_sees_masked_values_on_the_job_page(viewer_client, job):
    page = viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Authorization: ****" in page and "{{ secret.ref }}" in page
    assert not any(value in page for value in HIDDEN)


def test_a_viewer_sees_masked_values_in_the_audit_trail(viewer_client, staff_user, job):
    loaded = Job.objects.get(pk=job.pk)
    loaded.properties = {**PROPERTIES, "api_key": "key-clear-9n"}
    services.save_job(job=loaded, user=staff_user)
    page = viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "key-clear-9n" not in page and not any(value in page for value in HIDDEN)


def test_staff_see_the_values_they_may_edit(staff_client, job):
    page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "clear-7x9q" in page


def test_a_viewer_s_export_and_api_answers_are_masked(viewer_client, viewer_api, staff_api, job):
    exported = viewer_client.get("/jobs/export.json").content.decode()
    assert "{{ secret.ref }}" in exported and not any(value in exported for value in HIDDEN)
    for answer in (viewer_api.get(f"/api/jobs/{job.pk}"), viewer_api.get("/api/jobs?include=properties")):
        text = answer.content.decode()
        assert answer.status_code == 200 and "****" in text
        assert not any(value in text for value in HIDDEN)
    assert "clear-7x9q" in staff_api.get(f"/api/jobs/{job.pk}").content.decode()


@pytest.mark.parametrize(
    ("properties", "field"),
    [
        ({"api_token": "clear"}, "api_token"),
        ({"headers": "Authorization: Bearer clear"}, "headers"),
        ({"headers": json.dumps({"X-Api-Key": "clear"})}, "headers"),
        ({"env": json.dumps({"DB_PASSWORD": "clear"})}, "env"),
    ],
)
def test_the_strict_mode_refuses_credentials_typed_in_clear(staff_api, settings, properties, field):
    from tests.fixtures.api import JOB, assert_error

    settings.JOBS_REQUIRE_SECRET_REFERENCES = True
    body = assert_error(
        staff_api.post("/api/jobs", {**JOB, "properties": properties}), 400, "secret_reference_required"
    )
    assert "JOBS_REQUIRE_SECRET_REFERENCES" in body["message"]
    assert not Job.objects.filter(name=JOB["name"]).exists()
    settings.JOBS_REQUIRE_SECRET_REFERENCES = False
    assert staff_api.post("/api/jobs", {**JOB, "properties": properties}).status_code == 201


def test_the_strict_mode_takes_references(staff_api, settings):
    from tests.fixtures.api import JOB

    settings.JOBS_REQUIRE_SECRET_REFERENCES = True
    secrets.set_secret(name="tok", value="v", via="cli")
    properties = {
        "api_token": "{{ secret.tok }}",
        "headers": "Authorization: Bearer {{ env:TOK }}",
        "region": "eu",
    }
    assert staff_api.post("/api/jobs", {**JOB, "properties": properties}).status_code == 201


def test_a_run_s_overrides_are_masked_for_viewers(viewer_client, viewer_api, staff_api, make_job):
    from jobs.models import Run

    job = make_job(name="overridden")
    run = Run.objects.create(
        job=job, scheduled_at=job.created_at, trigger="manual", properties={"api_key": "key-clear-8m"}
    )
    for answer in (
        viewer_client.get(f"/runs/{run.pk}/"),
        viewer_api.get(f"/api/runs/{run.pk}"),
        viewer_api.get("/api/runs"),
        viewer_api.get(f"/api/jobs/{job.pk}/runs"),
        viewer_api.get("/api/dashboard"),
    ):
        assert answer.status_code == 200
        assert "key-clear-8m" not in answer.content.decode()
    assert "key-clear-8m" in staff_api.get(f"/api/runs/{run.pk}").content.decode()
