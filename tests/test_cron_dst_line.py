"""The line under the cron editor's preview that names the next clock change
touching the schedule, however far beyond the five rows, as docs/cron.md's
rules say (jobs.cron.next_dst_effect)."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from jobs import cron

AFTER = datetime(2026, 12, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "zone", "line"),
    [
        # A daily 02:30 in Berlin: the gap of 28 March 2027, months away.
        (
            "0 30 2 * * ?",
            "Europe/Berlin",
            "2027-03-28: 02:30 does not exist in Europe/Berlin; this schedule then fires at 03:00.",
        ),
        (
            "0 30 2 * * *",
            "America/New_York",
            "2027-03-14: 02:30 does not exist in America/New_York; this schedule then fires at 03:00.",
        ),
        # Sydney's clocks go back in April: a single time fires once...
        (
            "0 0 2 ? * SUN",
            "Australia/Sydney",
            "2027-04-04: 02:00 happens twice in Australia/Sydney; this schedule fires once, in the first pass.",
        ),
        # ... an interval-based one in both passes.
        (
            "0 */20 2 * * ?",
            "Australia/Sydney",
            "2027-04-04: 02:00–03:00 happens twice in Australia/Sydney; this schedule fires in both passes.",
        ),
        ("0 0 12 * * ?", "Europe/Berlin", None),  # noon is never in a change
        ("0 30 2 * * ?", "UTC", None),
        ("0 30 2 * * ?", "Asia/Shanghai", None),  # no changes at all
    ],
)
def test_the_next_clock_change_that_touches_the_schedule(expression, zone, line):
    assert cron.next_dst_effect(expression, zone, after=AFTER) == line


def test_a_change_the_schedule_misses_is_passed_over_for_the_next():
    # Only the 1st of the month: Berlin's March and October changes fall on other days.
    assert cron.next_dst_effect("0 30 2 1 * ?", "Europe/Berlin", after=AFTER) is None
    after_spring = datetime(2027, 4, 1, tzinfo=UTC)
    assert cron.next_dst_effect("0 30 2 * * ?", "Europe/Berlin", after=after_spring).startswith(
        "2027-10-31: 02:30 happens twice"
    )


@pytest.mark.django_db
def test_the_editor_shows_it_below_the_preview_in_the_page_s_language(staff_client):
    url = reverse("jobs:cron_preview")
    html = staff_client.get(
        url, {"cron_expression": "0 30 2 * * ?", "timezone": "Europe/Berlin"}
    ).content.decode()
    assert 'id="cron-dst"' in html and "02:30 does not exist in Europe/Berlin" in html
    # None of the five rows is on that day: the line is what says it.
    assert "DST gap" not in html
    chinese = staff_client.get(
        url,
        {"cron_expression": "0 30 2 * * ?", "timezone": "Europe/Berlin"},
        headers={"accept-language": "zh-CN"},
    ).content.decode()
    assert "does not exist" not in chinese and "Europe/Berlin" in chinese
    plain = staff_client.get(url, {"cron_expression": "0 0 12 * * ?", "timezone": "Europe/Berlin"})
    assert 'id="cron-dst"' not in plain.content.decode()
