"""The HTTP job handler (jobs/handlers/http.py): the result and error format,
properties, validation for the form/API layer, and the fence at run time."""

import json
import threading
import time

import pytest

from jobs.handlers.base import HandlerError, JobContext
from jobs.handlers.http import HttpJobHandler, parse_expect_status, parse_headers, validate_http_properties
from tests.fixtures.core import T0, drain
from tests.fixtures.http import TestServer, make_ctx


def run(props: dict, **kwargs) -> tuple[str, JobContext]:
    ctx = make_ctx(props, **kwargs)
    return HttpJobHandler().run(ctx), ctx


@pytest.fixture(scope="module")
def server():
    server = TestServer("127.0.0.2", name="target")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def victim():
    server = TestServer("127.0.0.1", name="victim")
    yield server
    server.stop()
    assert server.requests == []


@pytest.fixture(autouse=True)
def _allow_target(settings, server):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]
    server.requests.clear()


def test_success_records_status_elapsed_and_excerpt(server):
    result, ctx = run({"url": server.url("/hello")})
    first, excerpt = result.split("\n")
    assert first.startswith("HTTP 200 OK in ") and first.endswith(" ms")
    assert excerpt == "hello from target"
    assert f"GET {server.url('/hello')}" in ctx.log_text()
    assert "HTTP 200 OK in" in ctx.log_text()


def test_non_matching_status_fails_with_status_and_excerpt(server):
    with pytest.raises(HandlerError) as info:
        run({"url": server.url("/status/503")})
    message = str(info.value)
    assert message.startswith("HTTP 503 Service Unavailable in ")
    assert message.endswith(" ms (expected 2xx): body of a 503")


def test_expect_status_picks_the_success_codes(server):
    result, _ = run({"url": server.url("/status/404"), "expect_status": "404, 410"})
    assert result.startswith("HTTP 404")
    with pytest.raises(HandlerError, match=r"HTTP 200 OK in \d+ ms \(expected 201\)"):
        run({"url": server.url("/"), "expect_status": "201"})


def test_expecting_a_redirect_does_not_follow_it(server, victim):
    url = server.url(f"/redirect?to=http://127.0.0.1:{victim.port}/")
    result, _ = run({"url": url, "expect_status": "3xx"})
    assert result.startswith("HTTP 302 Found")


def test_redirects_are_followed_and_logged(server):
    final = server.url("/status/200")
    result, ctx = run({"url": server.url(f"/redirect?to={final}")})
    assert result.startswith("HTTP 200")
    assert f"redirected to {final}" in ctx.log_text()


def test_method_headers_and_body_are_sent(server):
    props = {
        "url": server.url("/echo"),
        "method": "post",
        "headers": "Content-Type: application/json\nX-Token: abc",
        "body": '{"a": 1}',
    }
    result, _ = run(props)
    echoed = json.loads(result.split("\n", 1)[1])
    assert echoed["method"] == "POST"
    assert echoed["body"] == '{"a": 1}'
    assert echoed["headers"]["X-Token"] == "abc"
    assert echoed["headers"]["Content-Type"] == "application/json"


def test_a_shard_sends_its_numbers_as_headers_and_in_the_body(server):
    props = {
        "url": server.url("/echo"),
        "method": "POST",
        "body": '{"piece": {{shard_index}}, "of": {{shard_total}}}',
    }
    ctx = make_ctx(props)
    ctx.shard_index, ctx.shard_total = 2, 5
    echoed = json.loads(HttpJobHandler().run(ctx).split("\n", 1)[1])
    assert echoed["body"] == '{"piece": 2, "of": 5}'
    assert (echoed["headers"]["X-Cronboard-Shard-Index"], echoed["headers"]["X-Cronboard-Shard-Total"]) == (
        "2",
        "5",
    )
    # A fire that is not split sends no shard headers.
    unsplit = json.loads(run({**props, "body": "{{shard_index}}"})[0].split("\n", 1)[1])
    assert unsplit["body"] == "0" and "X-Cronboard-Shard-Index" not in unsplit["headers"]


def test_headers_as_json(server):
    result, _ = run({"url": server.url("/echo"), "headers": '{"X-Token": "j"}'})
    assert json.loads(result.split("\n", 1)[1])["headers"]["X-Token"] == "j"


def test_long_bodies_are_cut_in_the_result(server):
    result, _ = run({"url": server.url("/big?n=5000")})
    assert result.split("\n", 1)[1] == "x" * 1000 + "… [4000 more characters]"


def test_blocked_url_fails_without_a_request(victim):
    with pytest.raises(
        HandlerError, match=r"^blocked by the fence: 127\.0\.0\.1 is not in JOBS_HTTP_ALLOWED_HOSTS$"
    ):
        run({"url": f"http://0x7f.1:{victim.port}/"})


def test_blocked_url_with_the_default_policy(settings, victim):
    settings.JOBS_HTTP_ALLOWED_HOSTS = []
    with pytest.raises(
        HandlerError, match=r"^blocked by the fence: 127\.0\.0\.1 is in blocked range 127\.0\.0\.0/8"
    ):
        run({"url": f"http://127.1:{victim.port}/"})


def test_redirect_to_a_blocked_address_fails_the_run(server, victim):
    with pytest.raises(HandlerError, match="blocked by the fence: redirect to http://127.0.0.1:.* blocked"):
        run({"url": server.url(f"/redirect?to=http://127.0.0.1:{victim.port}/")})


def test_job_deadline_bounds_the_request(server):
    started = time.monotonic()
    with pytest.raises(HandlerError, match="timed out"):
        run({"url": server.url("/slow?s=30")}, seconds=0.5)
    assert time.monotonic() - started < 10  # far below the server's 30 s


def test_timeout_property_is_capped_by_the_job(server):
    with pytest.raises(HandlerError, match="timed out"):
        run({"url": server.url("/slow?s=3"), "timeout": "0.3"}, seconds=60)


def test_cancel_stops_the_request(server):
    ctx = make_ctx({"url": server.url("/slow?s=3")}, seconds=30)
    threading.Timer(0.3, ctx.cancelled.set).start()
    with pytest.raises(HandlerError, match="^cancelled$"):
        HttpJobHandler().run(ctx)


def test_bad_properties_fail_the_run():
    with pytest.raises(HandlerError, match="property 'url' is empty"):
        run({})
    with pytest.raises(HandlerError, match="property 'method' must be one of"):
        run({"url": "http://10.0.0.1/", "method": "TRACE"})


# --- validation for the form and the API ------------------------------------------


def test_valid_properties_have_no_errors(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = []
    props = {
        "url": "http://10.0.0.1/hook",
        "method": "PUT",
        "headers": "X-A: 1",
        "expect_status": "2xx, 304",
        "timeout": "30",
    }
    assert validate_http_properties(props) == {}


def test_validation_names_the_fence_rule(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = []
    errors = validate_http_properties({"url": "http://[::ffff:169.254.169.254]/latest/"})
    assert errors == {
        "url": "Blocked by the fence: 169.254.169.254 is in blocked range 169.254.0.0/16 (link-local / cloud metadata)"
    }


def test_validation_reports_each_bad_field(settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = []
    errors = validate_http_properties(
        {"url": "", "method": "TRACE", "headers": "Host: evil", "expect_status": "ok", "timeout": "-1"}
    )
    assert errors == {
        "url": "Enter the URL to request.",
        "method": "Method must be one of GET, POST, PUT, PATCH, DELETE, HEAD.",
        "headers": "The Host header is set by Cronboard and cannot be overridden.",
        "expect_status": "'ok' is not a status code (use e.g. 200, 204 or 2xx).",
        "timeout": "The timeout must be between 0 and 86400 seconds.",
    }


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("no colon here", "line 1: expected 'Name: value'"),
        ("Bad Name: x", "'Bad Name' is not a valid header name"),
        ('{"X-A": "1\\r\\nX-B: 2"}', "the value of X-A contains a line break"),
        ("{not json", "headers look like JSON but do not parse"),
        ("Transfer-Encoding: chunked", "cannot be overridden"),
    ],
)
def test_header_parsing_refuses_bad_input(text, error):
    with pytest.raises(ValueError, match=error):
        parse_headers(text)


def test_header_parsing_accepts_lines_json_and_dicts():
    assert parse_headers("A: 1\n\nB:  two words ") == [("A", "1"), ("B", "two words")]
    assert parse_headers('{"A": "1", "B": 2}') == [("A", "1"), ("B", "2")]
    assert parse_headers({"A": "1"}) == [("A", "1")]
    assert parse_headers("") == []


def test_expect_status_parsing():
    assert parse_expect_status("") == (frozenset(), frozenset({2}))
    assert parse_expect_status("200 204, 3xx") == (frozenset({200, 204}), frozenset({3}))


# --- through the scheduler --------------------------------------------------------


@pytest.mark.django_db
def test_http_job_runs_through_the_scheduler(make_job, server, make_scheduler):
    scheduler = make_scheduler(
        worker_id="node-a", max_workers=2, clock=lambda: T0, misfire_threshold=60, max_message_chars=262144
    )
    ok = make_job(kind="http", handler="", properties={"url": server.url("/hello")}, next_fire_at=T0)
    bad = make_job(kind="http", handler="", properties={"url": server.url("/status/500")}, next_fire_at=T0)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    drain(scheduler, T0, timeout=5)
    (ok_run,), (bad_run,) = ok.runs.all(), bad.runs.all()
    assert ok_run.status == "succeeded"
    assert ok_run.result.startswith("HTTP 200 OK in ")
    assert bad_run.status == "failed"
    assert bad_run.error.startswith("HTTP 500 Internal Server Error in ")
    assert bad_run.error.endswith("(expected 2xx): body of a 500")
