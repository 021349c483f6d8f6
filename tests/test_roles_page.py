"""The roles page (/roles/): administrators grant a user or a group a role,
everywhere or in one namespace, and revoke it, through jobs.roles (audited);
bad input re-renders the form with a sentence and saves nothing; everyone
else is refused."""

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from jobs.models import AuditEvent, RoleGrant
from tests.fixtures.core import make_user

pytestmark = pytest.mark.django_db
ROLES = "/roles/"


def console(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def grant(client, **fields):
    return client.post(
        ROLES, {"holder_type": "user", "role": "viewer", "namespace": "", **fields}, follow=True
    )


def test_an_admin_grants_and_revokes_and_each_is_audited(staff_user):
    client = console(staff_user)
    assert f'href="{ROLES}"' in client.get("/").content.decode()
    alice = make_user("alice")
    page = grant(client, holder="alice", role="editor", namespace="billing").content.decode()
    assert "alice: editor in namespace “billing”." in page
    (row,) = RoleGrant.objects.filter(user=alice)
    assert (row.role, row.namespace) == ("editor", "billing")
    assert f'id="grant-{row.pk}"' in page
    Group.objects.create(name="on-call")
    grant(client, holder_type="group", holder="on-call", role="operator")
    assert RoleGrant.objects.get(group__name="on-call").namespace is None

    response = client.post(reverse("jobs:role_revoke", args=[row.pk]), follow=True)
    assert "alice: no role in namespace “billing”." in response.content.decode()
    assert not RoleGrant.objects.filter(user=alice).exists()
    assert client.post(reverse("jobs:role_revoke", args=[row.pk])).status_code == 404
    events = AuditEvent.objects.filter(subject="roles").order_by("pk")
    assert [(e.action, e.subject_name, e.via, e.username) for e in events] == [
        ("grant", "alice", "console", "staff"),
        ("grant", "group on-call", "console", "staff"),
        ("revoke", "alice", "console", "staff"),
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"holder": "nobody"}, "No user “nobody”."),
        ({"holder_type": "group", "holder": "nobody"}, "No group “nobody”."),
        ({"holder": "alice", "namespace": "Not One"}, "“Not One” is not a namespace."),
        ({"holder": "alice", "role": "owner"}, "Select a valid choice."),
    ],
)
def test_bad_input_is_refused_with_a_sentence_and_saves_nothing(staff_user, fields, message):
    make_user("alice")
    response = grant(console(staff_user), **fields)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not RoleGrant.objects.exclude(user=staff_user).exists()
    assert not AuditEvent.objects.filter(subject="roles").exists()


def test_only_administrators_everywhere_may_open_it(db):
    alice = make_user("alice")
    for user in (make_user("eddie", "editor"), make_user("ann", "admin", namespace="billing")):
        client = console(user)
        assert f'href="{ROLES}"' not in client.get("/").content.decode()
        assert client.get(ROLES).status_code == 403
        assert grant(client, holder="alice", role="admin").status_code == 403
    assert not RoleGrant.objects.filter(user=alice).exists()
