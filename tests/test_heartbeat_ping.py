"""CRONBOARD_HEARTBEAT_URL: the scheduler pings an external monitor once a
minute through the fence, against a real receiver on loopback."""

from datetime import timedelta

import pytest

from jobs.engine.heartbeat_ping import HeartbeatPinger
from tests.fixtures.core import T0


def test_pings_once_a_minute(webhook_server, loopback_fence_open):
    pinger = HeartbeatPinger(webhook_server.url("/ping/abc", schema="http"))
    assert pinger.step(T0)
    assert pinger.wait(15)
    assert not pinger.step(T0 + timedelta(seconds=59))
    assert pinger.step(T0 + timedelta(seconds=60))
    assert pinger.wait(15)
    assert [(h.method, h.path) for h in webhook_server.received] == [("GET", "/ping/abc")] * 2
    assert pinger.last_error == ""


def test_a_fenced_off_url_is_never_contacted(webhook_server, settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = []  # default fence: loopback blocked
    pinger = HeartbeatPinger(webhook_server.url("/ping", schema="http"))
    assert pinger.step(T0)
    assert pinger.wait(15)
    assert webhook_server.received == []
    assert "loopback" in pinger.last_error


def test_a_dead_monitor_is_logged_and_retried_next_minute(webhook_server, loopback_fence_open):
    url = webhook_server.url("/ping", schema="http")
    webhook_server.stop()
    pinger = HeartbeatPinger(url)
    pinger.step(T0)
    assert pinger.wait(15)
    assert pinger.last_error
    webhook_server.start()
    pinger.step(T0 + timedelta(minutes=1))
    assert pinger.wait(15)
    assert pinger.last_error == "" and len(webhook_server.received) == 1


@pytest.mark.django_db
def test_the_scheduler_pass_pings(webhook_server, loopback_fence_open, settings, make_scheduler):
    settings.CRONBOARD_HEARTBEAT_URL = webhook_server.url("/hc", schema="http")
    scheduler = make_scheduler(worker_id="node-hb", clock=lambda: T0, clustered=False)
    scheduler.run_pass(T0)
    assert scheduler.heartbeat_pinger.wait(15)
    scheduler.run_pass(T0 + timedelta(seconds=5))
    assert scheduler.heartbeat_pinger.wait(15)
    assert [h.path for h in webhook_server.received] == ["/hc"]


def test_no_url_no_ping():
    assert not HeartbeatPinger("").step(T0)
