"""The previews with a calendar, H and jitter: the API's, the console's live
preview and `manage.py cron next --calendar --rule`, each marking the
skipped dates with their reason and the make-up working days."""

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse

from jobs import calendars, cron
from tests.fixtures.api import assert_error

AFTER = "2025-09-26T02:00:00Z"


def run_next(*args):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command("cron", "next", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_cron_next_with_a_calendar_marks_skips_and_make_up_days():
    code, out, err = run_next(
        "0 0 9 * * ?", "--tz", "Asia/Shanghai", "--after", AFTER, "--count", "4", "--calendar", "cn"
    )
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:4] == [
        "# skipped 2025-09-27 weekend",
        "2025-09-28T01:00:00Z  # make-up working day for 2025-10-07",
        "2025-09-29T01:00:00Z",
        "2025-09-30T01:00:00Z",
    ]
    assert "# skipped 2025-10-01 National Day" in lines
    assert lines[-1] == "2025-10-09T01:00:00Z"


@pytest.mark.django_db
def test_cron_next_refuses_an_unknown_calendar_or_rule_with_a_code():
    code, out, err = run_next("0 0 9 * * ?", "--calendar", "US-ZZ")
    assert code == 1 and out == "" and err.startswith("error 47030:")
    code, _, err = run_next("0 0 9 * * ?", "--calendar", "CN", "--rule", "sometimes")
    assert code == 1 and err.startswith("error 47030:")


def test_cron_next_reads_h_by_name():
    code, out, _ = run_next(
        "0 H 9 * * ?", "--name", "nightly", "--after", "2026-01-01T00:00:00Z", "--count", "1"
    )
    minute = cron.parse("0 H 9 * * ?", "nightly").minutes[0]
    assert code == 0 and out.splitlines() == [f"2026-01-01T09:{minute:02d}:00Z"]


@pytest.mark.django_db
def test_the_api_preview_lists_skipped_dates_and_make_up_days(viewer_api):
    body = {
        "expression": "0 0 9 * * ?",
        "timezone": "Asia/Shanghai",
        "after": AFTER,
        "count": 4,
        "calendar": "CN",
        "calendar_rule": "working_days",
    }
    response = viewer_api.post("/api/cron/preview", body)
    assert response.status_code == 200, response.content
    result = response.json()
    assert [t["utc"] for t in result["times"]] == [
        "2025-09-28T01:00:00Z",
        "2025-09-29T01:00:00Z",
        "2025-09-30T01:00:00Z",
        "2025-10-09T01:00:00Z",
    ]
    assert result["times"][0]["note"] == "make-up working day for 2025-10-07"
    assert {"date": "2025-10-01", "reason": "National Day"} in result["skipped"]
    assert result["missing"] is None


@pytest.mark.django_db
def test_the_api_preview_says_where_the_data_ends(viewer_api):
    last = calendars.preview_days("CN", "working_days").covered_until
    body = {
        "expression": "0 0 9 * * ?",
        "calendar": "CN",
        "after": f"{last.year}-12-29T00:00:00Z",
        "count": 10,
    }
    result = viewer_api.post("/api/cron/preview", body).json()
    assert result["missing"] == f"{last.year + 1}-01-01" and len(result["times"]) == 3


@pytest.mark.django_db
def test_the_api_preview_refuses_an_unknown_calendar(viewer_api):
    response = viewer_api.post("/api/cron/preview", {"expression": "0 0 9 * * ?", "calendar": "XX"})
    assert_error(response, 400, "47030", "calendar")


@pytest.mark.django_db
def test_the_api_preview_applies_h_and_jitter(viewer_api):
    body = {"expression": "0 H 9 * * ?", "name": "nightly", "after": "2026-01-01T00:00:00Z", "count": 1}
    minute = cron.parse("0 H 9 * * ?", "nightly").minutes[0]
    assert (
        viewer_api.post("/api/cron/preview", body).json()["times"][0]["utc"]
        == f"2026-01-01T09:{minute:02d}:00Z"
    )
    jittered = viewer_api.post("/api/cron/preview", {**body, "jitter_seconds": 600}).json()["times"][0]["utc"]
    nominal = datetime(2026, 1, 1, 9, minute, tzinfo=UTC)
    assert jittered == cron.iso_utc(nominal + timedelta(seconds=cron.jitter_seconds("nightly", nominal, 600)))


def test_the_console_preview_shows_skips_and_notes(staff_client):
    url = reverse("jobs:cron_preview")
    response = staff_client.get(
        url,
        {
            "cron_expression": "0 0 9 * * ?",
            "timezone": "Asia/Shanghai",
            "calendar": "CN",
            "calendar_rule": "non_working_days",
        },
    )
    html = response.content.decode()
    assert response.status_code == 200
    # Five weekend fires from any day skip at least the weekdays between them.
    assert 'id="cron-skipped"' in html and "skipped by the calendar" in html
    response = staff_client.get(url, {"cron_expression": "0 0 9 * * ?", "calendar": "XX"})
    assert "47030" in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["name", "calendar"])
def test_the_api_preview_refuses_text_no_database_stores(viewer_api, field):
    response = viewer_api.post("/api/cron/preview", {"expression": "0 0 9 * * ?", field: "a\x00b"})
    assert_error(response, 400, "invalid_text", field)
