"""The console in Simplified Chinese, in a real headless Chromium (Debian's,
via Playwright): a browser asking for zh-CN signs in and walks the main
pages; none of the English UI phrases may be left."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from jobs import alerts
from jobs.config import ALERT_KINDS, set_setting
from jobs.handlers import registry
from jobs.models import Job, Run
from tests.factories import make_job
from tests.fixtures.browser import SCREENSHOTS, close_contexts, new_page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]

# English UI words and phrases that must not be seen once the console speaks
# Chinese (whole words, case as shown in the console).
ENGLISH_UI = [
    "Dashboard",
    "Jobs",
    "Runs",
    "Upcoming",
    "Alerts",
    "Cluster",
    "Settings",
    "Messages",
    "Sign in",
    "Sign out",
    "New job",
    "Run now",
    "Pause",
    "Resume",
    "Re-enable",
    "Edit",
    "Clone",
    "Delete",
    "Cancel",
    "Save",
    "Filter",
    "Search",
    "Schedule",
    "Next fire",
    "Last run",
    "Time zone",
    "Timezone",
    "State",
    "Kind",
    "Name",
    "Description",
    "Namespace",
    "Handler",
    "Properties",
    "Retries",
    "Timeout",
    "Enabled",
    "Paused",
    "Crashed",
    "Succeeded",
    "Failed",
    "Queued",
    "Running",
    "never",
    "every",
    "Every",
    "Second",
    "Minute",
    "Hour",
    "Day of month",
    "Month",
    "Day of week",
    "Cron expression",
    "cannot both be set",
    "Status",
    "Trigger",
    "Duration",
    "Attempt",
    "Audit trail",
    "Run history",
    "No alerts",
    "Mark all read",
    "Alert emails",
    "Alert channels",
    "Save settings",
    "Send test email",
    "Recipients",
    "Threshold",
    "crashed",
    "consecutive",
    "failed fire",
    "Manual",
    "Language",
    "viewer",
    "Properties it reads",
    "Import",
    "Export",
    "All states",
    "Retry",
    "Log",
    "Result",
    "Next",
    "Last",
    "Today",
    "hours",
    "days",
    "minutes",
    "seconds",
    "ago",
    # Words of any English sentence left behind.
    "the",
    "and",
    "of",
    "to",
    "is",
    "in",
    "for",
    "with",
    "this",
    "No",
    "The",
    "This",
]
ENGLISH_UI_PATTERN = re.compile(r"\b(" + "|".join(re.escape(w) for w in ENGLISH_UI) + r")\b")


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user(
        "ada", "ada@example.com", "pw-ada-123", is_staff=True, is_superuser=True
    )


@pytest.fixture
def zh_page(browser, live_server):
    # locale= makes Chromium send Accept-Language: zh-CN.
    page = new_page(browser, live_server.url, locale="zh-CN")
    yield page
    close_contexts(page.context)


def data_words() -> list[str]:
    """What the pages show that is data, not UI: names people and handlers chose."""
    words = [
        *Job.objects.exclude(description="").values_list("description", flat=True),  # the built-in job's
        "billing-sync",
        "import-orders",
        "ada",
        "ops@example.com",
        "Europe/Berlin",
        "Asia/Shanghai",
        "disk full on /var",
    ]
    for handler in registry.available():
        # A handler's label, description and property help are its author's words.
        words += [handler.name, handler.label, handler.description]
        for key, help_text in handler.properties_help.items():
            words += [str(key), str(help_text)]
    return sorted((w for w in words if w), key=len, reverse=True)


def english_left(page, extra_data=()) -> list[str]:
    """The English UI phrases in the page's visible text and its labels,
    after taking out data (job names, cron expressions, handler names…)."""
    text = page.evaluate(
        """() => {
          const parts = [document.body.innerText, document.title];
          document.querySelectorAll('[title], [aria-label], [placeholder]').forEach(el => {
            for (const a of ['title', 'aria-label', 'placeholder']) {
              if (el.getAttribute(a) && el.offsetParent !== null) parts.push(el.getAttribute(a));
            }
          });
          document.querySelectorAll('code, pre, .mono, datalist, option[value^="demo"]').forEach(el => {
            parts.push('\\u0000' + el.textContent + '\\u0000');
          });
          return parts.join('\\n');
        }"""
    )
    # Code and preformatted text (cron expressions, logs, field names) is data.
    text = re.sub(r"\x00.*?\x00", " ", text, flags=re.S)
    for word in [*extra_data, *data_words()]:
        text = text.replace(word, " ")
    return sorted(set(ENGLISH_UI_PATTERN.findall(text)))


def shoot(page, name: str, *, full_page: bool = False) -> None:
    """The README's Chinese screenshots (docs/screenshots with CRONBOARD_SCREENSHOTS=docs)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


def assert_chinese(page, where: str, *, extra_data=()) -> None:
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    left = english_left(page, extra_data)
    assert not left, f"{where}: English left in the UI: {left}"


def seed(staff) -> tuple[Job, Job]:
    now = timezone.now()
    good = make_job(
        name="billing-sync",
        description="",
        cron_expression="0 */15 * * * *",
        timezone="Europe/Berlin",
        next_fire_at=now + timedelta(minutes=7),
        last_status="succeeded",
        last_duration_ms=1840,
        last_fire_at=now - timedelta(minutes=8),
        owner=staff,
    )
    Run.objects.create(
        job=good,
        scheduled_at=now - timedelta(minutes=8),
        started_at=now - timedelta(minutes=8),
        finished_at=now - timedelta(minutes=8) + timedelta(seconds=2),
        trigger=Run.Trigger.SCHEDULE,
        status=Run.Status.SUCCEEDED,
        duration_ms=1840,
    )
    crashed = make_job(
        name="import-orders",
        description="",
        cron_expression="0 0 */2 * * *",
        state=Job.State.CRASHED,
        consecutive_failures=3,
        alert_threshold=3,
        alert_emails=["ops@example.com"],
        last_status="failed",
        last_error="disk full on /var",
        last_fire_at=now - timedelta(hours=3),
        owner=staff,
    )
    Run.objects.create(
        job=crashed,
        scheduled_at=now - timedelta(hours=3),
        finished_at=now - timedelta(hours=3),
        trigger=Run.Trigger.SCHEDULE,
        status=Run.Status.FAILED,
        error="disk full on /var",
    )
    alerts.on_crash(job=crashed, run=None, now=now)
    return good, crashed


def test_a_browser_asking_for_chinese_gets_the_whole_console_in_chinese(zh_page, live_server, staff):
    page = zh_page
    # Alerts (and the in-site messages written with them) follow sys.ui.language.
    set_setting("sys.ui.language", "zh-hans")
    good, crashed = seed(staff)

    page.goto("/login/")
    assert_chinese(page, "sign-in page")
    page.fill("input[name=username]", "ada")
    page.fill("input[name=password]", "pw-ada-123")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text(re.compile("仪表盘|任务"))

    page.goto("/jobs/")
    expect(page.locator("#job-table")).to_contain_text("billing-sync")
    expect(page.locator(f"#job-row-{crashed.pk}")).to_contain_text("已崩溃")
    assert_chinese(page, "job list")
    shoot(page, "zh-job-list")

    page.goto(f"/jobs/{good.pk}/")
    expect(page.locator("h1")).to_contain_text("billing-sync")
    expect(page.locator("body")).to_contain_text("立即执行")
    expect(page.locator("body")).to_contain_text("每 15 分钟")  # the cron description
    page.wait_for_selector("#job-alerts")  # the alerts panel loads with hx-get
    assert_chinese(page, "job page")
    shoot(page, "zh-job-page")

    page.goto(f"/jobs/{crashed.pk}/")
    expect(page.locator("#crash-banner")).to_contain_text("已崩溃")
    page.wait_for_selector("#job-alerts")
    assert_chinese(page, "crashed job page")

    page.goto("/jobs/new/")
    raw = page.locator("#id_cron_expression")
    raw.fill("0 0 9 ? * 5#3")
    expect(page.locator("#cron-description")).to_have_text("在 09:00，每月第三个星期五")
    expect(page.locator("select.cron-mode[data-field=dow] option:checked")).to_have_text("第 N 个星期几")
    raw.fill("0 0 0 1 * MON")
    expect(page.locator("#cron-error code")).to_have_text("47003")
    expect(page.locator("#cron-error")).to_contain_text("不能同时指定")
    assert_chinese(page, "job form")
    raw.fill("0 0 9 ? * 5#3")
    expect(page.locator("#cron-description")).to_have_text("在 09:00，每月第三个星期五")
    page.locator("#cron-editor").scroll_into_view_if_needed()
    shoot(page, "zh-job-form", full_page=True)

    page.goto("/settings/")
    expect(page.locator("h1")).to_have_text("设置")
    # The kinds of alert are typed as these names (sys.job.alertOn): values, not UI.
    assert_chinese(page, "settings", extra_data=ALERT_KINDS)

    page.goto("/messages/")
    expect(page.locator("body")).to_contain_text("已崩溃")
    assert_chinese(page, "messages")

    page.goto("/alerts/")
    expect(page.locator("body")).to_contain_text("import-orders")
    assert_chinese(page, "alerts")

    run = Run.objects.filter(job=good).first()
    for path in (
        "/",
        "/runs/",
        f"/runs/{run.pk}/",
        "/upcoming/",
        "/cluster/",
        "/profile/",
        "/jobs/import/",
        f"/jobs/{good.pk}/delete/",
        f"/jobs/{good.pk}/edit/",
    ):
        page.goto(path)
        assert_chinese(page, path)
    assert page.js_errors == []


def test_the_switcher_turns_the_console_back_to_english_without_script(browser, live_server, staff):
    context = browser.new_context(base_url=live_server.url, locale="zh-CN", java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto("/login/")
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "pw-ada-123")
        page.click("button[type=submit]")
        page.goto("/jobs/")
        page.select_option("#language-switch", "en")
        page.click(".topbar .language-switch button")
        expect(page.locator("html")).to_have_attribute("lang", "en")
        expect(page.locator("h1")).to_have_text("Jobs")
        assert page.url.endswith("/jobs/")
        # The check the Chinese walk relies on does see English when it is there.
        assert {"Jobs", "Runs", "Settings", "Sign out"} <= set(english_left(page))
    finally:
        close_contexts(context)
