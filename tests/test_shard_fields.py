"""A job's `shards` and `broadcast` through every door: the form's coded
refusals (47036-47039) that save nothing, the API's 400s and answers, the
console's form, jobs as code and the audit trail."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from jobs import pools, services
from jobs.forms import JobForm
from jobs.models import AuditEvent, Job
from tests.factories import job_data
from tests.fixtures.api import JOB, assert_error

pytestmark = pytest.mark.django_db


def codes(**fields) -> dict:
    form = JobForm(data=job_data(**fields))
    assert not form.is_valid()
    return {error["field"]: error["code"] for error in form.error_list()}


def test_the_form_refuses_what_cannot_split_a_fire_each_with_its_code():
    pools.save_pool(name="heavy", size=2)
    assert codes(shards="0") == {"shards": "47036"}
    assert codes(shards="1001") == {"shards": "47036"}
    assert codes(shards="-5") == {"shards": "47036"}
    assert codes(shards="2", broadcast="on") == {"broadcast": "47037"}
    assert codes(shards="4", overlap_policy="queue_one") == {"overlap_policy": "47038"}
    assert codes(broadcast="on", overlap_policy="allow", max_parallel="2") == {"overlap_policy": "47038"}
    assert codes(shards="4", pool="heavy") == {"pool": "47039"}
    assert codes(broadcast="on", overlap_policy="replace", pool="heavy") == {
        "overlap_policy": "47038",
        "pool": "47039",
    }
    # Not split, the other policies and pools are as they always were.
    assert JobForm(data=job_data(shards="1", overlap_policy="queue_one", pool="heavy")).is_valid()


def test_a_sharded_job_and_a_broadcast_job_save_with_their_defaults():
    form = JobForm(data=job_data(shards="1000"))
    assert form.is_valid(), form.errors
    job = services.save_job(job=form.save(commit=False))
    job.refresh_from_db()
    assert (job.shards, job.broadcast, job.overlap_policy) == (1000, False, "skip")
    form = JobForm(data=job_data(name="everywhere", broadcast="on"))
    assert form.is_valid(), form.errors
    assert (form.cleaned_data["shards"], form.cleaned_data["broadcast"]) == (1, True)


def test_the_api_answers_a_coded_400_and_saves_nothing(staff_api):
    assert_error(staff_api.post("/api/jobs", {**JOB, "shards": 0}), 400, "47036", "shards")
    assert_error(staff_api.post("/api/jobs", {**JOB, "shards": 1001}), 400, "47036", "shards")
    assert_error(
        staff_api.post("/api/jobs", {**JOB, "shards": 3, "broadcast": True}), 400, "47037", "broadcast"
    )
    assert_error(
        staff_api.post("/api/jobs", {**JOB, "broadcast": True, "overlap_policy": "queue_one"}),
        400,
        "47038",
        "overlap_policy",
    )
    assert not Job.objects.filter(builtin=False).exists()
    made = staff_api.post("/api/jobs", {**JOB, "shards": 8})
    assert made.status_code == 201, made.content
    assert (made.json()["shards"], made.json()["broadcast"]) == (8, False)
    job_id = made.json()["id"]
    assert_error(staff_api.patch(f"/api/jobs/{job_id}", {"shards": 5000}), 400, "47036", "shards")
    assert Job.objects.get(pk=job_id).shards == 8
    assert (
        staff_api.patch(f"/api/jobs/{job_id}", {"shards": 1, "broadcast": True}).json()["broadcast"] is True
    )


def test_the_api_document_states_the_fields_and_their_range(anon_api):
    document = anon_api.get("/api/schema").json()
    schemas = document["components"]["schemas"]
    shards = schemas["JobCreate"]["properties"]["shards"]
    assert (shards["minimum"], shards["maximum"]) == (1, 1000)
    assert "47036" in shards["description"]
    assert {"shards", "broadcast"} <= set(schemas["Job"]["required"])
    assert {"shard_index", "shard_total", "node"} <= set(schemas["Run"]["required"])


def test_the_console_form_shows_the_fields_and_a_refusal(staff_client):
    page = staff_client.get("/jobs/new/")
    assert b'name="shards"' in page.content and b'name="broadcast"' in page.content
    answer = staff_client.post("/jobs/new/", job_data(shards="2", broadcast="on"))
    assert answer.status_code == 200
    assert "A job is either sharded or broadcast" in answer.content.decode()
    assert not Job.objects.filter(builtin=False).exists()


def test_jobs_as_code_and_the_audit_trail_carry_the_fields(tmp_path):
    source = tmp_path / "jobs.json"
    source.write_text(
        json.dumps([{"name": "split", "handler": "demo.echo", "cron_expression": "@daily", "shards": 6}])
    )
    call_command("jobs", "import", str(source), stdout=StringIO(), stderr=StringIO())
    job = Job.objects.get(name="split")
    assert job.shards == 6
    out = StringIO()
    call_command("jobs", "export", stdout=out)
    (spec,) = [spec for spec in json.loads(out.getvalue()) if spec["name"] == "split"]
    assert (spec["shards"], spec["broadcast"]) == (6, False)
    source.write_text(json.dumps([{**spec, "shards": 1, "broadcast": True}]))
    call_command("jobs", "import", str(source), stdout=StringIO(), stderr=StringIO())
    (changes,) = AuditEvent.objects.filter(job=job, action="edit").values_list("changes", flat=True)
    assert changes == {"shards": [6, 1], "broadcast": [False, True]}
