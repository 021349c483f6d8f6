"""Signing in through a real OpenLDAP directory (tests/fixtures/ldap.py):
through the console's form, groups mapped to roles and followed at every
sign-in, refused tokens of a user who lost every role, wrong passwords,
unknown users, injection in the name typed, a directory that is down or
hangs, StartTLS, nested groups, and `manage.py sso check`."""

import socket
import threading
import time
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from jobs import tokens
from jobs.models import AuditEvent, RoleGrant
from tests.fixtures.api import ApiClient, assert_error
from tests.fixtures.core import make_user
from tests.fixtures.ldap import GROUPS, PEOPLE, SERVICE_DN, group_dn

pytestmark = pytest.mark.ldap

RULES = f"""
{group_dn("sre")} → operator:*
payments-dev → editor:billing
payments-lead → admin:*
platform → viewer:platform
"""


@pytest.fixture
def ldap_on(directory, settings, db):
    directory.use(settings)
    settings.CRONBOARD_GROUP_ROLES = RULES
    return directory


def sign_in(username: str, password: str) -> tuple[Client, object]:
    client = Client()
    response = client.post(reverse("login"), {"username": username, "password": password})
    return client, response


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def roles_of(username: str) -> dict:
    return {g.namespace: (g.role, g.source) for g in RoleGrant.objects.filter(user__username=username)}


def sign_in_rows():
    return list(AuditEvent.objects.filter(subject=AuditEvent.Subject.SIGN_IN).order_by("id"))


def test_a_directory_user_signs_in_through_the_form_and_gets_the_mapped_roles(ldap_on):
    ldap_on.add_user("alice", "pw-alice-ldap", groups=["sre", "payments-dev"], mail="alice@corp.example")
    client, response = sign_in("alice", "pw-alice-ldap")
    assert response.status_code == 302 and signed_in(client)
    assert client.get(reverse("jobs:job_list")).status_code == 200
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get(username="alice")
    assert not user.has_usable_password()  # Cronboard never holds it
    assert user.email == "alice@corp.example"
    assert roles_of("alice") == {
        None: ("operator", "ldap"),
        "billing": ("editor", "ldap"),
        # platform holds sre, but groupOfNames does not follow nesting
    }
    (row,) = sign_in_rows()
    assert (row.action, row.via, row.user) == ("sign-in", AuditEvent.Via.SSO, user)
    assert row.changes["source"] == "ldap"
    assert set(row.changes["granted"].split(", ")) == {"operator:*", "editor:billing"}


def test_the_name_typed_in_another_case_is_the_same_user(ldap_on):
    from django.contrib.auth import get_user_model

    ldap_on.add_user("ivan", "pw-ivan-ldap", groups=["sre"])
    for typed in ("ivan", "IVAN", " Ivan "):
        client, _response = sign_in(typed, "pw-ivan-ldap")
        assert signed_in(client)
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["ivan"]


def test_group_changes_are_followed_at_the_next_sign_in_and_a_removed_users_token_is_refused(ldap_on):
    ldap_on.add_user("bob", "pw-bob-ldap", groups=["sre"])
    client, _response = sign_in("bob", "pw-bob-ldap")
    assert signed_in(client)
    api = ApiClient(tokens.create_token(user=RoleGrant.objects.get(user__username="bob").user, name="ci")[1])
    assert api.get("/api/jobs").status_code == 200

    # Added to a group, and moved from sre (operator) to the leads (admin).
    ldap_on.set_groups("bob", ["payments-lead", "payments-dev"])
    client, _response = sign_in("bob", "pw-bob-ldap")
    assert signed_in(client)
    assert roles_of("bob") == {None: ("admin", "ldap"), "billing": ("editor", "ldap")}
    row = sign_in_rows()[-1]
    assert row.changes["removed"] == "operator:*"
    assert set(row.changes["granted"].split(", ")) == {"admin:*", "editor:billing"}

    # Removed from every mapped group: the page, no session, an audit row,
    # and the token made while they had a role is refused.
    ldap_on.set_groups("bob", ["unmapped"])
    client, response = sign_in("bob", "pw-bob-ldap")
    assert response.status_code == 403
    assert b"Your account has no role in Cronboard; ask an administrator" in response.content
    assert b"LDAP recognised you" in response.content
    assert not signed_in(client)
    assert roles_of("bob") == {}
    row = sign_in_rows()[-1]
    assert row.action == "sign-in-refused"
    assert set(row.changes["removed"].split(", ")) == {"admin:*", "editor:billing"}
    assert_error(api.get("/api/jobs"), 403, "no_role")


def test_a_role_given_by_hand_survives_the_directorys_sign_ins(ldap_on):
    ldap_on.add_user("carol", "pw-carol-ldap", groups=["unmapped"])
    client, _response = sign_in("carol", "pw-carol-ldap")  # created, no role yet
    assert not signed_in(client)
    carol = get_user_model().objects.get(username="carol")
    assert not carol.has_usable_password()
    RoleGrant.objects.create(user=carol, role="viewer", namespace="ops")  # given by hand
    client, _response = sign_in("carol", "pw-carol-ldap")
    assert signed_in(client)
    assert roles_of("carol") == {"ops": ("viewer", "")}


def test_a_local_account_is_never_signed_in_by_a_directory_entry_of_the_same_name(ldap_on):
    """A directory entry named like a local account (any case) does not
    become it: the local password still works, the directory's does not."""
    ldap_on.add_user("Root", "pw-root-ldap", groups=["sre"])
    local = get_user_model().objects.create_superuser("root", "root@example.com", "pw-root-local")
    client, _response = sign_in("Root", "pw-root-ldap")
    assert not signed_in(client)
    client, _response = sign_in("root", "pw-root-ldap")
    assert not signed_in(client)
    local.refresh_from_db()
    assert local.has_usable_password() and local.email == "root@example.com"
    assert not RoleGrant.objects.filter(user=local).exists()
    client, _response = sign_in("root", "pw-root-local")
    assert signed_in(client)


def test_the_directory_never_signs_in_an_identity_providers_account(ldap_on):
    """With LDAP and OIDC both on, an account the provider made stays the
    provider's: the directory's entry of the same name is refused."""
    from jobs.models import Profile

    ldap_on.add_user("omar", "pw-omar-ldap", groups=["sre"])
    provider_user = get_user_model().objects.create_user("omar")
    Profile.objects.create(user=provider_user, sign_in_source="oidc")
    client, _response = sign_in("omar", "pw-omar-ldap")
    assert not signed_in(client)
    assert not RoleGrant.objects.filter(user=provider_user).exists()


def test_a_wrong_password_and_an_unknown_user_are_refused_like_any_wrong_password(ldap_on):
    ldap_on.add_user("dave", "pw-dave-ldap", groups=["sre"])
    for username, password in [("dave", "wrong"), ("nobody", "pw-dave-ldap"), ("dave", "")]:
        client, response = sign_in(username, password)
        assert response.status_code == 200
        assert b"didn" in response.content  # "Your username and password didn't match"
        assert not signed_in(client)
    assert not RoleGrant.objects.exists()
    # The empty password is refused by the form before anyone is asked.
    assert [row.action for row in sign_in_rows()] == ["sign-in-failed"] * 2


@pytest.mark.parametrize("typed", ["*", "*)(uid=*))(|(uid=*", "dave)(|(uid=*", "*)(objectClass=*"])
def test_ldap_filter_characters_in_the_name_typed_are_escaped(ldap_on, typed):
    ldap_on.add_user("dave", "pw-dave-ldap", groups=["payments-lead"])
    client, response = sign_in(typed, "pw-dave-ldap")
    assert response.status_code == 200 and not signed_in(client)
    assert not RoleGrant.objects.exists()
    # Nobody found by the escaped filter; the real name is.
    out = StringIO()
    call_command("sso", "check", typed, stdout=out)
    assert "no user" in out.getvalue()
    call_command("sso", "check", "dave", stdout=out)
    assert "admin:*" in out.getvalue()


def test_a_directory_that_is_down_is_said_so_and_local_accounts_still_sign_in(own_slapd, settings, db):
    own_slapd.use(settings)
    settings.CRONBOARD_GROUP_ROLES = RULES
    own_slapd.add_user("erin", "pw-erin-ldap", groups=["sre"])
    client, _response = sign_in("erin", "pw-erin-ldap")
    assert signed_in(client)
    make_user("local", "viewer")

    own_slapd.stop()
    client, response = sign_in("erin", "pw-erin-ldap")
    assert response.status_code == 200 and not signed_in(client)
    assert b"The directory (LDAP) could not be reached" in response.content
    assert b"didn" not in response.content
    assert roles_of("erin") == {None: ("operator", "ldap")}  # kept until the directory says otherwise
    client, response = sign_in("local", "pw-local-123")
    assert response.status_code == 302 and signed_in(client)
    with pytest.raises(CommandError, match="could not be asked"):
        call_command("sso", "check", "erin", stdout=StringIO())


class Silent:
    """A TCP server on loopback that accepts connections and never answers:
    a directory that hangs."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while True:
            try:
                self.accepted.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self):
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_a_directory_that_does_not_answer_times_out_with_the_message(directory, settings, db):
    silent = Silent()
    try:
        directory.use(settings, server_uri=f"ldap://127.0.0.1:{silent.port}", timeout=1)
        started = time.monotonic()
        client, response = sign_in("erin", "pw-erin-ldap")
        elapsed = time.monotonic() - started
    finally:
        silent.close()
    assert response.status_code == 200 and not signed_in(client)
    assert b"did not answer in time" in response.content
    # One bind's timeout (1 s), not a stuck worker; generous for a loaded machine.
    assert elapsed < 15


def test_starttls_with_the_directorys_certificate(ldap_on, settings):
    ldap_on.add_user("fay", "pw-fay-ldap", groups=["sre"])
    ldap_on.use(settings, start_tls=True, ca_file=ldap_on.ca_file)
    client, _response = sign_in("fay", "pw-fay-ldap")
    assert signed_in(client)


def test_starttls_refuses_a_certificate_it_cannot_verify(ldap_on, settings, tmp_path):
    from tests.fixtures.tls import write_self_signed

    # Another CA than the server's.
    write_self_signed(tmp_path / "server.pem", tmp_path / "server.key", names=["localhost", "127.0.0.1"])
    ldap_on.add_user("fay", "pw-fay-ldap", groups=["sre"])
    ldap_on.use(settings, start_tls=True, ca_file=str(tmp_path / "server.pem"))
    client, response = sign_in("fay", "pw-fay-ldap")
    assert not signed_in(client)
    assert b"The directory (LDAP) could not be reached" in response.content


def test_nested_groups_count_with_the_nested_group_type(ldap_on, settings):
    ldap_on.add_user("gus", "pw-gus-ldap", groups=["sre"])
    ldap_on.use(settings, group_type="nestedGroupOfNames")
    client, _response = sign_in("gus", "pw-gus-ldap")
    assert signed_in(client)
    # sre is a member of platform: its members are platform's too.
    assert roles_of("gus") == {None: ("operator", "ldap"), "platform": ("viewer", "ldap")}


def test_sso_check_prints_the_groups_and_the_roles_without_signing_in(ldap_on):
    ldap_on.add_user("hana", "pw-hana-ldap", groups=["sre", "payments-dev", "unmapped"])
    out = StringIO()
    call_command("sso", "check", "hana", stdout=out)
    text = out.getvalue()
    assert f"uid=hana,{PEOPLE}" in text
    for group in (group_dn("sre"), group_dn("unmapped"), "payments-dev"):
        assert f"  {group}\n" in text
    assert f"{group_dn('sre')} → operator:*" in text
    assert "  operator:*\n" in text and "  editor:billing\n" in text
    from django.contrib.auth import get_user_model

    assert not get_user_model().objects.filter(username="hana").exists()
    assert not AuditEvent.objects.exists()

    ldap_on.set_groups("hana", ["unmapped"])
    out = StringIO()
    call_command("sso", "check", "hana", stdout=out)
    assert "No rule of CRONBOARD_GROUP_ROLES matches" in out.getvalue()


def test_sso_check_without_a_directory_says_what_to_configure(db, settings):
    settings.LDAP_SERVER_URI = ""
    with pytest.raises(CommandError, match="LDAP_SERVER_URI"):
        call_command("sso", "check", "anyone")


# -- the settings ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"server_uri": "http://dir"}, "LDAP_SERVER_URI"),
        ({"server_uri": "ldaps://dir:636", "start_tls": True}, "LDAP_START_TLS"),
        ({"user_search_base": " "}, "LDAP_USER_SEARCH_BASE"),
        ({"user_filter": "(uid=%s)"}, "LDAP_USER_FILTER"),
        ({"group_type": "posix"}, "LDAP_GROUP_TYPE"),
        ({"ca_file": "/nonexistent/ca.pem"}, "LDAP_CA_FILE"),
    ],
)
def test_a_bad_ldap_setting_is_named(overrides, names):
    from config.ldapsettings import auth_ldap_settings

    values = {
        "server_uri": "ldap://dir.example",
        "bind_dn": SERVICE_DN,
        "bind_password": "x",
        "user_search_base": PEOPLE,
        "user_filter": "(uid=%(user)s)",
        "group_search_base": GROUPS,
        "group_type": "groupOfNames",
        "group_filter": "",
        "start_tls": False,
        "ca_file": "",
        "timeout": 5,
    }
    values.update(overrides)
    with pytest.raises(ImproperlyConfigured, match=names):
        auth_ldap_settings(**values)


# -- the worked example of docs/operations.md, from the environment ------------


def example_environment(directory) -> dict:
    """docs/operations.md's OpenLDAP example, pointed at the test's slapd."""
    return {
        "LDAP_SERVER_URI": directory.uri,
        "LDAP_START_TLS": "true",
        "LDAP_CA_FILE": directory.ca_file,
        "LDAP_BIND_DN": SERVICE_DN,
        "LDAP_BIND_PASSWORD": "service-secret",
        "LDAP_USER_SEARCH_BASE": PEOPLE,
        "LDAP_USER_FILTER": "(uid=%(user)s)",
        "LDAP_GROUP_SEARCH_BASE": GROUPS,
        "LDAP_GROUP_TYPE": "groupOfNames",
        "CRONBOARD_GROUP_ROLES": "cn=sre,ou=groups,dc=corp → operator:*; payments-dev → editor:billing",
    }


@pytest.mark.slow
def test_the_operations_example_configures_sign_in_from_the_environment(directory, migrated_sqlite, tmp_path):
    from tests.fixtures.processes import SqliteSite

    directory.add_user("alice", "pw-alice-ldap", groups=["sre", "payments-dev"])
    site = SqliteSite(tmp_path, migrated_sqlite, **example_environment(directory))
    site.manage("check")
    done = site.manage("sso", "check", "alice")
    assert f"LDAP: alice is uid=alice,{PEOPLE}" in done.stdout
    assert "  cn=sre,ou=groups,dc=corp → operator:*\n" in done.stdout
    assert "  operator:*\n  editor:billing\n" in done.stdout

    for name, value, says in [
        ("LDAP_GROUP_TYPE", "groups", "LDAP_GROUP_TYPE must be one of"),
        ("LDAP_TIMEOUT", "soon", "LDAP_TIMEOUT must be a number of seconds"),
        ("CRONBOARD_GROUP_ROLES", "sre → boss:*", "CRONBOARD_GROUP_ROLES: rule 1"),
    ]:
        done = site.manage("check", check=False, **{name: value})
        assert done.returncode != 0
        assert says in done.stderr, done.stderr[-2000:]
