"""The job list, the job form and the cron preview, through the HTTP interface."""

import json
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import pytest
import time_machine
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone

from jobs import channelbook, cron, services
from jobs.forms import JobForm
from jobs.models import AuditEvent, Job
from tests.factories import job_data

HTMX = {"HX-Request": "true"}


# -- the list ------------------------------------------------------------------------


def test_list_shows_the_columns(staff_client, make_job):
    job = make_job(
        name="billing-sync",
        description="pushes invoices",
        namespace="finance",
        timezone="Europe/Berlin",
        next_fire_at=timezone.now() + timedelta(minutes=5),
        last_status="failed",
        last_duration_ms=1500,
        last_fire_at=timezone.now() - timedelta(hours=1),
    )
    html = staff_client.get(reverse("jobs:job_list")).content.decode()
    assert "billing-sync" in html and "pushes invoices" in html and "finance" in html
    assert job.cron_expression in html
    assert cron.describe(job.cron_expression) in html
    assert "Europe/Berlin" in html
    assert "state-enabled" in html
    assert "in 4 min" in html or "in 5 min" in html
    assert "CET" in html or "CEST" in html
    assert "status-failed" in html and "1.5 s" in html


def test_list_search_filter_and_sort(staff_client, make_job):
    make_job(name="alpha", description="nightly export")
    make_job(name="beta", state=Job.State.PAUSED)
    make_job(name="gamma", kind=Job.Kind.HTTP, handler="", namespace="web")

    def names(**params):
        response = staff_client.get(
            reverse("jobs:job_list"), params, headers={**HTMX, "HX-Target": "job-table"}
        )
        assert response.status_code == 200
        html = response.content.decode()
        assert "<html" not in html and 'id="job-table"' in html
        return [n for n in ("alpha", "beta", "gamma", "retention") if f">{n}</a>" in html]

    assert names(q="export") == ["alpha"]
    assert names(q="GAM") == ["gamma"]
    assert names(state="paused") == ["beta"]
    assert names(kind="http") == ["gamma"]
    assert names(namespace="web") == ["gamma"]
    html = staff_client.get(reverse("jobs:job_list"), {"sort": "-name"}).content.decode()
    assert html.index(">gamma<") < html.index(">beta<") < html.index(">alpha<")


def test_list_tolerates_nonsense_parameters(staff_client, make_job):
    make_job()
    for params in (
        {"page": "abc"},
        {"page": "-4"},
        {"page": "99999"},
        {"sort": "password"},
        {"state": "<x>"},
        {"kind": "'; drop"},
        {"q": "x" * 5000},
    ):
        assert staff_client.get(reverse("jobs:job_list"), params).status_code == 200, params


def test_list_with_10000_jobs_makes_a_fixed_number_of_queries(staff_client, django_assert_max_num_queries):
    now = timezone.now()
    Job.objects.bulk_create(
        Job(
            name=f"job-{i:05}",
            handler="demo.echo",
            cron_expression="0 */5 * * * *",
            namespace=f"ns{i % 7}",
            next_fire_at=now + timedelta(seconds=i),
            last_status="succeeded",
            last_duration_ms=i,
        )
        for i in range(10_000)
    )
    for params in (
        {},
        {"sort": "-next", "page": "150"},
        {"q": "job-09", "state": "enabled", "kind": "python"},
    ):
        # session, user, roles, count, page, namespaces, unread messages
        with django_assert_max_num_queries(8):
            response = staff_client.get(reverse("jobs:job_list"), params)
        assert response.status_code == 200
    assert "10001 jobs" in staff_client.get(reverse("jobs:job_list")).content.decode()


def test_bulk_pause_and_resume(staff_client, make_job):
    a, b, c = make_job(name="a"), make_job(name="b"), make_job(name="c")
    response = staff_client.post(
        reverse("jobs:job_bulk") + "?q=",
        {"action": "pause", "ids": [a.pk, b.pk]},
        headers={**HTMX, "HX-Target": "job-table"},
    )
    assert response.status_code == 200 and 'id="job-table"' in response.content.decode()
    assert "Paused 2 jobs." in response.content.decode()
    assert [j.state for j in Job.objects.filter(pk__in=[a.pk, b.pk, c.pk]).order_by("name")] == [
        "paused",
        "paused",
        "enabled",
    ]
    staff_client.post(reverse("jobs:job_bulk"), {"action": "resume", "ids": [a.pk, "junk"]})
    assert Job.objects.get(pk=a.pk).state == "enabled"
    assert Job.objects.get(pk=a.pk).next_fire_at is not None
    assert AuditEvent.objects.filter(job=a, action="pause").count() == 1
    # Delete asks first: a page naming the job; nothing is deleted yet.
    asked = staff_client.post(reverse("jobs:job_bulk"), {"action": "delete", "ids": [c.pk]})
    assert asked.status_code == 200 and "Delete 1 job?" in asked.content.decode()
    assert Job.objects.get(pk=c.pk).deleted_at is None


def test_job_output_in_the_list_is_escaped(staff_client, make_job):
    make_job(name="<script>alert(1)</script>", description='<div hx-get="/x" hx-trigger="load">')
    html = staff_client.get(reverse("jobs:job_list")).content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html
    assert 'hx-get="/x"' not in html


# -- the form -------------------------------------------------------------------------


def test_the_cron_editor_reads_its_aliases_and_day_names_from_the_cron_module(staff_client):
    html = staff_client.get(reverse("jobs:job_create")).content.decode()
    data = re.search(r'<script id="cron-names" type="application/json">(.*?)</script>', html).group(1)
    script = (django_settings.BASE_DIR / "static" / "jobs" / "cron-editor.js").read_text()

    assert json.loads(data) == cron.editor_names()
    assert cron.editor_names()["aliases"] == cron.ALIASES
    assert cron.editor_names()["days"] == ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
    assert {"@every_minute", "@every_second"} <= set(cron.editor_names()["aliases"])
    # No copy of its own in the script: neither an alias nor the day names.
    assert not re.search(r'"@\w+"|"SUN"', script)


def test_create_page_has_the_cron_editor_and_timezone_search(staff_client, settings):
    settings.JOBS_SQL_ENABLED = False
    html = staff_client.get(reverse("jobs:job_create")).content.decode()
    assert 'id="cron-fields"' in html and "cron-editor.js" in html
    assert f'hx-get="{reverse("jobs:cron_preview")}"' in html
    assert '<datalist id="timezone-names">' in html and '<option value="America/New_York">' in html
    assert 'value="demo.echo"' in html  # the handler drop-down from the registry
    assert 'value="sql"' not in html  # SQL jobs are off


def test_create_offers_sql_when_enabled(staff_client, settings):
    settings.JOBS_SQL_ENABLED = True
    assert 'value="sql"' in staff_client.get(reverse("jobs:job_create")).content.decode()


def test_create_saves_and_redirects_to_the_job(staff_client, staff_user):
    response = staff_client.post(reverse("jobs:job_create"), job_data(properties='{"region": "eu", "n": 3}'))
    job = Job.objects.get(name="report")
    assert response.status_code == 302 and response["Location"] == reverse("jobs:job_detail", args=[job.pk])
    assert job.cron_expression == "0 30 2 * * *" and job.timezone == "Europe/Berlin"
    assert job.properties == {"region": "eu", "n": "3"}
    assert job.owner == staff_user and job.next_fire_at is not None
    assert AuditEvent.objects.get(job=job).action == "create"


def test_create_through_htmx_redirects_the_page(staff_client):
    response = staff_client.post(
        reverse("jobs:job_create"), job_data(), headers={**HTMX, "HX-Target": "job-form"}
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("jobs:job_detail", args=[Job.objects.get(name="report").pk])


def test_invalid_form_rerenders_with_200_and_saves_nothing(staff_client):
    before = Job.objects.count()
    response = staff_client.post(
        reverse("jobs:job_create"),
        job_data(
            name="",
            timeout_seconds="0",
            timezone="Mars/Olympus",
            handler="",
            alert_emails="not-an-email",
            max_retries="lots",
        ),
        headers={**HTMX, "HX-Target": "job-form"},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and 'id="job-form"' in html
    assert "Nothing was saved" in html
    assert "This field is required." in html
    assert "The timeout must be between 1 and 86,400 seconds" in html
    assert "Choose a handler." in html
    assert "is not a valid email address" in html
    assert '<code class="code">47006</code>' in html
    assert Job.objects.count() == before


def test_interval_below_five_seconds_shows_47004(staff_client):
    response = staff_client.post(
        reverse("jobs:job_create"), job_data(schedule_type="interval", interval_seconds="4")
    )
    assert response.status_code == 200
    assert '<code class="code">47004</code>' in response.content.decode()
    assert not Job.objects.filter(name="report").exists()


def test_both_day_fields_restricted_shows_47003(staff_client):
    response = staff_client.post(reverse("jobs:job_create"), job_data(cron_expression="0 0 0 1 * MON"))
    assert response.status_code == 200
    assert '<code class="code">47003</code>' in response.content.decode()


def test_edit_saves_and_bumps_the_version(staff_client, make_job):
    job = make_job(name="report")
    page = staff_client.get(reverse("jobs:job_edit", args=[job.pk])).content.decode()
    assert f'name="version" value="{job.version}"' in page
    response = staff_client.post(
        reverse("jobs:job_edit", args=[job.pk]), job_data(description="new", version=job.version)
    )
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.description == "new" and job.version == 2
    assert AuditEvent.objects.filter(job=job, action="edit").get().changes["description"] == ["", "new"]


def test_an_edit_that_loses_a_deadlock_is_told_to_try_again_and_changes_nothing(
    staff_client, make_job, monkeypatch
):
    from django.db import OperationalError

    from jobs import workflows

    class Deadlock(Exception):
        sqlstate = "40P01"

    def lock_graph():
        raise OperationalError("deadlock detected") from Deadlock()

    monkeypatch.setattr(workflows, "lock_graph", lock_graph)
    job = make_job(name="report")
    response = staff_client.post(
        reverse("jobs:job_edit", args=[job.pk]), job_data(description="mine", version=job.version)
    )
    assert response.status_code == 200
    assert "Other changes were being saved at the same moment" in response.content.decode()
    job.refresh_from_db()
    assert job.description == "" and job.version == 1


def test_second_editor_is_told_the_job_changed(staff_client, make_job, superuser):
    job = make_job(name="report")
    loaded_version = job.version
    # Someone else saves first.
    other = Job.objects.get(pk=job.pk)
    other.description = "theirs"
    services.save_job(job=other, user=superuser, expected_version=loaded_version)

    response = staff_client.post(
        reverse("jobs:job_edit", args=[job.pk]),
        job_data(description="mine", cron_expression="0 0 5 * * *", version=loaded_version),
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "changed by someone else after you opened it" in html
    job.refresh_from_db()
    assert job.description == "theirs" and job.cron_expression == "0 * * * * *"


def test_edit_keeps_http_fields_out_of_the_property_bag(staff_client, make_job):
    job = make_job(
        name="hook",
        kind=Job.Kind.HTTP,
        handler="",
        properties={"url": "https://example.com/x", "method": "POST", "token": "t"},
    )
    html = staff_client.get(reverse("jobs:job_edit", args=[job.pk])).content.decode()
    assert 'value="https://example.com/x"' in html
    assert "&quot;token&quot;: &quot;t&quot;" in html
    assert "&quot;url&quot;" not in html


def test_form_pages_tolerate_garbage(staff_client, make_job):
    job = make_job()
    for data in (
        {},
        {
            "name": "x" * 500,
            "kind": "cobol",
            "schedule_type": "sometimes",
            "interval_seconds": "1e99",
            "properties": "[1,2]",
        },
        {
            "name": "y",
            "properties": "{not json",
            "version": "abc",
            "state": "exploded",
            "misfire_policy": "<b>",
        },
        job_data(cron_expression="* * * * * * * *"),
        job_data(cron_expression="\x00"),
    ):
        assert staff_client.post(reverse("jobs:job_create"), data).status_code == 200, data
        assert staff_client.post(reverse("jobs:job_edit", args=[job.pk]), data).status_code == 200, data


def test_demo_mode_blocks_http_jobs_and_run_now_but_not_python_jobs(staff_client, settings):
    settings.DEMO_MODE = True
    response = staff_client.post(
        reverse("jobs:job_create"), job_data(name="hook", kind="http", url="https://10.0.0.1/x")
    )
    assert response.status_code == 200
    assert "Creating or editing HTTP jobs is disabled in demo mode." in response.content.decode()
    assert not Job.objects.filter(name="hook").exists()

    staff_client.post(reverse("jobs:job_create"), job_data())
    job = Job.objects.get(name="report")
    response = staff_client.post(reverse("jobs:job_run_now", args=[job.pk]), follow=True)
    assert "Run now is disabled in demo mode." in response.content.decode()
    assert not job.runs.exists()


# -- the preview ------------------------------------------------------------------------


def preview(client, expression, zone="UTC"):
    response = client.get(
        reverse("jobs:cron_preview"), {"cron_expression": expression, "timezone": zone}, headers=HTMX
    )
    assert response.status_code == 200
    return response.content.decode()


def test_preview_is_open_to_viewers_and_shows_five_times_in_both_zones(viewer_client):
    with time_machine.travel(datetime(2026, 1, 10, 12, 0, tzinfo=UTC), tick=False):
        html = preview(viewer_client, "0 0 9 * * *", "Asia/Tokyo")
    assert 'id="cron-preview"' in html and "<html" not in html
    assert 'id="cron-description"' in html and "At 09:00" in html
    assert html.count("<tr>") == 6  # the header and five times
    assert "Sun 2026-01-11 09:00:00 JST" in html
    assert "2026-01-11 00:00:00 UTC" in html


def test_preview_shows_the_coded_error(viewer_client):
    html = preview(viewer_client, "0 0 25 * * *")
    assert 'id="cron-error"' in html and '<code class="code">4700' in html
    html = preview(viewer_client, "0 0 0 * * *", "Nowhere/Land")
    assert '<code class="code">47006</code>' in html


def test_preview_warns_about_every_second(viewer_client):
    assert "The seconds field is *" in preview(viewer_client, "* * * * * *")


def test_preview_of_nothing_asks_for_an_expression(viewer_client):
    assert "Type an expression" in preview(viewer_client, "")


def test_preview_escapes_what_it_echoes(viewer_client):
    html = preview(viewer_client, "<img src=x onerror=alert(1)>", "<b>")
    assert "<img" not in html and "<b>" not in html


def test_preview_marks_dst_changes(viewer_client):
    with time_machine.travel(datetime(2026, 3, 6, 12, 0, tzinfo=UTC), tick=False):
        spring = preview(viewer_client, "0 30 2 * * *", "America/New_York")
    assert "DST gap" in spring
    with time_machine.travel(datetime(2026, 10, 30, 12, 0, tzinfo=UTC), tick=False):
        fall = preview(viewer_client, "0 */30 1 * * *", "America/New_York")
    assert "DST repeated hour" in fall


def test_preview_shows_47003(viewer_client):
    assert '<code class="code">47003</code>' in preview(viewer_client, "0 0 0 1 * 1")


# -- HTTP and SQL jobs through the form ----------------------------------------------------


def test_create_http_job_merges_its_fields_into_properties(staff_client):
    response = staff_client.post(
        reverse("jobs:job_create"),
        job_data(
            name="hook",
            kind="http",
            handler="",
            url="https://10.1.2.3/ping",
            method="POST",
            headers="X-Token: abc",
            body='{"a": 1}',
            properties='{"expect_status": "200"}',
        ),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(name="hook")
    assert job.properties == {
        "url": "https://10.1.2.3/ping",
        "method": "POST",
        "headers": "X-Token: abc",
        "body": '{"a": 1}',
        "expect_status": "200",
    }


def test_http_job_to_a_blocked_address_is_refused_by_the_fence(staff_client):
    response = staff_client.post(
        reverse("jobs:job_create"),
        job_data(name="evil", kind="http", handler="", url="http://127.0.0.1:8000/admin/"),
    )
    html = response.content.decode()
    assert response.status_code == 200 and "Blocked by the fence" in html
    assert not Job.objects.filter(name="evil").exists()


def test_sql_jobs_need_a_superuser(staff_client, settings):
    settings.JOBS_SQL_ENABLED = True
    response = staff_client.post(
        reverse("jobs:job_create"), job_data(name="q", kind="sql", handler="", sql="select 1")
    )
    assert (
        response.status_code == 200
        and "Only superusers can create or edit SQL jobs." in response.content.decode()
    )
    assert not Job.objects.filter(name="q").exists()


def test_sql_job_is_refused_when_sql_is_off(staff_client, settings):
    settings.JOBS_SQL_ENABLED = False
    response = staff_client.post(
        reverse("jobs:job_create"), job_data(name="q", kind="sql", handler="", sql="select 1")
    )
    assert response.status_code == 200 and not Job.objects.filter(name="q").exists()


def test_fields_added_to_the_form_elsewhere_still_render(staff_client, monkeypatch):
    from django import forms

    from jobs.forms import JobForm

    original = JobForm.__init__

    def with_extra(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.fields["notify_something"] = forms.BooleanField(required=False, label="Notify something")

    monkeypatch.setattr(JobForm, "__init__", with_extra)
    assert "Notify something" in staff_client.get(reverse("jobs:job_create")).content.decode()


# -- every field once ------------------------------------------------------------------


class _FormControls(HTMLParser):
    """The named controls inside <form id="job-form">: (name, value) for
    check boxes and radio buttons (a group shares its name), the name alone
    for every other control."""

    def __init__(self):
        super().__init__()
        self.depth = 0
        self.controls: list[tuple] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and attrs.get("id") == "job-form":
            self.depth = 1
        elif self.depth and tag == "form":
            self.depth += 1
        if not self.depth or tag not in {"input", "select", "textarea"} or "name" not in attrs:
            return
        if attrs.get("type") in {"checkbox", "radio"}:
            self.controls.append((attrs["name"], attrs.get("value")))
        else:
            self.controls.append((attrs["name"],))

    def handle_endtag(self, tag):
        if self.depth and tag == "form":
            self.depth -= 1


def _form_controls(html: str) -> list[tuple]:
    parser = _FormControls()
    parser.feed(html)
    return parser.controls


FORM_KINDS = {
    "python": {"handler": "demo.echo"},
    "http": {"url": "http://127.0.0.1:9/hook", "method": "POST"},
    "sql": {"sql": "select 1"},
    "command": {"properties": '{"command": "/bin/true"}'},
}
FORM_SCHEDULES = {
    "cron": {"cron_expression": "0 30 2 * * *"},
    "interval": {"interval_seconds": "60", "cron_expression": ""},
    "none": {"cron_expression": ""},
}


@pytest.mark.parametrize("schedule", FORM_SCHEDULES)
@pytest.mark.parametrize("kind", FORM_KINDS)
def test_every_form_variant_renders_each_field_exactly_once(client, superuser, settings, kind, schedule):
    """Two controls with one name post two values, and Django keeps the last:
    what was typed into the other is lost with "Saved" shown (it happened to
    "Runs after"). Every variant of the job form (each kind and schedule
    type; new, edit, clone, and a save that failed) names each field once,
    and renders every field of the form."""
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_COMMAND_ENABLED = True
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.1"]  # saved, never run
    client.force_login(superuser)
    data = job_data(name=f"variant-{kind}-{schedule}", kind=kind, schedule_type=schedule)
    data.update(FORM_KINDS[kind])
    data.update(FORM_SCHEDULES[schedule])
    data["after"] = '[{"job": "upstream", "on": "success"}]'
    services.save_job(
        job=Job(name="upstream", kind="python", handler="demo.echo", schedule_type="none"), user=None
    )
    # The channels' boxes: one per named channel (none without one).
    channelbook.save_channel(name="ops", url="json://hooks.example.com/ops")
    data["alert_channels"] = ["ops"]
    created = client.post(reverse("jobs:job_create"), data)
    assert created.status_code == 302, re.findall(r'class="error"[^>]*>(.*?)</', created.content.decode())
    job = Job.objects.get(name=data["name"])
    assert job.after == [{"job": "upstream", "on": "success"}]
    pages = {
        "new": client.get(reverse("jobs:job_create")),
        "edit": client.get(reverse("jobs:job_edit", args=[job.pk])),
        "clone": client.get(reverse("jobs:job_clone", args=[job.pk])),
        "failed save": client.post(reverse("jobs:job_edit", args=[job.pk]), {**data, "timeout_seconds": "x"}),
    }
    expected = set(JobForm(user=superuser).fields)
    for variant, response in pages.items():
        assert response.status_code == 200, variant
        controls = _form_controls(response.content.decode())
        repeated = sorted({c for c in controls if controls.count(c) > 1})
        assert not repeated, f"{variant}: named twice: {repeated}"
        missing = expected - {c[0] for c in controls}
        assert not missing, f"{variant}: not rendered: {sorted(missing)}"


def test_the_job_form_carries_its_own_labels_for_every_door():
    form = JobForm()

    assert (form["sql"].label, form["interval_seconds"].label, form["notify_recovered"].label) == (
        "SQL statement",
        "Every (seconds)",
        "Notify recovered",
    )


def test_the_page_places_by_name_exactly_the_fields_the_form_says_it_places(superuser):
    template = (django_settings.BASE_DIR / "templates" / "jobs" / "job_form.html").read_text()
    named = set(re.findall(r"\bform\.([a-z_]+)", template)) - {"errors", "non_field_errors"}
    form = JobForm(user=superuser)

    assert named == JobForm.PLACED_FIELDS
    assert [field.name for field in form.unplaced_fields()] == ["notify_recovered"]
