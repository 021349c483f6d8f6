"""The audit page (/audit/): every audit row across jobs, the settings, the
global alert channels and sign-ins, newest first, filtered, in keyset pages;
and the rows those changes write."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.urls import reverse

from jobs import channels, services
from jobs.models import AuditEvent, Job

pytestmark = pytest.mark.django_db

AUDIT = "/audit/"
HOOK = "json://127.0.0.1:9/hook?token=s3cr3t-path"


def rows(response) -> list[str]:
    html = response.content.decode()
    return [part.split('"', 1)[0] for part in html.split('<tr id="audit-')[1:]]


def make_events(count: int, *, start=datetime(2026, 1, 1, tzinfo=UTC), **fields):
    AuditEvent.objects.bulk_create(
        AuditEvent(
            job_name=fields.get("job_name", "bulk"),
            action=fields.get("action", "edit"),
            username=fields.get("username", "someone"),
            created_at=start + timedelta(seconds=i // 2),  # pairs share an instant
        )
        for i in range(count)
    )


def test_staff_see_every_row_newest_first_with_each_fields_before_and_after(
    staff_client, staff_api, make_job
):
    job = make_job(name="nightly", description="old words")
    staff_api.patch(f"/api/jobs/{job.pk}", {"description": "new words"})
    services.save_settings(values={"sys.job.logRetentionDays": 9})
    response = staff_client.get(AUDIT)
    html = response.content.decode()
    assert response.status_code == 200
    ids = [int(i) for i in rows(response)]
    assert ids == sorted(ids, reverse=True) and len(ids) == AuditEvent.objects.count()
    assert "<strong>Description</strong>: <code>old words</code> → <code>new words</code>" in html
    assert "<strong>sys.job.logRetentionDays</strong>: <code>30</code> → <code>9</code>" in html
    assert f'href="/jobs/{job.pk}/"' in html and "Settings" in html


def test_the_audit_page_is_for_staff_and_linked_in_their_nav(staff_user, viewer_user):
    staff, viewer = Client(), Client()
    staff.force_login(staff_user)
    viewer.force_login(viewer_user)
    assert f'href="{AUDIT}"' in staff.get("/").content.decode()
    assert f'href="{AUDIT}"' not in viewer.get("/").content.decode()
    assert viewer.get(AUDIT).status_code == 403
    assert Client().get(AUDIT).status_code == 302


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("user=ann", {"ann-edit-a", "ann-pause-b"}),
        ("job=b", {"ann-pause-b", "bob-edit-b"}),
        ("action=pause", {"ann-pause-b"}),
        ("via=api", {"bob-edit-b"}),
        ("subject=settings", {"settings"}),
        ("since=2026-03-02", {"bob-edit-b", "settings"}),
        ("until=2026-03-01", {"ann-edit-a", "ann-pause-b"}),
        ("since=2026-03-02 10:00&until=2026-03-02 10:30", {"bob-edit-b"}),
    ],
)
def test_filters(staff_client, query, expected):
    AuditEvent.objects.all().delete()  # the staff user's sign-in
    day = datetime(2026, 3, 1, 10, tzinfo=UTC)
    made = {
        "ann-edit-a": dict(username="ann", job_name="a", action="edit", created_at=day),
        "ann-pause-b": dict(username="ann", job_name="b", action="pause", created_at=day),
        "bob-edit-b": dict(
            username="bob", job_name="b", action="edit", via="api", created_at=day + timedelta(days=1)
        ),
        "settings": dict(
            username="bob", subject="settings", action="change", created_at=day + timedelta(days=1, hours=1)
        ),
    }
    names = {AuditEvent.objects.create(**fields).pk: name for name, fields in made.items()}
    response = staff_client.get(f"{AUDIT}?{query}")
    assert {names[int(i)] for i in rows(response)} == expected


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("since=yesterday", "“yesterday” is not a date"),
        ("until=2026-02-30", "“2026-02-30” is not a date"),
        ("since=0000-01-01", "is not a date"),
        ("until=9999-12-31", "“9999-12-31” is not a date"),
        ("until=99991231", "“99991231” is not a date"),
        ("via=telepathy", "There is no such choice for “via”: telepathy."),
    ],
)
def test_a_filter_that_cannot_be_read_is_said_and_left_out(staff_client, query, message):
    response = staff_client.get(f"{AUDIT}?{query}")
    assert response.status_code == 200 and message in response.content.decode()
    assert len(rows(response)) == AuditEvent.objects.count()


def test_a_hand_made_cursor_shows_the_first_page(staff_client):
    response = staff_client.get(f"{AUDIT}?before=007.1")
    assert response.status_code == 200 and len(rows(response)) == AuditEvent.objects.count()


def test_cursor_pages_cover_every_row_once_at_the_same_cost(staff_client, django_assert_max_num_queries):
    make_events(1200)
    total = AuditEvent.objects.count()
    seen, url, queries = [], AUDIT + "?user=someone", []
    while url:
        # one query more than before roles: the grants, read once per request
        with django_assert_max_num_queries(6) as captured:
            response = staff_client.get(url)
        queries.append(len(captured))
        seen.extend(rows(response))
        html = response.content.decode()
        marker = 'href="?'
        url = (
            AUDIT + "?" + html.split(marker, 1)[1].split('"', 1)[0].replace("&amp;", "&")
            if marker in html
            else ""
        )
    assert len(seen) == len(set(seen)) == total - 1  # all but the sign-in, which is not "someone"'s
    assert len(queries) == 24 and len(set(queries)) == 1


def test_settings_and_global_channel_changes_are_audited_with_the_channels_masked(
    staff_client, staff_user, loopback_fence_open
):
    from jobs import channelbook

    channelbook.save_channel(name="hook", url=HOOK)
    response = staff_client.post(
        reverse("jobs:settings"), {"sys.job.logRetentionDays": "7", "sys.job.alertChannels": "hook"}
    )
    assert response.status_code == 302
    settings_row = AuditEvent.objects.get(subject="settings")
    assert settings_row.changes["sys.job.logRetentionDays"] == [30, 7] and settings_row.user == staff_user
    channel_row = AuditEvent.objects.get(subject="channels", action="change")
    assert channel_row.changes["sys.job.alertChannels"] == [[], ["hook"]]
    saved = AuditEvent.objects.get(subject="channels", action="channel-save")
    assert saved.subject_name == "hook" and saved.changes["url"] == [None, channels.mask(HOOK)]
    assert "s3cr3t" not in json.dumps(list(AuditEvent.objects.values()), default=str)
    assert "s3cr3t" not in staff_client.get(AUDIT).content.decode()
    # Saving the same values again changes nothing and writes no row.
    staff_client.post(
        reverse("jobs:settings"), {"sys.job.logRetentionDays": "7", "sys.job.alertChannels": "hook"}
    )
    assert AuditEvent.objects.filter(subject__in=["settings", "channels"]).count() == 3


def test_sign_ins_and_failed_sign_ins_are_audited_without_the_password(staff_user):
    client = Client()
    client.post("/login/", {"username": "staff", "password": "wrong-password-42"})
    client.post("/login/", {"username": "staff", "password": "pw-staff-123"})
    failed = AuditEvent.objects.get(action="sign-in-failed")
    signed_in = AuditEvent.objects.get(action="sign-in")
    assert (failed.username, failed.user, failed.via, failed.subject) == ("staff", None, "console", "sign-in")
    assert (signed_in.user, signed_in.via) == (staff_user, "console")
    assert "wrong-password-42" not in json.dumps(list(AuditEvent.objects.values()), default=str)


def test_failed_sign_ins_past_the_lockout_add_no_rows(staff_user, settings):
    """A client guessing passwords is locked out by django-axes at its
    LOGIN_FAILURE_LIMIT-th failure; from then on axes' own log holds the
    attempts, so the audit table cannot grow without end."""
    client = Client()
    for attempt in range(settings.AXES_FAILURE_LIMIT + 10):
        client.post("/login/", {"username": "staff", "password": f"guess-{attempt}"})
    assert AuditEvent.objects.filter(action="sign-in-failed").count() == settings.AXES_FAILURE_LIMIT - 1


def test_a_sign_in_through_another_backend_is_via_sso(staff_user, settings):
    backend = "django.contrib.auth.backends.RemoteUserBackend"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, backend]
    Client().force_login(staff_user, backend=backend)
    assert AuditEvent.objects.get(action="sign-in").via == "sso"


def test_an_import_from_the_command_line_is_via_import(tmp_path):
    from django.core.management import call_command

    path = tmp_path / "jobs.json"
    path.write_text(
        json.dumps([{"name": "imported", "handler": "demo.echo", "cron_expression": "0 * * * *"}])
    )
    call_command("jobs", "import", str(path))
    assert AuditEvent.objects.get(job=Job.objects.get(name="imported")).via == "import"


def test_secrets_and_roles_have_subjects_of_their_own_shown_and_filtered(staff_client, staff_user):
    from jobs import roles, secrets
    from tests.fixtures.core import make_user

    secrets.set_secret(name="deploy-key", value="v4lue-one", description="ci", user=staff_user, via="console")
    secrets.set_secret(name="deploy-key", value="v4lue-two", user=staff_user, via="cli")
    roles.grant_role(
        role="editor", namespace="billing", user=make_user("alice"), by=staff_user, via="console"
    )
    secret_rows = AuditEvent.objects.filter(subject=AuditEvent.Subject.SECRETS)
    assert [(e.subject_name, e.job_name, e.job_id) for e in secret_rows] == [("deploy-key", "", None)] * 2
    assert AuditEvent.objects.get(subject=AuditEvent.Subject.ROLES).subject_name == "alice"

    html = staff_client.get(AUDIT, {"subject": "secrets", "action": "secret-set"}).content.decode()
    assert "no such choice" not in html.lower()
    assert len(rows(staff_client.get(AUDIT, {"subject": "secrets", "action": "secret-set"}))) == 1
    assert "Secrets: <strong>deploy-key</strong>" in html and "replace secret" in html
    assert '<strong>Value</strong>: <span class="muted">changed</span>' in html
    assert "v4lue" not in html and "<code>c</code>" not in html
    roles_page = staff_client.get(AUDIT, {"subject": "roles", "action": "grant"}).content.decode()
    assert "Roles: <strong>alice</strong>" in roles_page
    assert "<strong>holder</strong>: <code>alice</code>" in roles_page
    assert "<strong>role</strong>: <code>—</code> → <code>editor</code>" in roles_page


def test_secret_rows_written_before_get_their_subject_on_upgrading():
    import importlib

    from django.apps import apps

    migration = importlib.import_module("jobs.migrations.0026_audit_secret_subject")
    old = AuditEvent.objects.create(
        job_name="secret tok", action="secret-set", via="cli", changes={"secret": "tok", "value": "changed"}
    )
    grant = AuditEvent.objects.create(
        subject="roles",
        action="grant",
        changes={"holder": "bob", "namespace": None, "role": [None, "viewer"]},
    )
    migration.name_the_subjects(apps, None)
    old.refresh_from_db()
    grant.refresh_from_db()
    assert (old.subject, old.subject_name, old.job_name, old.changes) == (
        "secrets",
        "tok",
        "",
        {"value": "changed"},
    )
    assert grant.subject_name == "bob"
