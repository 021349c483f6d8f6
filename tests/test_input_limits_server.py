"""Hostile input sent to a real gunicorn, on
SQLite and on PostgreSQL: a chunked body is read, an over-long URL and an
over-large body are answered as JSON, and every refusal is a coded 400 that
leaves the database as it was."""

import json

import pytest

from tests.fixtures import processes

pytestmark = pytest.mark.slow

JOB = {"name": "limits", "handler": "demo.echo", "cron_expression": "0 0 3 * * *"}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def web(request, tmp_path):
    server = processes.Web.on_either_database(request, tmp_path, "input_limits")
    yield server
    server.stop_all(timeout=15)


def job_names(web) -> list[str]:
    status, body = web.call("GET", "/api/jobs")
    assert status == 200
    return [job["name"] for job in body["results"] if not job["builtin"]]


def test_hostile_input_over_http(web):
    deep = '{"a":' * 10_000 + "1" + "}" * 10_000
    refusals = [
        ('{"properties": ' + deep + "}", "invalid_json"),
        (json.dumps(JOB)[:-1] + ', "properties": {"a": "1", "a": "2"}}', "duplicate_key"),
        (json.dumps({**JOB, "properties": {"a": "1", " a": "2"}}), "duplicate_key"),
        (json.dumps({**JOB, "alert_emails": [f"u{i}@example.com" for i in range(10_000)]}), "too_many"),
        (json.dumps({**JOB, "description": "x" * 100_000}), "max_length"),
        (json.dumps({**JOB, "name": "night\u202ely"}), "invalid_characters"),
        (
            json.dumps(
                {
                    **JOB,
                    "kind": "http",
                    "handler": "",
                    "properties": {"url": "https://10.0.0.1/", "headers": deep},
                }
            ),
            "invalid",
        ),
    ]
    for body, code in refusals:
        status, answer = web.call("POST", "/api/jobs", body)
        assert (status, answer["code"]) == (400, code), answer
    assert job_names(web) == []

    # A chunked body is read, not taken as empty.
    chunks = iter([b'{"expression": "@daily", ', b'"timezone": "europe/berlin", "count": 2}'])
    # http.client frames an iterable body of unknown length as chunked itself.
    status, preview = web.call("POST", "/api/cron/preview", chunks)
    assert status == 200, preview
    assert len(preview["times"]) == 2 and preview["times"][0]["local"].endswith(("+01:00", "+02:00"))

    # Over-large body and over-long URL: JSON, not gunicorn's or Django's HTML.
    status, answer = web.call("POST", "/api/jobs", json.dumps({**JOB, "description": "x" * 3_000_000}))
    assert (status, answer["code"]) == (413, "too_large")
    status, answer = web.call("GET", "/api/jobs?namespace=" + "a" * 6000)
    assert (status, answer["code"]) == (414, "uri_too_long")

    status, job = web.call("POST", "/api/jobs", json.dumps({**JOB, "timezone": "europe/berlin"}))
    assert status == 201 and job["timezone"] == "Europe/Berlin"
    assert job_names(web) == ["limits"]
