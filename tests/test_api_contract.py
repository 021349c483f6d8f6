"""What the Schemathesis run against the generated document found
(tests/test_api_schemathesis.py), pinned so it stays fixed without the slow
run; and the document's own promises about shapes that only the job form
can enforce."""

import pytest

from jobs.models import Job
from jobs.properties import MAX_PROPERTY_NAME_CHARS
from jobs.text import VISIBLE_PATTERN
from tests.fixtures.api import JOB, assert_error


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


@pytest.mark.parametrize("schedule", [{"cron_expression": "0 0 * * * *"}, {"schedule_type": "none"}])
@pytest.mark.parametrize(
    ("seconds", "code"), [(4, "47004"), (0, "47004"), (Job.MAX_INTERVAL_SECONDS + 1, "invalid")]
)
def test_an_interval_out_of_range_is_refused_whatever_the_schedule(
    staff_api, make_job, schedule, seconds, code
):
    # Schemathesis: a cron job took interval_seconds above the document's
    # maximum with 200 (the form reads the interval only for interval jobs).
    created = staff_api.post("/api/jobs", {**JOB, **schedule})
    assert created.status_code == 201, created.content
    url = f"/api/jobs/{created.json()['id']}"
    assert_error(staff_api.patch(url, {"interval_seconds": seconds}), 400, code, "interval_seconds")
    assert_error(
        staff_api.put(url, {**JOB, **schedule, "interval_seconds": seconds}), 400, code, "interval_seconds"
    )
    assert_error(
        staff_api.post("/api/jobs", {**JOB, **schedule, "name": "other", "interval_seconds": seconds}),
        400,
        code,
        "interval_seconds",
    )
    # In range, the interval of a job of another schedule is accepted and not kept.
    answer = staff_api.patch(url, {"interval_seconds": Job.MAX_INTERVAL_SECONDS})
    assert answer.status_code == 200, answer.content
    assert answer.json()["interval_seconds"] is None


def test_an_unknown_handler_is_refused_for_every_kind(staff_api):
    # Schemathesis: an HTTP job took a handler outside the document's enum
    # (the form cleared it without looking).
    http = {
        "name": "h",
        "kind": "http",
        "properties": {"url": "https://93.184.215.14/"},
        "cron_expression": "0 0 * * * *",
    }
    assert_error(staff_api.post("/api/jobs", {**http, "handler": "no.such"}), 400, "invalid", "handler")
    created = staff_api.post("/api/jobs", {**http, "handler": "demo.echo"})
    assert created.status_code == 201, created.content
    assert created.json()["handler"] == ""
    url = f"/api/jobs/{created.json()['id']}"
    assert_error(staff_api.patch(url, {"handler": "no.such"}), 400, "invalid", "handler")
    assert staff_api.patch(url, {"handler": ""}).status_code == 200
