"""Signing in through a real OpenLDAP directory in Chromium: the console's
own form, then, with the user's groups changed in the directory, the page
for an account with no role (under the console's CSP, without script
errors)."""

import pytest

pytestmark = [pytest.mark.ldap, pytest.mark.browser]


def test_a_directory_user_signs_in_and_then_meets_the_no_role_page(
    directory, settings, transactional_db, page, login
):
    from playwright.sync_api import expect

    directory.use(settings)
    settings.CRONBOARD_GROUP_ROLES = "cn=sre,ou=groups,dc=corp → operator:*"
    directory.add_user("june", "pw-june-ldap", groups=["sre"])
    login("june", "pw-june-ldap")

    directory.set_groups("june", ["unmapped"])
    page.context.clear_cookies()
    page.goto("/login/")
    page.fill("input[name=username]", "june")
    page.fill("input[name=password]", "pw-june-ldap")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("No role in Cronboard")
    expect(page.locator("main")).to_contain_text(
        "Your account has no role in Cronboard; ask an administrator"
    )
    assert "sessionid" not in {cookie["name"] for cookie in page.context.cookies()}
    page.goto("/jobs/")
    expect(page).to_have_url(f"{page.base_url}/login/?next=/jobs/")
    assert page.js_errors == []
