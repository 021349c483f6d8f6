"""/api/schema says what the API really does: the same routes and methods
as the URLconf, a valid OpenAPI document, and answers that fit it."""

import re
from datetime import UTC, datetime

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from jobs import tasks
from jobs.models import Run

jsonschema = pytest.importorskip("jsonschema")


def api_routes() -> set[tuple[str, str]]:
    """(OpenAPI path, method) for every route under /api/ in the URLconf."""
    found = set()

    def walk(patterns, prefix):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and (prefix + str(pattern.pattern)).startswith("api/"):
                if pattern.name == "not_found":
                    continue  # the catch-all that answers JSON 404s
                route = "/" + prefix + str(pattern.pattern)
                route = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
                for method in pattern.callback.api_methods:
                    found.add((route, method.lower()))

    walk(get_resolver().url_patterns, "")
    return found


@pytest.fixture
def document(anon_api):
    return anon_api.get("/api/schema").json()


def schema_routes(document) -> set[tuple[str, str]]:
    methods = {"get", "post", "put", "patch", "delete"}
    return {
        (path, method) for path, item in document["paths"].items() for method in item if method in methods
    }


def test_schema_lists_exactly_the_routes_in_the_urlconf(document):
    routes = api_routes()
    assert ("/api/jobs/{job_id}", "patch") in routes  # the walk itself works
    assert schema_routes(document) == routes


def test_schema_is_a_valid_openapi_document(document):
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(document)


def test_the_job_schema_has_every_field_the_api_sends(document, make_job):
    from jobs.serializers import JOB_FIELDS, job_to_dict

    job_schema = document["components"]["schemas"]["Job"]
    assert set(job_schema["properties"]) == set(job_to_dict(make_job()))
    # What a client writes, and what it may send back from a read job (ignored).
    input_schema = document["components"]["schemas"]["JobInput"]["properties"]
    writable = {name for name, field in input_schema.items() if not field.get("readOnly")}
    assert writable == {*JOB_FIELDS, "version"}
    assert set(input_schema) == writable | (set(job_to_dict(make_job(name="other"))) - writable)


def test_path_parameters_are_declared(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            parameters = [*item.get("parameters", []), *operation.get("parameters", [])]
            declared = {p["name"] for p in parameters if p["in"] == "path"}
            assert declared == set(re.findall(r"{(\w+)}", path)), (path, method)


def check(document, response, name):
    """Validate a real answer against components/schemas/<name>, and check the
    schema promises that status for that operation."""
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"#/components/schemas/{name}", "components": document["components"]},
        format_checker=jsonschema.FormatChecker(),
    )
    validator.validate(response.json())


def documented_statuses(document, path, method):
    return set(document["paths"][path][method]["responses"])


def test_real_answers_fit_the_schema(document, staff_api, make_job):
    created = staff_api.post(
        "/api/jobs",
        {
            "name": "s",
            "handler": "demo.echo",
            "cron_expression": "0 0 * * * *",
            "alert_emails": ["a@example.com"],
        },
    )
    assert "201" in documented_statuses(document, "/api/jobs", "post")
    check(document, created, "Job")
    job_id = created.json()["id"]
    check(document, staff_api.get("/api/jobs"), "JobList")
    check(document, staff_api.patch(f"/api/jobs/{job_id}", {"description": "d"}), "Job")
    check(document, staff_api.post(f"/api/jobs/{job_id}/toggle"), "Job")
    staff_api.post(f"/api/jobs/{job_id}/toggle")
    check(document, staff_api.post(f"/api/jobs/{job_id}/run"), "Run")
    Run.objects.create(
        job_id=job_id,
        scheduled_at=datetime(2026, 1, 1, tzinfo=UTC),
        trigger="schedule",
        status="skipped",
        skip_reason="overlap",
    )
    runs = staff_api.get(f"/api/jobs/{job_id}/runs", {"limit": 1})
    check(document, runs, "RunPage")
    assert runs.json()["next_cursor"]
    run_id = runs.json()["results"][0]["id"]
    check(document, staff_api.get(f"/api/runs/{run_id}"), "RunDetail")
    check(document, staff_api.post(f"/api/runs/{run_id}/cancel"), "Run")
    check(document, staff_api.get("/api/handlers"), "HandlerList")
    check(document, staff_api.post("/api/tasks", {"handler": "demo.echo", "key": "k"}), "Run")
    check(
        document,
        staff_api.post("/api/cron/preview", {"expression": "0 0 * * * *", "timezone": "Europe/Berlin"}),
        "Preview",
    )
    created = staff_api.put("/api/secrets/api.token", {"value": "v", "description": "d"})
    assert created.status_code == 201
    check(document, created, "Secret")
    check(document, staff_api.put("/api/secrets/api.token", {"value": "w"}), "Secret")
    check(document, staff_api.get("/api/secrets"), "SecretList")
    assert "204" in documented_statuses(document, "/api/secrets/{name}", "delete")


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "path"),
    [
        ("post", "/api/jobs", {"name": ""}, "400", "/api/jobs"),
        ("get", "/api/jobs/999999", None, "404", "/api/jobs/{job_id}"),
        ("patch", "/api/jobs/{job}", {"version": 99}, "409", "/api/jobs/{job_id}"),
        ("delete", "/api/jobs/{builtin}", None, "409", "/api/jobs/{job_id}"),
        ("get", "/api/jobs/{job}/runs", {"limit": "0"}, "400", "/api/jobs/{job_id}/runs"),
        (
            "post",
            "/api/cron/preview",
            {"expression": "x", "timezone": "No/Where"},
            "400",
            "/api/cron/preview",
        ),
        ("post", "/api/tasks", {"handler": "demo.echo"}, "400", "/api/tasks"),
        ("put", "/api/secrets/a%20b", {"value": "v"}, "400", "/api/secrets/{name}"),
        ("put", "/api/secrets/ok", {"value": "x" * 65537}, "400", "/api/secrets/{name}"),
        ("delete", "/api/secrets/none", None, "404", "/api/secrets/{name}"),
    ],
)
def test_error_answers_fit_the_schema(document, staff_api, make_job, method, url, body, status, path):
    from jobs.models import Job

    job = make_job(name="e")
    url = url.format(job=job.pk, builtin=Job.objects.get(builtin=True).pk)
    response = getattr(staff_api, method)(url, body)
    assert str(response.status_code) == status
    assert status in documented_statuses(document, path, method)
    check(document, response, "Error")


def test_unauthenticated_and_forbidden_answers_fit_the_schema(document, anon_api, viewer_api):
    check(document, anon_api.get("/api/jobs"), "Error")
    check(document, viewer_api.post("/api/tasks", {"handler": "demo.echo", "key": "k"}), "Error")
    check(document, viewer_api.get("/api/secrets"), "Error")
    assert "403" in documented_statuses(document, "/api/secrets", "get")


def test_a_task_run_fits_the_schema(document, staff_api):
    run = tasks.enqueue("demo.echo", key="schema")
    check(document, staff_api.get(f"/api/runs/{run.pk}"), "RunDetail")


def _request_strings(document):
    """(where, schema) of every free-text string a request may carry: query
    parameters and request bodies, $refs followed, enums and formats left out."""
    components = document["components"]["schemas"]
    found = []

    def walk(node, where, seen):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref:
                name = ref.rsplit("/", 1)[-1]
                if name not in seen:
                    walk(components[name], f"{where}→{name}", seen | {name})
                return
            if node.get("type") == "string" and "enum" not in node and "format" not in node:
                found.append((where, node))
            if "propertyNames" in node:
                found.append((f"{where}/propertyNames", node["propertyNames"]))
            # A pattern or an enum beside anyOf applies to each alternative.
            inherited = {key: node[key] for key in ("pattern", "enum") if key in node}
            for key, value in node.items():
                if key == "anyOf":
                    for index, option in enumerate(value):
                        walk({**inherited, **option}, f"{where}/anyOf[{index}]", seen)
                elif key != "propertyNames":
                    walk(value, f"{where}/{key}", seen)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}[{index}]", seen)

    for path, item in document["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                walk(parameter["schema"], f"{method} {path} ?{parameter['name']}", frozenset())
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                walk(body["schema"], f"{method} {path} body", frozenset())
    return found


def _allows(schema, text):
    # pattern is unanchored in JSON Schema; maxLength and the like aside.
    return "pattern" not in schema or re.search(schema["pattern"], text) is not None


def test_the_document_says_no_request_text_may_hold_a_nul(document):
    """The API refuses a NUL in every text (code invalid_text), so the
    document's patterns say so: a client (or Schemathesis) that follows the
    document never sends one and expects it to be accepted."""
    strings = _request_strings(document)
    assert len(strings) > 15, strings  # the walk itself reaches the bodies and parameters
    assert [where for where, schema in strings if _allows(schema, "a\x00b")] == []


def test_every_text_the_cursor_pattern_allows_is_a_cursor_and_nothing_else_is():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from jobs.models import CURSOR_PATTERN, parse_run_cursor, run_cursor

    @settings(max_examples=300, deadline=None)
    @given(st.from_regex(CURSOR_PATTERN, fullmatch=True))
    def allowed(text):
        at, run_id = parse_run_cursor(text)
        assert run_cursor(at, run_id) == text

    @settings(max_examples=300, deadline=None)
    @given(
        st.datetimes(min_value=datetime(1654, 1, 1), max_value=datetime(5137, 1, 1)),
        st.integers(1, 10**18 - 1),
    )
    def written(at, run_id):
        assert re.fullmatch(CURSOR_PATTERN, run_cursor(at.replace(tzinfo=UTC), run_id))

    allowed()
    written()
    for text in ("01.5", "-0.5", "1.05", "1.0", "1.-5", "1.5 ", "+1.5", "1", "1.5.5", ""):
        assert re.fullmatch(CURSOR_PATTERN, text) is None and parse_run_cursor(text) is None, text


def test_the_upcoming_page_cursor_is_refused_when_it_is_not_one_the_api_gave(staff_api):
    for text in ("01.5", "1.05", "garbage"):
        response = staff_api.get("/api/upcoming", {"cursor": text})
        assert response.status_code == 400 and response.json()["field"] == "cursor", text
