"""htmx works under the Content-Security-Policy in a real browser (Debian's
Chromium through Playwright): no violation is reported, and an hx-get
actually swaps."""

import pytest
from django.contrib.auth import get_user_model

from tests.fixtures.browser import close_contexts, new_page

expect = pytest.importorskip("playwright.sync_api").expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def csp_page(browser, live_server):
    """A page on the shared Chromium (tests/fixtures/browser.py) that keeps
    every console line, where the browser reports CSP violations."""
    page = new_page(browser, live_server.url)
    page.console_lines = []
    page.on("console", lambda message: page.console_lines.append(message.text))
    page.on("pageerror", lambda exc: page.console_lines.append(str(exc)))
    yield page
    close_contexts(page.context)


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
    with page.expect_request(
        lambda request: "/cluster/" in request.url and request.headers.get("hx-request") == "true",
        timeout=15_000,
    ):
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
    page.wait_for_load_state("load")  # htmx binds the form at DOMContentLoaded
    page.fill("#token-name", "laptop")
    page.click("text=Create token")
    secret = page.text_content("#new-token code")
    assert secret.startswith("cb_")
    assert violations(page) == []


def test_every_console_page_runs_without_a_policy_violation(csp_page, make_job):
    from jobs.models import RoleGrant, Run

    cat = get_user_model().objects.create_user("cat", password="pw-cat-12345", is_staff=True)
    RoleGrant.objects.create(user=cat, role="admin")
    job = make_job(name="toured")
    run = Run.objects.create(
        job=job, scheduled_at=job.created_at, trigger="schedule", status="succeeded", log="ok"
    )
    page = csp_page
    page.goto("/login/")
    page.fill("input[name=username]", "cat")
    page.fill("input[name=password]", "pw-cat-12345")
    page.click("button[type=submit]")
    page.wait_for_load_state()
    for url in [
        "/",
        "/jobs/new/",
        f"/jobs/{job.pk}/",
        f"/jobs/{job.pk}/edit/",
        f"/runs/{run.pk}/",
        "/settings/",
        "/secrets/",
        "/messages/",
        "/alerts/",
        "/cluster/",
        "/profile/",
    ]:
        response = page.goto(url)
        assert response.status == 200, url
        page.wait_for_load_state("networkidle")
    # The cron editor's live preview is a fetch under connect-src 'self'.
    page.goto("/jobs/new/")
    page.fill("#id_cron_expression", "0 */5 * * * *")
    expect(page.locator("#cron-description")).to_contain_text("5 minutes")
    assert violations(page) == []


def test_actions_that_swap_parts_of_a_page_log_nothing(csp_page, make_job):
    """htmx settles the attributes of a swapped element by copying the old
    values over, then the new ones back; `style` among them is an inline
    style the policy refuses. Each kind of swap the console does, once."""
    from jobs.models import Job, RoleGrant

    cat = get_user_model().objects.create_user("cat", password="pw-cat-12345", is_staff=True)
    RoleGrant.objects.create(user=cat, role="admin")
    first, second = make_job(name="sync-a"), make_job(name="sync-b")
    page = csp_page
    page.goto("/login/")
    page.fill("input[name=username]", "cat")
    page.fill("input[name=password]", "pw-cat-12345")
    page.click("button[type=submit]")
    page.goto("/jobs/")
    page.wait_for_load_state("load")
    assert "style" not in page.evaluate("htmx.config.attributesToSettle")
    # A style set through the CSSOM (by a browser extension, a password
    # manager, a script), which the policy allows, on the parts htmx swaps.
    mark_styled = "document.querySelectorAll('[id]').forEach(el => { el.style.outline = '0px none'; })"
    page.evaluate(mark_styled)
    # A bulk action after a search.
    page.fill("input[name=q]", "sync-")
    expect(page.locator("#job-table tbody tr")).to_have_count(2)
    page.click(f"#tick-{first.pk}")
    page.click("#bulk-form button[value=pause]")
    expect(page.locator("#flash")).to_contain_text("Paused 1 job")
    # A live state change, as the table's poll redraws it.
    Job.objects.filter(pk=second.pk).update(state=Job.State.PAUSED)
    page.evaluate(mark_styled)
    page.evaluate("htmx.trigger('#job-table', 'poll')")
    expect(page.locator(f"#job-row-{second.pk}")).to_contain_text("Paused")
    # A form that comes back with its errors.
    page.goto("/jobs/new/")
    page.wait_for_load_state("load")
    page.evaluate(mark_styled)
    page.click("button:has-text('Create job')")
    expect(page.locator("#form-errors")).to_be_visible()
    # A settings save.
    page.goto("/settings/")
    page.wait_for_load_state("load")
    page.evaluate(mark_styled)
    page.click("#settings-form button[type=submit]")
    # The save ends in a redirect that htmx follows as a page load: a
    # language switch posted before it is cut off by that navigation.
    expect(page.locator("#flash")).to_contain_text("Settings saved")
    page.wait_for_load_state("load")
    # The language switch, there and back.
    page.select_option("#language-switch", "zh-hans")
    page.click(".language-switch button")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    page.select_option("#language-switch", "en")
    page.click(".language-switch button")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    page.wait_for_load_state("networkidle")
    assert violations(page) == []
