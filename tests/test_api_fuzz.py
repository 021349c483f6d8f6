"""Random input thrown at the API never gets a 500: every answer is a JSON
success or a coded JSON error (hypothesis)."""

import json
from datetime import UTC, timedelta
from datetime import timezone as dt_timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.serializers import JOB_FIELDS

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
field_names = st.sampled_from([*JOB_FIELDS, "version", "id", "url", "sql"]) | st.text(max_size=12)
job_payloads = st.dictionaries(field_names, json_values, max_size=8)

VALID_JOB = {"name": "fuzzed", "handler": "demo.echo", "cron_expression": "0 0 * * * *"}
# Mostly valid jobs with a few fields replaced: reaches the deeper checks.
near_valid_jobs = st.dictionaries(
    st.sampled_from([*JOB_FIELDS, "version"]), json_values, min_size=1, max_size=3
).map(lambda changes: {**VALID_JOB, **changes})

cron_alphabet = "0123456789 */,-?LW#@ADEFHIJLMNOPRSTUVWY"
expressions = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=cron_alphabet, max_size=40),
    st.lists(st.text(alphabet="0123456789*/,-?LW#", min_size=1, max_size=6), min_size=5, max_size=7).map(
        " ".join
    ),
)
zones = st.one_of(
    st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "", "../etc/passwd"]),
    st.text(max_size=30),
)


# ISO-8601 instants up to datetime's limits, with and without offsets.
offsets = st.sampled_from(
    [None, UTC, dt_timezone(timedelta(hours=14)), dt_timezone(timedelta(hours=-12, minutes=-30))]
)
instants = st.one_of(
    st.datetimes(timezones=offsets).map(lambda d: d.isoformat()),
    # datetime's own ends, where converting zones overflows
    st.sampled_from(
        ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "0001-01-01", "9999-12-31T23:59:59.999999"]
    ),
    st.dates().map(lambda d: d.isoformat()),
    st.text(max_size=30),
)


def body_of(data):
    return json.dumps(data, allow_nan=True)


def assert_answered(response, allowed):
    assert response.status_code in allowed, (response.status_code, response.content[:500])
    assert response["Content-Type"] == "application/json"
    if response.status_code >= 400:
        assert {"code", "message", "field"} <= set(response.json())


@FUZZ
@given(payload=job_payloads | near_valid_jobs)
def test_job_create_never_fails_on_random_json(staff_api, payload):
    assert_answered(staff_api.post("/api/jobs", raw=body_of(payload)), {201, 400, 403})


@FUZZ
@given(
    raw=st.one_of(
        st.text(max_size=200),
        st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
        json_values.map(body_of),
    )
)
def test_job_create_never_fails_on_random_bodies(staff_api, raw):
    assert_answered(staff_api.post("/api/jobs", raw=raw.encode("utf-8", "surrogatepass")), {201, 400})


@FUZZ
@given(payload=job_payloads | near_valid_jobs)
def test_job_update_never_fails_on_random_json(staff_api, make_job, payload):
    job = make_job()
    for method in ("put", "patch"):
        assert_answered(
            getattr(staff_api, method)(f"/api/jobs/{job.pk}", raw=body_of(payload)), {200, 400, 403, 409}
        )


@FUZZ
@given(
    expression=expressions,
    zone=zones,
    extra=st.dictionaries(st.sampled_from(["after", "count"]), json_values, max_size=2),
)
def test_preview_never_fails_on_random_input(staff_api, expression, zone, extra):
    response = staff_api.post(
        "/api/cron/preview", raw=body_of({"expression": expression, "timezone": zone, **extra})
    )
    assert_answered(response, {200, 400})


@FUZZ
@given(
    after=instants,
    count=st.integers(min_value=1, max_value=50),
    expression=st.sampled_from(["0 0 0 1 1 *", "* * * * * *", "0 0 0 29 2 *", "0 0 0 L * ?"]),
)
def test_preview_never_fails_on_any_start(staff_api, after, count, expression):
    response = staff_api.post(
        "/api/cron/preview", raw=body_of({"expression": expression, "after": after, "count": count})
    )
    assert_answered(response, {200, 400})


@FUZZ
@given(payload=json_values)
def test_preview_never_fails_on_random_json(staff_api, payload):
    assert_answered(staff_api.post("/api/cron/preview", raw=body_of(payload)), {200, 400})


@FUZZ
@given(
    payload=st.dictionaries(
        st.sampled_from(
            [
                "handler",
                "key",
                "properties",
                "run_after",
                "max_retries",
                "retry_interval_seconds",
                "timeout_seconds",
            ]
        )
        | st.text(max_size=8),
        json_values,
        max_size=6,
    )
)
def test_tasks_never_fail_on_random_json(staff_api, payload):
    assert_answered(staff_api.post("/api/tasks", raw=body_of(payload)), {200, 201, 400})


@FUZZ
@given(run_after=instants, key=st.text(min_size=1, max_size=20))
def test_tasks_never_fail_on_any_start(staff_api, run_after, key):
    response = staff_api.post(
        "/api/tasks", raw=body_of({"handler": "demo.echo", "key": key, "run_after": run_after})
    )
    assert_answered(response, {200, 201, 400})


@FUZZ
@given(
    params=st.dictionaries(
        st.sampled_from(["status", "trigger", "from", "to", "limit", "cursor"]),
        st.text(max_size=40) | instants,
        max_size=6,
    )
)
def test_run_listing_never_fails_on_random_parameters(staff_api, make_job, params):
    job = make_job()
    params = {k: v.replace("\x00", "") for k, v in params.items()}
    assert_answered(staff_api.get(f"/api/jobs/{job.pk}/runs", params), {200, 400})


@FUZZ
@given(
    path=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789/-_.%", max_size=40),
    method=st.sampled_from(["get", "post", "put", "patch", "delete"]),
)
def test_random_paths_under_api_answer_json(staff_api, path, method):
    response = getattr(staff_api, method)("/api/" + path, {} if method != "get" else None)
    assert response.status_code < 500, (path, response.content[:300])
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/jobs/{job}/toggle"),
        ("post", "/api/jobs/{job}/run"),
        ("post", "/api/runs/1/cancel"),
        ("delete", "/api/jobs/{job}"),
    ],
)
def test_bodies_are_ignored_where_none_is_expected(staff_api, make_job, method, url):
    job = make_job()
    response = getattr(staff_api, method)(url.format(job=job.pk), raw="{not json")
    assert response.status_code < 500
