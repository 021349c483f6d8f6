"""Alert channels in a real headless Chromium: the job page lists a job's
channels masked, and "Send test" reaches a real webhook receiver on loopback
and shows the answer in place."""

import pytest
from playwright.sync_api import expect

from jobs import channels
from jobs.models import AlertChannel
from tests.factories import make_job
from tests.fixtures.browser import sign_in_by_cookie

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "brOwserSECRET123"


def test_send_test_from_the_job_page(page, staff, webhook_server, loopback_fence_open):
    url = f"json://u:{SECRET}@{webhook_server.host}:{webhook_server.port}/hooks/{SECRET}"
    AlertChannel.objects.create(name="hook", url=channels.encrypt(url))
    job = make_job(name="with-channel", alert_channels=["hook"])
    sign_in_by_cookie(page, "ada", f"/jobs/{job.pk}/")
    panel = page.locator("#job-alerts")
    expect(panel).to_contain_text(channels.mask(url))
    assert SECRET not in page.content()
    panel.locator("button:has-text('Send test')").click()
    expect(panel.locator(".test-channel-slot")).to_contain_text("Sent to")
    (hook,) = webhook_server.received
    assert hook.path == f"/hooks/{SECRET}" and "with-channel" in hook.json["message"]
