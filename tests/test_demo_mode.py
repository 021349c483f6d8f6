"""Demo mode closes every outbound and global door: alert channels and their
tests, the test email, settings, imports, resuming a paused job and
schedules faster than once a minute are refused at every door (console,
API, service) with "disabled in demo mode" (403 `demo_mode` over the API),
and nothing is written."""

import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from jobs import channels, imports, refusals, services
from jobs.config import get_setting, set_setting
from jobs.models import AlertChannel, AuditEvent, Job

pytestmark = pytest.mark.django_db

HOOK = "json://127.0.0.1:9/hook"


@pytest.fixture(autouse=True)
def hook(db):
    """A named channel sending to HOOK (made by an administrator before the demo)."""
    return AlertChannel.objects.create(name="hook", url=channels.encrypt(HOOK))


def assert_refused(response, field=None):
    assert response.status_code == 403, response.content
    body = response.json()
    assert body["code"] == "demo_mode" and "disabled in demo mode" in body["message"]
    if field is not None:
        assert body["field"] == field


@pytest.fixture
def demo(settings, loopback_fence_open):
    settings.DEMO_MODE = True
    return settings


@pytest.fixture
def paused_job(make_job):
    job = make_job(name="py")
    services.pause_job(job=job)
    job.refresh_from_db()
    return job


# -- alert channels --------------------------------------------------------------------


def test_the_api_refuses_adding_a_channel_to_a_job(staff_api, make_job, demo):
    job = make_job(name="py")
    assert_refused(staff_api.patch(f"/api/jobs/{job.pk}", {"alert_channels": ["hook"]}), "alert_channels")
    job.refresh_from_db()
    assert job.alert_channels == [] and job.version == 1


def test_the_api_refuses_a_new_job_with_channels(staff_api, demo):
    body = {"name": "new", "handler": "demo.echo", "cron_expression": "0 * * * *", "alert_channels": ["hook"]}
    assert_refused(staff_api.post("/api/jobs", body), "alert_channels")
    assert not Job.objects.filter(name="new").exists()


def test_the_api_refuses_removing_a_jobs_channels(staff_api, make_job, settings, loopback_fence_open):
    job = make_job(name="py", alert_channels=["hook"])
    settings.DEMO_MODE = True
    assert_refused(staff_api.patch(f"/api/jobs/{job.pk}", {"alert_channels": []}), "alert_channels")
    # Left as they are, the channels do not stop other edits.
    assert staff_api.patch(f"/api/jobs/{job.pk}", {"description": "x"}).status_code == 200


def test_the_service_refuses_a_channel_change_the_form_did_not_see(make_job, demo):
    job = make_job(name="py")
    job.alert_channels = ["hook"]
    with pytest.raises(refusals.DemoModeError, match="disabled in demo mode"):
        services.save_job(job=job)
    assert Job.objects.get(pk=job.pk).alert_channels == []


@pytest.mark.parametrize("index", ["hook", "", "²"])
def test_send_test_channel_is_refused_and_sends_nothing(staff_client, demo, monkeypatch, index):
    set_setting("sys.job.alertChannels", ["hook"])
    sent = []
    monkeypatch.setattr(channels, "send", lambda *args, **kwargs: sent.append(args))
    response = staff_client.post(reverse("jobs:send_test_channel"), {"channel": index})
    assert response.status_code == 200
    assert "Sending a test message is disabled in demo mode." in response.content.decode()
    assert sent == []


def test_send_test_email_is_refused_and_sends_nothing(staff_client, demo, mailoutbox):
    response = staff_client.post(reverse("jobs:send_test_email"), {"to": "ops@example.com"})
    assert response.status_code == 200
    assert "Sending a test email is disabled in demo mode." in response.content.decode()
    assert mailoutbox == []


# -- settings --------------------------------------------------------------------------


def test_the_settings_page_refuses_a_change_and_saves_nothing(staff_client, demo):
    response = staff_client.post(
        reverse("jobs:settings"),
        {"sys.job.logRetentionDays": "7", "sys.job.alertChannels": "hook"},
        headers={"HX-Request": "true", "HX-Target": "settings-form"},
    )
    html = response.content.decode()
    assert response.status_code == 200 and "Changing settings is disabled in demo mode." in html
    assert get_setting("sys.job.logRetentionDays") == 30 and get_setting("sys.job.alertChannels") == []
    assert not AuditEvent.objects.filter(subject__in=["settings", "channels"]).exists()


def test_the_settings_service_refuses_in_demo_mode(demo, staff_user):
    with pytest.raises(refusals.DemoModeError):
        services.save_settings(values={"sys.job.logRetentionDays": 7}, user=staff_user)
    assert get_setting("sys.job.logRetentionDays") == 30


# -- imports ---------------------------------------------------------------------------

SPEC = {"name": "imported", "handler": "demo.echo", "cron_expression": "0 * * * *"}


def test_the_console_refuses_an_import(staff_client, demo):
    response = staff_client.post(reverse("jobs:job_import"), {"text": json.dumps([SPEC]), "apply": "1"})
    assert response.status_code == 200
    assert "Importing jobs is disabled in demo mode." in response.content.decode()
    assert not Job.objects.filter(name="imported").exists()


def test_the_console_refuses_an_import_at_upload_without_previewing_it(staff_client, demo, monkeypatch):
    def preview(*args, **kwargs):
        raise AssertionError("an import demo mode refuses is not previewed")

    monkeypatch.setattr(imports, "parse", preview)
    monkeypatch.setattr(imports, "plan", preview)
    response = staff_client.post(reverse("jobs:job_import"), {"text": json.dumps([SPEC])})
    assert response.status_code == 200
    assert "Importing jobs is disabled in demo mode." in response.content.decode()


def test_the_command_line_import_seeds_a_demo(demo, tmp_path):
    """`jobs import` is the operator's: it seeds the demo, and each job still
    meets demo mode's rules for jobs."""
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([SPEC]))
    call_command("jobs", "import", str(path))
    assert Job.objects.filter(name="imported").exists()
    path.write_text(json.dumps([{**SPEC, "name": "fast", "cron_expression": "* * * * * *"}]))
    with pytest.raises(Exception, match="nothing was saved"):
        call_command("jobs", "import", str(path))
    assert not Job.objects.filter(name="fast").exists()


# -- resuming a paused job -------------------------------------------------------------


def test_the_api_refuses_resuming_a_paused_python_job(staff_api, paused_job, demo):
    assert_refused(staff_api.post(f"/api/jobs/{paused_job.pk}/toggle"))
    assert_refused(staff_api.patch(f"/api/jobs/{paused_job.pk}", {"state": "enabled"}), "state")
    paused_job.refresh_from_db()
    assert paused_job.state == Job.State.PAUSED and paused_job.next_fire_at is None


def test_the_console_refuses_resuming_a_paused_job(staff_client, paused_job, demo):
    response = staff_client.post(reverse("jobs:job_resume", args=[paused_job.pk]), follow=True)
    assert "Resuming a paused job is disabled in demo mode." in response.content.decode()
    staff_client.post(reverse("jobs:job_bulk"), {"action": "resume", "ids": [paused_job.pk]})
    paused_job.refresh_from_db()
    assert paused_job.state == Job.State.PAUSED


def test_pausing_and_editing_stay_open(staff_api, make_job, demo):
    job = make_job(name="py")
    assert staff_api.post(f"/api/jobs/{job.pk}/toggle").json()["state"] == "paused"
    assert staff_api.patch(f"/api/jobs/{job.pk}", {"description": "x"}).status_code == 200


# -- schedules faster than once a minute -----------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"cron_expression": "* * * * * *"}, "cron_expression"),
        ({"cron_expression": "*/30 * * * * *"}, "cron_expression"),
        ({"cron_expression": "@every_second"}, "cron_expression"),
        ({"schedule_type": "interval", "interval_seconds": 59}, "interval_seconds"),
    ],
)
def test_the_api_refuses_a_schedule_faster_than_once_a_minute(staff_api, demo, fields, field):
    body = {"name": "fast", "handler": "demo.echo", "cron_expression": "0 * * * *", **fields}
    assert_refused(staff_api.post("/api/jobs", body), field)
    assert not Job.objects.filter(name="fast").exists()


@pytest.mark.parametrize(
    "fields",
    [
        {"cron_expression": "* * * * *"},
        {"cron_expression": "30 * * * * *"},
        {"schedule_type": "interval", "interval_seconds": 60},
    ],
)
def test_once_a_minute_is_allowed(staff_api, demo, fields):
    body = {"name": "ok", "handler": "demo.echo", "cron_expression": "0 * * * *", **fields}
    assert staff_api.post("/api/jobs", body).status_code == 201


def test_an_existing_fast_schedule_may_stay_while_other_fields_change(staff_api, make_job, settings):
    job = make_job(name="seeded", cron_expression="*/5 * * * * *")
    settings.DEMO_MODE = True
    assert staff_api.patch(f"/api/jobs/{job.pk}", {"description": "x"}).status_code == 200
    assert_refused(staff_api.patch(f"/api/jobs/{job.pk}", {"cron_expression": "*/2 * * * * *"}))


def test_the_console_form_refuses_a_fast_schedule(staff_client, make_job, demo):
    job = make_job(name="py")
    response = staff_client.post(
        reverse("jobs:job_edit", args=[job.pk]),
        {
            "name": "py",
            "kind": "python",
            "handler": "demo.echo",
            "schedule_type": "interval",
            "interval_seconds": "10",
            "timezone": "UTC",
            "misfire_policy": job.misfire_policy,
            "state": "enabled",
            "version": job.version,
        },
    )
    assert response.status_code == 200
    assert "A schedule faster than once a minute is disabled in demo mode." in response.content.decode()
    job.refresh_from_db()
    assert job.schedule_type == "cron" and job.version == 1


def test_the_service_refuses_a_fast_schedule(make_job, demo):
    job = make_job(name="py")
    job.schedule_type, job.cron_expression, job.interval_seconds = "interval", "", 5
    with pytest.raises(refusals.DemoModeError):
        services.save_job(job=job)


def _edit_form(job, **fields):
    return {
        "name": job.name,
        "kind": "python",
        "handler": "demo.echo",
        "schedule_type": "cron",
        "cron_expression": job.cron_expression,
        "timezone": "UTC",
        "misfire_policy": job.misfire_policy,
        "state": "enabled",
        "version": job.version,
        **fields,
    }


@pytest.mark.parametrize(
    ("refusal", "field"),
    [
        (refusals.DemoModeError("Resuming a paused job is disabled in demo mode.", field="state"), "state"),
        (refusals.DemoModeError("Running jobs is disabled in demo mode."), None),
        (refusals.ForbiddenError("You may not edit this job."), None),
    ],
)
def test_a_refusal_only_the_service_saw_is_a_form_error(staff_client, make_job, monkeypatch, refusal, field):
    """A refusal the service's second check raises (demo mode or rights
    changed after the form's check) re-renders the form, not a 500."""
    job = make_job(name="py")

    def refuse(**kwargs):
        raise refusal

    monkeypatch.setattr(services, "save_job", refuse)
    response = staff_client.post(reverse("jobs:job_edit", args=[job.pk]), _edit_form(job))
    assert response.status_code == 200
    assert response.context["form"].errors[field or "__all__"] == [str(refusal)]


def test_the_api_names_the_field_of_a_demo_refusal_only_the_service_saw(staff_api, make_job, monkeypatch):
    job = make_job(name="py")

    def refuse(**kwargs):
        raise refusals.DemoModeError("Resuming a paused job is disabled in demo mode.", field="state")

    monkeypatch.setattr(services, "save_job", refuse)
    assert_refused(staff_api.patch(f"/api/jobs/{job.pk}", {"description": "x"}), "state")


def test_a_job_action_the_demo_table_does_not_word_is_still_refused_with_the_demo_sentence(demo):
    with pytest.raises(refusals.DemoModeError, match="Changing HTTP jobs is disabled in demo mode."):
        refusals.check_job_change(kinds=["http"], user=None, action="rename")
