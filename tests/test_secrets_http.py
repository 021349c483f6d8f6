"""An HTTP job's secret references: the request carries the values, the
run's text shows `****` where the server echoed them."""

import json

import pytest

from jobs import secrets
from jobs.engine.execution.pool import HandlerRef, run_handler
from tests.fixtures.http import TestServer, make_ctx

pytestmark = pytest.mark.django_db
VALUE = "tok-3c1d9e"


@pytest.fixture(scope="module")
def server():
    server = TestServer("127.0.0.2", name="target")
    yield server
    server.stop()


def test_the_request_carries_the_value_and_the_result_hides_it(settings, server):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]
    secrets.set_secret(name="api.key", value=VALUE, via="cli")
    ctx = make_ctx(
        {
            "url": server.url("/echo") + "?key={{ secret.api.key }}",
            "headers": '{"X-Api-Key": "{{ secret.api.key }}"}',
            "body": "token={{ secret.api.key }}",
            "method": "POST",
        }
    )
    outcome = run_handler(ctx, HandlerRef("http", ""))
    assert outcome.status == "succeeded", outcome.error
    echoed = outcome.result.split("\n", 1)[1]
    assert VALUE not in outcome.result + ctx.log_text()
    assert "****" in echoed and "****" in ctx.log_text()
    # The server got the value itself.
    assert json.loads(echoed)["headers"]["X-Api-Key"] == "****"
    assert server.requests and VALUE in repr(server.requests[-1])
