"""Rules written once and held at every door (the console, the API, the
commands, the engine): each test pins what every place that applies a rule
must agree on."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from jobs import tasks
from jobs.models import Job, Run
from tests.fixtures.databases import query_plan

pytestmark = pytest.mark.django_db
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("name", ["alert_list", "job_alerts", "send_test_email"])
def test_alert_views_send_an_expired_htmx_session_to_the_login_page_as_a_whole_page(client, make_job, name):
    """They used Django's login_required, which swapped the login form into
    the fragment htmx asked for."""
    job = make_job()
    url = reverse(f"jobs:{name}", args=[job.pk] if name == "job_alerts" else [])
    current = reverse("jobs:job_detail", args=[job.pk])
    headers = {"HX-Request": "true", "HX-Current-URL": f"http://testserver{current}"}
    response = (
        client.post(url, headers=headers) if name == "send_test_email" else client.get(url, headers=headers)
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"{reverse('login')}?next={current.replace('/', '%2F')}"
    assert b"password" not in response.content


def test_a_run_is_visible_in_the_console_exactly_when_the_api_shows_it(staff_client, staff_api, make_job):
    """One access rule for runs (jobs.access.get_run_for_user): a run of a
    live job and a task are visible; a run of a deleted job is not."""
    live, deleted = make_job(name="live"), make_job(name="gone")
    runs = {
        "live job": Run.objects.create(job=live, scheduled_at=T0, trigger=Run.Trigger.MANUAL),
        "deleted job": Run.objects.create(job=deleted, scheduled_at=T0, trigger=Run.Trigger.MANUAL),
        "task": Run.objects.create(
            scheduled_at=T0, trigger=Run.Trigger.TASK, handler="demo.echo", task_key="k"
        ),
    }
    Job.objects.filter(pk=deleted.pk).update(deleted_at=T0)
    for label, run in runs.items():
        console = staff_client.get(reverse("jobs:run_detail", args=[run.pk])).status_code
        api = staff_api.get(f"/api/runs/{run.pk}").status_code
        assert console == api == (404 if label == "deleted job" else 200), label


def test_the_live_run_condition_selects_live_runs_through_the_partial_index(make_job):
    """LIVE_RUN (jobs.models) is the one statement of "queued or running"
    for the engine and the console, written so SQLite can use an index on
    the status (with `status__in` and bound parameters it could not)."""
    from datetime import timedelta

    from jobs.models import LIVE_RUN, MANUAL_RUN

    job = make_job()
    for minute, status in enumerate(Run.Status.values):
        Run.objects.create(
            job=job, scheduled_at=T0 + timedelta(minutes=minute), trigger=Run.Trigger.SCHEDULE, status=status
        )
    live = Run.objects.filter(LIVE_RUN, job=job)
    assert sorted(live.values_list("status", flat=True)) == sorted(Run.LIVE)
    assert not live.filter(MANUAL_RUN).exists()
    plan = " ".join(query_plan(live.values("id")))
    # A seek on (job, status), not a walk through the job's whole history.
    assert "INDEX" in plan and "(job_id=? AND status=?)" in plan, plan


def test_every_default_blocked_range_is_refused_under_its_own_name():
    """The default block list and the names of its ranges are one table
    (jobs.fence.DEFAULT_BLOCKED); a range added to one and not the other
    would be refused as plain "JOBS_HTTP_BLOCKED_CIDRS"."""
    from django.conf import settings

    from jobs.fence import DEFAULT_BLOCKED, Policy

    assert list(DEFAULT_BLOCKED) == settings.JOBS_HTTP_BLOCKED_CIDRS
    labels = [label for _network, label in Policy.from_settings().blocked]
    assert "JOBS_HTTP_BLOCKED_CIDRS" not in labels
    assert labels == list(DEFAULT_BLOCKED.values())


def test_lease_ttl_and_renew_period_are_the_settings_everywhere(settings):
    """The lease module had its own 30 s / 10 s beside JOBS_LEASE_TTL_SECONDS
    and JOBS_LEASE_RENEW_SECONDS; a lease taken without an explicit TTL and a
    scheduler now both follow the settings."""
    from datetime import timedelta

    from jobs.engine import leases
    from jobs.engine.loop import Scheduler

    settings.JOBS_LEASE_TTL_SECONDS, settings.JOBS_LEASE_RENEW_SECONDS = 7, 2
    grant = leases.acquire("leader", "a", now=T0)
    assert grant.expires_at == T0 + timedelta(seconds=7)
    scheduler = Scheduler(worker_id="a", clock=lambda: T0)
    assert (scheduler.leadership.lease_ttl, scheduler.leadership.lease_renew) == (
        timedelta(seconds=7),
        timedelta(seconds=2),
    )


def test_a_job_and_a_task_that_say_nothing_get_the_same_defaults_everywhere(staff_api, tmp_path):
    """jobs.models' DEFAULT_* are what the model, the form (API, import,
    console) and tasks.enqueue give."""
    import json

    from django.core.management import call_command

    from jobs import models

    expected = (
        models.DEFAULT_MAX_RETRIES,
        models.DEFAULT_RETRY_INTERVAL_SECONDS,
        models.DEFAULT_TIMEOUT_SECONDS,
    )
    policy = ("max_retries", "retry_interval_seconds", "timeout_seconds")
    bare = {"handler": "demo.echo", "cron_expression": "0 * * * * *"}
    created = staff_api.post("/api/jobs", {"name": "api", **bare}).json()
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([{"name": "imported", **bare}]))
    call_command("jobs", "import", str(path))
    task = staff_api.post("/api/tasks", {"handler": "demo.echo", "key": "k"}).json()
    enqueued = tasks.enqueue("demo.echo", key="other")

    for job in (Job.objects.get(pk=created["id"]), Job.objects.get(name="imported"), Job(name="model")):
        assert tuple(getattr(job, name) for name in policy) == expected, job.name
        assert job.alert_threshold == models.DEFAULT_ALERT_THRESHOLD
    for run in (Run.objects.get(pk=task["id"]), enqueued, Run()):
        assert tuple(getattr(run, name) for name in policy) == expected


def test_the_interval_floor_and_the_timeout_ceiling_hold_at_every_door(staff_api, make_job):
    from django.db import IntegrityError, transaction

    from jobs.handlers.http import parse_timeout
    from jobs.models import MAX_TIMEOUT_SECONDS, MIN_INTERVAL_SECONDS

    bare = {"name": "j", "handler": "demo.echo", "schedule_type": "interval"}
    short = staff_api.post("/api/jobs", {**bare, "interval_seconds": MIN_INTERVAL_SECONDS - 1})
    assert (short.status_code, short.json()["code"]) == (400, "47004")
    long = staff_api.post(
        "/api/jobs", {**bare, "interval_seconds": 60, "timeout_seconds": MAX_TIMEOUT_SECONDS + 1}
    )
    assert long.status_code == 400
    assert f"{MAX_TIMEOUT_SECONDS:,}" in long.json()["message"]
    with pytest.raises(ValueError, match=str(MAX_TIMEOUT_SECONDS)):
        parse_timeout(str(MAX_TIMEOUT_SECONDS + 1))
    job = make_job(
        schedule_type="interval", interval_seconds=MIN_INTERVAL_SECONDS, timeout_seconds=MAX_TIMEOUT_SECONDS
    )
    for change in (
        {"interval_seconds": MIN_INTERVAL_SECONDS - 1},
        {"timeout_seconds": MAX_TIMEOUT_SECONDS + 1},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            Job.objects.filter(pk=job.pk).update(**change)


def test_demo_mode_refuses_in_one_voice(settings, staff_api, make_job):
    """jobs.services decides what demo mode refuses (check_job_change for
    HTTP and SQL jobs, check_demo_mode for run now and tasks); every door
    answers it the same way."""
    settings.DEMO_MODE = True
    job = make_job()
    answers = [
        staff_api.post(
            "/api/jobs", {"name": "hook", "kind": "http", "properties": {"url": "https://a.test/"}}
        ),
        staff_api.post(f"/api/jobs/{job.pk}/run"),
        staff_api.post("/api/tasks", {"handler": "demo.echo", "key": "k"}),
    ]
    for answer in answers:
        assert answer.status_code == 403
        assert answer.json()["code"] == "demo_mode"
        assert answer.json()["message"].endswith(" is disabled in demo mode.")
    assert not Job.objects.filter(name="hook").exists()


def test_the_job_form_leaves_demo_mode_to_services(settings, superuser_api, monkeypatch):
    """forms.py read DEMO_MODE itself (to skip its "SQL jobs are turned off"
    error in a demo): with refusals.check_job_change allowing the change,
    a demo server with SQL jobs off saved an SQL job."""
    from jobs import refusals

    settings.DEMO_MODE = True
    settings.JOBS_SQL_ENABLED = False
    monkeypatch.setattr(refusals, "check_job_change", lambda **_: None)
    answer = superuser_api.post(
        "/api/jobs",
        {"name": "q", "kind": "sql", "properties": {"sql": "SELECT 1"}, "schedule_type": "none"},
    )
    assert answer.status_code == 400, answer.content
    assert [e["code"] for e in answer.json()["errors"]] == ["sql_disabled"]
    assert not Job.objects.filter(name="q").exists()


def test_a_command_run_asks_the_one_reader_of_demo_mode_whether_it_refuses_it(settings, monkeypatch):
    """Demo mode is read in one place (jobs.core.demo); the command handler
    asks it at run time, as the services and the pages do."""
    from jobs.core import demo
    from jobs.handlers.base import HandlerError
    from jobs.handlers.command import CommandJobHandler
    from tests.fixtures.commands import make_ctx

    settings.JOBS_COMMAND_ENABLED = True
    settings.DEMO_MODE = True
    with pytest.raises(HandlerError, match=r"^Running command jobs is disabled in demo mode\.$"):
        CommandJobHandler().run(make_ctx({"command": "/bin/echo hi"}))
    monkeypatch.setattr(demo, "is_on", lambda: False)
    assert CommandJobHandler().run(make_ctx({"command": "/bin/echo hi"})) == "exit status 0"


def test_http_and_sql_fields_are_properties_in_the_api_and_left_out_of_the_console_bag(
    superuser_api, superuser, client, settings, tmp_path
):
    """The form's own fields for HTTP and SQL jobs (jobs.kinds.KIND_FIELDS)."""
    import sqlite3

    target = tmp_path / "t.sqlite3"
    sqlite3.connect(target).close()
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(target)}
    bad = superuser_api.post(
        "/api/jobs",
        {
            "name": "q",
            "kind": "sql",
            "cron_expression": "0 * * * * *",
            "properties": {"sql": "DELETE FROM t"},
        },
    )
    assert bad.status_code == 400
    assert bad.json()["field"] == "properties.sql"
    job = Job.objects.create(
        name="http",
        kind=Job.Kind.HTTP,
        cron_expression="0 * * * * *",
        properties={"url": "https://a.test/", "method": "GET", "expect_status": "200"},
    )
    client.force_login(superuser)
    form = client.get(reverse("jobs:job_edit", args=[job.pk])).context["form"]
    assert form["properties"].initial == {"expect_status": "200"}
    assert form["url"].initial == "https://a.test/"


def test_the_run_history_cursor_is_one_format_for_the_console_the_api_and_bench_pages(
    staff_client, staff_api, make_job
):
    """The console's history links, the API's next_cursor and bench pages
    each wrote their own cursor (two formats, three copies): now
    jobs.models.run_cursor, read back by parse_run_cursor, so a cursor from
    one door opens the same page at the other."""
    import re
    from datetime import timedelta
    from html import unescape

    from jobs.bench import pages
    from jobs.models import parse_run_cursor, run_cursor

    job = make_job()
    runs = [
        Run.objects.create(
            job=job, scheduled_at=T0 + timedelta(minutes=n // 2, microseconds=n), status="succeeded"
        )
        for n in range(60)
    ]
    api_page = staff_api.get(f"/api/jobs/{job.pk}/runs", {"limit": 25}).json()
    console_page = staff_client.get(reverse("jobs:job_runs", args=[job.pk])).content.decode()
    console_cursor = re.search(r"before=([0-9.]+)", unescape(console_page)).group(1)
    last_shown = runs[-25]
    assert api_page["next_cursor"] == console_cursor == run_cursor(last_shown.scheduled_at, last_shown.pk)
    assert parse_run_cursor(console_cursor) == (last_shown.scheduled_at, last_shown.pk)
    older = staff_api.get(f"/api/jobs/{job.pk}/runs", {"limit": 25, "cursor": console_cursor}).json()
    assert [r["id"] for r in older["results"]] == [r.pk for r in runs[-26:-51:-1]]
    assert not hasattr(pages, "_cursor")
    for made_up in [
        "",
        "1",
        "1.2.3",
        "+1.5",
        " 1.5",
        "1.5 ",
        "1_0.5",
        "1.0",
        "1.-5",
        f"1.{2**63}",
        "1." + "9" * 40,
    ]:
        assert parse_run_cursor(made_up) is None, made_up
        assert staff_api.get(f"/api/jobs/{job.pk}/runs", {"cursor": made_up}).status_code in (200, 400)
    assert staff_api.get(f"/api/jobs/{job.pk}/runs", {"cursor": "1.-5"}).json()["code"] == "invalid"
