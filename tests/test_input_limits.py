"""Hostile and careless input: deep nesting,
duplicate keys, too many alert emails, huge descriptions, invisible
characters in names, chunked bodies, over-long URLs and over-large bodies.
Each is a clear, coded 400 (or 411/413/414) under /api/ and a form error in
the console, never a 500, and nothing is saved.

These use the Django test client on SQLite; tests/test_input_limits_server.py
sends the same kind of requests to a real gunicorn on SQLite and PostgreSQL."""

import io
import json

import pytest
from django.urls import reverse

from jobs.forms import JobForm
from jobs.handlers.http import parse_headers
from jobs.models import Job
from tests.fixtures.api import assert_error

JOB = {"name": "limits", "handler": "demo.echo", "cron_expression": "0 0 3 * * *"}
DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000  # deeper than the stack, shorter than a property


# -- nesting deeper than the stack -------------------------------------------


def test_deeply_nested_properties_in_the_console_form_are_a_form_error(staff_client):
    data = {**JOB, "kind": "python", "schedule_type": "cron", "timezone": "UTC", "properties": DEEP_OBJECT}
    response = staff_client.post(reverse("jobs:job_create"), data)
    assert response.status_code == 200
    assert "nested too deeply" in response.content.decode()
    assert not Job.objects.filter(name="limits").exists()


@pytest.mark.parametrize("headers", [DEEP_OBJECT, '{"X-A": ' + "[" * 10_000 + "]" * 10_000 + "}"])
def test_deeply_nested_http_headers_are_a_400(staff_api, headers):
    body = {
        **JOB,
        "kind": "http",
        "handler": "",
        "properties": {"url": "https://10.0.0.1/", "headers": headers},
    }
    assert_error(staff_api.post("/api/jobs", body), 400, "invalid", "properties.headers")
    assert not Job.objects.filter(name="limits").exists()


def test_deeply_nested_headers_in_the_console_form_are_a_form_error(staff_client):
    data = {
        **JOB,
        "kind": "http",
        "handler": "",
        "schedule_type": "cron",
        "timezone": "UTC",
        "url": "https://10.0.0.1/",
        "method": "GET",
        "headers": DEEP_OBJECT,
    }
    response = staff_client.post(reverse("jobs:job_create"), data)
    assert response.status_code == 200 and "nested too deeply" in response.content.decode()


@pytest.mark.parametrize("url", ["/api/jobs", "/api/tasks", "/api/cron/preview"])
def test_deeply_nested_api_bodies_are_a_400(staff_api, url):
    assert_error(staff_api.post(url, raw='{"properties": ' + DEEP_OBJECT + "}"), 400, "invalid_json")


def test_the_jobs_import_of_a_deeply_nested_file_is_a_clear_error(tmp_path, db):
    from django.core.management import CommandError, call_command

    path = tmp_path / "jobs.json"
    path.write_text(DEEP)
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("jobs", "import", str(path), stdout=io.StringIO(), stderr=io.StringIO())


# -- duplicate keys -----------------------------------------------------------


@pytest.mark.parametrize(
    "properties",
    [
        '{"properties": {"a": "1", "a": "2"}}',
        '{"properties": {"a": "1", " a ": "2"}}',
    ],
)
def test_duplicate_property_keys_are_refused_over_the_api(staff_api, properties):
    raw = json.dumps(JOB)[:-1] + ", " + properties[1:]
    assert_error(staff_api.post("/api/jobs", raw=raw), 400, "duplicate_key")
    assert not Job.objects.filter(name="limits").exists()


def test_a_duplicate_top_level_key_is_refused(staff_api):
    raw = '{"name": "a", "name": "b", "handler": "demo.echo", "cron_expression": "@daily"}'
    assert_error(staff_api.post("/api/jobs", raw=raw), 400, "duplicate_key")


@pytest.mark.parametrize("text", ['{"a": "1", "a": "2"}', '{"a": "1", "a ": "2"}'])
def test_duplicate_property_keys_are_refused_in_the_console_form(text, db):
    form = JobForm({**JOB, "properties": text}, user=None)
    assert not form.is_valid()
    assert ("duplicate_key", "properties") in [(e["code"], e["field"]) for e in form.error_list()]


def test_duplicate_json_header_names_are_refused():
    with pytest.raises(ValueError, match="twice"):
        parse_headers('{"X-Key": "1", "X-Key": "2"}')


def test_the_jobs_import_refuses_duplicate_keys(tmp_path, db):
    from django.core.management import CommandError, call_command

    path = tmp_path / "jobs.json"
    path.write_text('[{"name": "a", "name": "b", "handler": "demo.echo", "cron_expression": "@daily"}]')
    with pytest.raises(CommandError, match="twice"):
        call_command("jobs", "import", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert not Job.objects.filter(name__in=["a", "b"]).exists()


# -- sizes and characters ------------------------------------------------------


def test_a_huge_property_name_is_refused(staff_api):
    body = {**JOB, "properties": {"k" * 1_000_000: "v"}}
    assert_error(staff_api.post("/api/jobs", body), 400, "max_length", "properties")
    assert staff_api.post("/api/jobs", {**JOB, "properties": {"k" * 200: "v"}}).status_code == 201


def test_ten_thousand_alert_emails_are_refused(staff_api):
    emails = [f"user{i}@example.com" for i in range(10_000)]
    assert_error(
        staff_api.post("/api/jobs", {**JOB, "alert_emails": emails}), 400, "too_many", "alert_emails"
    )
    assert not Job.objects.filter(name="limits").exists()


def test_twenty_alert_emails_are_fine_and_twenty_one_are_not(staff_api):
    emails = [f"user{i}@example.com" for i in range(21)]
    assert_error(
        staff_api.post("/api/jobs", {**JOB, "alert_emails": emails}), 400, "too_many", "alert_emails"
    )
    response = staff_api.post("/api/jobs", {**JOB, "alert_emails": emails[:20] + emails[:5]})
    assert response.status_code == 201 and len(response.json()["alert_emails"]) == 20


def test_a_huge_description_is_refused(staff_api):
    assert_error(
        staff_api.post("/api/jobs", {**JOB, "description": "x" * 1_000_000}), 400, "max_length", "description"
    )
    assert staff_api.post("/api/jobs", {**JOB, "description": "x" * 2000}).status_code == 201


@pytest.mark.parametrize(
    "name",
    [
        "nightly\u202egnp.exe",  # right-to-left override
        "night\u200bly",  # zero-width space
        "night\u200dly",  # zero-width joiner
        "\ufeffnightly",  # byte-order mark
        "night\u2066ly",  # left-to-right isolate
        "night\x07ly",  # a control character
        "night\nly",
        "night\u2028ly",  # line separator
        "night\u00a0ly",  # no-break space, looks like a plain one
        "night\tly",
    ],
)
def test_names_with_invisible_characters_are_refused(staff_api, name):
    assert_error(staff_api.post("/api/jobs", {**JOB, "name": name}), 400, "invalid_characters", "name")
    assert not Job.objects.filter(name=name).exists()


def test_a_name_is_the_same_name_however_its_accents_are_typed(staff_api):
    assert staff_api.post("/api/jobs", {**JOB, "name": "Caf\u00e9"}).status_code == 201
    assert_error(staff_api.post("/api/jobs", {**JOB, "name": "Cafe\u0301"}), 400, "unique", "name")


def test_too_many_query_fields_is_a_400_not_a_500(staff_api, make_job, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    job = make_job(name="many")
    query = "&".join(f"f{i}=1" for i in range(20))
    assert_error(staff_api.get(f"/api/jobs/{job.pk}/runs?{query}"), 400, "bad_request")


def test_names_in_other_scripts_are_fine(staff_api):
    response = staff_api.post("/api/jobs", {**JOB, "name": "Nächtlicher Bericht — 夜間"})
    assert response.status_code == 201


def test_the_console_form_refuses_invisible_characters_in_names(staff_client):
    data = {**JOB, "name": "a\u202eb", "kind": "python", "schedule_type": "cron", "timezone": "UTC"}
    response = staff_client.post(reverse("jobs:job_create"), data)
    assert response.status_code == 200 and "invisible" in response.content.decode()


# -- how the body and the URL arrive -------------------------------------------


def test_a_chunked_body_the_server_has_framed_is_read(staff_api):
    raw = json.dumps({"expression": "@daily", "timezone": "UTC", "count": 2}).encode()
    response = staff_api.client.generic(
        "POST",
        "/api/cron/preview",
        headers={**staff_api.headers, "Transfer-Encoding": "chunked", "Content-Type": "application/json"},
        **{"wsgi.input": io.BytesIO(raw), "wsgi.input_terminated": True},
    )
    assert response.status_code == 200, response.content
    assert len(response.json()["times"]) == 2


def test_a_chunked_body_the_server_cannot_frame_is_411(staff_api):
    response = staff_api.client.generic(
        "POST",
        "/api/cron/preview",
        headers={**staff_api.headers, "Transfer-Encoding": "chunked", "Content-Type": "application/json"},
        **{"wsgi.input": io.BytesIO(b'{"expression": "@daily"}')},
    )
    assert_error(response, 411, "length_required")


def test_a_chunked_body_over_the_size_limit_is_413(staff_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    raw = json.dumps({"expression": "@daily", "pad": "x" * 2000}).encode()
    response = staff_api.client.generic(
        "POST",
        "/api/cron/preview",
        headers={**staff_api.headers, "Transfer-Encoding": "chunked"},
        **{"wsgi.input": io.BytesIO(raw), "wsgi.input_terminated": True},
    )
    assert_error(response, 413, "too_large")


def test_an_over_large_body_is_a_json_413(staff_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    assert_error(staff_api.post("/api/jobs", {**JOB, "description": "x" * 2000}), 413, "too_large")


@pytest.mark.parametrize("url", ["/api/jobs?namespace=" + "a" * 5000, "/api/" + "x" * 5000])
def test_an_over_long_url_is_a_json_414(staff_api, url):
    assert_error(staff_api.get(url), 414, "uri_too_long")


# -- the document says so ----------------------------------------------------------------


def test_the_openapi_document_lists_the_limits_and_answers(anon_api):
    document = anon_api.get("/api/schema").json()
    schemas = document["components"]["schemas"]
    job_input = schemas["JobInput"]["properties"]
    assert job_input["description"]["anyOf"][0]["maxLength"] == 2000
    assert job_input["alert_emails"]["maxItems"] == 20
    assert job_input["alert_threshold"]["maximum"] == 1000
    assert job_input["cron_expression"]["anyOf"][0]["maxLength"] == 200
    assert job_input["timezone"]["maxLength"] == 64
    assert "crashed" not in job_input["state"]["anyOf"][0]["enum"]
    assert "crashed" in schemas["Job"]["properties"]["state"]["enum"]
    assert schemas["JobCreate"]["required"] == ["name"]
    preview = schemas["PreviewRequest"]["properties"]
    assert (preview["expression"]["minLength"], preview["expression"]["maxLength"]) == (1, 200)
    for path, method in [
        ("/api/jobs", "post"),
        ("/api/jobs/{job_id}", "patch"),
        ("/api/cron/preview", "post"),
    ]:
        assert {"400", "411", "413", "414"} <= set(document["paths"][path][method]["responses"])
    assert "414" in document["paths"]["/api/jobs"]["get"]["responses"]


CRON = {"handler": "demo.echo", "cron_expression": "0 0 * * * *"}


@pytest.mark.parametrize(
    ("path", "body", "field", "code"),
    [
        ("/api/jobs", {**CRON, "name": "  " + "n" * 199}, "name", "max_length"),
        ("/api/tasks", {"handler": "demo.echo", "key": "    " + "k" * 197}, "key", "max_length"),
        (
            "/api/jobs",
            {**CRON, "name": "c", "cron_expression": "   0 0 * * * *" + " " * 190},
            "cron_expression",
            "47001",
        ),
        (
            "/api/jobs",
            {**CRON, "name": "ch", "alert_channels": ["  json://example.com/" + "a" * 1980]},
            "alert_channels",
            "invalid_channel",
        ),
    ],
)
def test_a_text_longer_than_the_document_says_is_refused_even_if_it_trims_short(
    staff_api, path, body, field, code
):
    """The document's maxLength counts the text as sent (JSON Schema's
    rule); the form trims first, so a padded text must not slip through.
    The code is the one the form gives for a text too long."""
    response = staff_api.post(path, body)
    assert response.status_code == 400, response.content[:500]
    error = response.json()
    assert (error["field"], error["code"]) == (field, code), error
