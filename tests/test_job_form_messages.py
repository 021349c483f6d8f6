"""One message per problem: each invalid field of the job form shows one
message, the most specific, with the spec's code where it has one."""

import re

import pytest
from django.urls import reverse

from tests.factories import job_data

pytestmark = pytest.mark.django_db


def messages(html: str) -> list[str]:
    """The messages beside the fields (the summary above the form links to them)."""
    return [
        " ".join(re.sub(r"<[^>]+>", "", m).split())
        for m in re.findall(r'<p class="error"[^>]*>(.*?)</p>', html, re.S)
    ]


BAD = [
    ({"schedule_type": "interval", "cron_expression": "", "interval_seconds": "-5"}, "interval_seconds"),
    ({"schedule_type": "interval", "cron_expression": "", "interval_seconds": "0"}, "interval_seconds"),
    ({"schedule_type": "interval", "cron_expression": "", "interval_seconds": "3"}, "interval_seconds"),
    ({"schedule_type": "interval", "cron_expression": "", "interval_seconds": "x"}, "interval_seconds"),
    ({"schedule_type": "interval", "cron_expression": "", "interval_seconds": "2.5"}, "interval_seconds"),
    (
        {"schedule_type": "interval", "cron_expression": "", "interval_seconds": "99999999999"},
        "interval_seconds",
    ),
    ({"cron_expression": "0 0 0 1 * MON"}, "cron_expression"),
    ({"cron_expression": "nonsense"}, "cron_expression"),
    ({"name": ""}, "name"),
    ({"name": "a\u200bb"}, "name"),
    ({"namespace": "Bad Space"}, "namespace"),
    ({"timezone": "Mars/Base"}, "timezone"),
    ({"max_retries": "-1"}, "max_retries"),
    ({"max_retries": "100000"}, "max_retries"),
    ({"max_retries": "x"}, "max_retries"),
    ({"retry_interval_seconds": "-1"}, "retry_interval_seconds"),
    ({"retry_interval_seconds": "x"}, "retry_interval_seconds"),
    ({"timeout_seconds": "0"}, "timeout_seconds"),
    ({"timeout_seconds": "-5"}, "timeout_seconds"),
    ({"timeout_seconds": "x"}, "timeout_seconds"),
    ({"alert_threshold": "-5"}, "alert_threshold"),
    ({"alert_threshold": "5000"}, "alert_threshold"),
    ({"alert_emails": "not-an-address"}, "alert_emails"),
    ({"alert_channels": "notaurl"}, "alert_channels"),
    ({"properties": "{"}, "properties"),
    ({"properties": "[1]"}, "properties"),
    ({"handler": "no.such"}, "handler"),
    ({"misfire_policy": "sometimes"}, "misfire_policy"),
    ({"schedule_type": "weekly"}, "schedule_type"),
    ({"after": "[{"}, "after"),
    ({"after": '[{"job": "ghost", "on": "success"}]'}, "after"),
]


@pytest.mark.parametrize(("overrides", "field"), BAD, ids=[f"{f}={list(o.values())[-1]!r}" for o, f in BAD])
def test_each_invalid_field_shows_one_message(staff_client, overrides, field):
    response = staff_client.post(reverse("jobs:job_create"), job_data(**overrides))
    assert response.status_code == 200
    found = messages(response.content.decode())
    assert len(found) == 1, found
    assert response.context["form"].errors.keys() == {field}


@pytest.mark.parametrize("seconds", ["-5", "0", "4"])
def test_an_interval_below_the_floor_is_one_coded_message(staff_client, seconds):
    data = job_data(schedule_type="interval", cron_expression="", interval_seconds=seconds)
    found = messages(staff_client.post(reverse("jobs:job_create"), data).content.decode())
    assert len(found) == 1, found
    assert found[0].startswith("47004 The interval must be at least 5 seconds"), found


def test_help_texts_show_code_spans_not_backticks(staff_client):
    """Help written with Markdown's code spans (a handler's description, a
    setting's help) reads as code, not as backticks."""
    form = staff_client.get(reverse("jobs:job_create")).content.decode()
    assert "Always fails with <code>message</code>." in form
    settings = staff_client.get(reverse("jobs:settings")).content.decode()
    assert "A <code>late</code> alert" in settings
    for html in (form, settings):
        visible = re.sub(r"<[^>]+>", "", re.sub(r"<(script|textarea)\b.*?</\1>", "", html, flags=re.S))
        assert "`" not in visible
