"""What the Schemathesis run against the generated document found
(tests/test_api_schemathesis.py), pinned so it stays fixed without the slow
run; and the document's own promises about shapes that only the job form
can enforce."""

import pytest

from jobs.forms import MAX_PROPERTY_NAME_CHARS
from jobs.text import VISIBLE_PATTERN
from tests.test_api import JOB, assert_error


def test_renaming_a_job_that_runs_after_another_is_saved(staff_api, make_job):
    # Renaming a job with upstreams was a 500 (TypeError in the cycle check).
    make_job(name="upstream")
    created = staff_api.post("/api/jobs", {**JOB, "name": "downstream", "after": ["upstream"]}).json()
    response = staff_api.patch(f"/api/jobs/{created['id']}", {"name": "renamed", "after": ["upstream"]})
    assert response.status_code == 200, response.content
    assert response.json()["name"] == "renamed"


def test_renaming_a_job_to_run_after_itself_is_47008(staff_api, make_job):
    job = make_job(name="loner")
    response = staff_api.patch(f"/api/jobs/{job.pk}", {"name": "0", "after": ["0"]})
    assert_error(response, 400, "47008", "after")


def test_a_local_time_with_an_offset_in_seconds_fits_the_document(staff_api, anon_api):
    # Schemathesis: Moscow's 1901 offset (+02:30:17) is no RFC 3339 date-time,
    # which the document promised for `local`.
    jsonschema = pytest.importorskip("jsonschema")
    document = anon_api.get("/api/schema").json()
    response = staff_api.post(
        "/api/cron/preview", {"expression": "0 30 3 * * MON-FRI", "timezone": "W-SU", "after": "1901-01-01"}
    )
    assert response.status_code == 200
    assert response.json()["times"][0]["local"].endswith("+02:30:17")
    validator = jsonschema.Draft202012Validator(
        {"$ref": "#/components/schemas/Preview", "components": document["components"]},
        format_checker=jsonschema.FormatChecker(),
    )
    validator.validate(response.json())


def test_a_whole_number_written_with_a_point_is_an_integer(staff_api):
    # JSON Schema's integer includes 2.0; the API refused it (Schemathesis).
    task = staff_api.post("/api/tasks", {"handler": "demo.echo", "key": "k", "max_retries": 2.0})
    assert task.status_code == 201, task.content
    job = staff_api.post("/api/jobs", {**JOB, "timeout_seconds": 30.0})
    assert job.status_code == 201, job.content
    assert job.json()["timeout_seconds"] == 30
    assert_error(staff_api.post("/api/jobs", {**JOB, "name": "x", "timeout_seconds": 30.5}), 400, "invalid")


def test_property_names_are_described_as_the_form_reads_them(anon_api):
    # The document allowed any name ("" included) where the form wants one
    # that is not blank after trimming.
    schemas = anon_api.get("/api/schema").json()["components"]["schemas"]
    for name in ("JobInput", "JobCreate", "RunNow", "TaskInput"):
        (bag, _null) = schemas[name]["properties"]["properties"]["anyOf"]
        assert bag["propertyNames"] == {"maxLength": MAX_PROPERTY_NAME_CHARS, "pattern": VISIBLE_PATTERN}, (
            name
        )
        assert "patternProperties" not in bag
