"""Every page of the console in a real headless Chromium (Debian's, via
Playwright), as each role, at a laptop's and a phone's width, in English and
Chinese, under axe-core: the issue's own walk. Apart from
test_console_pages_browser.py so the suite's workers share the two files.

axe-core comes from the PyPI package axe-playwright-python (pinned in
requirements-dev.txt), evaluated into the page through Playwright."""

import re

import pytest
from playwright.sync_api import expect

from jobs.models import Job
from tests.fixtures.browser import sign_in_with_form
from tests.fixtures.console_pages import (
    PHONE,
    fits_width,
    one_character_per_line,
    save_screenshot,
    seed_console,
    serious_violations,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def console_urls(billing, runs) -> list[str]:
    return [
        "/",
        "/jobs/new/",
        f"/jobs/{billing.pk}/",
        f"/jobs/{billing.pk}/edit/",
        f"/jobs/{billing.pk}/clone/",
        f"/jobs/{billing.pk}/delete/",
        f"/runs/{runs[1].pk}/",
        "/runs/",
        "/runs/?status=failed&since=today",
        "/upcoming/",
        "/upcoming/?window=7d",
        "/jobs/",
        "/jobs/import/",
        "/settings/",
        "/audit/",
        "/audit/?via=console&since=yesterday",  # with a filter that cannot be read
        "/messages/",
        "/alerts/",
        "/cluster/",
        "/profile/",
        "/secrets/",
        "/pools/",
        "/roles/",
        "/calendars/",
        "/alerts/channels/",
        f"/jobs/{billing.pk}/backfill/",
        "/profile/two-factor/",
        "/jobs/999999/",  # the 404 page
    ]


# What each role may not open, answered 403 (a viewer and an operator change
# no job; only administrators see the secrets, pools, roles, channels and the audit).
REFUSED = {
    "viewer": ("/new/", "/edit/", "/clone/", "/delete/", "/backfill/", "/jobs/import/"),
    "operator": ("/new/", "/edit/", "/clone/", "/delete/", "/backfill/", "/jobs/import/"),
    "editor": (),
    "admin": (),
}
ADMIN_ONLY = ("/audit/", "/secrets/", "/pools/", "/roles/", "/alerts/channels/")


def expected_status(role: str, url: str) -> int:
    if url == "/jobs/999999/":
        return 404
    path = url.split("?")[0]
    refused = REFUSED[role] + (() if role == "admin" else ADMIN_ONLY)
    return 403 if any(path.endswith(end) or path == end for end in refused) else 200


def walk_data(staff_user) -> list[str]:
    """What the seeded pages show that is data, not interface words."""
    from jobs.handlers import registry

    data = [
        *Job.objects.values_list("name", flat=True),
        *Job.objects.exclude(description="").values_list("description", flat=True),
        *Job.objects.values_list("handler", flat=True),
        "finance",
        "Europe/Berlin",
        "eu-west",
        "ops@example.com",
        "import-orders crashed",
        "“import-orders” crashed",
        "timed out after 600 s",
        "550 refused",
        "deploy script",
        "node-1",
        "sched-host-1.internal",
        "Cronboard",
        "ada",
        "val",
        "otto",
        "eddie",
    ]
    for handler in registry.available():
        # A handler's label, description and property help are its author's words.
        for text in [handler.name, handler.label, handler.description, *handler.properties_help.values()]:
            data += [piece.strip() for piece in re.split(r"`[^`]*`", str(text))]
    return data


ROLE_USERS = {"viewer": "val", "operator": "otto", "editor": "eddie", "admin": "ada"}
# The walk's desktop: a laptop's 1280 px, narrower than the other tests' 1360.
WALK_DESKTOP = {"width": 1280, "height": 900}


@pytest.mark.parametrize("locale", ["en-GB", "zh-CN"], ids=["english", "chinese"])
@pytest.mark.parametrize("viewport", [WALK_DESKTOP, PHONE], ids=["desktop", "phone"])
@pytest.mark.parametrize("role", list(ROLE_USERS))
def test_every_page_passes_axe_and_fits_the_width(open_page, staff, viewport, locale, role):
    """Every page of the console as each role, at both widths, in both
    languages: axe finds nothing serious, nothing is wider than the window, no
    request fails but the page's own expected 403 or 404, the console logs no
    error, and a Chinese page has no English interface string left."""
    from django.contrib.auth import get_user_model

    from jobs.models import RoleGrant
    from tests.fixtures.i18n import english_left

    billing, _crashed, runs = seed_console(staff)
    username = ROLE_USERS[role]
    if role != "admin":
        user = get_user_model().objects.create_user(username, password=f"pw-{username}-123")
        RoleGrant.objects.create(user=user, role=role, namespace=None)
    data = walk_data(staff)
    chinese = locale == "zh-CN"
    # locale= makes Chromium ask for that language (Accept-Language).
    page = open_page(viewport, locale=locale)
    console_errors, failed = [], []
    page.on("console", lambda message: message.type == "error" and console_errors.append(message.text))
    page.on(
        "response", lambda r: r.status >= 400 and failed.append((r.status, r.request.resource_type, r.url))
    )
    page.goto("/login/")
    assert serious_violations(page) == [], "/login/"
    assert fits_width(page)[0] <= viewport["width"], "/login/"
    sign_in_with_form(page, username, f"pw-{username}-123")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans" if chinese else "en")
    problems = {}
    refusal_walked = False
    for url in console_urls(billing, runs):
        status = expected_status(role, url)
        failed.clear()
        response = page.goto(url)
        found = [] if response.status == status else [f"answered {response.status}, not {status}"]
        if status == 403 and refusal_walked:
            # The refusal page is one template: walked once per role, width and language.
            if found:
                problems[url] = found
            continue
        refusal_walked = refusal_walked or status == 403
        page.wait_for_load_state("networkidle")
        found += serious_violations(page)
        scroll_width, inner_width = fits_width(page)
        if scroll_width > inner_width:
            found.append(f"page is {scroll_width} px wide in a {inner_width} px window")
        found += [f"one character a line: {text}" for text in one_character_per_line(page)]
        # A link the role would be refused at is a dead end: the page should not offer it.
        found += [
            f"links to {href}, refused to a {role}"
            for href in page.evaluate(
                "[...new Set([...document.querySelectorAll('a[href^=\"/\"]')].map(a => a.getAttribute('href')))]"
            )
            if expected_status(role, href) == 403
        ]
        if url.endswith(("/new/", "/edit/")) and status == 200:
            # Every field stays inside the form's card.
            sticking_out = page.evaluate(
                """() => { const card = document.getElementById("job-form").getBoundingClientRect();
                   return [...document.querySelectorAll("#job-form input, #job-form select, #job-form textarea")]
                     .filter(el => el.offsetParent && el.getBoundingClientRect().right > card.right + 0.5)
                     .map(el => el.name || el.dataset.part || el.tagName); }"""
            )
            if sticking_out:
                found.append(f"fields wider than the card: {sticking_out}")
        found += [
            f"{code} {kind} {where}"
            for code, kind, where in failed
            if not (kind == "document" and code == status)
        ]
        if chinese:
            found += [f"English left: {run}" for run in english_left(page.content(), data)]
        if found:
            problems[url] = found
        if role != "admin" or chinese:
            continue
        shots = {
            "/jobs/": "phone-job-list",
            "/jobs/new/": "phone-job-form",
            f"/jobs/{billing.pk}/": "phone-job-page",
        }
        desktop_shots = {"/": "dashboard", "/runs/": "all-runs", "/upcoming/": "upcoming"}
        if viewport is PHONE and url in shots:
            save_screenshot(page, shots[url])
        elif viewport is WALK_DESKTOP and url in desktop_shots:
            save_screenshot(page, desktop_shots[url])
    assert problems == {}
    assert page.js_errors == []
    # The expected 403s and 404 are the errors the browser may report.
    assert [line for line in console_errors if not re.search(r"\b40[34]\b", line)] == []
