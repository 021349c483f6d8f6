"""A role granted in one namespace: the user sees and acts on exactly that
namespace's jobs; everything else answers 404, as if it did not exist."""

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs import access, tokens
from jobs.models import Job, Run
from tests.factories import job_data
from tests.fixtures.api import ApiClient, assert_error
from tests.fixtures.core import make_user


@pytest.fixture
def jobs(make_job):
    return make_job(name="mine", namespace="team-a"), make_job(name="theirs", namespace="team-b")


@pytest.fixture
def editor(db):
    return make_user("eddie", "editor", namespace="team-a")


def console(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_lists_runs_and_the_api_show_only_the_namespaces_granted(both_databases, jobs, editor):
    mine, theirs = jobs
    for job in jobs:
        Run.objects.create(job=job, scheduled_at=timezone.now(), trigger=Run.Trigger.MANUAL)
    assert list(access.visible_jobs(editor).values_list("name", flat=True)) == ["mine"]
    assert {run.job.name for run in access.visible_runs(editor)} == {"mine"}
    listing = console(editor).get(reverse("jobs:job_list")).content
    assert b"mine" in listing and b"theirs" not in listing
    api = ApiClient(tokens.create_token(user=editor, name="t")[1])
    assert [job["name"] for job in api.get("/api/jobs").json()["results"]] == ["mine"]
    assert [run["job_id"] for run in api.get("/api/runs").json()["results"]] == [mine.pk]


def test_the_dashboard_counts_only_the_live_runs_of_the_namespaces_granted(
    db, jobs, editor, staff_user, make_job
):
    """The count of what is running is no window onto other teams' work."""
    from jobs.overview import dashboard_figures

    mine, theirs = jobs
    for job in (mine, theirs, make_job(name="theirs-too", namespace="team-b")):
        Run.objects.create(
            job=job, scheduled_at=timezone.now(), trigger=Run.Trigger.MANUAL, status=Run.Status.RUNNING
        )
    assert dashboard_figures(editor, now=timezone.now())["running_count"] == 1
    assert dashboard_figures(staff_user, now=timezone.now())["running_count"] == 3
    api = ApiClient(tokens.create_token(user=editor, name="t")[1])
    assert api.get("/api/dashboard").json()["running_count"] == 1


def test_a_job_outside_the_namespaces_answers_404_not_403(db, jobs, editor):
    _mine, theirs = jobs
    client = console(editor)
    for name in ("job_detail", "job_edit"):
        assert client.get(reverse(f"jobs:{name}", args=[theirs.pk])).status_code == 404
    assert client.post(reverse("jobs:job_pause", args=[theirs.pk])).status_code == 404
    api = ApiClient(tokens.create_token(user=editor, name="t")[1])
    assert_error(api.get(f"/api/jobs/{theirs.pk}"), 404, "not_found")
    assert_error(api.post(f"/api/jobs/{theirs.pk}/run"), 404, "not_found")
    theirs.refresh_from_db()
    assert theirs.state == Job.State.ENABLED


def test_an_editor_in_one_namespace_cannot_create_or_move_a_job_into_another(db, jobs, editor):
    mine, _theirs = jobs
    client = console(editor)
    response = client.post(reverse("jobs:job_create"), job_data(name="new", namespace="team-b"))
    assert response.status_code == 200 and "team-b" in response.context["form"].errors["namespace"][0]
    assert not Job.objects.filter(name="new").exists()
    assert (
        client.post(reverse("jobs:job_create"), job_data(name="new", namespace="team-a")).status_code == 302
    )
    api = ApiClient(tokens.create_token(user=editor, name="t")[1])
    body = assert_error(api.patch(f"/api/jobs/{mine.pk}", {"namespace": "team-b"}), 403, "forbidden")
    assert "team-b" in body["message"]
    mine.refresh_from_db()
    assert mine.namespace == "team-a"


def test_an_operator_in_one_namespace_and_a_viewer_everywhere_acts_only_in_that_one(db, jobs):
    mine, theirs = jobs
    user = make_user("otto", "viewer")
    from jobs.models import RoleGrant

    RoleGrant.objects.create(user=user, role="operator", namespace="team-a")
    client = console(user)
    assert client.get(reverse("jobs:job_detail", args=[theirs.pk])).status_code == 200
    assert client.post(reverse("jobs:job_pause", args=[theirs.pk])).status_code == 403
    assert client.post(reverse("jobs:job_pause", args=[mine.pk])).status_code == 302


def test_one_off_tasks_are_seen_only_by_roles_granted_everywhere(db, editor):
    task = Run.objects.create(
        job=None, handler="demo.echo", trigger=Run.Trigger.TASK, scheduled_at=timezone.now()
    )
    assert not access.visible_runs(editor).filter(pk=task.pk).exists()
    assert access.visible_runs(make_user("vera", "viewer")).filter(pk=task.pk).exists()


def test_alerts_of_other_namespaces_are_not_listed(db, jobs, editor):
    from jobs.models import Alert

    for job in jobs:
        Alert.objects.create(
            job=job,
            kind="crash",
            status="sent",
            subject=f"{job.name} crashed",
            body_text="x",
            message_id=f"<{job.pk}@c>",
        )
    assert [alert.job.name for alert in access.visible_alerts(editor)] == ["mine"]


# -- narrowed API tokens ---------------------------------------------------------


def test_a_token_narrowed_to_one_namespace_sees_and_acts_only_there(db, jobs):
    mine, theirs = jobs
    user = make_user("ada", "admin")
    api = ApiClient(tokens.create_token(user=user, name="t", namespace="team-a")[1])
    assert [job["name"] for job in api.get("/api/jobs").json()["results"]] == ["mine"]
    assert_error(api.get(f"/api/jobs/{theirs.pk}"), 404, "not_found")
    assert api.post(f"/api/jobs/{mine.pk}/toggle").status_code == 200
    # What only an administrator everywhere may do is out of a narrowed token's reach.
    assert_error(api.put("/api/secrets/db_pass", {"value": "x"}), 403, "forbidden")


def test_a_read_only_token_reads_but_changes_nothing(db, jobs):
    mine, _theirs = jobs
    api = ApiClient(tokens.create_token(user=make_user("ada", "admin"), name="t", read_only=True)[1])
    assert api.get(f"/api/jobs/{mine.pk}").status_code == 200
    assert_error(api.post(f"/api/jobs/{mine.pk}/run"), 403, "forbidden")
    assert not Run.objects.exists()


def test_a_narrowed_token_never_exceeds_its_users_current_roles(db, jobs):
    mine, _theirs = jobs
    user = make_user("eddie", "editor", namespace="team-a")
    api = ApiClient(tokens.create_token(user=user, name="t", namespace="team-b")[1])
    assert_error(api.get("/api/jobs"), 403, "no_role")
    from jobs.models import RoleGrant

    RoleGrant.objects.filter(user=user).update(role="viewer")
    api = ApiClient(tokens.create_token(user=user, name="t2", namespace="team-a")[1])
    assert_error(api.post(f"/api/jobs/{mine.pk}/run"), 403, "forbidden")


def test_the_profile_page_creates_a_narrowed_token(db):
    from jobs.models import APIToken

    client = console(make_user("eddie", "editor"))
    client.post(reverse("jobs:profile"), {"name": "ci", "namespace": "team-a", "read_only": "on"})
    token = APIToken.objects.get(name="ci")
    assert (token.namespace, token.read_only) == ("team-a", True)
    client.post(reverse("jobs:profile"), {"name": "bad", "namespace": "Not A Namespace"})
    assert not APIToken.objects.filter(name="bad").exists()


# -- workflows across namespaces ---------------------------------------------------


def test_a_job_cannot_be_chained_after_a_job_in_a_namespace_the_user_cannot_edit(db, jobs, editor, make_job):
    mine, theirs = jobs
    api = ApiClient(tokens.create_token(user=editor, name="t")[1])
    body = assert_error(api.patch(f"/api/jobs/{mine.pk}", {"after": ["theirs"]}), 400)
    assert body["errors"][0]["code"] == "47011" and body["errors"][0]["field"] == "after"
    mine.refresh_from_db()
    assert not mine.after
    other = make_job(name="also-mine", namespace="team-a")
    assert api.patch(f"/api/jobs/{mine.pk}", {"after": [other.name]}).status_code == 200


def test_a_rename_is_refused_while_a_job_the_user_cannot_edit_runs_after_it(db, jobs, editor):
    from jobs import services
    from jobs.models import AuditEvent

    mine, theirs = jobs
    theirs.after = [{"job": "mine", "on": "success"}]
    services.save_job(job=theirs)  # a trusted caller: an admin's chain across namespaces
    api = ApiClient(tokens.create_token(user=editor, name="t")[1])
    body = assert_error(api.patch(f"/api/jobs/{mine.pk}", {"name": "renamed"}), 400)
    assert body["errors"][0]["code"] == "47012" and body["errors"][0]["field"] == "name"
    assert "“theirs”" in body["errors"][0]["message"]
    mine.refresh_from_db()
    assert mine.name == "mine"
    # Once that job is in the editor's namespace, the rename rewrites its `after`, audited and versioned.
    Job.objects.filter(pk=theirs.pk).update(namespace="team-a")
    version = Job.objects.get(pk=theirs.pk).version
    assert api.patch(f"/api/jobs/{mine.pk}", {"name": "renamed"}).status_code == 200
    theirs.refresh_from_db()
    assert theirs.after == [{"job": "renamed", "on": "success"}] and theirs.version == version + 1
    assert AuditEvent.objects.filter(job=theirs, action="edit", user=editor).exists()


def test_the_audit_page_filters_by_namespace(db, jobs):
    from jobs import services

    mine, theirs = jobs
    for job in jobs:
        services.pause_job(job=job)
    client = console(make_user("ada", "admin"))
    page = client.get(reverse("jobs:audit"), {"namespace": "team-a"})
    assert [event.job_id for event in page.context["events"]] == [mine.pk]
    page = client.get(reverse("jobs:audit"), {"namespace": "Not One"})
    assert page.status_code == 200 and page.context["errors"]
    assert {mine.pk, theirs.pk} <= {event.job_id for event in page.context["events"]}


# -- in-site messages ------------------------------------------------------------


def test_an_alerts_messages_reach_only_users_who_may_see_its_namespace(both_databases, make_job, superuser):
    from django.contrib.auth.models import Group

    from jobs import alerts
    from jobs.models import Message, RoleGrant

    owner = make_user("olive", "editor", namespace="team-a")
    moved = make_job(name="moved", namespace="team-b", owner=owner)
    kept = make_job(name="kept", namespace="team-a", owner=owner)
    alerts.on_crash(job=moved, run=None, now=timezone.now())
    assert list(Message.objects.filter(job=moved).values_list("user__username", flat=True)) == ["root"]
    # A role held through a group, or everywhere, counts as the user's own.
    RoleGrant.objects.filter(user=owner).delete()
    team = Group.objects.create(name="team-b")
    owner.groups.add(team)
    RoleGrant.objects.create(group=team, role="viewer", namespace="team-b")
    alerts.on_crash(job=moved, run=None, now=timezone.now() + timezone.timedelta(seconds=1))
    alerts.on_crash(job=kept, run=None, now=timezone.now())
    assert Message.objects.filter(user=owner, job=moved).count() == 1
    assert not Message.objects.filter(user=owner, job=kept).exists()


def test_messages_about_a_namespace_no_longer_granted_are_hidden_and_not_counted(db, jobs, editor):
    from jobs.models import Message

    mine, theirs = jobs
    kept = Message.objects.create(user=editor, job=mine, subject="mine crashed")
    hidden = Message.objects.create(user=editor, job=theirs, subject="theirs crashed")
    client = console(editor)
    page = client.get(reverse("jobs:messages")).content.decode()
    assert "mine crashed" in page and "theirs crashed" not in page
    badge = client.get(reverse("jobs:unread_count")).content.decode()
    assert 'data-poll-version="1"' in badge
    assert client.post(reverse("jobs:message_read", args=[hidden.pk])).status_code == 404
    assert client.post(reverse("jobs:message_read", args=[kept.pk])).status_code in (200, 302)
