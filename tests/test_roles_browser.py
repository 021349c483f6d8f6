"""The roles page and an alert's Acknowledge button in a real browser:
short, the rules are tested through HTTP in test_roles_page.py and
test_alert_acknowledge.py."""

import pytest
from playwright.sync_api import expect

from jobs.models import Alert, RoleGrant
from tests.fixtures.browser import sign_in_by_cookie
from tests.fixtures.core import make_user

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def test_grant_then_revoke_a_role(page, staff):
    make_user("alice")
    sign_in_by_cookie(page, "ada", "/roles/")
    page.select_option("#id_role", "operator")
    page.fill("#id_holder", "alice")
    page.fill("#id_namespace", "billing")
    page.click("#grant-form button[type=submit]")
    row = page.locator("tr", has_text="alice")
    expect(row).to_contain_text("in namespace “billing”")
    assert RoleGrant.objects.get(user__username="alice").role == "operator"
    row.locator("button", has_text="Revoke").click()
    expect(page.locator("tr", has_text="alice")).to_have_count(0)
    assert page.js_errors == []


def test_acknowledge_an_alert(page, staff, make_job):
    job = make_job(name="billing-sync")
    alert = Alert.objects.create(
        job=job,
        kind="crash",
        status="sent",
        subject="billing-sync crashed",
        body_text="x",
        message_id="<1@c>",
    )
    sign_in_by_cookie(page, "ada", "/alerts/")
    page.locator(f"#alert-{alert.pk}-ack button").click()
    expect(page.locator(f"#alert-{alert.pk}-ack")).to_contain_text("by ada")
    assert page.js_errors == []
