"""Cron details from the security review: bounded input, ISO 8601 years, the search horizon, ASCII names, zone names."""

import io
import json
from datetime import UTC, datetime

import pytest
from django.core.management import call_command

from jobs import cron
from jobs.cron import CronError, parse
from jobs.forms import JobForm
from jobs.models import Job


def cron_next(*args, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("cron", "next", *args, stdout=out, stderr=err, **({"stdin": stdin} if stdin else {}))
    except SystemExit as exit:
        return exit.code, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


# -- one limit on expression and zone, caches keyed on bounded text -----------


def test_an_over_long_expression_is_refused_before_it_is_parsed():
    with pytest.raises(CronError) as caught:
        parse("1," * 100_000 + "1 * * * * *")
    assert caught.value.code == cron.MALFORMED and "200" in caught.value.message
    assert Job._meta.get_field("cron_expression").max_length == cron.MAX_EXPRESSION_CHARS


def test_a_five_field_expression_that_grows_past_the_limit_is_refused():
    text = ",".join(["1"] * 96) + " * * * *"  # 199 characters; "0 " makes it 201
    assert len(text) <= 200
    with pytest.raises(CronError) as caught:
        parse(text)
    assert caught.value.code == cron.MALFORMED


def test_an_over_long_zone_is_refused():
    with pytest.raises(CronError) as caught:
        cron.get_zone("Europe/" + "x" * 1_000_000)
    assert caught.value.code == cron.UNKNOWN_ZONE
    assert Job._meta.get_field("timezone").max_length == cron.MAX_ZONE_CHARS


def test_zone_lookups_are_cached_on_the_canonical_name():
    cron._load_zone.cache_clear()
    for typed in ("europe/BERLIN", "Europe/Berlin", " EUROPE/berlin ", "europe/berlin"):
        assert cron.get_zone(typed).key == "Europe/Berlin"
    assert cron._load_zone.cache_info().currsize == 1


def test_the_api_preview_refuses_a_huge_expression_and_zone(staff_api):
    response = staff_api.post("/api/cron/preview", {"expression": "1," * 500_000 + "1 * * * *"})
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("47001", "expression")
    response = staff_api.post("/api/cron/preview", {"expression": "@daily", "timezone": "A" * 100_000})
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("47006", "timezone")


def test_the_console_preview_refuses_a_long_expression_rather_than_cutting_it(staff_client):
    expression = "0 0 0 * * " + "1," * 100 + "1"
    response = staff_client.get("/cron/preview/", {"cron_expression": expression})
    assert "47001" in response.content.decode()


# -- ISO 8601 years, the search horizon, names -------------------------------------------


def test_cron_next_prints_four_digit_years():
    code, out, _ = cron_next("0 0 0 31 12 ?", "--after", "0998-06-01T00:00:00Z", "--count", "2")
    assert code == 0
    assert out.split() == ["0998-12-31T00:00:00Z", "0999-12-31T00:00:00Z"]
    line = json.dumps({"expr": "0 0 0 31 12 ?", "tz": "UTC", "start": "0099-01-01T00:00:00Z"})
    _, out, _ = cron_next("--jsonl", stdin=io.StringIO(line + "\n"))
    assert json.loads(out)["next"][0] == "0099-12-31T00:00:00Z"
    preview = cron.preview("@yearly", "UTC", after=datetime(500, 1, 1, tzinfo=UTC), count=1)
    assert preview["times"][0]["utc"] == "0501-01-01T00:00:00Z"


def test_fires_are_found_in_year_2499_and_up_to_year_9999():
    schedule = parse("0 0 0 1 1 ?")
    assert schedule.next_after(datetime(2498, 6, 1, tzinfo=UTC), "UTC") == datetime(2499, 1, 1, tzinfo=UTC)
    assert schedule.next_after(datetime(7000, 6, 1, tzinfo=UTC), "Asia/Tokyo") == datetime(
        7000, 12, 31, 15, 0, tzinfo=UTC
    )
    assert schedule.next_after(datetime(9999, 6, 1, tzinfo=UTC), "UTC") is None
    # At the very end of the range, in a zone ahead of or behind UTC: None, never an error.
    end = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)
    for zone in ("Asia/Tokyo", "America/New_York", "UTC"):
        assert len(parse("0 * * * * *").next_n(end, zone, 100)) <= 59
    code, out, _ = cron_next("@yearly", "--after", "2600-03-01T00:00:00Z", "--count", "1")
    assert (code, out.strip()) == (0, "2601-01-01T00:00:00Z")


@pytest.mark.parametrize(
    "expr", ["0 0 0 ? * ſun", "0 0 0 ? * frı", "0 0 0 1 ｊan ?", "0 0 0 ? * MON-ſat", "٣ * * * * *"]
)
def test_only_ascii_names_and_digits_are_accepted(expr):
    with pytest.raises(CronError) as caught:
        parse(expr)
    assert caught.value.code == cron.MALFORMED


def test_an_empty_zone_means_utc_on_the_command_line_as_in_jsonl():
    code, out, err = cron_next("@daily", "--tz", "", "--after", "2026-01-01T12:00:00Z", "--count", "1")
    assert (code, out.strip(), err) == (0, "2026-01-02T00:00:00Z", "")
    line = json.dumps({"expr": "@daily", "tz": "", "start": "2026-01-01T12:00:00Z"})
    _, out, _ = cron_next("--jsonl", stdin=io.StringIO(line + "\n"))
    assert json.loads(out)["next"][0] == "2026-01-02T00:00:00Z"


@pytest.mark.parametrize("name", ["localtime", "posixrules", "Factory", "factory", "LOCALTIME"])
def test_pseudo_zones_are_refused(name, staff_api):
    with pytest.raises(CronError) as caught:
        cron.get_zone(name)
    assert caught.value.code == cron.UNKNOWN_ZONE
    code, _, err = cron_next("@daily", "--tz", name)
    assert code == 1 and err.startswith("error 47006")
    response = staff_api.post("/api/cron/preview", {"expression": "@daily", "timezone": name})
    assert (response.status_code, response.json()["code"]) == (400, "47006")


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("europe/berlin", "Europe/Berlin"),
        ("AMERICA/NEW_YORK", "America/New_York"),
        (" utc ", "UTC"),
        ("", "UTC"),
    ],
)
def test_zone_names_match_case_insensitively_and_are_stored_canonically(typed, canonical, db):
    assert cron.zone_name(typed) == canonical
    form = JobForm(
        {"name": "z", "handler": "demo.echo", "cron_expression": "0 0 3 * * *", "timezone": typed}, user=None
    )
    assert form.is_valid(), form.errors
    assert form.cleaned_data["timezone"] == canonical


def test_the_api_stores_the_canonical_zone(staff_api):
    response = staff_api.post(
        "/api/jobs",
        {
            "name": "zoned",
            "handler": "demo.echo",
            "cron_expression": "0 0 3 * * *",
            "timezone": "europe/berlin",
        },
    )
    assert response.status_code == 201, response.content
    assert response.json()["timezone"] == "Europe/Berlin"
    preview = staff_api.post("/api/cron/preview", {"expression": "@daily", "timezone": "asia/tokyo"}).json()
    assert preview["times"][0]["local"].endswith("+09:00")


def test_the_job_form_offers_only_zones_it_accepts(staff_client):
    html = staff_client.get("/jobs/new/").content.decode()
    assert 'value="Europe/Berlin"' in html
    assert 'value="Factory"' not in html and 'value="localtime"' not in html


def test_spacing_and_case_do_not_grow_the_parse_cache():
    cron._normalize_text.cache_clear()
    for spaces in range(1, 40):
        for text in ("0" + " " * spaces + "30 2 * * mon-fri", "0\t30 2 * *" + " " * spaces + "MON-FRI"):
            assert (
                parse(text).expression == "0 0 30 2 * MON-FRI"
                or parse(text).expression == "0 30 2 * * MON-FRI"
            )
    assert cron._normalize_text.cache_info().currsize <= 2
