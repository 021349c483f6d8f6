"""Roles (viewer, operator, editor, admin) granted everywhere: each role's
allowed and refused actions through the console and the API, and the
upgrade that keeps every existing user's access."""

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs import tokens
from jobs.models import AuditEvent, Job, RoleGrant, Run
from tests.factories import job_data
from tests.fixtures.api import ApiClient, assert_error
from tests.fixtures.core import make_user


def console(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api(user) -> ApiClient:
    return ApiClient(tokens.create_token(user=user, name="tests")[1])


@pytest.fixture
def job(make_job):
    return make_job(name="nightly", state=Job.State.ENABLED)


# -- the console ---------------------------------------------------------------


def test_a_viewer_sees_a_job_but_may_not_pause_or_edit_it(db, job):
    client = console(make_user("vera", "viewer"))
    page = client.get(reverse("jobs:job_detail", args=[job.pk]))
    assert page.status_code == 200
    assert reverse("jobs:job_pause", args=[job.pk]).encode() not in page.content
    assert client.post(reverse("jobs:job_pause", args=[job.pk])).status_code == 403
    assert client.get(reverse("jobs:job_edit", args=[job.pk])).status_code == 403
    job.refresh_from_db()
    assert job.state == Job.State.ENABLED


def test_an_operator_pauses_and_runs_a_job_but_may_not_edit_or_delete_it(db, job):
    client = console(make_user("otto", "operator"))
    page = client.get(reverse("jobs:job_detail", args=[job.pk]))
    assert reverse("jobs:job_pause", args=[job.pk]).encode() in page.content
    assert reverse("jobs:job_edit", args=[job.pk]).encode() not in page.content
    assert client.post(reverse("jobs:job_pause", args=[job.pk])).status_code == 302
    job.refresh_from_db()
    assert job.state == Job.State.PAUSED
    assert client.post(reverse("jobs:job_run_now", args=[job.pk])).status_code == 302
    assert Run.objects.filter(job=job, trigger=Run.Trigger.MANUAL).count() == 1
    assert client.get(reverse("jobs:job_edit", args=[job.pk])).status_code == 403
    assert client.post(reverse("jobs:job_delete", args=[job.pk])).status_code == 403
    assert client.post(reverse("jobs:job_create"), job_data(name="new")).status_code == 403
    assert not Job.objects.filter(name="new").exists()


def test_an_operator_may_not_override_a_credential_for_one_run(db, job):
    client = console(make_user("otto", "operator"))
    client.post(reverse("jobs:job_run_now", args=[job.pk]), {"properties": '{"api_token": "x"}'})
    assert not Run.objects.filter(job=job).exists()
    client.post(reverse("jobs:job_run_now", args=[job.pk]), {"properties": '{"greeting": "x"}'})
    assert Run.objects.get(job=job).properties == {"greeting": "x"}


def test_an_operator_retries_a_run_whose_overrides_hold_a_credential_without_seeing_it(both_databases, job):
    """The overrides an editor chose are queued again as they are stored (a
    reference stays one, a value typed in clear is never sent to the
    operator), and the operator changes none of them."""
    from jobs import secrets, services

    secrets.set_secret(name="feed.token", value="v4lue-Of-the-secret", via="cli")
    editor = make_user("edna", "editor")
    overrides = {"api_token": "{{ secret.feed.token }}", "password": "typed-in-clear-99"}
    first, _created = services.run_now(job=job, user=editor, properties=overrides)
    Run.objects.filter(pk=first.pk).update(status=Run.Status.FAILED, finished_at=timezone.now())
    client = console(make_user("otto", "operator"))
    page = client.get(reverse("jobs:run_detail", args=[first.pk])).content.decode()
    assert "typed-in-clear-99" not in page and reverse("jobs:run_retry", args=[first.pk]) in page
    client.post(reverse("jobs:run_retry", args=[first.pk]))
    retry = Run.objects.exclude(pk=first.pk).get(job=job)
    assert retry.properties == overrides
    event = AuditEvent.objects.filter(action="run-now").latest("pk")
    assert event.username == "otto" and event.changes["retry_of"] == [None, first.pk]
    # Typing a credential for a run of one's own is still an editor's.
    Run.objects.filter(pk=retry.pk).update(status=Run.Status.FAILED, finished_at=timezone.now())
    client.post(reverse("jobs:job_run_now", args=[job.pk]), {"properties": '{"api_token": "x"}'})
    assert Run.objects.filter(job=job).count() == 2


def test_an_operator_cancels_and_a_viewer_may_not(db, job):
    run = Run.objects.create(job=job, scheduled_at=timezone.now(), trigger=Run.Trigger.MANUAL)
    assert (
        console(make_user("vera", "viewer")).post(reverse("jobs:run_cancel", args=[run.pk])).status_code
        == 403
    )
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert (
        console(make_user("otto", "operator")).post(reverse("jobs:run_cancel", args=[run.pk])).status_code
        == 302
    )
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED


def test_an_editor_creates_jobs_but_may_not_change_settings_or_secrets(db):
    client = console(make_user("eddie", "editor"))
    assert client.post(reverse("jobs:job_create"), job_data(name="made")).status_code == 302
    assert Job.objects.filter(name="made").exists()
    assert client.post(reverse("jobs:settings"), {}).status_code == 403
    assert client.get(reverse("jobs:secret_list")).status_code == 403
    assert client.get(reverse("jobs:audit")).status_code == 403


def test_an_admin_opens_the_secrets_and_audit_pages(db):
    client = console(make_user("ada", "admin"))
    assert client.get(reverse("jobs:secret_list")).status_code == 200
    assert client.get(reverse("jobs:audit")).status_code == 200


def test_a_user_without_any_role_sees_no_job(db, job):
    client = console(make_user("nobody"))
    assert client.get(reverse("jobs:job_detail", args=[job.pk])).status_code == 404
    assert b"nightly" not in client.get(reverse("jobs:job_list")).content


def test_a_role_granted_to_a_group_reaches_its_members(db, job):
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="oncall")
    RoleGrant.objects.create(group=group, role="operator")
    user = make_user("gus")
    user.groups.add(group)
    assert console(user).post(reverse("jobs:job_pause", args=[job.pk])).status_code == 302


# -- the API -------------------------------------------------------------------


def test_the_api_answers_forbidden_for_an_action_the_role_lacks(db, job):
    viewer, operator = api(make_user("vera", "viewer")), api(make_user("otto", "operator"))
    assert viewer.get(f"/api/jobs/{job.pk}").status_code == 200
    assert_error(viewer.post(f"/api/jobs/{job.pk}/run"), 403, "forbidden")
    assert operator.post(f"/api/jobs/{job.pk}/run").status_code == 201
    assert operator.post(f"/api/jobs/{job.pk}/toggle").status_code == 200
    assert_error(operator.patch(f"/api/jobs/{job.pk}", {"description": "x"}), 403, "forbidden")
    assert_error(operator.delete(f"/api/jobs/{job.pk}"), 403, "forbidden")
    editor = api(make_user("eddie", "editor"))
    assert editor.patch(f"/api/jobs/{job.pk}", {"description": "x"}).status_code == 200
    assert editor.get("/api/secrets").status_code == 200
    assert_error(editor.put("/api/secrets/db_pass", {"value": "x"}), 403, "forbidden")


# -- the upgrade ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_upgrading_keeps_every_users_access():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate([("jobs", "0020_audit_subjects")])
    old = executor.loader.project_state([("jobs", "0020_audit_subjects")]).apps
    User = old.get_model("auth", "User")
    User.objects.create(username="staff", is_staff=True)
    User.objects.create(username="plain")
    User.objects.create(username="root", is_staff=True, is_superuser=True)
    User.objects.create(username="gone", is_active=False)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    grants = {(g.user.username, g.role, g.namespace) for g in RoleGrant.objects.select_related("user")}
    assert grants == {("staff", "admin", None), ("plain", "viewer", None)}


def test_granting_a_role_is_audited(db):
    from jobs import roles

    user, admin = make_user("eddie"), make_user("ada", "admin")
    roles.grant_role(user=user, role="editor", namespace="team-a", by=admin, via="cli")
    assert roles.revoke_role(user=user, namespace="team-a", by=admin, via="cli")
    assert not roles.revoke_role(user=user, namespace="team-a", by=admin, via="cli")
    rows = list(AuditEvent.objects.filter(subject=AuditEvent.Subject.ROLES).order_by("pk"))
    assert [(row.action, row.changes["role"]) for row in rows] == [
        ("grant", [None, "editor"]),
        ("revoke", ["editor", None]),
    ]


# -- the command line ----------------------------------------------------------


def test_the_roles_command_grants_lists_and_revokes(db):
    from io import StringIO

    from django.core.management import CommandError, call_command

    make_user("eddie")
    call_command("roles", "grant", "eddie", "editor", "--namespace", "team-a", stdout=StringIO())
    call_command("roles", "grant", "eddie", "viewer", stdout=StringIO())
    out = StringIO()
    call_command("roles", "list", "eddie", stdout=out)
    assert sorted(out.getvalue().splitlines()) == [
        "eddie\teditor\tin namespace “team-a”",
        "eddie\tviewer\teverywhere",
    ]
    call_command("roles", "revoke", "eddie", "--namespace", "team-a", stdout=StringIO())
    assert list(RoleGrant.objects.values_list("role", "namespace")) == [("viewer", None)]
    with pytest.raises(CommandError, match="No user"):
        call_command("roles", "grant", "nobody", "admin", stdout=StringIO())
    with pytest.raises(CommandError, match="not a namespace"):
        call_command("roles", "grant", "eddie", "admin", "--namespace", "Bad NS", stdout=StringIO())


def test_a_grant_made_in_the_django_admin_is_audited(db, superuser, client):
    user = make_user("eddie")
    client.force_login(superuser)
    response = client.post(
        "/admin/jobs/rolegrant/add/", {"user": user.pk, "group": "", "role": "editor", "namespace": "team-a"}
    )
    assert response.status_code == 302, response.content
    assert list(RoleGrant.objects.values_list("user__username", "role", "namespace")) == [
        ("eddie", "editor", "team-a")
    ]
    grant = RoleGrant.objects.get()
    client.post(f"/admin/jobs/rolegrant/{grant.pk}/delete/", {"post": "yes"})
    assert not RoleGrant.objects.exists()
    rows = AuditEvent.objects.filter(subject=AuditEvent.Subject.ROLES).order_by("pk")
    assert [(row.action, row.user_id) for row in rows] == [("grant", superuser.pk), ("revoke", superuser.pk)]


# -- users created later -----------------------------------------------------------


def test_a_user_created_later_holds_no_role_unless_a_default_is_set(db, job):
    from django.contrib.auth import get_user_model

    nobody = get_user_model().objects.create_user("nora", password="pw-nora-123")
    assert not RoleGrant.objects.filter(user=nobody).exists()
    assert console(nobody).get(reverse("jobs:job_detail", args=[job.pk])).status_code == 404


def test_the_default_role_is_granted_everywhere_when_a_user_is_created(db, job, settings):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    settings.CRONBOARD_DEFAULT_ROLE = "operator"
    User = get_user_model()
    olga = User.objects.create_user("olga", password="pw-olga-123")
    grant = RoleGrant.objects.get(user=olga)
    assert (grant.role, grant.namespace) == ("operator", None)
    client = console(olga)
    assert client.post(reverse("jobs:job_pause", args=[job.pk])).status_code in (200, 302)
    assert Job.objects.get(pk=job.pk).state == Job.State.PAUSED
    event = AuditEvent.objects.get(subject=AuditEvent.Subject.ROLES)
    assert (event.action, event.via, event.changes["holder"]) == ("grant", "system", "olga")
    # Saving the user again grants nothing more; a superuser needs no grant.
    olga.first_name = "Olga"
    olga.save()
    User.objects.create_superuser("root2", password="pw-root2-123")
    Group.objects.create(name="team")
    assert RoleGrant.objects.count() == 1
