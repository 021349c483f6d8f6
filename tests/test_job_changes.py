"""Who may change which job, and what a save does to the schedule. The
rules live in jobs/refusals.py (check_job_change), jobs/services.py
(save_job_if_changed) and Job.mark_saved; these tests go
through every door: the API, the console and the service."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs import refusals, services
from jobs.forms import JobForm
from jobs.models import AuditEvent, Job, Run
from jobs.serializers import spec_to_form_data

SQL_JOB = dict(kind=Job.Kind.SQL, handler="", properties={"sql": "SELECT 1"})
HTTP_JOB = dict(kind=Job.Kind.HTTP, handler="", properties={"url": "https://10.0.0.1/hook", "method": "GET"})


def assert_refused(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    assert set(body) >= {"code", "message", "field"}


# -- an SQL job is a superuser's -------------------------------------------


@pytest.fixture
def sql_job(make_job, superuser, settings):
    settings.JOBS_SQL_ENABLED = True
    return make_job(name="report", owner=superuser, **SQL_JOB)


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("patch", {"kind": "python", "handler": "demo.echo"}),
        ("patch", {"description": "just a note"}),
        ("put", {"name": "report", "handler": "demo.echo", "cron_expression": "0 * * * * *"}),
        (
            "put",
            {"name": "report", "kind": "python", "handler": "demo.echo", "cron_expression": "0 * * * * *"},
        ),
    ],
)
def test_a_non_superuser_cannot_change_an_sql_job_over_the_api(staff_api, sql_job, method, body):
    response = getattr(staff_api, method)(f"/api/jobs/{sql_job.pk}", body)
    assert_refused(response, 403, "forbidden")
    sql_job.refresh_from_db()
    assert (sql_job.kind, sql_job.properties, sql_job.version) == ("sql", {"sql": "SELECT 1"}, 1)
    assert not AuditEvent.objects.filter(job=sql_job).exists()


@pytest.mark.parametrize("path", ["toggle"])
def test_a_non_superuser_cannot_pause_or_resume_an_sql_job(staff_api, sql_job, path):
    assert_refused(staff_api.post(f"/api/jobs/{sql_job.pk}/{path}"), 403, "forbidden")
    sql_job.refresh_from_db()
    assert sql_job.state == Job.State.ENABLED


def test_a_non_superuser_cannot_delete_an_sql_job(staff_api, sql_job):
    assert_refused(staff_api.delete(f"/api/jobs/{sql_job.pk}"), 403, "forbidden")
    sql_job.refresh_from_db()
    assert sql_job.deleted_at is None


def test_a_superuser_may_turn_an_sql_job_into_a_python_job(superuser_api, sql_job):
    response = superuser_api.patch(f"/api/jobs/{sql_job.pk}", {"kind": "python", "handler": "demo.echo"})
    assert response.status_code == 200, response.content
    assert response.json()["kind"] == "python"


def test_a_non_superuser_cannot_change_an_sql_job_in_the_console(staff_client, sql_job):
    data = {
        "name": "report",
        "kind": "python",
        "handler": "demo.echo",
        "schedule_type": "cron",
        "cron_expression": "0 * * * * *",
        "timezone": "UTC",
        "version": sql_job.version,
    }
    response = staff_client.post(reverse("jobs:job_edit", args=[sql_job.pk]), data)
    assert response.status_code == 200
    assert "Only superusers can create or edit SQL jobs." in response.content.decode()
    sql_job.refresh_from_db()
    assert sql_job.kind == "sql"


def test_the_job_form_refuses_a_non_superusers_change_of_an_sql_job(staff_user, sql_job):
    data = spec_to_form_data({"kind": "python", "handler": "demo.echo"}, instance=sql_job)
    form = JobForm(data, instance=sql_job, user=staff_user)
    assert not form.is_valid()
    assert ("forbidden", "kind") in [(e["code"], e["field"]) for e in form.error_list()]


def test_the_console_bulk_resume_skips_an_sql_job_of_a_non_superuser(staff_client, sql_job, make_job):
    services.pause_job(job=sql_job)  # a trusted caller
    other = make_job(name="other", state=Job.State.PAUSED)
    staff_client.post(reverse("jobs:job_bulk"), {"action": "resume", "ids": [sql_job.pk, other.pk]})
    sql_job.refresh_from_db()
    other.refresh_from_db()
    assert (sql_job.state, other.state) == (Job.State.PAUSED, Job.State.ENABLED)


# -- demo mode refuses every door that would run an HTTP or SQL job ------------


@pytest.fixture
def demo_http_job(make_job, settings):
    job = make_job(name="hook", **HTTP_JOB)
    services.pause_job(job=job)
    settings.DEMO_MODE = True
    job.refresh_from_db()
    return job


def test_demo_mode_refuses_resuming_an_http_job_with_the_toggle(staff_api, demo_http_job):
    assert_refused(staff_api.post(f"/api/jobs/{demo_http_job.pk}/toggle"), 403, "demo_mode")
    demo_http_job.refresh_from_db()
    assert demo_http_job.state == Job.State.PAUSED and demo_http_job.next_fire_at is None


@pytest.mark.parametrize(
    ("method", "body"),
    [
        ("patch", {"kind": "python", "handler": "demo.echo"}),
        ("patch", {"description": "changed"}),
        ("patch", {"state": "enabled"}),
        ("put", {"name": "hook", "handler": "demo.echo", "cron_expression": "0 * * * * *"}),
    ],
)
def test_demo_mode_refuses_editing_an_http_job_over_the_api(staff_api, demo_http_job, method, body):
    response = getattr(staff_api, method)(f"/api/jobs/{demo_http_job.pk}", body)
    assert_refused(response, 403, "demo_mode")
    demo_http_job.refresh_from_db()
    assert (demo_http_job.kind, demo_http_job.state, demo_http_job.version) == ("http", "paused", 2)


def test_demo_mode_refuses_resuming_an_http_job_in_the_console(staff_client, demo_http_job):
    staff_client.post(reverse("jobs:job_resume", args=[demo_http_job.pk]))
    staff_client.post(reverse("jobs:job_bulk"), {"action": "resume", "ids": [demo_http_job.pk]})
    demo_http_job.refresh_from_db()
    assert demo_http_job.state == Job.State.PAUSED


def test_demo_mode_refuses_run_now_of_an_http_job(staff_api, demo_http_job):
    assert_refused(staff_api.post(f"/api/jobs/{demo_http_job.pk}/run"), 403, "demo_mode")
    assert not Run.objects.exists()


def test_demo_mode_refuses_resuming_in_the_service(demo_http_job, staff_user):
    with pytest.raises(refusals.DemoModeError):
        services.resume_job(job=demo_http_job, user=staff_user)


def test_demo_mode_still_lets_python_jobs_be_paused_and_edited(staff_api, make_job, settings):
    """Resuming is refused whatever the kind (tests/test_demo_mode.py)."""
    settings.DEMO_MODE = True
    job = make_job(name="py")
    assert staff_api.post(f"/api/jobs/{job.pk}/toggle").json()["state"] == "paused"
    assert staff_api.patch(f"/api/jobs/{job.pk}", {"description": "x"}).status_code == 200


# -- a save does not move an unchanged schedule --------------------------------

NOW = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)


def _save(job, now, **changes):
    data = spec_to_form_data(changes, instance=job)
    form = JobForm(data, instance=job, user=None)
    assert form.is_valid(), form.errors
    return services.save_job(job=form.save(commit=False), now=now)


def test_editing_an_interval_job_keeps_last_fire_plus_interval(make_job):
    job = make_job(schedule_type="interval", cron_expression="", interval_seconds=3600)
    last = NOW - timedelta(minutes=10)
    Job.objects.filter(pk=job.pk).update(last_fire_at=last, next_fire_at=last + timedelta(hours=1))
    job.refresh_from_db()
    saved = _save(job, NOW, description="only the text")
    assert saved.next_fire_at == last + timedelta(hours=1)


def test_changing_the_interval_counts_from_the_last_fire(make_job):
    job = make_job(schedule_type="interval", cron_expression="", interval_seconds=3600)
    last = NOW - timedelta(minutes=10)
    Job.objects.filter(pk=job.pk).update(last_fire_at=last, next_fire_at=last + timedelta(hours=1))
    job.refresh_from_db()
    assert _save(job, NOW, interval_seconds=1800).next_fire_at == last + timedelta(minutes=30)
    # Already past: now + the interval, no replay.
    job.refresh_from_db()
    assert _save(job, NOW, interval_seconds=300).next_fire_at == NOW + timedelta(minutes=5)


def test_editing_a_cron_job_keeps_its_next_fire(make_job):
    # Due a minute ago and not claimed yet: the save must not skip it.
    job = make_job(cron_expression="0 59 11 * * *", timezone="Europe/Berlin")
    planned = NOW - timedelta(minutes=1)
    Job.objects.filter(pk=job.pk).update(next_fire_at=planned)
    job.refresh_from_db()
    assert _save(job, NOW, description="new text", max_retries=2).next_fire_at == planned


def test_a_new_cron_expression_or_zone_moves_the_next_fire(make_job):
    job = make_job(cron_expression="0 0 3 * * *", timezone="Europe/Berlin")
    Job.objects.filter(pk=job.pk).update(next_fire_at=datetime(2026, 5, 5, 1, 0, tzinfo=UTC))
    job.refresh_from_db()
    assert _save(job, NOW, timezone="UTC").next_fire_at == datetime(2026, 5, 5, 3, 0, tzinfo=UTC)
    job.refresh_from_db()
    assert _save(job, NOW, cron_expression="0 0 11 * * *").next_fire_at == datetime(
        2026, 5, 4, 11, 0, tzinfo=UTC
    )


def test_an_api_patch_of_the_description_keeps_the_next_fire(staff_api, make_job):
    planned = timezone.now().replace(microsecond=0) + timedelta(minutes=20)
    job = make_job(schedule_type="interval", cron_expression="", interval_seconds=3600, next_fire_at=planned)
    response = staff_api.patch(f"/api/jobs/{job.pk}", {"description": "edited later"})
    assert response.status_code == 200
    job.refresh_from_db()
    assert job.next_fire_at == planned


def test_demo_mode_refuses_resuming_an_http_job_from_the_command_line(demo_http_job):
    from io import StringIO

    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="disabled in demo mode"):
        call_command("jobs", "resume", "hook", stdout=StringIO(), stderr=StringIO())
    demo_http_job.refresh_from_db()
    assert demo_http_job.state == Job.State.PAUSED


def test_a_refused_job_form_spends_no_query_on_the_models_constraints(db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    data = spec_to_form_data(
        {"name": "nightly", "kind": "python", "handler": "demo.echo", "cron_expression": "nope"}
    )
    with CaptureQueriesContext(connection) as queries:
        form = JobForm(data, user=None)
        assert not form.is_valid()
    assert "cron_expression" in form.errors
    # Django's constraint checks select a value named "_check"; the name's own
    # uniqueness check (clean_name) still runs.
    assert [q["sql"] for q in queries if "_check" in q["sql"]] == []


def test_a_constraint_the_form_does_not_check_still_refuses_the_save(db, monkeypatch):
    # A drift between the form and the model's constraints: the form lets a
    # timeout over the maximum through, the job_timeout_range constraint
    # refuses it.
    monkeypatch.setattr(
        JobForm, "clean_timeout_seconds", lambda self: self.cleaned_data.get("timeout_seconds")
    )
    data = spec_to_form_data(
        {
            "name": "nightly",
            "kind": "python",
            "handler": "demo.echo",
            "cron_expression": "0 0 * * * *",
            "timeout_seconds": Job.MAX_TIMEOUT_SECONDS + 1,
        }
    )
    form = JobForm(data, user=None)
    assert not form.is_valid()
    assert "job_timeout_range" in str(form.errors), form.errors
