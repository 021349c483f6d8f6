"""Single sign-on in Chromium: from Cronboard's sign-in page through the
provider's own login page (tests/oidc_provider) and back, then out again."""

import pytest
from playwright.sync_api import expect

from jobs.models import RoleGrant

pytestmark = [
    pytest.mark.browser,
    pytest.mark.oidc,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]


def test_sign_in_through_the_providers_page_and_out_again(oidc, page, live_server, settings):
    settings.CRONBOARD_GROUP_ROLES = "sre → operator:*"
    oidc.allow_redirect(f"{live_server.url}/oidc/callback/")
    oidc.allow_post_logout_redirect(f"{live_server.url}/login/")
    oidc.add_user("ann", groups=["sre"], password="provider-pw-456")

    page.goto("/login/")
    page.click("text=Sign in with Test provider")
    expect(page.locator("h1")).to_have_text("Test provider")
    assert page.url.startswith(oidc.issuer.removesuffix("/o"))
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", "provider-pw-456")
    page.click("text=Sign in to the provider")

    # The landing page after a sign-in (LOGIN_REDIRECT_URL): the dashboard.
    page.wait_for_selector("h1:has-text('Dashboard')")
    assert page.url == f"{live_server.url}/"
    assert list(RoleGrant.objects.filter(user__username="ann").values_list("role", flat=True)) == ["operator"]
    expect(page.locator("body")).to_contain_text("ann")

    page.click("button:has-text('Sign out')")
    # Through the provider's end-session endpoint, which sends the browser
    # back to the sign-in page it was given.
    page.wait_for_url(f"{live_server.url}/login/")
    page.goto("/jobs/")
    assert page.url == f"{live_server.url}/login/?next=/jobs/"
    # Signed out at the provider too: it asks for the password again.
    page.click("text=Sign in with Test provider")
    expect(page.locator("h1")).to_have_text("Test provider")
