"""The API's overlap fields, pools and backfills: coded refusals that write
nothing, and the answers' shapes."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Backfill, Job, Pool, Run
from tests.fixtures.api import JOB, assert_error

pytestmark = pytest.mark.django_db


def test_pool_size_zero_is_a_coded_400_and_saves_nothing(staff_api):
    assert_error(staff_api.put("/api/pools/heavy", {"size": 0}), 400, "47020", "size")
    assert not Pool.objects.exists()


def test_pools_are_created_listed_resized_and_deleted_by_admins(staff_api, viewer_api):
    assert staff_api.put("/api/pools/heavy", {"size": 2}).json()["size"] == 2
    assert staff_api.put("/api/pools/heavy", {"size": 3, "description": "big"}).status_code == 200
    assert viewer_api.get("/api/pools").json()["results"] == [
        {"name": "heavy", "size": 3, "description": "big", "live": 0, "jobs": 0}
    ]
    assert_error(viewer_api.put("/api/pools/heavy", {"size": 9}), 403, "forbidden")
    assert Pool.objects.get().size == 3
    assert staff_api.delete("/api/pools/heavy").status_code == 204
    assert_error(staff_api.delete("/api/pools/heavy"), 404, "not_found")


def test_a_job_takes_its_overlap_fields_and_a_known_pool(staff_api):
    staff_api.put("/api/pools/heavy", {"size": 2})
    body = {**JOB, "overlap_policy": "allow", "max_parallel": 3, "pool": "heavy"}
    answer = staff_api.post("/api/jobs", body).json()
    assert (answer["overlap_policy"], answer["max_parallel"], answer["pool"]) == ("allow", 3, "heavy")
    assert_error(staff_api.delete("/api/pools/heavy"), 409, "47022", "name")

    assert_error(staff_api.post("/api/jobs", {**JOB, "name": "x", "pool": "nope"}), 400, "47023", "pool")
    assert_error(staff_api.post("/api/jobs", {**JOB, "name": "y", "max_parallel": 0}), 400)
    assert Job.objects.filter(builtin=False).count() == 1


def test_backfill_dry_run_counts_then_creates_runs(staff_api, make_job):
    job = make_job(cron_expression="0 0 * * * *")
    end = timezone.now().replace(minute=30, second=0, microsecond=0) - timedelta(hours=1)
    start = end - timedelta(hours=5)
    body = {"range_start": start.isoformat(), "range_end": end.isoformat()}
    plan = staff_api.post(f"/api/jobs/{job.pk}/backfill", {**body, "dry_run": True})
    assert plan.status_code == 200 and plan.json() == {"fires": 5, "succeeded": 0}
    assert not Run.objects.exists()

    made = staff_api.post(f"/api/jobs/{job.pk}/backfill", {**body, "parallel": 2})
    assert made.status_code == 201, made.content
    answer = made.json()
    assert (answer["fires"], answer["parallel"], answer["runs"]["waiting"]) == (5, 2, 5)
    assert set(Run.objects.values_list("trigger", flat=True)) == {"backfill"}

    cancelled = staff_api.post(f"/api/backfills/{answer['id']}/cancel").json()
    assert cancelled["runs"]["cancelled"] == 5 and cancelled["cancelled_at"]


def test_backfill_bad_input_is_coded_and_writes_nothing(staff_api, make_job):
    job = make_job(cron_expression="0 * * * * *")
    now = timezone.now()
    url = f"/api/jobs/{job.pk}/backfill"
    too_many = {"range_start": (now - timedelta(days=30)).isoformat(), "range_end": now.isoformat()}
    assert_error(staff_api.post(url, too_many), 400, "47024", "range_end")
    future = {"range_start": now.isoformat(), "range_end": (now + timedelta(hours=1)).isoformat()}
    assert_error(staff_api.post(url, future), 400, "47025", "range_end")
    assert_error(staff_api.post(url, {"range_start": "yesterday", "range_end": now.isoformat()}), 400)
    assert not Backfill.objects.exists() and not Run.objects.exists()


def test_viewers_may_not_backfill(viewer_api, make_job):
    job = make_job()
    now = timezone.now()
    body = {"range_start": (now - timedelta(minutes=5)).isoformat(), "range_end": now.isoformat()}
    assert_error(viewer_api.post(f"/api/jobs/{job.pk}/backfill", body), 403)
    assert not Run.objects.exists()


def test_overlap_fields_round_trip_through_export_and_import_and_are_audited(tmp_path, staff_user):
    from io import StringIO

    from django.core.management import call_command

    from jobs import imports, pools, services
    from jobs.forms import JobForm
    from jobs.models import AuditEvent
    from tests.factories import edit_form_data, job_data

    pools.save_pool(name="heavy", size=2)
    form = JobForm(data=job_data(name="nightly"))
    assert form.is_valid(), form.errors
    job = services.save_job(job=form.save(commit=False), user=staff_user)
    form = JobForm(
        data=edit_form_data(job, overlap_policy="queue_one", max_parallel="1", pool="heavy"), instance=job
    )
    assert form.is_valid(), form.errors
    services.save_job(job=form.save(commit=False), user=staff_user, expected_version=job.version)
    changes = AuditEvent.objects.filter(job=job).order_by("-pk").first().changes
    assert changes["overlap_policy"] == ["skip", "queue_one"] and changes["pool"] == ["", "heavy"]

    out = StringIO()
    call_command("jobs", "export", "nightly", stdout=out)
    (spec,) = json.loads(out.getvalue())
    assert (spec["overlap_policy"], spec["max_parallel"], spec["pool"]) == ("queue_one", 1, "heavy")
    spec.update(name="copy", overlap_policy="allow", max_parallel=4)
    imports.apply(imports.parse(json.dumps([spec]), source="test"))
    copy = Job.objects.get(name="copy")
    assert (copy.overlap_policy, copy.max_parallel, copy.pool) == ("allow", 4, "heavy")
    spec.update(name="bad", pool="missing")
    with pytest.raises(imports.ImportFailed) as failed:
        imports.apply(imports.parse(json.dumps([spec]), source="test"))
    assert failed.value.errors[0]["code"] == "47023"
    assert not Job.objects.filter(name="bad").exists()


def test_a_pool_description_that_cannot_be_stored_is_refused(staff_api):
    assert_error(staff_api.put("/api/pools/heavy", {"size": 2, "description": "a\x00b"}), 400, "invalid_text")
    assert not Pool.objects.exists()


def test_a_dry_run_checks_parallel_too(staff_api, make_job):
    job = make_job()
    now = timezone.now()
    body = {"range_start": (now - timedelta(minutes=5)).isoformat(), "range_end": now.isoformat()}
    answer = staff_api.post(f"/api/jobs/{job.pk}/backfill", {**body, "parallel": 101, "dry_run": True})
    assert_error(answer, 400, "47026", "parallel")
