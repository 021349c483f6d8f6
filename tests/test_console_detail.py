"""The job page: actions, run history (keyset pages, filters, live polling),
the run viewer, the chart and the audit trail."""

import re
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.models import AuditEvent, Job, Run, cap_message
from tests.fixtures.core import T0
from tests.fixtures.databases import query_plan

HTMX = {"HX-Request": "true"}


def add_runs(job, count, *, status=Run.Status.SUCCEEDED, trigger=Run.Trigger.SCHEDULE, start=T0, **fields):
    return Run.objects.bulk_create(
        Run(
            job=job,
            scheduled_at=start + timedelta(minutes=i),
            trigger=trigger,
            status=status,
            duration_ms=100 + i,
            worker_id="w1",
            **fields,
        )
        for i in range(count)
    )


def run_ids(html):
    return [int(i) for i in re.findall(r'<tr id="run-(\d+)"', html)]


def history(client, job, query=""):
    response = client.get(reverse("jobs:job_runs", args=[job.pk]) + query, headers=HTMX)
    assert response.status_code == 200
    return response.content.decode()


# -- actions ------------------------------------------------------------------------------


def test_detail_shows_summary_actions_chart_and_audit(staff_client, make_job, staff_user):
    job = make_job(name="report", description="daily", properties={"region": "eu"}, timezone="Europe/Berlin")
    AuditEvent.objects.create(
        job=job,
        job_name=job.name,
        user=staff_user,
        username="staff",
        action="edit",
        changes={"description": ["", "daily"]},
    )
    add_runs(job, 3)
    html = staff_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    for text in (
        "daily",
        "region",
        "Europe/Berlin",
        "Run now",
        "Pause",
        "Edit",
        "Delete…",
        'id="run-history"',
        'id="audit-trail"',
        "<svg",
        "<strong>Description</strong>",
    ):
        assert text in html, text
    assert html.count('<rect class="bar status-succeeded"') == 3


def test_pause_resume_and_run_now(staff_client, make_job, staff_user):
    job = make_job(name="report", next_fire_at=timezone.now() + timedelta(minutes=1))
    response = staff_client.post(reverse("jobs:job_pause", args=[job.pk]))
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.state == Job.State.PAUSED and job.next_fire_at is None
    assert "Resume" in staff_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()

    staff_client.post(reverse("jobs:job_resume", args=[job.pk]))
    job.refresh_from_db()
    assert job.state == Job.State.ENABLED and job.next_fire_at is not None

    staff_client.post(reverse("jobs:job_run_now", args=[job.pk]))
    staff_client.post(reverse("jobs:job_run_now", args=[job.pk]))  # a second click queues nothing more
    run = Run.objects.get(job=job)
    assert (
        run.trigger == Run.Trigger.MANUAL and run.status == Run.Status.QUEUED and run.created_by == staff_user
    )
    assert [e.action for e in AuditEvent.objects.filter(job=job).order_by("id")] == [
        "pause",
        "resume",
        "run-now",
    ]


def test_crashed_job_is_shown_and_re_enabled_with_a_fresh_count(staff_client, make_job):
    job = make_job(name="flaky", state=Job.State.CRASHED, consecutive_failures=3)
    html = staff_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert 'id="crash-banner"' in html and "Re-enable" in html
    staff_client.post(reverse("jobs:job_resume", args=[job.pk]))
    job.refresh_from_db()
    assert job.state == Job.State.ENABLED and job.consecutive_failures == 0 and job.next_fire_at is not None
    assert AuditEvent.objects.get(job=job).action == "re-enable"


def test_delete_asks_then_deletes_softly(staff_client, make_job):
    job = make_job(name="old")
    queued = Run.objects.create(job=job, scheduled_at=timezone.now(), trigger=Run.Trigger.MANUAL)
    assert "Delete the job" in staff_client.get(reverse("jobs:job_delete", args=[job.pk])).content.decode()
    assert Job.objects.get(pk=job.pk).deleted_at is None
    response = staff_client.post(reverse("jobs:job_delete", args=[job.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("jobs:job_list")
    assert Job.objects.get(pk=job.pk).deleted_at is not None
    assert Run.objects.get(pk=queued.pk).status == Run.Status.CANCELLED


def test_builtin_job_cannot_be_deleted(staff_client):
    retention = Job.objects.get(builtin=True)
    response = staff_client.post(reverse("jobs:job_delete", args=[retention.pk]), follow=True)
    assert "Built-in jobs cannot be deleted" in response.content.decode()
    assert Job.objects.get(pk=retention.pk).deleted_at is None


def test_cancel_a_queued_run(staff_client, make_job):
    job = make_job()
    run = Run.objects.create(job=job, scheduled_at=timezone.now(), trigger=Run.Trigger.MANUAL)
    staff_client.post(reverse("jobs:run_cancel", args=[run.pk]))
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED


def test_unknown_zone_is_warned_about(staff_client, make_job):
    job = make_job()
    Job.objects.filter(pk=job.pk).update(timezone="Atlantis/Capital")
    html = staff_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert "is not known to this system" in html


# -- history ------------------------------------------------------------------------------


def pager_query(html: str, label: str) -> str:
    """The query of the history's "Older →" / "← Newer" link (the section's
    own polling URL carries a cursor too, when it shows a deeper page)."""
    link = re.search(r'<a class="button small" href="[^"]*(\?[^"]+)"[^>]*>[←\s]*' + label, html)
    return link.group(1).replace("&amp;", "&")


def test_history_pages_newest_first_with_keyset_cursors(staff_client, make_job):
    job = make_job()
    runs = add_runs(job, 60)
    ids = [r.pk for r in sorted(runs, key=lambda r: r.scheduled_at, reverse=True)]

    first = history(staff_client, job)
    assert run_ids(first) == ids[:25]
    assert "Newer" not in first
    older = pager_query(first, "Older")

    second = history(staff_client, job, older)
    assert run_ids(second) == ids[25:50]
    newer = pager_query(second, "Newer")
    older = pager_query(second, "Older")

    assert run_ids(history(staff_client, job, older)) == ids[50:]
    assert "Older" not in history(staff_client, job, older)
    assert run_ids(history(staff_client, job, newer)) == ids[:25]


def test_history_breaks_ties_on_id(staff_client, make_job):
    job = make_job()
    same_time = [
        Run.objects.create(job=job, scheduled_at=T0, trigger=Run.Trigger.MANUAL, status="succeeded")
        for _ in range(30)
    ]
    first = history(staff_client, job)
    older = pager_query(first, "Older")
    seen = run_ids(first) + run_ids(history(staff_client, job, older))
    assert seen == sorted((r.pk for r in same_time), reverse=True)


def test_history_filters_by_status_and_trigger(staff_client, make_job):
    job = make_job()
    ok = add_runs(job, 3)
    bad = add_runs(job, 2, status=Run.Status.FAILED, start=T0 + timedelta(days=1), error="boom")
    manual = add_runs(job, 1, trigger=Run.Trigger.MANUAL, start=T0 + timedelta(days=2))
    assert set(run_ids(history(staff_client, job, "?status=failed"))) == {r.pk for r in bad}
    assert set(run_ids(history(staff_client, job, "?trigger=manual"))) == {r.pk for r in manual}
    assert set(run_ids(history(staff_client, job, "?status=succeeded&trigger=schedule"))) == {
        r.pk for r in ok
    }
    assert "boom" in history(staff_client, job, "?status=failed")


def test_history_tolerates_bad_cursors_and_filters(staff_client, make_job):
    job = make_job()
    add_runs(job, 3)
    for query in (
        "?before=abc",
        "?after=1.2.3",
        "?before=99999999999999999999999.1",
        "?status=<x>",
        "?before=-5.-5",
    ):
        assert len(run_ids(history(staff_client, job, query))) in (0, 3), query
    # Text no database stores is refused before the view (tests/test_poison_input.py).
    response = staff_client.get(reverse("jobs:job_runs", args=[job.pk]) + "?trigger=%00", headers=HTMX)
    assert response.status_code == 400


def test_skipped_run_shows_its_reason(staff_client, make_job):
    job = make_job()
    add_runs(job, 1, status=Run.Status.SKIPPED, skip_reason=Run.SkipReason.OVERLAP)
    assert "overlap" in history(staff_client, job)


def test_deep_history_page_costs_what_the_first_does(staff_client, make_job):
    """Keyset pagination: no OFFSET, the same queries, and the history index."""
    job = make_job()
    add_runs(job, 5000)
    with CaptureQueriesContext(connection) as first:
        page_one = history(staff_client, job)
    cursor_run = Run.objects.filter(job=job).order_by("scheduled_at", "id")[30]
    from jobs.models import run_cursor

    with CaptureQueriesContext(connection) as deep:
        deep_page = history(
            staff_client, job, f"?before={run_cursor(cursor_run.scheduled_at, cursor_run.pk)}"
        )
    assert len(run_ids(page_one)) == 25 and len(run_ids(deep_page)) == 25
    assert len(deep) == len(first)
    history_sql = [
        q["sql"] for q in deep.captured_queries if '"jobs_run"' in q["sql"] and "LIMIT 26" in q["sql"]
    ]
    assert history_sql and all("OFFSET" not in sql for sql in history_sql)
    # The database seeks the history index to the cursor: no walk from the
    # newest run, no sort. (SQLite: the captured SQL has its values inlined.)
    if connection.vendor == "sqlite":
        plan = " ".join(query_plan(history_sql[0]))
        assert "run_history_idx (job_id=? AND scheduled_at<?)" in plan, plan
        assert "TEMP B-TREE" not in plan.upper(), plan


def test_history_polls_fast_while_something_runs_and_slowly_otherwise(staff_client, make_job):
    job = make_job()
    add_runs(job, 2)
    idle = history(staff_client, job)
    # Always polling (a short run that starts and ends between two looks still
    # shows up), every 5 s backing off to 30 s while nothing changes…
    assert 'hx-trigger="poll"' in idle and 'data-poll-min="5" data-poll-max="30"' in idle
    assert 'data-live="no"' in idle
    running = Run.objects.create(
        job=job, scheduled_at=timezone.now(), trigger=Run.Trigger.MANUAL, status=Run.Status.RUNNING
    )
    polling = history(staff_client, job)
    # …and every 2 s while a run is live.
    assert 'data-poll-min="2" data-poll-max="2"' in polling and 'data-live="yes"' in polling
    Run.objects.filter(pk=running.pk).update(status=Run.Status.SUCCEEDED)
    done = history(staff_client, job)
    assert 'data-live="no"' in done
    # What the page shows changed: the version console.js compares changed too.
    version = re.compile(r'data-poll-version="([0-9a-f]+)"')
    assert len({version.search(page).group(1) for page in (idle, polling, done)}) == 3
    assert version.search(done).group(1) == version.search(history(staff_client, job)).group(1)


def test_detail_page_answers_htmx_history_target_with_the_partial(staff_client, make_job):
    job = make_job()
    response = staff_client.get(
        reverse("jobs:job_detail", args=[job.pk]), headers={**HTMX, "HX-Target": "run-history"}
    )
    html = response.content.decode()
    assert "<html" not in html and html.strip().startswith('<section class="card" id="run-history"')


# -- the run viewer -----------------------------------------------------------------------


def test_run_log_is_escaped_and_inert(staff_client, make_job):
    job = make_job()
    evil = '<div hx-get="/jobs/new/" hx-trigger="load">x</div><script>alert(1)</script>'
    run = Run.objects.create(
        job=job,
        scheduled_at=T0,
        trigger=Run.Trigger.MANUAL,
        status=Run.Status.FAILED,
        log=evil,
        result=evil,
        error=evil,
    )
    for headers in ({}, {**HTMX, "HX-Target": "run-viewer"}):
        html = staff_client.get(reverse("jobs:run_detail", args=[run.pk]), headers=headers).content.decode()
        assert '<div hx-get="/jobs/new/"' not in html and "<script>alert" not in html
        assert "&lt;div hx-get=&quot;/jobs/new/&quot; hx-trigger=&quot;load&quot;&gt;" in html
    # …and in the history's error column.
    assert '<div hx-get="/jobs/new/"' not in history(staff_client, job)


def test_run_viewer_shows_the_truncation_marker(staff_client, make_job):
    job = make_job()
    log = cap_message("head-" + "x" * 5000 + "-tail", 1000)
    run = Run.objects.create(
        job=job, scheduled_at=T0, trigger=Run.Trigger.MANUAL, status=Run.Status.SUCCEEDED, log=log
    )
    html = staff_client.get(
        reverse("jobs:run_detail", args=[run.pk]), headers={**HTMX, "HX-Target": "run-viewer"}
    ).content.decode()
    assert "<html" not in html and 'id="run-viewer"' in html
    assert re.search(
        r'<mark class="truncated">\[… \d+ characters omitted; original length 5010 characters …\]</mark>',
        html,
    )
    assert "head-" in html and "-tail" in html


def test_task_runs_are_viewable(staff_client):
    run = Run.objects.create(trigger=Run.Trigger.TASK, handler="demo.echo", task_key="k1", scheduled_at=T0)
    html = staff_client.get(reverse("jobs:run_detail", args=[run.pk])).content.decode()
    assert "demo.echo" in html and "k1" in html


def test_chart_colours_runs_by_status(staff_client, make_job):
    job = make_job()
    add_runs(job, 2)
    add_runs(job, 1, status=Run.Status.FAILED, start=T0 + timedelta(hours=1))
    Run.objects.create(
        job=job,
        scheduled_at=T0 + timedelta(hours=3),
        trigger=Run.Trigger.SCHEDULE,
        status=Run.Status.SKIPPED,
        skip_reason=Run.SkipReason.MISFIRE,
    )
    html = staff_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert (
        svg.count("status-succeeded") == 2
        and svg.count("status-failed") == 1
        and svg.count("status-skipped") == 1
    )
    assert "<script" not in svg


def test_history_refresh_also_refreshes_state_actions_summary_and_chart(staff_client, make_job):
    job = make_job(state=Job.State.PAUSED)
    html = history(staff_client, job)
    for dom_id in ("job-state", "job-actions", "job-summary", "run-chart"):
        assert f'id="{dom_id}" hx-swap-oob="true"' in html, dom_id
    assert "Resume" in html


def test_viewer_history_refresh_has_no_actions(viewer_client, make_job):
    job = make_job()
    html = history(viewer_client, job)
    assert 'id="job-actions"' not in html and "Run now" not in html
