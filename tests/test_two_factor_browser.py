"""Two-factor sign-in in a real Chromium: an admin whom the policy requires
to use it is led to the set-up page at sign-in, turns it on with the app's
code, sees the recovery codes, and at the next sign-in is asked for a code
before the job list. The app's codes come from the key the page shows, at
the time of an injected clock (as in tests/test_two_factor.py)."""

import base64

import pytest
from django_otp.oath import TOTP
from playwright.sync_api import expect

from tests.fixtures.twofactor import AppClock

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def code_for(key_text: str, clock: AppClock) -> str:
    key = key_text.replace(" ", "")
    app = TOTP(base64.b32decode(key + "=" * (-len(key) % 8)), step=30, t0=0, digits=6)
    app.time = clock.now
    return f"{app.token():06d}"


def test_an_admin_sets_up_two_factor_and_is_asked_for_a_code_at_the_next_sign_in(
    page, staff, settings, monkeypatch, screenshot
):
    settings.CRONBOARD_REQUIRE_2FA = "admins"
    clock = AppClock().install(monkeypatch)
    csp_errors = []
    page.on(
        "console", lambda msg: csp_errors.append(msg.text) if "Content Security Policy" in msg.text else None
    )

    page.goto("/login/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-ada-123")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Two-factor sign-in")
    expect(page.get_by_text("Your account must use two-factor sign-in")).to_be_visible()
    expect(page.get_by_role("link", name="Jobs")).to_have_count(0)
    page.get_by_role("button", name="Set up two-factor sign-in").click()
    expect(page.locator("img.qr-code")).to_be_visible()
    key = page.locator("#two-factor-key").inner_text()
    page.fill("#two-factor-setup input[name=code]", code_for(key, clock))
    page.get_by_role("button", name="Turn on").click()
    expect(page.locator("#recovery-codes-list")).to_be_visible()
    codes = page.locator("#recovery-codes-list").inner_text().split()
    assert len(codes) == 10
    screenshot("two-factor-set-up")

    page.get_by_role("button", name="Sign out").click()
    clock.next_step()
    page.goto("/login/?next=/jobs/")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-ada-123")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Two-factor sign-in")
    page.fill("input[name=code]", code_for(key, clock))
    page.get_by_role("button", name="Verify").click()
    expect(page.locator("h1")).to_have_text("Jobs")
    assert page.js_errors == [] and csp_errors == []
