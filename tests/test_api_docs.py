"""/api/docs: the interactive page for /api/schema, for signed-in users,
with every asset served by this installation (no CDN), inside the CSP; and
the document's shapes for the endpoints declared with django-ninja."""

import re

from django.contrib.staticfiles import finders
from django.test import Client


def test_docs_need_a_signed_in_user(anon_api):
    response = anon_api.get("/api/docs")
    assert response.status_code == 401
    assert response.json()["code"] == "unauthenticated"


def test_docs_page_loads_only_local_assets(viewer_user):
    client = Client()
    client.force_login(viewer_user)
    response = client.get("/api/docs")
    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any(src.endswith("swagger-ui-bundle.js") for src in sources)
    for src in sources:
        assert src.startswith("/"), src  # same origin: nothing from a CDN
        if src.startswith("/static/"):
            assert finders.find(src.removeprefix("/static/")), src
    # The CSP allows scripts from this origin only; the page has no inline script to run.
    assert "script-src 'self'" in response["Content-Security-Policy"]
    assert not re.search(r"<script(?![^>]*\b(?:src=|type=\"application/json\"))", html)
    assert '"url": "/api/schema"' in html


def test_a_token_opens_the_docs_too(viewer_api):
    assert viewer_api.get("/api/docs").status_code == 200


def test_declared_shapes_reach_the_document(anon_api):
    document = anon_api.get("/api/schema").json()
    preview = document["components"]["schemas"]["PreviewRequest"]
    assert preview["required"] == ["expression"]
    assert preview["properties"]["count"]["minimum"] == 1
    assert preview["properties"]["count"]["maximum"] == 50
    assert preview["properties"]["timezone"]["maxLength"] == 64
    operation = document["paths"]["/api/cron/preview"]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/PreviewRequest"
    )
    assert {"400", "401", "411", "413", "414"} <= set(operation["responses"])


def test_shape_errors_keep_the_api_error_body(staff_api):
    response = staff_api.post("/api/cron/preview", {"expression": "0 * * * * *", "count": True})
    assert response.status_code == 400
    body = response.json()
    assert (body["code"], body["field"]) == ("invalid", "count")
    assert body["errors"] == [{"code": "invalid", "message": body["message"], "field": "count"}]


def test_the_written_docs_name_every_trigger_and_every_kind_of_job():
    """docs/api.md's trigger filter and the README's kinds of job follow the
    models' choices (a trigger added later is named, or this fails)."""
    from pathlib import Path

    from jobs.models import Job, Run

    root = Path(__file__).resolve().parents[1]
    api = (root / "docs" / "api.md").read_text()
    line = next(line for line in api.splitlines() if line.startswith("| `trigger` | only this trigger"))
    assert set(re.findall(r"`(\w+)`", line.split("|")[2])) == set(Run.Trigger.values)
    readme = (root / "README.md").read_text()
    intro = readme.split("\n\n")[1].replace("\n", " ")
    words = {"python": "Python handler", "http": "HTTP call", "sql": "SQL statement", "command": "a command"}
    assert set(words) == set(Job.Kind.values)
    for value, said in words.items():
        assert said in intro, value
