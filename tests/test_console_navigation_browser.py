"""Navigation, phone and time zones in a real Chromium (Debian's, through
Playwright): a run opened from a job's history has its own URL and Back
returns to the job where it was; the unread count shows in a phone's folded
top bar; tick boxes are 24 px and beside the names; the sign-in form sends
the browser's zone and the top bar switches to UTC in one click; the new
parts (the chain, the timeline, the profile's zone) pass axe at both widths.
The browser console is watched for CSP reports and errors throughout."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs import services
from jobs.models import Message, Profile, Run
from tests.factories import make_job
from tests.fixtures.browser import close_contexts, new_page, sign_in_by_cookie, sign_in_with_form
from tests.fixtures.console_pages import job_with_history

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def open_page(browser, live_server):
    """open_page(viewport, **context options) → a signed-out page keeping its
    console lines (page.console_lines); all closed at the end."""
    contexts = []

    def _open(viewport=DESKTOP, **options):
        page = new_page(browser, live_server.url, viewport=viewport, **options)
        page.console_lines = []
        page.on("console", lambda message: page.console_lines.append(f"{message.type}: {message.text}"))
        contexts.append(page.context)
        return page

    yield _open
    close_contexts(*contexts)


def console_problems(page) -> list[str]:
    return [
        line
        for line in page.console_lines
        if line.startswith("error") or "Content Security Policy" in line or "Refused to" in line
    ] + page.js_errors


def serious_violations(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page).response
    return [
        f"{v['id']} ({v['impact']}): {v['help']}"
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_a_run_has_its_own_url_and_back_returns_to_the_job_where_it_was(open_page, staff):
    job = job_with_history("many", 25)
    page = sign_in_by_cookie(open_page(), "ada", f"/jobs/{job.pk}/")
    last = page.locator("#run-history tbody tr").last.locator("a")
    last.scroll_into_view_if_needed()
    scrolled = page.evaluate("window.scrollY")
    assert scrolled > 200
    run_url = last.get_attribute("href")
    last.click()
    expect(page).to_have_url(page.base_url + run_url)
    expect(page.locator("#run-viewer #run-log")).to_contain_text("run 24")
    expect(page.locator("#run-viewer")).to_be_in_viewport()
    expect(page.locator("#run-viewer-title")).to_be_focused()
    page.go_back()
    expect(page).to_have_url(f"{page.base_url}/jobs/{job.pk}/")
    expect(page.locator("#run-history")).to_be_visible()
    page.wait_for_function(f"(() => Math.abs(window.scrollY - {scrolled}) < 5)()")
    # Opened directly, the run's URL is a whole page.
    page.goto(run_url)
    expect(page.locator("header.topbar")).to_be_visible()
    expect(page.locator("#run-viewer #run-log")).to_contain_text("run 24")
    assert console_problems(page) == []


def test_a_phone_shows_the_unread_count_with_the_menu_folded(open_page, staff):
    Message.objects.create(user=staff, subject="job crashed")
    page = sign_in_by_cookie(open_page(PHONE), "ada", "/jobs/")
    expect(page.locator(".nav-toggle")).to_be_visible()
    expect(page.locator("#topbar-menu")).to_be_hidden()
    expect(page.locator("#unread-count .count")).to_be_visible()
    assert console_problems(page) == []


@pytest.mark.parametrize("width", [1280, 390])
def test_the_alerts_link_ends_the_bar_on_a_desktop_and_stays_out_of_a_phone_s_menu(open_page, staff, width):
    """On a desktop the Alerts link (with its count) follows the bar's other
    entries, next to the user's; on a phone it stays beside the Menu button
    with the menu folded. Either way the bar lists it once."""
    Message.objects.create(user=staff, subject="job crashed")
    page = sign_in_by_cookie(open_page({"width": width, "height": 844}), "ada", "/jobs/")
    bar = page.locator("header.topbar")
    alerts = bar.get_by_role("link", name=re.compile(r"^Alerts"))
    expect(alerts).to_have_count(1)
    expect(alerts).to_be_visible()
    expect(alerts.locator(".count")).to_be_visible()
    dashboard = bar.get_by_role("link", name="Dashboard", exact=True)
    if width == 390:
        expect(dashboard).to_be_hidden()
        page.locator(".nav-toggle").click()
        expect(dashboard).to_be_visible()
        # Above the unfolded menu, in the bar's first row.
        assert alerts.bounding_box()["y"] + alerts.bounding_box()["height"] <= dashboard.bounding_box()["y"]
    else:
        last = bar.locator("nav a").last
        user = bar.get_by_role("link", name="ada", exact=True)
        a, d, n, u = (x.bounding_box() for x in (alerts, dashboard, last, user))
        # One row: after Dashboard and the nav's last entry, before the user's name.
        assert abs(a["y"] - d["y"]) < d["height"] and abs(a["y"] - u["y"]) < u["height"], (a, d, u)
        assert d["x"] < n["x"] + n["width"] <= a["x"] < a["x"] + a["width"] <= u["x"], (d, n, a, u)
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    assert console_problems(page) == []


@pytest.mark.parametrize("locale", ["en-GB", "zh-CN"], ids=["english", "chinese"])
def test_a_phone_shows_the_alert_filters_as_lines_of_links(open_page, staff, locale):
    """The delivery-state filters are words with separators between them: on a
    phone they wrap between links, never one link and one separator a line."""
    page = sign_in_by_cookie(open_page(PHONE, locale=locale), "ada", "/alerts/")
    links = page.locator("nav.filter-links a")
    expect(links.first).to_be_visible()
    rows = {round(links.nth(i).bounding_box()["y"]) for i in range(links.count())}
    assert links.count() >= 6 and len(rows) <= 3, (links.count(), rows)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert console_problems(page) == []


@pytest.mark.parametrize("locale", ["en-GB", "zh-CN"], ids=["english", "chinese"])
@pytest.mark.parametrize("path", ["/jobs/new/", "/alerts/channels/"])
def test_a_list_of_tick_boxes_sits_under_its_label_one_option_a_line(open_page, staff, path, locale):
    """The kinds of alert (and a job's channels) are a list of boxes: their
    label above them, each box with its word on one line, at phone width."""
    page = sign_in_by_cookie(open_page(PHONE, locale=locale), "ada", path)
    field = page.locator("#field-alert_on" if path == "/jobs/new/" else "#field-kinds")
    label = field.locator("> label")
    options = field.locator("input[type=checkbox]")
    expect(options.first).to_be_attached()
    label_box = label.bounding_box()
    for i in range(options.count()):
        option = options.nth(i).locator("xpath=..")
        option.scroll_into_view_if_needed()
        box, label_box = option.bounding_box(), label.bounding_box()
        assert box["y"] >= label_box["y"] + label_box["height"] - 0.5, (label_box, box)
        assert box["height"] < 40, f"{option.inner_text()!r} wraps: {box}"
    assert console_problems(page) == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_tick_boxes_are_24_px_and_beside_the_names(open_page, staff, viewport):
    for i in range(3):
        make_job(name=f"a-rather-long-job-name-that-wraps-on-a-phone-{i}")
    page = sign_in_by_cookie(open_page(viewport), "ada", "/jobs/")
    boxes = page.locator("#bulk-form input[type=checkbox][name=ids]")
    expect(boxes.first).to_be_visible()
    for i in range(boxes.count()):
        box = boxes.nth(i).bounding_box()
        name = page.locator("#bulk-form tbody tr").nth(i).locator("a.strong").bounding_box()
        assert box["width"] >= 24 and box["height"] >= 24, box
        overlap_x = min(box["x"] + box["width"], name["x"] + name["width"]) - max(box["x"], name["x"])
        overlap_y = min(box["y"] + box["height"], name["y"] + name["height"]) - max(box["y"], name["y"])
        assert overlap_x <= 0 or overlap_y <= 0, (box, name)


def test_sign_in_keeps_the_browsers_zone_and_one_click_shows_utc(open_page, staff):
    run = Run.objects.create(
        job=make_job(name="nightly"),
        scheduled_at=timezone.now().replace(hour=12, minute=0, second=0, microsecond=0),
        trigger="manual",
        status="succeeded",
    )
    page = open_page(timezone_id="Asia/Tokyo")
    sign_in_with_form(page, "ada", "pw-ada-123")
    assert Profile.objects.get(user=staff).time_zone == "Asia/Tokyo"
    page.goto(f"/runs/{run.pk}/")
    facts = page.locator("#run-facts time").first
    expect(facts).to_have_text(re.compile(r"\d{4}-\d\d-\d\d 21:00:00"))
    expect(facts).to_have_attribute("title", re.compile(r"\d{4}-\d\d-\d\d 12:00:00 UTC"))
    page.click(".time-switch button")
    expect(page).to_have_url(f"{page.base_url}/runs/{run.pk}/")
    expect(page.locator("#run-facts time").first).to_have_text(re.compile(r"\d{4}-\d\d-\d\d 12:00:00"))
    assert console_problems(page) == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_chain_the_timeline_and_the_profile_pass_axe_and_fit(open_page, staff, viewport):
    up = make_job(name="backup-db", last_status="succeeded")
    job = make_job(
        name="verify", schedule_type="none", cron_expression="", after=[{"job": "backup-db", "on": "success"}]
    )
    services.save_dependencies(job)
    make_job(
        name="demo-20s",
        schedule_type="interval",
        cron_expression="",
        interval_seconds=20,
        next_fire_at=timezone.now() + timedelta(seconds=5),
    )
    page = sign_in_by_cookie(open_page(viewport), "ada", f"/jobs/{job.pk}/")
    for path, ready in (
        (f"/jobs/{job.pk}/", "#job-chain"),
        ("/upcoming/?window=1h", "#upcoming-fires tr.series"),
        ("/profile/", "#profile-time-zone"),
        (f"/jobs/{up.pk}/", "#job-downstream"),
    ):
        page.goto(path)
        expect(page.locator(ready)).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), path
        assert serious_violations(page) == [], path
    assert console_problems(page) == []


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_chain_is_built_with_the_picker_from_the_keyboard(open_page, staff, viewport):
    up = make_job(name="backup-db", cron_expression="0 0 3 * * *")
    job = make_job(name="verify", schedule_type="none", cron_expression="")
    page = sign_in_by_cookie(open_page(viewport), "ada", f"/jobs/{job.pk}/edit/")
    picker = page.locator("#after-picker")
    expect(picker).to_be_visible()
    # The JSON the picker writes is folded away, one click from view.
    expect(page.locator("#id_after")).to_be_hidden()
    page.locator("#after-json summary").click()
    expect(page.locator("#id_after")).to_be_visible()
    page.locator("#after-q").press_sequentially("backup")
    add = page.locator("#after-results button")
    expect(add).to_have_text("Add “backup-db”")
    add.focus()
    page.keyboard.press("Enter")
    expect(picker.locator(".after-row")).to_contain_text("backup-db")
    expect(page.locator("#id_after")).to_have_value(re.compile(r'"job": "backup-db"'))
    picker.locator("select").select_option("failure")
    expect(page.locator("#id_after")).to_have_value(re.compile(r'"on": "failure"'))
    assert serious_violations(page) == []
    page.locator("#job-form button[type=submit]").first.click()
    expect(page.locator("#job-upstream")).to_contain_text("backup-db")
    job.refresh_from_db()
    assert job.after == [{"job": "backup-db", "on": "failure"}]
    page.goto(f"/jobs/{up.pk}/")
    expect(page.locator("#job-downstream")).to_contain_text("verify")
    assert console_problems(page) == []
