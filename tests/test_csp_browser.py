"""htmx works under the Content-Security-Policy in a real browser (Debian's
Chromium through Playwright): no violation is reported, and an hx-get
actually swaps."""

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

CHROMIUM = os.environ.get("CRONBOARD_CHROMIUM", "/usr/bin/chromium")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def csp_page(live_server):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    pytest.importorskip("playwright")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(base_url=live_server.url)
        page.set_default_timeout(10_000)
        page.console_lines = []
        page.on("console", lambda message: page.console_lines.append(message.text))
        page.on("pageerror", lambda exc: page.console_lines.append(str(exc)))
        yield page
        browser.close()


def violations(page) -> list[str]:
    return [line for line in page.console_lines if "Content Security Policy" in line or "Refused to" in line]


def test_htmx_runs_under_the_policy(csp_page):
    get_user_model().objects.create_user("ada", password="pw-ada-12345")
    page = csp_page
    page.goto("/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-ada-12345")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    page.goto("/cluster/")
    assert page.evaluate("typeof htmx") == "object"
    assert page.evaluate("htmx.config.includeIndicatorStyles") is False
    # The status section polls itself with hx-get every few seconds.
    with page.expect_request(lambda request: "/cluster/" in request.url and request.headers.get("hx-request") == "true", timeout=15_000):
        pass
    page.wait_for_timeout(500)
    assert violations(page) == []


def test_the_profile_page_creates_a_token_in_the_browser(csp_page):
    get_user_model().objects.create_user("bob", password="pw-bob-12345")
    page = csp_page
    page.goto("/login/?next=/profile/")
    page.fill("input[name=username]", "bob")
    page.fill("input[name=password]", "pw-bob-12345")
    page.click("button[type=submit]")
    page.wait_for_selector("#token-name")
    page.fill("#token-name", "laptop")
    page.click("text=Create token")
    secret = page.text_content("#new-token code")
    assert secret.startswith("cb_")
    assert violations(page) == []
