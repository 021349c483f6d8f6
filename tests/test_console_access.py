"""Sign-in, permissions, CSRF and "no state change on GET" for every console view."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from jobs.models import Job, Message, Run


@pytest.fixture
def job(make_job):
    return make_job(name="nightly")


@pytest.fixture
def run(job):
    from django.utils import timezone

    return Run.objects.create(job=job, scheduled_at=timezone.now(), trigger=Run.Trigger.MANUAL)


def page_urls(job, run):
    return [
        reverse("jobs:job_list"),
        reverse("jobs:job_detail", args=[job.pk]),
        reverse("jobs:job_runs", args=[job.pk]),
        reverse("jobs:run_detail", args=[run.pk]),
        reverse("jobs:cron_preview") + "?cron_expression=0+0+*+*+*+*",
        reverse("jobs:settings"),
        reverse("jobs:messages"),
        reverse("jobs:job_create"),
        reverse("jobs:job_edit", args=[job.pk]),
        reverse("jobs:job_delete", args=[job.pk]),
    ]


def mutation_urls(job, run):
    """Every POST that changes a job, a run or the config centre."""
    return [
        (reverse("jobs:job_bulk"), {"action": "pause", "ids": [job.pk]}),
        (
            reverse("jobs:job_create"),
            {"name": "x", "kind": "python", "handler": "demo.echo", "cron_expression": "0 * * * * *"},
        ),
        (
            reverse("jobs:job_edit", args=[job.pk]),
            {
                "name": "renamed",
                "kind": "python",
                "handler": "demo.echo",
                "cron_expression": "0 * * * * *",
                "version": job.version,
            },
        ),
        (reverse("jobs:job_pause", args=[job.pk]), {}),
        (reverse("jobs:job_resume", args=[job.pk]), {}),
        (reverse("jobs:job_run_now", args=[job.pk]), {}),
        (reverse("jobs:job_delete", args=[job.pk]), {}),
        (reverse("jobs:run_cancel", args=[run.pk]), {}),
        (reverse("jobs:settings"), {"sys.job.logRetentionDays": "7", "sys.job.alertEmails": ""}),
    ]


def assert_unchanged(job, run):
    fresh = Job.objects.get(pk=job.pk)
    assert (fresh.name, fresh.state, fresh.deleted_at, fresh.version) == (
        "nightly",
        Job.State.ENABLED,
        None,
        job.version,
    )
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
    assert Run.objects.count() == 1
    assert Job.objects.filter(builtin=False).count() == 1


def test_anonymous_is_sent_to_login_from_every_page(client, job, run):
    for url in page_urls(job, run):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login") + "?next="), url


def test_anonymous_posts_change_nothing(client, job, run):
    for url, data in mutation_urls(job, run):
        response = client.post(url, data)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("login")), url
    assert_unchanged(job, run)


def test_expired_session_on_htmx_request_redirects_whole_page(client, job, run):
    """htmx would swap a followed redirect's login form into the fragment;
    HX-Redirect makes the browser load the login page instead."""
    detail = reverse("jobs:job_detail", args=[job.pk])
    response = client.get(
        reverse("jobs:job_runs", args=[job.pk]),
        headers={"HX-Request": "true", "HX-Current-URL": f"http://testserver{detail}"},
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"{reverse('login')}?next={detail.replace('/', '%2F')}"
    assert b"password" not in response.content


def test_viewer_sees_every_page_but_no_edit_forms(viewer_client, job, run):
    for url in page_urls(job, run)[:7]:
        assert viewer_client.get(url).status_code == 200, url
    detail = viewer_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert "Run now" not in detail and "Pause" not in detail and "Delete" not in detail
    listing = viewer_client.get(reverse("jobs:job_list")).content.decode()
    assert "New job" not in listing and 'name="ids"' not in listing


def test_viewer_gets_403_on_every_mutation(viewer_client, job, run):
    for url, data in mutation_urls(job, run):
        response = viewer_client.post(url, data)
        assert response.status_code == 403, url
        response = viewer_client.post(url, data, headers={"HX-Request": "true"})
        assert response.status_code == 403, url
    assert_unchanged(job, run)


def test_viewer_cannot_open_the_edit_pages(viewer_client, job):
    for url in (
        reverse("jobs:job_create"),
        reverse("jobs:job_edit", args=[job.pk]),
        reverse("jobs:job_delete", args=[job.pk]),
    ):
        assert viewer_client.get(url).status_code == 403, url


def test_get_never_changes_state(staff_client, job, run):
    for name in ("job_pause", "job_resume", "job_run_now"):
        assert staff_client.get(reverse(f"jobs:{name}", args=[job.pk])).status_code == 405
    assert staff_client.get(reverse("jobs:run_cancel", args=[run.pk])).status_code == 405
    assert staff_client.get(reverse("jobs:job_bulk") + "?action=pause&ids=" + str(job.pk)).status_code == 405
    # The delete page only asks.
    assert staff_client.get(reverse("jobs:job_delete", args=[job.pk])).status_code == 200
    assert_unchanged(job, run)


def test_posts_without_csrf_token_are_refused(staff_user, job, run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    for url, data in mutation_urls(job, run):
        assert client.post(url, data).status_code == 403, url
        assert (
            client.post(url, data, headers={"HX-Request": "true", "X-CSRFToken": "forged"}).status_code == 403
        ), url
    assert_unchanged(job, run)


def test_htmx_csrf_header_from_the_page_is_accepted(staff_user, job, run):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    page = client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    token = client.cookies["csrftoken"].value
    assert 'hx-headers=\'{"x-csrftoken": "' in page
    response = client.post(
        reverse("jobs:job_pause", args=[job.pk]), headers={"HX-Request": "true", "X-CSRFToken": token}
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("jobs:job_detail", args=[job.pk])
    assert Job.objects.get(pk=job.pk).state == Job.State.PAUSED


def test_message_read_needs_csrf_and_post(viewer_user):
    message = Message.objects.create(user=viewer_user, subject="hello")
    client = Client(enforce_csrf_checks=True)
    client.force_login(viewer_user)
    assert client.get(reverse("jobs:message_read", args=[message.pk])).status_code == 405
    assert client.post(reverse("jobs:message_read", args=[message.pk])).status_code == 403
    message.refresh_from_db()
    assert message.read_at is None


def test_login_page_renders_and_signs_in_to_the_dashboard_as_opening_the_site_does(client, staff_user):
    """One landing page, as the README says: the dashboard, whether the sign-in
    page was opened itself or by way of /; another page asked for is kept."""
    assert client.get(reverse("login")).status_code == 200
    response = client.post(reverse("login"), {"username": "staff", "password": "pw-staff-123"})
    assert response.status_code == 302 and response["Location"] == reverse("jobs:dashboard")
    client.logout()
    asked = client.get("/")
    assert asked["Location"] == f"{reverse('login')}?next=/"
    response = client.post(asked["Location"], {"username": "staff", "password": "pw-staff-123"})
    assert response["Location"] == "/"
    client.logout()
    response = client.post(
        f"{reverse('login')}?next=/runs/", {"username": "staff", "password": "pw-staff-123"}
    )
    assert response["Location"] == "/runs/"


def test_htmx_is_served_from_the_package_not_a_cdn(staff_client):
    page = staff_client.get(reverse("jobs:job_list")).content.decode()
    sources = re.findall(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["']([^"']+)""", page)
    assert "/static/django_htmx/htmx-2.min.js" in sources
    # Every script and stylesheet comes from this site: no host, no scheme.
    # (Only the tags' addresses are read: the page's random CSRF token can
    # spell anything, "cdn" included.)
    assert sources and all(source.startswith("/") and not source.startswith("//") for source in sources)


def test_missing_objects_are_404_not_500(staff_client, job):
    assert staff_client.get(reverse("jobs:job_detail", args=[999999])).status_code == 404
    assert staff_client.get(reverse("jobs:run_detail", args=[999999])).status_code == 404
    assert staff_client.post(reverse("jobs:job_pause", args=[999999])).status_code == 404
    assert staff_client.post(reverse("jobs:message_read", args=[999999])).status_code == 404


def test_deleted_job_is_gone_from_the_console(staff_client, job):
    staff_client.post(reverse("jobs:job_delete", args=[job.pk]))
    assert staff_client.get(reverse("jobs:job_detail", args=[job.pk])).status_code == 404
    assert staff_client.post(reverse("jobs:job_resume", args=[job.pk])).status_code == 404
