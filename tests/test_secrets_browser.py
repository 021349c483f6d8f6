"""The job form's "Move to a secret" in a real browser: a credential typed in
clear goes to the secret store and the field keeps the reference."""

import re

import pytest
from playwright.sync_api import expect

from jobs.core import crypto
from jobs.models import Job, Secret
from tests.fixtures.browser import sign_in_by_cookie

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]
TOKEN = "Bearer s3cr3t-typed-in-clear"


def wait_for_question(page, questions, count, timeout_ms=10_000):
    """Wait until the page has asked `count` questions (confirm()); the
    browser's events are heard only while Playwright is called."""
    waited = 0
    while len(questions) < count and waited < timeout_ms:
        page.wait_for_timeout(50)
        waited += 50
    assert len(questions) >= count, questions


def test_move_an_authorization_header_to_a_secret_and_save(page, staff, settings):
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.1"]  # saved, never run
    sign_in_by_cookie(page, "ada", "/jobs/new/")
    page.fill("#id_name", "orders-feed")
    page.select_option("#id_kind", "http")
    page.fill("#id_url", "http://127.0.0.1:9/feed")
    page.fill("#id_headers", f"Accept: application/json\nAuthorization: {TOKEN}")
    move = page.locator(".credential-move[data-entry=Authorization]")
    expect(move).to_be_visible()
    expect(move.locator("[data-move-name]")).to_have_value("orders-feed.Authorization")
    move.locator("[data-move-name]").fill("feed.auth")
    answers = []
    page.on("response", lambda r: answers.append(r.text()) if "/secrets/move/" in r.url else None)
    move.locator("[data-move-secret]").click()
    expect(page.locator("#id_headers")).to_have_value(
        "Accept: application/json\nAuthorization: {{ secret.feed.auth }}"
    )
    # The list is drawn again without the moved credential.
    expect(page.locator(".credential-move")).to_have_count(0)
    assert crypto.decrypt(Secret.objects.get(name="feed.auth").token, purpose=crypto.SECRETS) == TOKEN
    assert answers and not any("s3cr3t" in text for text in answers)

    page.click("#job-form button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    job = Job.objects.get(name="orders-feed")
    assert job.properties["headers"] == "Accept: application/json\nAuthorization: {{ secret.feed.auth }}"
    assert page.js_errors == []


def test_replacing_an_existing_secret_asks_first(page, staff):
    from jobs import secrets

    secrets.set_secret(name="feed.auth", value="old", via="cli")
    sign_in_by_cookie(page, "ada", "/jobs/new/")
    page.fill("#id_name", "feed")
    page.select_option("#id_kind", "http")
    page.fill("#id_headers", f"Authorization: {TOKEN}")
    move = page.locator(".credential-move[data-entry=Authorization]")
    move.locator("[data-move-name]").fill("feed.auth")
    questions = []

    def answer(dialog):
        questions.append(dialog.message)
        dialog.accept() if len(questions) == 2 else dialog.dismiss()

    page.on("dialog", answer)
    move.locator("[data-move-secret]").click()
    wait_for_question(page, questions, 1)
    assert "feed.auth" in questions[0]
    expect(page.locator("#id_headers")).to_have_value(f"Authorization: {TOKEN}")
    assert crypto.decrypt(Secret.objects.get(name="feed.auth").token, purpose=crypto.SECRETS) == "old"
    move.locator("[data-move-secret]").click()
    wait_for_question(page, questions, 2)
    expect(page.locator("#id_headers")).to_have_value("Authorization: {{ secret.feed.auth }}")
    assert crypto.decrypt(Secret.objects.get(name="feed.auth").token, purpose=crypto.SECRETS) == TOKEN


def test_a_bad_name_shows_the_stores_message(page, staff):
    sign_in_by_cookie(page, "ada", "/jobs/new/")
    page.fill("#id_name", "feed")
    page.select_option("#id_kind", "http")
    page.fill("#id_headers", f"Authorization: {TOKEN}")
    move = page.locator(".credential-move[data-entry=Authorization]")
    move.locator("[data-move-name]").fill("bad name")
    move.locator("[data-move-secret]").click()
    expect(move.locator("[data-move-error]")).to_contain_text("1 to 100 letters")
    expect(page.locator("#id_headers")).to_have_value(f"Authorization: {TOKEN}")
    assert not Secret.objects.exists()


def test_move_a_property_typed_in_clear_in_the_property_bag(page, staff):
    sign_in_by_cookie(page, "ada", "/jobs/new/")
    page.fill("#id_name", "report")
    page.select_option("#id_handler", "demo.echo")
    page.click("text=Add property")
    page.locator(".property-row [data-part=key]").last.fill("api_token")
    page.locator(".property-row [data-part=value]").last.fill("typed-t0ken")
    move = page.locator(".credential-move[data-property=api_token]")
    expect(move.locator("[data-move-name]")).to_have_value("report.api_token")
    move.locator("[data-move-secret]").click()
    expect(page.locator(".property-row [data-part=value]").last).to_have_value(
        "{{ secret.report.api_token }}"
    )
    expect(page.locator(".credential-move")).to_have_count(0)
    page.click("#job-form button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    assert Job.objects.get(name="report").properties["api_token"] == "{{ secret.report.api_token }}"
    assert (
        crypto.decrypt(Secret.objects.get(name="report.api_token").token, purpose=crypto.SECRETS)
        == "typed-t0ken"
    )
