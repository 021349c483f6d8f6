"""Custom calendars through the API and the console's Calendars page:
administrators write them (each refusal coded, nothing saved), everyone
signed in reads them, a change re-plans the jobs on them, the job page
shows when a calendar's data runs out."""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from jobs import workdays
from jobs.models import AuditEvent, Job, WorkCalendar
from tests.fixtures.api import assert_error

pytestmark = pytest.mark.django_db

ICS = b"""BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:1
DTSTART;VALUE=DATE:20251224
DTEND;VALUE=DATE:20251227
SUMMARY:Winter break
END:VEVENT
END:VCALENDAR
"""


def test_an_admin_creates_replaces_and_deletes_a_calendar(staff_api, viewer_api):
    body = {"base": "cn", "description": "HQ", "non_working": [{"date": "2025-12-31", "name": "Close"}]}
    response = staff_api.put("/api/calendars/hq", body)
    assert response.status_code == 201, response.content
    assert response.json()["base"] == "CN"
    assert staff_api.put("/api/calendars/hq", {**body, "ics": ICS.decode()}).status_code == 200
    stored = viewer_api.get("/api/calendars/hq").json()
    assert [d["date"] for d in stored["non_working"]] == [
        "2025-12-24",
        "2025-12-25",
        "2025-12-26",
        "2025-12-31",
    ]
    assert [c["name"] for c in viewer_api.get("/api/calendars").json()["results"]] == ["hq"]
    assert staff_api.delete("/api/calendars/hq").status_code == 204
    assert viewer_api.get("/api/calendars/hq").status_code == 404
    actions = list(
        AuditEvent.objects.filter(subject="calendar").order_by("id").values_list("action", flat=True)
    )
    assert actions == ["create", "change", "delete"]


def test_a_viewer_may_not_change_calendars(viewer_api):
    assert_error(viewer_api.put("/api/calendars/x", {}), 403, "forbidden")
    assert not WorkCalendar.objects.exists()


@pytest.mark.parametrize(
    ("name", "body", "code", "field"),
    [
        ("CN", {}, "47030", "name"),
        ("x", {"base": "ZZ"}, "47030", "base"),
        ("x", {"base": "US-QQ"}, "47030", "base"),
        ("x", {"base": "x"}, "47031", "base"),
        ("x", {"non_working": [{"date": "2025-02-30"}]}, "47033", "non_working"),
        ("x", {"working": [{"date": "tomorrow"}]}, "47033", "working"),
        ("x", {"ics": "nonsense"}, "47033", "ics"),
    ],
)
def test_bad_calendars_are_coded_400s_and_save_nothing(staff_api, name, body, code, field):
    assert_error(staff_api.put(f"/api/calendars/{name}", body), 400, code, field)
    assert not WorkCalendar.objects.exists()


def test_a_loop_of_bases_is_refused(staff_api):
    staff_api.put("/api/calendars/a", {})
    staff_api.put("/api/calendars/b", {"base": "a"})
    assert_error(staff_api.put("/api/calendars/a", {"base": "b"}), 400, "47031", "base")
    assert WorkCalendar.objects.get(name="a").base == ""


def test_a_calendar_in_use_is_a_409(staff_api, make_job):
    staff_api.put("/api/calendars/ops", {})
    make_job(calendar="ops")
    assert_error(staff_api.delete("/api/calendars/ops"), 409, "47034")


def test_the_console_page_saves_with_an_ics_upload_and_shows_errors(staff_client, viewer_user):
    url = reverse("jobs:calendar_list")
    upload = SimpleUploadedFile("h.ics", ICS, content_type="text/calendar")
    response = staff_client.post(
        url,
        {
            "name": "plant",
            "base": "DE-BY",
            "non_working": "2025-08-01 Summer shutdown",
            "working": "",
            "ics": upload,
        },
    )
    assert response.status_code == 302
    row = WorkCalendar.objects.get(name="plant")
    assert row.base == "DE-BY" and len(row.non_working) == 4
    response = staff_client.post(url, {"name": "plant2", "base": "plant2", "non_working": "", "working": ""})
    assert response.status_code == 200 and "47031" in response.content.decode()
    response = staff_client.post(url, {"name": "plant3", "non_working": "2025-99-01", "working": ""})
    assert "47033" in response.content.decode()
    assert set(WorkCalendar.objects.values_list("name", flat=True)) == {"plant"}
    viewer_client = Client()
    viewer_client.force_login(viewer_user)
    page = viewer_client.get(url).content.decode()
    assert "plant" in page and 'id="calendar-form"' not in page
    assert viewer_client.post(url, {"name": "v"}).status_code == 404


def test_the_job_page_says_when_calendar_data_is_missing(staff_client, make_job, monkeypatch):
    last = workdays.builtin("CN").covered_until
    job = make_job(cron_expression="0 0 9 * * ?", calendar="CN", timezone="Asia/Shanghai")
    url = reverse("jobs:job_detail", args=[job.pk])
    near_the_end = datetime(last.year, 12, 20, tzinfo=UTC)
    monkeypatch.setattr("jobs.web.job_page.timezone", SimpleNamespace(now=lambda: near_the_end))
    page = staff_client.get(url).content.decode()
    assert 'id="calendar-missing"' in page and f"Calendar data for {last.year + 1} missing" in page
    monkeypatch.setattr(
        "jobs.web.job_page.timezone", SimpleNamespace(now=lambda: near_the_end - timedelta(days=200))
    )
    assert 'id="calendar-missing"' not in staff_client.get(url).content.decode()


def test_the_job_form_places_the_calendar_fields(staff_client):
    page = staff_client.get(reverse("jobs:job_create")).content.decode()
    for name in ("calendar", "calendar_rule", "jitter_seconds"):
        assert f'name="{name}"' in page
    assert Job.CalendarRule.SKIP_HOLIDAYS in page


def _command(*args, stdin_text=None):
    import io

    from django.core.management import call_command
    from django.core.management.base import CommandError

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("jobs", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return 1, out.getvalue(), err.getvalue() + str(exc)
    return 0, out.getvalue(), err.getvalue()


def test_calendars_and_job_calendar_fields_travel_as_code(tmp_path, staff_api, make_job):
    import json

    staff_api.put("/api/calendars/hq", {"base": "CN", "working": [{"date": "2025-10-12", "name": "Launch"}]})
    staff_api.put("/api/calendars/team", {"base": "hq"})
    make_job(name="daily", calendar="team", calendar_rule="skip_holidays", jitter_seconds=30)
    code, out, _ = _command("export-calendars")
    exported = json.loads(out)
    assert [c["name"] for c in exported] == ["hq", "team"]
    code, out, _ = _command("export", "daily")
    spec = json.loads(out)[0]
    assert (spec["calendar"], spec["calendar_rule"], spec["jitter_seconds"]) == ("team", "skip_holidays", 30)

    # Into an empty system: the file's order does not matter (team is based on hq).
    Job.objects.filter(name="daily").delete()
    WorkCalendar.objects.all().delete()
    path = tmp_path / "calendars.json"
    path.write_text(json.dumps(list(reversed(exported))))
    assert _command("import-calendars", str(path))[0] == 0
    assert WorkCalendar.objects.get(name="team").base == "hq"
    jobs_file = tmp_path / "jobs.json"
    jobs_file.write_text(json.dumps([spec]))
    assert _command("import", str(jobs_file))[0] == 0
    assert Job.objects.get(name="daily").calendar == "team"


def test_a_bad_calendar_file_saves_nothing(tmp_path):
    import json

    path = tmp_path / "calendars.json"
    path.write_text(json.dumps([{"name": "ok"}, {"name": "loop", "base": "loop"}]))
    code, _, err = _command("import-calendars", str(path))
    assert code == 1 and "error 47031" in err and "'loop'" in err
    assert not WorkCalendar.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"description": "a\x00b"}, None),
        ({"non_working": [{"date": "2025-10-01", "name": "x\x00"}]}, "non_working"),
        ({"base": "C\x00N"}, None),
    ],
)
def test_text_no_database_stores_is_refused_not_a_500(staff_api, body, field):
    response = staff_api.put("/api/calendars/odd", body)
    assert response.status_code == 400, response.content
    if field:
        assert response.json()["field"] == field
    assert not WorkCalendar.objects.exists()
    assert staff_api.get("/api/calendars/a%00b").status_code in (400, 404)
