"""The console's pages on the server side (Django's test client): bulk
actions, labels and errors after a failed save, the cron preview's columns
and zone names, live-region endpoints, tokens, favicon, links in messages,
history URLs, all runs, upcoming fires, the dashboard, import and export.
The browser side is tests/test_console_pages_browser.py."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.urls import reverse

from jobs import cron
from jobs.handlers import registry
from jobs.models import APIToken, AuditEvent, Job, Message, Run
from tests.factories import job_data

HTMX = {"HX-Request": "true"}


def flash(html: str) -> list[str]:
    return re.findall(r'<p class="flash ([a-z ]+)" role="\w+">(.*?)</p>', html, re.S)


# -- 1. bulk actions -------------------------------------------------------------------


def test_bulk_pause_with_nothing_ticked_is_refused(staff_client, make_job):
    job = make_job(name="untouched")
    response = staff_client.post(reverse("jobs:job_bulk"), {"action": "pause"}, headers=HTMX)
    (tags, text), *_ = flash(response.content.decode())
    assert "error" in tags and "Nothing was paused" in text and "tick" in text
    assert Job.objects.get(pk=job.pk).state == Job.State.ENABLED
    assert not AuditEvent.objects.filter(action="pause").exists()


def test_bulk_pause_leaves_a_crashed_job_crashed_and_says_so(staff_client, make_job):
    crashed = make_job(name="import-orders", state=Job.State.CRASHED, consecutive_failures=3)
    fine = make_job(name="billing-sync")
    response = staff_client.post(
        reverse("jobs:job_bulk"), {"action": "pause", "ids": [crashed.pk, fine.pk]}, headers=HTMX
    )
    (tags, text), *_ = flash(response.content.decode())
    assert "warning" in tags
    assert "Paused 1 job." in text and "Left 1 crashed job crashed" in text and "import-orders" in text
    crashed.refresh_from_db()
    assert crashed.state == Job.State.CRASHED and crashed.consecutive_failures == 3
    assert Job.objects.get(pk=fine.pk).state == Job.State.PAUSED


def test_bulk_pause_of_jobs_already_paused_says_so_not_a_green_paused_0(staff_client, make_job):
    paused = make_job(name="resting", state=Job.State.PAUSED)
    response = staff_client.post(
        reverse("jobs:job_bulk"), {"action": "pause", "ids": [paused.pk]}, headers=HTMX
    )
    (tags, text), *_ = flash(response.content.decode())
    assert "warning" in tags and "success" not in tags
    assert "“resting” was already paused." in text
    both = [paused.pk, make_job(name="fresh").pk]
    response = staff_client.post(reverse("jobs:job_bulk"), {"action": "resume", "ids": both}, headers=HTMX)
    (tags, text), *_ = flash(response.content.decode())
    assert "success" in tags and "Resumed 1 job." in text and "“fresh” was already enabled." in text


def test_a_poll_of_the_job_list_does_not_wipe_the_flash(staff_client, make_job):
    make_job(name="polled")
    as_poll = staff_client.get(
        reverse("jobs:job_list"), headers={**HTMX, "HX-Target": "job-table", "HX-Trigger": "job-table"}
    )
    assert 'id="flash"' not in as_poll.content.decode()
    as_filter = staff_client.get(
        reverse("jobs:job_list"),
        {"q": "pol"},
        headers={**HTMX, "HX-Target": "job-table", "HX-Trigger": "job-filters"},
    )
    assert 'id="flash" hx-swap-oob="true"' in as_filter.content.decode()


def test_the_search_box_leaving_focus_does_not_refilter(staff_client):
    html = staff_client.get(reverse("jobs:job_list")).content.decode()
    trigger = re.search(r'<form id="job-filters"[^>]*hx-trigger="([^"]+)"', html, re.S).group(1)
    # Typing filters; the selects filter on change; a bare "change" (which the
    # search box fires when a tick takes the focus) does not.
    assert trigger == "input changed delay:300ms from:input[name=q], change from:select.job-filter"


# -- 4. after a failed save ------------------------------------------------------------------


def labels(html: str) -> dict[str, str]:
    return dict(re.findall(r'<label for="id_(\w+)">([^<]+)', html))


def test_labels_are_the_same_after_a_failed_save(staff_client):
    before = labels(staff_client.get(reverse("jobs:job_create")).content.decode())
    bad = job_data(name="", cron_expression="0 0 12 5 * 1", max_retries="500", alert_threshold="5000")
    after = labels(
        staff_client.post(
            reverse("jobs:job_create"), bad, headers={**HTMX, "HX-Target": "job-form"}
        ).content.decode()
    )
    assert before["schedule_type"] == after["schedule_type"] == "Schedule"
    assert before["max_retries"] == after["max_retries"] == "Retries"
    assert after["alert_threshold"] == "Alert after this many failed fires in a row"
    assert {k: v for k, v in after.items() if k in before} == before


def test_the_error_summary_links_each_field_and_the_cron_error_shows_once(staff_client):
    bad = job_data(name="", cron_expression="0 0 12 5 * 1")
    html = staff_client.post(
        reverse("jobs:job_create"), bad, headers={**HTMX, "HX-Target": "job-form"}
    ).content.decode()
    summary = re.search(
        r'<div class="flash error error-summary"[^>]*id="form-errors"[^>]*>(.*?)</div>', html, re.S
    )
    assert summary and 'tabindex="-1"' in html
    assert '<a href="#id_name">Name</a>' in summary.group(1)
    assert '<a href="#id_cron_expression">Cron expression</a>' in summary.group(1)
    # 47003 once below the field (in the live preview, which drops it when fixed), not twice.
    after_summary = html[summary.end() :]
    assert after_summary.count("47003") == 1
    assert re.search(r'id="cron-error"><code class="code">47003</code>', after_summary)
    assert not Job.objects.filter(builtin=False).exists()


def test_a_required_cron_error_stays_under_the_field(staff_client):
    html = staff_client.post(reverse("jobs:job_create"), job_data(cron_expression="")).content.decode()
    field = re.search(r'id="field-cron_expression">(.*?)</div>', html, re.S).group(1)
    assert "Enter a cron expression." in field


# -- 6. handler help -----------------------------------------------------------------------------


def test_the_form_carries_each_handlers_description_and_property_help(staff_client):
    html = staff_client.get(reverse("jobs:job_create")).content.decode()
    for info in registry.available():
        block = re.search(rf'<div data-handler-help="{re.escape(info.name)}"[^>]*>(.*?)</div>', html, re.S)
        assert block, info.name
        # Its code spans as <code> (jobs.web.templatetags.console.code_spans).
        shown = re.sub(r"`([^`]+)`", r"<code>\1</code>", str(info.description))
        assert shown in block.group(1).replace("&#x27;", "'")
        for key in info.properties_help:
            assert f"<code>{key}</code>" in block.group(1)
    # Only the chosen handler's help is visible.
    edit = staff_client.get(reverse("jobs:job_create")).content.decode()
    assert all(" hidden" in tag for tag in re.findall(r"<div data-handler-help=[^>]*>", edit))


# -- 8. the cron preview --------------------------------------------------------------------------


def preview(client, expression, zone):
    return client.get(
        reverse("jobs:cron_preview"), {"cron_expression": expression, "timezone": zone}
    ).content.decode()


def test_a_utc_preview_has_one_time_column(staff_client):
    for zone in ("UTC", "Etc/UTC"):
        html = preview(staff_client, "0 0 * * * *", zone)
        assert re.findall(r"<th[^>]*>([^<]*)</th>", html)[:2] == ["#", "In UTC"]
        assert html.count(" UTC</td>") == 5  # the time's own cell, not a second copy
        assert '<th scope="col">UTC</th>' not in html
    berlin = preview(staff_client, "0 0 * * * *", "Europe/Berlin")
    assert "In Europe/Berlin" in berlin and '<th scope="col">UTC</th>' in berlin


@time_machine.travel(datetime(2026, 10, 31, 12, tzinfo=UTC), tick=False)
def test_repeated_hour_rows_keep_the_zone_abbreviation(staff_client):
    html = preview(staff_client, "0 */30 1 * * *", "America/New_York")
    rows = re.findall(r"<tr>(.*?)</tr>", html.split("<tbody>")[1], re.S)
    repeated = [row for row in rows if "DST repeated hour" in row]
    assert repeated
    # Both 01:00s and both 01:30s of 1 November, each with the side of the fold it is on.
    cells = [re.search(r"<td>(Sun 2026-11-01 01:[03]0:00 [A-Z]+)</td>", row).group(1) for row in rows[:4]]
    assert cells == [
        "Sun 2026-11-01 01:00:00 EDT",
        "Sun 2026-11-01 01:30:00 EDT",
        "Sun 2026-11-01 01:00:00 EST",
        "Sun 2026-11-01 01:30:00 EST",
    ]


def test_the_interval_box_knows_the_five_second_floor(staff_client):
    html = staff_client.get(reverse("jobs:job_create")).content.decode()
    box = re.search(r'<input type="number" name="interval_seconds"[^>]*>', html).group(0)
    assert f'min="{cron.MIN_INTERVAL_SECONDS}"' in box and f'data-min-code="{cron.INTERVAL_TOO_SHORT}"' in box
    assert f"At least {cron.MIN_INTERVAL_SECONDS} seconds." in html
    assert Job.MIN_INTERVAL_SECONDS == cron.MIN_INTERVAL_SECONDS


# -- 3. live regions -------------------------------------------------------------------------------


def test_the_unread_badge_has_its_own_url(viewer_client, viewer_user):
    url = reverse("jobs:unread_count")
    assert '<span class="count"' not in viewer_client.get(url).content.decode()
    Message.objects.create(user=viewer_user, subject="job crashed")
    html = viewer_client.get(url).content.decode()
    assert html.lstrip().startswith("{#") is False and 'id="unread-count"' in html
    assert 'title="1 unread">1' in html and 'data-poll-version="1"' in html and 'hx-trigger="poll"' in html


def test_the_run_viewer_polls_only_while_the_run_is_live(staff_client, make_job):
    job = make_job()
    run = Run.objects.create(
        job=job, scheduled_at=job.created_at, trigger="manual", status="running", log="step 1\n"
    )
    live = staff_client.get(reverse("jobs:run_detail", args=[run.pk])).content.decode()
    assert 'hx-trigger="poll"' in live and "step 1" in live
    Run.objects.filter(pk=run.pk).update(status="succeeded", log="step 1\nstep 2\n")
    done = staff_client.get(
        reverse("jobs:run_detail", args=[run.pk]), headers={**HTMX, "HX-Target": "run-viewer"}
    ).content.decode()
    assert 'hx-trigger="poll"' not in done and "step 2" in done and "<html" not in done


def test_the_job_page_refreshes_its_crash_banner_with_the_history(staff_client, make_job):
    job = make_job(name="flaky")
    Job.objects.filter(pk=job.pk).update(state=Job.State.CRASHED, consecutive_failures=3)
    html = staff_client.get(reverse("jobs:job_runs", args=[job.pk]), headers=HTMX).content.decode()
    assert '<div id="job-banner" hx-swap-oob="true">' in html and "crash-banner" in html
    assert '<span class="badge state-crashed" id="job-state" hx-swap-oob="true">' in html


# -- 7. tokens, favicon, messages, history URLs ---------------------------------------------------


def test_creating_a_token_redirects_and_a_reload_creates_no_second_one(staff_client):
    response = staff_client.post(reverse("jobs:profile"), {"name": "laptop"})
    assert response.status_code == 302
    first = staff_client.get(reverse("jobs:profile")).content.decode()
    secret = re.search(r'<code id="new-token-secret">(cb_[\w-]+)</code>', first).group(1)
    assert 'data-copy="#new-token-secret"' in first
    reload = staff_client.get(reverse("jobs:profile")).content.decode()
    assert secret not in reload and "new-token-secret" not in reload
    assert APIToken.objects.count() == 1


def test_revoking_asks_first(staff_client, staff_user):
    from jobs import tokens

    token, _ = tokens.create_token(user=staff_user, name="ci")
    html = staff_client.get(reverse("jobs:profile")).content.decode()
    confirm = re.search(r'<details class="confirm">(.*?)</details>', html, re.S).group(1)
    assert "<summary" in confirm and "Revoke “ci”?" in confirm
    assert f'name="revoke" value="{token.pk}"' in confirm
    # The empty header cell has words for screen readers.
    assert '<th scope="col"><span class="visually-hidden">Actions</span></th>' in html


def test_favicon_is_served(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    assert response.content[:4] == b"\x00\x00\x01\x00"


def test_links_in_messages_are_links_and_everything_else_is_escaped(viewer_client, viewer_user):
    Message.objects.create(
        user=viewer_user,
        subject="crashed",
        body='Re-enable it: http://cron.example/jobs/7/. <script>alert(1)</script> javascript:alert(2) "x"',
    )
    html = viewer_client.get(reverse("jobs:messages")).content.decode()
    assert (
        '<a href="http://cron.example/jobs/7/" rel="noopener noreferrer">http://cron.example/jobs/7/</a>.'
        in html
    )
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'href="javascript' not in html


def test_history_filters_and_pages_go_into_the_address_bar(staff_client, make_job):
    job = make_job()
    html = staff_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    form = re.search(r'<form class="filters"[^>]*>', html).group(0)
    assert f'hx-get="/jobs/{job.pk}/"' in form and 'hx-push-url="true"' in form
    # That URL, asked for by htmx for the history, answers the history (with the panels out of band).
    partial = staff_client.get(
        reverse("jobs:job_detail", args=[job.pk]),
        {"status": "failed"},
        headers={**HTMX, "HX-Target": "run-history"},
    ).content.decode()
    assert partial.lstrip().startswith("{#") is False and "<html" not in partial
    assert 'id="run-history"' in partial and "status=failed" in partial
    assert '<option value="failed" selected>' in partial


def test_every_page_has_a_skip_link_and_a_main_landmark(staff_client):
    html = staff_client.get(reverse("jobs:job_list")).content.decode()
    assert '<a class="skip-link" href="#main">' in html and '<main id="main" tabindex="-1">' in html
    assert 'aria-controls="topbar-menu"' in html and 'aria-expanded="false"' in html


# -- new views: bulk run and delete, clone, log download ---------------------------------------


def test_bulk_delete_asks_first_naming_the_jobs(staff_client, make_job):
    a, b = make_job(name="old-a"), make_job(name="old-b")
    url = reverse("jobs:job_bulk") + "?q=old&sort=name"
    asked = staff_client.post(
        url, {"action": "delete", "ids": [a.pk, b.pk]}, headers={**HTMX, "HX-Target": "job-table"}
    )
    html = asked.content.decode()
    assert "Delete 2 jobs?" in html and "<li>old-a</li>" in html and "<li>old-b</li>" in html
    assert 'name="confirm" value="yes"' in html
    assert Job.objects.live().filter(pk__in=[a.pk, b.pk]).count() == 2  # nothing deleted yet
    # Without htmx the question is a page of its own.
    page = staff_client.post(url, {"action": "delete", "ids": [a.pk]}).content.decode()
    assert "<html" in page and "Delete 1 job?" in page
    done = staff_client.post(url, {"action": "delete", "ids": [a.pk, b.pk], "confirm": "yes"}, headers=HTMX)
    assert "Deleted 2 jobs." in done.content.decode()
    assert not Job.objects.live().filter(pk__in=[a.pk, b.pk]).exists()
    assert AuditEvent.objects.filter(action="delete").count() == 2


def test_bulk_delete_refuses_a_built_in_job_and_says_so(staff_client, make_job):
    builtin = make_job(name="housekeeping", builtin=True)
    html = staff_client.post(
        reverse("jobs:job_bulk"), {"action": "delete", "ids": [builtin.pk], "confirm": "yes"}, headers=HTMX
    ).content.decode()
    assert "Deleted 0 jobs." in html and "Built-in jobs cannot be deleted" in html
    assert Job.objects.live().filter(pk=builtin.pk).exists()


def test_bulk_run_queues_one_manual_run_each(staff_client, make_job):
    a, b = make_job(name="run-a"), make_job(name="run-b")
    html = staff_client.post(
        reverse("jobs:job_bulk"), {"action": "run", "ids": [a.pk, b.pk]}, headers=HTMX
    ).content.decode()
    assert "Queued a manual run of 2 jobs." in html
    assert Run.objects.filter(job__in=[a, b], trigger="manual").count() == 2
    again = staff_client.post(
        reverse("jobs:job_bulk"), {"action": "run", "ids": [a.pk]}, headers=HTMX
    ).content.decode()
    assert "Queued a manual run of 0 jobs." in again and "“run-a” already had a manual run" in again
    assert Run.objects.filter(job=a, trigger="manual").count() == 1


def test_bulk_run_is_refused_in_demo_mode(staff_client, make_job, settings):
    settings.DEMO_MODE = True
    job = make_job(name="demo")
    html = staff_client.post(
        reverse("jobs:job_bulk"), {"action": "run", "ids": [job.pk]}, headers=HTMX
    ).content.decode()
    assert "Run now is disabled in demo mode." in html and not Run.objects.filter(job=job).exists()


def test_a_viewer_cannot_use_bulk_actions(viewer_client, make_job):
    job = make_job(name="theirs")
    response = viewer_client.post(
        reverse("jobs:job_bulk"), {"action": "delete", "ids": [job.pk], "confirm": "yes"}
    )
    assert response.status_code == 403 and Job.objects.live().filter(pk=job.pk).exists()


def test_clone_fills_the_new_job_form_and_saves_a_new_paused_job(staff_client, make_job):
    job = make_job(
        name="nightly",
        description="the report",
        cron_expression="0 30 2 * * *",
        timezone="Europe/Berlin",
        properties={"region": "eu"},
        max_retries=2,
    )
    html = staff_client.get(reverse("jobs:job_clone", args=[job.pk])).content.decode()
    assert 'value="nightly (copy)"' in html and "a copy of" in html
    assert (
        'value="0 30 2 * * *"' in html
        and "Europe/Berlin" in html
        and "&quot;region&quot;: &quot;eu&quot;" in html
    )
    assert f'action="{reverse("jobs:job_create")}"' in html
    data = job_data(
        name="nightly (copy)",
        cron_expression="0 30 2 * * *",
        properties='{"region": "eu"}',
        max_retries="2",
        state="paused",
    )
    response = staff_client.post(reverse("jobs:job_create"), data)
    assert response.status_code == 302
    copy = Job.objects.get(name="nightly (copy)")
    assert copy.pk != job.pk and copy.state == Job.State.PAUSED and copy.properties == {"region": "eu"}
    # A second clone gets the next free name.
    assert (
        'value="nightly (copy 2)"'
        in staff_client.get(reverse("jobs:job_clone", args=[job.pk])).content.decode()
    )


def test_a_runs_log_downloads_as_a_text_file(staff_client, viewer_client, make_job):
    job = make_job()
    run = Run.objects.create(
        job=job, scheduled_at=job.created_at, trigger="manual", status="succeeded", log="<b>line</b>\\n"
    )
    response = viewer_client.get(reverse("jobs:run_log", args=[run.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}.log"'
    assert response.content.decode() == "<b>line</b>\\n"
    assert staff_client.get(reverse("jobs:run_log", args=[999999])).status_code == 404


def test_retry_a_failed_run_queues_a_manual_run_named_in_the_audit_trail(staff_client, make_job):
    job = make_job(name="flaky")
    failed = Run.objects.create(
        job=job, scheduled_at=job.created_at, trigger="schedule", status="failed", error="boom"
    )
    viewer = staff_client.get(reverse("jobs:run_detail", args=[failed.pk])).content.decode()
    assert reverse("jobs:run_retry", args=[failed.pk]) in viewer
    response = staff_client.post(reverse("jobs:run_retry", args=[failed.pk]))
    assert response.status_code == 302 and response.url == reverse("jobs:job_detail", args=[job.pk])
    retry = Run.objects.get(job=job, trigger="manual")
    assert retry.status == "queued"
    event = AuditEvent.objects.get(job=job, action="run-now")
    assert event.changes == {"run": [None, retry.pk], "retry_of": [None, failed.pk]}
    # Asked again while that one is queued: no second run.
    staff_client.post(reverse("jobs:run_retry", args=[failed.pk]))
    assert Run.objects.filter(job=job, trigger="manual").count() == 1


def test_only_a_finished_unsuccessful_run_can_be_retried(staff_client, viewer_client, make_job):
    job = make_job()
    ok = Run.objects.create(job=job, scheduled_at=job.created_at, trigger="schedule", status="succeeded")
    assert (
        reverse("jobs:run_retry", args=[ok.pk])
        not in staff_client.get(reverse("jobs:run_detail", args=[ok.pk])).content.decode()
    )
    staff_client.post(reverse("jobs:run_retry", args=[ok.pk]))
    assert not Run.objects.filter(job=job, trigger="manual").exists()
    failed = Run.objects.create(
        job=job, scheduled_at=job.created_at + timedelta(minutes=1), trigger="schedule", status="failed"
    )
    assert viewer_client.post(reverse("jobs:run_retry", args=[failed.pk])).status_code == 403
    assert staff_client.get(reverse("jobs:run_retry", args=[failed.pk])).status_code == 405
    assert not Run.objects.filter(job=job, trigger="manual").exists()


# -- all runs across jobs (console and API) -------------------------------------------------------


@time_machine.travel(datetime(2026, 6, 1, 12, tzinfo=UTC), tick=False)
def test_all_runs_page_filters_running_now_and_failed_today(staff_client, make_job):
    from django.utils import timezone

    a, b = make_job(name="alpha"), make_job(name="beta")
    now = timezone.now()
    running = Run.objects.create(job=a, scheduled_at=now, trigger="schedule", status="running")
    failed_today = Run.objects.create(
        job=b, scheduled_at=now.replace(hour=1), trigger="manual", status="failed", error="boom"
    )
    failed_yesterday = Run.objects.create(
        job=b, scheduled_at=now.replace(day=1, month=5), trigger="schedule", status="failed"
    )
    ok = Run.objects.create(job=a, scheduled_at=now.replace(hour=2), trigger="schedule", status="succeeded")

    def ids(query):
        html = staff_client.get(reverse("jobs:run_list"), query).content.decode()
        return [int(pk) for pk in re.findall(r'<tr id="run-(\d+)">', html)]

    assert ids({}) == [running.pk, ok.pk, failed_today.pk, failed_yesterday.pk]
    assert ids({"status": "live"}) == [running.pk]
    assert ids({"status": "failed", "since": "today"}) == [failed_today.pk]
    assert ids({"status": "failed"}) == [failed_today.pk, failed_yesterday.pk]
    assert ids({"trigger": "manual"}) == [failed_today.pk]
    assert ids({"job": a.pk}) == [running.pk, ok.pk]
    # Hostile or unknown filters are ignored, never a 500.
    for query in (
        {"status": "x' OR 1=1"},
        {"since": "forever"},
        {"job": "-1"},
        {"before": "a.b"},
        {"job": "9" * 30},
    ):
        assert staff_client.get(reverse("jobs:run_list"), query).status_code == 200
    html = staff_client.get(reverse("jobs:run_list"), {"status": "failed"}).content.decode()
    assert "boom" in html and "beta" in html and 'data-poll-version="' in html


@time_machine.travel(datetime(2026, 6, 1, 12, tzinfo=UTC), tick=False)
def test_the_dashboards_failed_today_lists_every_run_its_count_counts(staff_client, staff_user, make_job):
    from django.utils import timezone

    from jobs.overview import dashboard_figures

    job = make_job(name="alpha")
    now = timezone.now()
    made = {
        status: Run.objects.create(
            job=job, scheduled_at=now.replace(hour=hour), trigger="schedule", status=status
        )
        for hour, status in enumerate(
            ("failed", "timed_out", "interrupted", "cancelled", "succeeded"), start=1
        )
    }
    dashboard = staff_client.get(reverse("jobs:dashboard")).content.decode()
    link = re.search(r'href="(/[^"]*)">Failed today<', dashboard).group(1).replace("&amp;", "&")
    html = staff_client.get(link).content.decode()
    listed = {int(pk) for pk in re.findall(r'<tr id="run-(\d+)">', html)}
    assert listed == {made[s].pk for s in ("failed", "timed_out", "interrupted")}
    by_status = dashboard_figures(staff_user, now=now)["runs_24h_by_status"]
    assert len(listed) == sum(by_status[s] for s in Run.FAILED_OUTCOMES)
    # The quick filter on the runs page is the same view, and status=failed still means failed only.
    assert 'href="?status=failures&amp;since=today" aria-current="page"' in html
    failed_only = staff_client.get(reverse("jobs:run_list"), {"status": "failed"}).content.decode()
    assert re.findall(r'<tr id="run-(\d+)">', failed_only) == [str(made["failed"].pk)]


def test_all_runs_page_pages_with_a_cursor(staff_client, make_job):
    from django.utils import timezone

    job = make_job()
    start = timezone.now()
    Run.objects.bulk_create(
        Run(
            job=job,
            scheduled_at=start.replace(microsecond=0) - timedelta(seconds=i),
            trigger="schedule",
            status="succeeded",
        )
        for i in range(30)
    )
    first = staff_client.get(reverse("jobs:run_list")).content.decode()
    older = (
        re.search(r'<a class="button small" href="(\?[^"]+)"[^>]*>Older', first)
        .group(1)
        .replace("&amp;", "&")
    )
    second = staff_client.get(reverse("jobs:run_list") + older).content.decode()
    seen = re.findall(r'<tr id="run-(\d+)">', first) + re.findall(r'<tr id="run-(\d+)">', second)
    assert len(seen) == len(set(seen)) == 30
    section = re.search(r'<section class="card" id="run-list"[^>]*>', second).group(0)
    assert 'hx-trigger="poll"' not in section  # a deeper page holds still


def test_all_runs_page_makes_the_same_queries_for_one_run_or_a_page_of_many_jobs(staff_client, make_job):
    """The fixed query count `bench pages` reports for "all runs", held by a test."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    now = timezone.now()
    Run.objects.create(job=make_job(), scheduled_at=now, trigger="schedule", status="failed", error="x")
    counts = []
    for query in ({}, {"status": "failed", "since": "today"}):
        with CaptureQueriesContext(connection) as few:
            assert staff_client.get(reverse("jobs:run_list"), query).status_code == 200
        counts.append(len(few))
    for i in range(60):
        Run.objects.create(
            job=make_job(),
            scheduled_at=now - timedelta(seconds=i + 1),
            trigger=("schedule", "manual", "api")[i % 3],
            status=("failed", "running", "succeeded")[i % 3],
            started_at=now,
        )
    for query, before in zip(({}, {"status": "failed", "since": "today"}), counts, strict=True):
        with CaptureQueriesContext(connection) as many:
            html = staff_client.get(reverse("jobs:run_list"), query).content.decode()
        assert len(many) == before, [q["sql"] for q in many.captured_queries]
        assert html.count('<tr id="run-') > 1


def test_api_lists_runs_across_jobs(staff_client, staff_user, make_job):
    from jobs import tokens
    from tests.fixtures.api import ApiClient

    a, b = make_job(name="alpha"), make_job(name="beta")
    ra = Run.objects.create(
        job=a, scheduled_at=datetime(2026, 1, 1, tzinfo=UTC), trigger="schedule", status="failed"
    )
    rb = Run.objects.create(
        job=b, scheduled_at=datetime(2026, 1, 2, tzinfo=UTC), trigger="schedule", status="succeeded"
    )
    _token, secret = tokens.create_token(user=staff_user, name="t")
    api = ApiClient(secret)
    assert [r["id"] for r in api.get("/api/runs").json()["results"]] == [rb.pk, ra.pk]
    assert [r["id"] for r in api.get("/api/runs", {"status": "failed"}).json()["results"]] == [ra.pk]
    assert [r["id"] for r in api.get("/api/runs", {"job": b.pk}).json()["results"]] == [rb.pk]
    page = api.get("/api/runs", {"limit": 1}).json()
    assert page["next_cursor"] and [
        r["id"] for r in api.get("/api/runs", {"limit": 1, "cursor": page["next_cursor"]}).json()["results"]
    ] == [ra.pk]
    assert api.get("/api/runs", {"job": "x"}).status_code == 400
    assert api.get("/api/runs", {"status": "nope"}).status_code == 400


# -- upcoming fires across jobs ------------------------------------------------------------------------


@time_machine.travel(datetime(2026, 10, 31, 22, 0, tzinfo=UTC), tick=False)
def test_upcoming_merges_every_jobs_fires_in_time_order_with_dst_marks(staff_client, make_job):
    from jobs.upcoming import upcoming_fires

    now = datetime(2026, 10, 31, 22, 0, tzinfo=UTC)
    # Every 6 hours from now; hourly at :30 in New York (clocks fall back 1 Nov 06:00 UTC); once.
    every6 = make_job(
        name="every-6h",
        schedule_type=Job.ScheduleType.INTERVAL,
        cron_expression="",
        interval_seconds=6 * 3600,
        next_fire_at=now + timedelta(hours=6),
    )
    ny = make_job(
        name="ny",
        cron_expression="0 30 * * * *",
        timezone="America/New_York",
        next_fire_at=datetime(2026, 10, 31, 22, 30, tzinfo=UTC),
    )
    once = make_job(name="once", run_once=True, next_fire_at=now + timedelta(hours=1, minutes=5))
    make_job(name="paused", state=Job.State.PAUSED, next_fire_at=None)

    fires, more = upcoming_fires(Job.objects.live(), start=now, end=now + timedelta(hours=24), limit=1000)
    assert not more
    assert [f.at for f in fires] == sorted(f.at for f in fires)
    by_job = {job.pk: [f for f in fires if f.job.pk == job.pk] for job in (every6, ny, once)}
    assert [f.at for f in by_job[every6.pk]] == [now + timedelta(hours=h) for h in (6, 12, 18)]
    assert len(by_job[once.pk]) == 1
    assert len(by_job[ny.pk]) == 24  # hourly, the repeated 01:30 twice
    marks = {(f.local.strftime("%H:%M %Z"), f.dst) for f in by_job[ny.pk] if f.dst}
    assert ("01:30 EDT", "repeated") in marks and ("01:30 EST", "repeated") in marks

    # Pages: limit and a cursor continue exactly where the last page stopped.
    first, more = upcoming_fires(Job.objects.live(), start=now, end=now + timedelta(hours=24), limit=10)
    assert more and first == fires[:10]
    rest, _ = upcoming_fires(
        Job.objects.live(),
        start=now,
        end=now + timedelta(hours=24),
        limit=1000,
        after=(first[-1].at, first[-1].job.pk),
    )
    assert first + rest == fires

    html = staff_client.get(reverse("jobs:upcoming")).content.decode()
    assert html.count('<tr class="fire"') == len(fires)
    assert (
        "DST repeated hour" in html
        and "every-6h" in html
        and "paused" not in re.sub(r"<head>.*?</head>", "", html, flags=re.S).split("<tbody>")[1]
    )


def test_upcoming_pages_over_many_jobs_without_walking_them_all(
    staff_client, make_job, django_assert_max_num_queries
):
    from django.utils import timezone

    now = timezone.now()
    # Daily jobs: each fires once in the 24-hour window, whatever second of
    # the minute the test starts at (an every-minute job due a second from
    # now fires again at the next minute, which may come before j001's fire).
    for i in range(450):
        make_job(
            name=f"j{i:03d}",
            next_fire_at=now + timedelta(seconds=i + 1),
            schedule_type="interval",
            interval_seconds=86_400,
            cron_expression="",
        )
    with django_assert_max_num_queries(8):
        html = staff_client.get(reverse("jobs:upcoming")).content.decode()
    names = re.findall(r'<tr class="fire" data-job="\d+">.*?>(j\d{3})</a>', html, re.S)
    assert names[:3] == ["j000", "j001", "j002"] and len(names) == 100
    later = re.search(r'href="(\?window=24h&amp;after=[^"]+)"', html).group(1).replace("&amp;", "&")
    second = staff_client.get(reverse("jobs:upcoming") + later).content.decode()
    assert re.findall(r">(j\d{3})</a>", second)[0] != names[-1]


def test_api_upcoming(staff_user, make_job):
    from django.utils import timezone

    from jobs import tokens
    from tests.fixtures.api import ApiClient

    now = timezone.now()
    job = make_job(name="soon", next_fire_at=now + timedelta(minutes=1), timezone="Europe/Berlin")
    _token, secret = tokens.create_token(user=staff_user, name="t")
    api = ApiClient(secret)
    body = api.get("/api/upcoming", {"limit": 2}).json()
    assert body["results"][0]["job"] == job.pk and body["results"][0]["timezone"] == "Europe/Berlin"
    assert body["next_cursor"]
    follow = api.get("/api/upcoming", {"limit": 2, "cursor": body["next_cursor"]}).json()["results"]
    assert follow[0]["at"] > body["results"][-1]["at"]
    assert api.get("/api/upcoming", {"window": "1y"}).status_code == 400
    assert api.get("/api/upcoming", {"cursor": "zzz"}).status_code == 400
    assert api.get("/api/upcoming", {"limit": "0"}).status_code == 400


# -- the dashboard ------------------------------------------------------------------------------------


def test_dashboard_figures_page_and_api(staff_client, staff_user, make_job, django_assert_max_num_queries):
    from django.utils import timezone

    from jobs import tokens
    from tests.fixtures.api import ApiClient

    now = timezone.now()
    crashed = make_job(name="crashed-one", state=Job.State.CRASHED, consecutive_failures=3, last_error="boom")
    failing = make_job(name="failing-one", consecutive_failures=1)
    make_job(name="fine")
    make_job(name="resting", state=Job.State.PAUSED)
    for i, status in enumerate(["succeeded", "succeeded", "succeeded", "failed", "skipped"]):
        Run.objects.create(
            job=failing, scheduled_at=now - timedelta(hours=1, minutes=i), trigger="schedule", status=status
        )
    Run.objects.create(job=failing, scheduled_at=now - timedelta(days=3), trigger="schedule", status="failed")
    live = Run.objects.create(
        job=crashed, scheduled_at=now - timedelta(minutes=1), trigger="manual", status="running"
    )

    # The trends' lists of jobs, uncached here, are three of them: whether
    # the window's per-job totals are current, the slowest, the most failing.
    with django_assert_max_num_queries(14):
        html = staff_client.get(reverse("jobs:dashboard")).content.decode()
    assert re.search(r'id="tile-crashed">\s*<span class="tile-number">1<', html)
    assert re.search(r'id="tile-paused">\s*<span class="tile-number">1<', html)
    assert "75.0 %" in html  # 3 of 4 finished runs in 24 h (the skip does not count)
    attention = html.split('id="needs-attention"')[1].split("</section>")[0]
    assert attention.index("crashed-one") < attention.index("failing-one") and "fine" not in attention
    assert f"#{live.pk}" in html.split('id="running-now"')[1]

    _token, secret = tokens.create_token(user=staff_user, name="t")
    body = ApiClient(secret).get("/api/dashboard").json()
    assert body["jobs_by_state"]["crashed"] == 1 and body["jobs_by_state"]["paused"] == 1
    assert body["runs_24h_by_status"]["succeeded"] == 3 and body["runs_24h_by_status"]["failed"] == 1
    assert body["success_rate_24h"] == 75.0
    assert [j["name"] for j in body["attention"]] == ["crashed-one", "failing-one"]
    assert [r["id"] for r in body["running"]] == [live.pk] and body["running_count"] == 1


def test_dashboard_attention_rows_say_how_often_and_when_and_escape_what_jobs_wrote(staff_client, make_job):
    from django.utils import timezone

    job = make_job(
        name="<b>loud</b>",
        state=Job.State.CRASHED,
        consecutive_failures=3,
        last_fire_at=timezone.now() - timedelta(minutes=5),
        last_error="<script>x</script> " + "e" * 200,
    )
    make_job(name="once", consecutive_failures=1)
    html = staff_client.get(reverse("jobs:dashboard")).content.decode()
    attention = html.split('id="needs-attention"')[1].split("</section>")[0]
    assert f'href="{reverse("jobs:job_detail", args=[job.pk])}"' in attention
    assert "&lt;b&gt;loud&lt;/b&gt;" in attention and "<b>" not in attention
    assert "3 failed fires in a row · last <time datetime=" in attention
    assert "1 failed fire in a row</span>" in attention  # no last fire: no "· last"
    assert "&lt;script&gt;x&lt;/script&gt; " + "e" * 100 + "…" in attention and "<script>" not in attention

    staff_client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/"})
    html = staff_client.get(reverse("jobs:dashboard")).content.decode()
    assert "连续 3 次触发失败 · 最近一次 <time datetime=" in html


def test_export_the_listed_jobs_as_an_import_file(staff_client, make_job, tmp_path):
    import json

    from django.core.management import call_command

    make_job(name="billing-a", description="x", properties={"k": "v"})
    make_job(name="billing-b", state=Job.State.CRASHED, consecutive_failures=3)
    make_job(name="other")
    response = staff_client.get(reverse("jobs:job_export"), {"q": "billing"})
    assert response["Content-Disposition"] == 'attachment; filename="cronboard-jobs.json"'
    specs = json.loads(response.content)
    assert [s["name"] for s in specs] == ["billing-a", "billing-b"]
    assert specs[0]["properties"] == {"k": "v"} and specs[1]["state"] == "enabled"
    # `manage.py jobs import` reads it back: nothing to change.
    path = tmp_path / "jobs.json"
    path.write_bytes(response.content)
    from io import StringIO

    out = StringIO()
    call_command("jobs", "import", str(path), stdout=out)
    assert "0 created, 0 updated, 2 unchanged" in out.getvalue()
    html = staff_client.get(reverse("jobs:job_list"), {"q": "billing"}).content.decode()
    assert f'href="{reverse("jobs:job_export")}?q=billing&amp;limit=1000"' in html


def test_import_previews_then_applies_all_or_nothing(staff_client, make_job):
    import json

    make_job(name="stays", cron_expression="0 * * * * *", timezone="UTC")
    make_job(name="changes", cron_expression="0 * * * * *", timezone="UTC")
    from jobs.serializers import job_to_spec

    specs = [job_to_spec(Job.objects.get(name=n)) for n in ("stays", "changes")]
    specs[1]["cron_expression"] = "0 */5 * * * *"
    specs.append({"name": "brand-new", "handler": "demo.echo", "cron_expression": "0 0 * * * *"})
    text = json.dumps(specs)
    before = AuditEvent.objects.count()

    preview = staff_client.post(reverse("jobs:job_import"), {"text": text}).content.decode()
    assert "1 to create · 1 to update · 1 unchanged" in preview
    assert (
        "<strong>cron_expression</strong>: <code>0 * * * * *</code> → <code>0 */5 * * * *</code>" in preview
    )
    assert not Job.objects.filter(name="brand-new").exists() and AuditEvent.objects.count() == before
    assert Job.objects.get(name="changes").cron_expression == "0 * * * * *"

    done = staff_client.post(reverse("jobs:job_import"), {"text": text, "apply": "1"})
    assert done.status_code == 302
    assert Job.objects.get(name="changes").cron_expression == "0 */5 * * * *"
    assert Job.objects.filter(name="brand-new").exists()
    assert (
        AuditEvent.objects.filter(via="import", username="staff").count() == 2
    )  # the unchanged job is not written


def test_import_with_an_error_saves_nothing_and_says_why(staff_client, make_job):
    import json

    text = json.dumps(
        [
            {"name": "good", "handler": "demo.echo", "cron_expression": "0 0 * * * *"},
            {"name": "bad", "handler": "demo.echo", "cron_expression": "0 0 12 5 * 1"},
        ]
    )
    preview = staff_client.post(reverse("jobs:job_import"), {"text": text}).content.decode()
    assert "1 with errors" in preview and "47003" in preview and 'name="apply"' not in preview
    staff_client.post(reverse("jobs:job_import"), {"text": text, "apply": "1"})
    assert not Job.objects.filter(name__in=["good", "bad"]).exists()
    for hostile in ("{", "[1, 2]", '[{"name": "a"}, {"name": "a"}]', '{"a": 1, "a": 2}', "[" * 100000):
        html = staff_client.post(reverse("jobs:job_import"), {"text": hostile}).content.decode()
        assert 'id="form-errors"' in html, hostile[:20]


def test_an_import_that_meets_a_job_deleted_meanwhile_says_so_and_saves_nothing(
    staff_client, make_job, monkeypatch
):
    import json

    from jobs import imports, services

    job = make_job(name="going")
    planned = imports.plan

    def plan_then_delete(specs, **kwargs):
        out = planned(specs, **kwargs)
        if Job.objects.live().filter(pk=job.pk).exists():
            services.delete_job(job=Job.objects.get(pk=job.pk))  # another admin, meanwhile
        return out

    monkeypatch.setattr(imports, "plan", plan_then_delete)
    text = json.dumps(
        [
            {"name": "new", "handler": "demo.echo", "cron_expression": "0 0 * * * *"},
            {"name": "going", "handler": "demo.echo", "cron_expression": "0 0 * * * *", "description": "x"},
        ]
    )
    response = staff_client.post(reverse("jobs:job_import"), {"text": text, "apply": "1"})
    assert response.status_code == 200
    assert (
        "going: This job was deleted or changed while the file was being imported"
        in response.content.decode()
    )
    assert not Job.objects.filter(name="new").exists()


def test_import_reads_an_uploaded_file(staff_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile(
        "jobs.json", b'[{"name": "up", "handler": "demo.echo", "cron_expression": "0 0 * * * *"}]'
    )
    html = staff_client.post(reverse("jobs:job_import"), {"file": upload}).content.decode()
    assert "1 to create" in html and "&quot;up&quot;" in html  # the text rides along to Apply
    latin = SimpleUploadedFile("jobs.json", '[{"name": "é"}]'.encode("latin-1"))
    assert "not UTF-8" in staff_client.post(reverse("jobs:job_import"), {"file": latin}).content.decode()


def test_import_is_staff_only(viewer_client):
    assert viewer_client.get(reverse("jobs:job_import")).status_code == 403
    text = '[{"name": "v", "handler": "demo.echo", "cron_expression": "0 0 * * * *"}]'
    assert viewer_client.post(reverse("jobs:job_import"), {"text": text, "apply": "1"}).status_code == 403
    assert not Job.objects.filter(name="v").exists()


@pytest.mark.parametrize(
    "when",
    [
        datetime(2026, 3, 29, 0, 59, 59, 999999, tzinfo=UTC),  # Berlin's spring-forward, either side
        datetime(2026, 3, 29, 1, 0, 0, tzinfo=UTC),
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # Berlin's repeated hour, first pass (CEST)
        datetime(2026, 10, 25, 1, 30, tzinfo=UTC),  # second pass (CET)
        datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC),  # a four-digit year however small
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
    ],
)
@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/St_Johns", "Asia/Kathmandu"])
def test_table_times_read_as_the_date_filter_wrote_them(when, zone):
    from zoneinfo import ZoneInfo

    from django.utils import dateformat

    from jobs.web.common import stamp

    tz = ZoneInfo(zone)
    try:
        local = when.astimezone(tz)
    except OverflowError:
        pytest.skip("past year 9999 in this zone")
    assert stamp(when, tz) == dateformat.format(local, "Y-m-d H:i:s")
    assert stamp(when, tz, day=False) == dateformat.format(local, "H:i:s")
    # The filter's "T" is empty in a repeated hour; the tables name the pass.
    assert stamp(when, tz, zone_name=True) == dateformat.format(local, "Y-m-d H:i:s ") + local.tzname()
    assert stamp(when) == dateformat.format(when.astimezone(UTC), "Y-m-d H:i:s")


def test_a_time_in_the_repeated_hour_says_which_pass_it_is():
    from zoneinfo import ZoneInfo

    from jobs.web.common import stamp

    berlin = ZoneInfo("Europe/Berlin")
    first, second = datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
    assert stamp(first, berlin, zone_name=True) == "2026-10-25 02:30:00 CEST"
    assert stamp(second, berlin, zone_name=True) == "2026-10-25 02:30:00 CET"
