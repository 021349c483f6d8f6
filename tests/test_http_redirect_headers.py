"""An HTTP job's own headers never follow a redirect to another origin:
real loopback servers on two ports, so the origins
differ by port only, as they would for two services on one host."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.fence import fenced_request
from jobs.handlers.base import JobContext
from jobs.handlers.http import HttpJobHandler
from tests.fixtures.http import TestServer

JOB_HEADERS = {
    "Authorization": "Bearer s3cret",
    "X-Api-Key": "key-123",
    "X-Auth-Token": "token-456",
    "Cookie": "session=abc",
    "X-Custom": "anything",
    "User-Agent": "my-job/1.0",
}


@pytest.fixture(scope="module")
def first():
    server = TestServer("127.0.0.2", name="first")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def second():
    server = TestServer("127.0.0.2", name="second")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _allow(settings, first, second):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]
    first.requests.clear()
    second.requests.clear()


def run_job(props: dict) -> str:
    now = timezone.now()
    ctx = JobContext(
        run_id=1,
        fire_id="fire-1",
        attempt=1,
        scheduled_at=now,
        deadline=now + timedelta(seconds=10),
        properties=props,
    )
    return HttpJobHandler().run(ctx)


def test_a_cross_origin_redirect_drops_every_job_header(first, second):
    assert first.port != second.port
    url = first.url(f"/redirect?to={second.url('/echo')}")
    result = run_job({"url": url, "headers": json.dumps(JOB_HEADERS)})
    assert result.startswith("HTTP 200")
    sent_first = first.requests[0]["headers"]
    assert {name: sent_first[name] for name in JOB_HEADERS} == JOB_HEADERS
    sent_second = {name.lower() for name in second.requests[0]["headers"]}
    for name in JOB_HEADERS:
        if name != "User-Agent":
            assert name.lower() not in sent_second, name
    assert second.requests[0]["headers"]["User-Agent"] == "Cronboard"


def test_headers_given_as_lines_are_dropped_too(first, second):
    url = first.url(f"/redirect?code=307&to={second.url('/echo')}")
    run_job({"url": url, "method": "POST", "body": "x", "headers": "X-Api-Key: k\nContent-Type: text/plain"})
    assert first.requests[0]["headers"]["X-Api-Key"] == "k"
    assert "X-Api-Key" not in second.requests[0]["headers"]
    assert second.requests[0]["body"] == b"x"  # a 307 keeps the method and body


def test_a_redirect_back_to_the_first_origin_does_not_get_them_back(first, second):
    back = first.url("/echo")
    url = first.url(f"/redirect?to={second.url('/redirect?to=' + back)}")
    response = fenced_request("GET", url, headers={"X-Api-Key": "k"}, timeout=5)
    assert response.status == 200
    assert "X-Api-Key" not in json.loads(response.body)["headers"]


def test_a_same_origin_redirect_keeps_the_job_headers(first):
    url = first.url(f"/redirect?to={first.url('/echo')}")
    response = fenced_request("GET", url, headers={"X-Api-Key": "k", "Authorization": "Bearer t"}, timeout=5)
    echoed = json.loads(response.body)["headers"]
    assert (echoed["X-Api-Key"], echoed["Authorization"]) == ("k", "Bearer t")
