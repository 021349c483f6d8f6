"""The console in a real headless Chromium (Debian's, via Playwright).

Runs execute inside the test process: the scheduler's steps are driven by
hand, against the same database the live server serves."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from jobs.models import Job, Run
from tests.factories import make_job
from tests.fixtures.browser import sign_in_by_cookie
from tests.fixtures.console_pages import sample_jobs
from tests.fixtures.core import drain

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]


def remember_page(page):
    """Mark the window so a later check can tell no full reload happened."""
    page.evaluate("window.__noReload = 'still here'")


def assert_not_reloaded(page):
    assert page.evaluate("window.__noReload") == "still here"


def test_sign_in_and_see_the_job_list(page, login, staff, screenshot):
    sample_jobs()
    page.goto("/jobs/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/jobs/$"))
    login("ada", "pw-ada-123")
    expect(page.locator("#job-table")).to_contain_text("billing-sync")
    expect(page.locator("#job-row-" + str(Job.objects.get(name="import-orders").pk))).to_contain_text(
        "Crashed"
    )

    remember_page(page)
    page.fill("input[name=q]", "report")
    expect(page.locator("#job-table tbody tr")).to_have_count(1)
    expect(page).to_have_url(re.compile(r"q=report"))
    page.fill("input[name=q]", "")
    # Every job, the built-in retention job too when this database still has it
    # (a transactional test before this one may have flushed it).
    everything = Job.objects.count()
    expect(page.locator("#job-table tbody tr")).to_have_count(everything)
    page.select_option("select[name=state]", "paused")
    expect(page.locator("#job-table tbody tr")).to_have_count(1)
    expect(page.locator("#job-table")).to_contain_text("cache-warmer")
    page.select_option("select[name=state]", "")
    expect(page.locator("#job-table tbody tr")).to_have_count(everything)
    assert_not_reloaded(page)
    screenshot("job-list")
    assert page.js_errors == []


def test_create_a_cron_job_through_the_editor(page, staff, screenshot):
    sign_in_by_cookie(page, "ada")
    page.click("text=New job")
    expect(page.locator("h1")).to_have_text("New job")
    remember_page(page)
    raw = page.locator("#id_cron_expression")
    expect(raw).to_have_value("0 0 * * * *")
    expect(page.locator("#cron-times tbody tr")).to_have_count(5)

    page.fill("#id_name", "quarter-hourly sync")
    page.select_option("#id_handler", "demo.echo")
    page.fill("#id_timezone", "Asia/Tokyo")

    # Minute: step mode, every 15.
    page.select_option("select.cron-mode[data-field=minute]", "step")
    page.fill("input[data-field=minute][data-part=every]", "15")
    expect(raw).to_have_value("0 */15 * * * *")
    # Hour: a range, 9 to 17.
    page.select_option("select.cron-mode[data-field=hour]", "range")
    page.fill("input[data-field=hour][data-part=from]", "9")
    page.fill("input[data-field=hour][data-part=to]", "17")
    # Day of week: specific days.
    page.select_option("select.cron-mode[data-field=dow]", "specific")
    page.fill("input[data-field=dow][data-part=values]", "MON,WED,FRI")
    expect(raw).to_have_value("0 */15 9-17 * * MON,WED,FRI")
    expect(page.locator("#cron-description")).to_contain_text("15 minutes")
    expect(page.locator("#cron-times tbody tr")).to_have_count(5)
    expect(page.locator("#cron-preview thead")).to_contain_text("In Asia/Tokyo")
    expect(page.locator("#cron-times tbody tr").first).to_contain_text("JST")
    first_time = page.locator("#cron-times tbody tr").first.inner_text()

    # Raw → fields: the special day forms read back into their modes.
    raw.fill("0 0 12 L * ?")
    expect(page.locator("select.cron-mode[data-field=dom]")).to_have_value("last")
    expect(page.locator("select.cron-mode[data-field=hour]")).to_have_value("specific")
    expect(page.locator("input[data-field=hour][data-part=values]")).to_have_value("12")
    expect(page.locator("#cron-description")).to_contain_text("last day of the month")
    raw.fill("0 0 9 ? * 5#3")
    expect(page.locator("select.cron-mode[data-field=dow]")).to_have_value("nth")
    expect(page.locator("input[data-field=dow][data-part=day]")).to_have_value("5")
    expect(page.locator("input[data-field=dow][data-part=nth]")).to_have_value("3")
    expect(page.locator("#cron-description")).to_contain_text("third Friday")
    raw.fill("0 0 9 ? * 5L")
    expect(page.locator("select.cron-mode[data-field=dow]")).to_have_value("lastOf")
    expect(page.locator("#cron-description")).to_contain_text("last Friday")
    # …and fields → raw for them too.
    page.select_option("select.cron-mode[data-field=dow]", "every")
    page.select_option("select.cron-mode[data-field=dom]", "nearest")
    page.fill("input[data-field=dom][data-part=day]", "15")
    expect(raw).to_have_value("0 0 9 15W * *")
    page.select_option("select.cron-mode[data-field=dom]", "lastOffset")
    page.fill("input[data-field=dom][data-part=offset]", "3")
    expect(raw).to_have_value("0 0 9 L-3 * *")
    page.select_option("select.cron-mode[data-field=dom]", "lastWeekday")
    expect(raw).to_have_value("0 0 9 LW * *")

    # An invalid expression shows its coded error, live.
    raw.fill("0 0 25 * * *")
    expect(page.locator("#cron-error")).to_contain_text("4700")
    expect(page.locator("#cron-error code")).to_have_text(re.compile(r"^4700\d$"))
    # The every-second warning.
    raw.fill("* */15 9-17 * * MON-FRI")
    expect(page.locator("#cron-preview")).to_contain_text("The seconds field is *")

    raw.fill("0 */15 9-17 * * MON-FRI")
    expect(page.locator("#cron-preview")).not_to_contain_text("The seconds field is *")
    expect(page.locator("#cron-description")).to_contain_text("Monday through Friday")
    expect(page.locator("#cron-times tbody tr")).to_have_count(5)
    assert first_time
    # The property bag editor.
    page.click("text=Add property")
    page.locator(".property-row input[data-part=key]").last.fill("region")
    page.locator(".property-row input[data-part=value]").last.fill("eu-west")
    assert_not_reloaded(page)
    page.locator("#cron-editor").scroll_into_view_if_needed()
    screenshot("job-form")

    page.click("button:has-text('Create job')")
    expect(page.locator("h1")).to_contain_text("quarter-hourly sync")
    job = Job.objects.get(name="quarter-hourly sync")
    assert job.cron_expression == "0 */15 9-17 * * MON-FRI" and job.timezone == "Asia/Tokyo"
    assert job.handler == "demo.echo" and job.properties == {"region": "eu-west"}
    assert page.js_errors == []


def test_invalid_form_keeps_the_editor_working(page, staff):
    sign_in_by_cookie(page, "ada", "/jobs/new/")
    page.fill("#id_name", "broken")
    page.fill("#id_cron_expression", "0 0 * * * *")
    page.select_option("#id_schedule_type", "interval")
    page.fill("#id_interval_seconds", "4")
    page.select_option("#id_handler", "demo.echo")
    page.click("button:has-text('Create job')")
    expect(page.locator("#field-interval_seconds .error")).to_contain_text("47004")
    expect(page.locator("#form-errors")).to_contain_text("Nothing was saved")
    # The swapped-in form is live again: switch back to cron and edit a field.
    page.select_option("#id_schedule_type", "cron")
    page.select_option("select.cron-mode[data-field=minute]", "step")
    page.fill("input[data-field=minute][data-part=every]", "10")
    expect(page.locator("#id_cron_expression")).to_have_value("0 */10 * * * *")
    assert not Job.objects.filter(name="broken").exists()
    assert page.js_errors == []


def test_pause_and_resume(page, staff):
    job = make_job(name="pausable", next_fire_at=timezone.now() + timedelta(minutes=1))
    sign_in_by_cookie(page, "ada", f"/jobs/{job.pk}/")
    page.click("button:has-text('Pause')")
    expect(page.locator("#job-state")).to_have_text("Paused")
    expect(page.locator("#flash")).to_contain_text("Paused")
    assert Job.objects.get(pk=job.pk).state == Job.State.PAUSED
    page.click("button:has-text('Resume')")
    expect(page.locator("#job-state")).to_have_text("Enabled")
    assert Job.objects.get(pk=job.pk).next_fire_at is not None


def test_bulk_pause_from_the_list(page, staff):
    a, b = make_job(name="bulk-a"), make_job(name="bulk-b")
    sign_in_by_cookie(page, "ada")
    remember_page(page)
    page.check(f"#job-row-{a.pk} input[name=ids]")
    page.check(f"#job-row-{b.pk} input[name=ids]")
    page.click("#bulk-form button[value=pause]")
    expect(page.locator("#flash")).to_contain_text("Paused 2 jobs.")
    expect(page.locator(f"#job-row-{a.pk}")).to_contain_text("Paused")
    assert_not_reloaded(page)
    assert set(Job.objects.filter(pk__in=[a.pk, b.pk]).values_list("state", flat=True)) == {"paused"}


def test_crashed_job_is_re_enabled(page, staff):
    job = make_job(
        name="flaky",
        state=Job.State.CRASHED,
        consecutive_failures=3,
        last_status="failed",
        last_error="connection refused",
    )
    sign_in_by_cookie(page, "ada")
    expect(page.locator(f"#job-row-{job.pk}")).to_contain_text("Crashed")
    page.click("text=flaky")
    expect(page.locator("#crash-banner")).to_contain_text("3 consecutive failed fires")
    page.click("button:has-text('Re-enable')")
    expect(page.locator("#job-state")).to_have_text("Enabled")
    expect(page.locator("#crash-banner")).to_have_count(0)
    job.refresh_from_db()
    assert job.state == Job.State.ENABLED and job.consecutive_failures == 0


def test_run_now_and_watch_it_finish(page, staff, screenshot, make_scheduler):
    job = make_job(
        name="echo",
        description="Logs its properties",
        properties={"greeting": "hello", "target": "world"},
        cron_expression="0 0 * * * *",
        timezone="Europe/Paris",
        next_fire_at=timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1),
    )
    # Some history for the chart and the table.
    start = timezone.now() - timedelta(hours=40)
    statuses = (
        ["succeeded"] * 7
        + ["failed"]
        + ["succeeded"] * 5
        + ["timed_out"]
        + ["succeeded"] * 6
        + ["skipped"]
        + ["succeeded"] * 4
    )
    Run.objects.bulk_create(
        Run(
            job=job,
            scheduled_at=start + timedelta(hours=i),
            started_at=start + timedelta(hours=i, seconds=1),
            finished_at=start + timedelta(hours=i, seconds=3),
            trigger="schedule",
            status=status,
            worker_id="node-1",
            skip_reason="overlap" if status == "skipped" else "",
            error="boom" if status == "failed" else "",
            duration_ms=None
            if status == "skipped"
            else 800 + (i * 137) % 1900 + (4000 if status == "timed_out" else 0),
        )
        for i, status in enumerate(statuses)
    )

    sign_in_by_cookie(page, "ada", f"/jobs/{job.pk}/")
    page.click("button:has-text('Run now')")
    expect(page.locator("#flash")).to_contain_text("Queued a manual run")
    manual = Run.objects.get(job=job, trigger=Run.Trigger.MANUAL)
    row = page.locator(f"#run-{manual.pk}")
    expect(row).to_contain_text("Queued")
    expect(page.locator("#run-history")).to_have_attribute("data-live", "yes")  # polls every 2 s
    remember_page(page)

    scheduler = make_scheduler(worker_id="browser-test")
    now = timezone.now()
    assert scheduler.claim_queued(now)
    drain(scheduler, timezone.now(), timeout=5)
    manual.refresh_from_db()
    assert manual.status == Run.Status.SUCCEEDED, manual.error

    # The history polls and picks the outcome up without a reload; then it slows down.
    expect(row).to_contain_text("Succeeded", timeout=8000)
    expect(row).to_contain_text("browser-test")
    expect(page.locator("#run-history")).to_have_attribute("data-live", "no")
    # What the run changed elsewhere on the page came along with the history.
    expect(page.locator("#job-actions button:has-text('Run now')")).to_be_enabled()
    expect(page.locator("#job-summary")).to_contain_text("Succeeded")
    assert_not_reloaded(page)

    row.locator("a").first.click()
    expect(page.locator("#run-viewer #run-log")).to_contain_text("greeting = hello")
    expect(page.locator("#run-viewer")).to_contain_text("2 properties")
    assert_not_reloaded(page)
    screenshot("job-history")
    scheduler.pool.wait(0)
    assert page.js_errors == []


def test_log_markup_is_inert_in_the_browser(page, staff):
    job = make_job(name="evil-output")
    run = Run.objects.create(
        job=job,
        scheduled_at=timezone.now(),
        trigger="manual",
        status="failed",
        log='<div id="pwned" hx-get="/jobs/new/" hx-trigger="load">x</div><img src=x onerror="window.__pwned=1">',
    )
    sign_in_by_cookie(page, "ada", f"/runs/{run.pk}/")
    expect(page.locator("#run-log")).to_contain_text('<div id="pwned"')
    page.wait_for_timeout(500)
    assert page.locator("#pwned").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_expired_session_sends_htmx_to_the_login_page(page, staff):
    job = make_job(name="session-test")
    sign_in_by_cookie(page, "ada", f"/jobs/{job.pk}/")
    page.context.clear_cookies()
    page.select_option("#run-history select[name=status]", "failed")
    expect(page).to_have_url(re.compile(r"/login/\?next="))
    expect(page.locator("h1")).to_have_text("Sign in")
    assert page.locator("#run-history").count() == 0
