"""Groups mapped to roles (jobs.rolemapping): reading CRONBOARD_GROUP_ROLES,
the system check on it, what a sign-in's mapping grants and removes (never
a grant given by hand), its audit row, the page and the refused tokens of a
user left with no role."""

import pytest
from django.contrib.auth.backends import ModelBackend
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client, override_settings
from django.urls import reverse

from jobs import checks, rolemapping, tokens
from jobs.models import AuditEvent, Role, RoleGrant
from jobs.rolemapping import MappingError, Rule, apply_group_mapping, parse_mapping
from tests.fixtures.api import ApiClient, assert_error
from tests.fixtures.core import make_user

RULES = """
# the SRE team runs everything
cn=sre,ou=groups,dc=corp → operator:*
payments-dev -> editor:billing; payments-lead → admin:*
"""


def grants(user) -> dict:
    return {
        g.namespace: (g.role, g.source) for g in RoleGrant.objects.filter(user=user).order_by("namespace")
    }


# -- reading the rules -----------------------------------------------------------


def test_rules_are_read_from_lines_and_semicolons_with_either_arrow():
    assert parse_mapping(RULES) == [
        Rule("cn=sre,ou=groups,dc=corp", Role.OPERATOR, None),
        Rule("payments-dev", Role.EDITOR, "billing"),
        Rule("payments-lead", Role.ADMIN, None),
    ]
    assert parse_mapping(["a → viewer:*", "b->viewer:ops"]) == [
        Rule("a", Role.VIEWER, None),
        Rule("b", Role.VIEWER, "ops"),
    ]
    assert parse_mapping("") == []


def test_a_distinguished_name_is_compared_without_case_or_spaces_around_its_separators():
    (rule,) = parse_mapping("CN=SRE, OU=Groups,  DC=corp → operator:*")
    assert rule.group == "cn=sre,ou=groups,dc=corp"
    assert rolemapping.normalise_group(" cn = sre , ou=groups,dc=Corp ") == rule.group
    # An escaped comma belongs to the value.
    assert rolemapping.normalise_group(r"CN=Doe\, John,DC=corp") == r"cn=doe\, john,dc=corp"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("sre operator:*", "write GROUP → ROLE:NAMESPACE"),
        ("→ operator:*", "group before the arrow is missing"),
        ("sre → owner:*", "unknown role 'owner'"),
        ("sre → operator", ":NAMESPACE, or :* for everywhere"),
        ("sre → operator:", ":NAMESPACE, or :* for everywhere"),
        ("sre → operator:Billing Team", "is not a namespace"),
        ("ok → viewer:*; sre → operator:" + "x" * 101, "rule 2"),
    ],
)
def test_a_rule_that_cannot_be_read_is_named_with_the_reason(text, says):
    with pytest.raises(MappingError) as caught:
        parse_mapping(text)
    assert says in str(caught.value)


def test_the_system_check_stops_a_start_with_an_unreadable_rule():
    with override_settings(CRONBOARD_GROUP_ROLES="sre → owner:*"):
        (error,) = checks.group_roles_readable()
        assert error.id == "cronboard.E002"
        assert "CRONBOARD_GROUP_ROLES: rule 1" in error.msg and "unknown role 'owner'" in error.msg
        with pytest.raises(SystemCheckError, match="CRONBOARD_GROUP_ROLES"):
            call_command("check")
    with override_settings(CRONBOARD_GROUP_ROLES=RULES):
        assert checks.group_roles_readable() == []


# -- applying them at a sign-in ---------------------------------------------------


@pytest.fixture
def mapped(settings):
    settings.CRONBOARD_GROUP_ROLES = RULES


def test_a_sign_in_grants_the_mapped_roles_and_records_them(db, mapped):
    user = make_user("sam")
    result = apply_group_mapping(user, ["CN=SRE,OU=Groups,DC=corp", "Payments-Dev", "other"], source="ldap")
    assert result.has_role
    assert sorted(result.granted) == ["editor:billing", "operator:*"]
    assert result.removed == []
    assert grants(user) == {None: ("operator", "ldap"), "billing": ("editor", "ldap")}
    event = AuditEvent.objects.get(subject=AuditEvent.Subject.SIGN_IN)
    assert (event.action, event.via, event.user) == ("sign-in", AuditEvent.Via.SSO, user)
    assert event.changes["source"] == "ldap"
    assert set(event.changes["granted"].split(", ")) == {"operator:*", "editor:billing"}


def test_the_next_sign_in_follows_the_groups_added_changed_and_removed(db, mapped):
    user = make_user("sam")
    apply_group_mapping(user, ["cn=sre,ou=groups,dc=corp"], source="ldap")
    # Moved from SRE to the payments leads: operator:* becomes admin:*, billing added.
    result = apply_group_mapping(user, ["payments-lead", "payments-dev"], source="ldap")
    assert sorted(result.granted) == ["admin:*", "editor:billing"]
    assert result.removed == ["operator:*"]
    assert grants(user) == {None: ("admin", "ldap"), "billing": ("editor", "ldap")}
    # Out of every mapped group: nothing left, and the row says so.
    result = apply_group_mapping(user, ["other"], source="ldap")
    assert not result.has_role
    assert sorted(result.removed) == ["admin:*", "editor:billing"]
    assert grants(user) == {}
    last = AuditEvent.objects.filter(subject=AuditEvent.Subject.SIGN_IN).first()
    assert last.action == "sign-in-refused"
    assert set(last.changes["removed"].split(", ")) == {"admin:*", "editor:billing"}


def test_the_highest_role_of_several_rules_for_one_scope_wins(db):
    user = make_user("sam")
    rules = parse_mapping("a → viewer:*; b → editor:*; c → operator:*")
    apply_group_mapping(user, ["a", "b", "c"], source="ldap", rules=rules)
    assert grants(user) == {None: ("editor", "ldap")}


def test_a_grant_given_by_hand_is_never_touched(db, mapped):
    user = make_user("sam", "viewer")  # by hand, everywhere
    RoleGrant.objects.create(user=user, role="operator", namespace="ops")  # by hand
    result = apply_group_mapping(user, ["cn=sre,ou=groups,dc=corp", "payments-dev"], source="ldap")
    # operator:* would replace the hand-given viewer:*: the scope is left alone.
    assert result.granted == ["editor:billing"]
    assert grants(user) == {None: ("viewer", ""), "billing": ("editor", "ldap"), "ops": ("operator", "")}
    result = apply_group_mapping(user, [], source="ldap")
    assert result.removed == ["editor:billing"]
    assert result.has_role  # the hand-given grants remain
    assert grants(user) == {None: ("viewer", ""), "ops": ("operator", "")}


def test_another_sources_grants_are_left_to_it(db, mapped):
    user = make_user("sam")
    apply_group_mapping(user, ["payments-dev"], source="oidc")
    apply_group_mapping(user, [], source="ldap")
    assert grants(user) == {"billing": ("editor", "oidc")}


def test_a_role_through_a_django_group_counts_as_a_role(db, mapped):
    from django.contrib.auth.models import Group

    user = make_user("sam")
    team = Group.objects.create(name="team")
    RoleGrant.objects.create(group=team, role="viewer", namespace=None)
    user.groups.add(team)
    result = apply_group_mapping(user, [], source="ldap")
    assert result.has_role and result.roles == {None: Role.VIEWER}


def test_a_sign_ins_grants_need_a_source_other_than_by_hand(db):
    with pytest.raises(ValueError, match="source"):
        apply_group_mapping(make_user("sam"), [], source="")


# -- a user left with no role ------------------------------------------------------


class GroupsFromEmailBackend(ModelBackend):
    """A directory stand-in for the sign-in form: the password as Django
    checks it, the groups from the e-mail's local part ("a+b@…")."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        user = super().authenticate(request, username=username, password=password, **kwargs)
        if user is not None:
            apply_group_mapping(user, user.email.split("@")[0].split("+"), source="ldap", request=request)
        return user


BACKENDS = ["axes.backends.AxesStandaloneBackend", "tests.test_group_mapping.GroupsFromEmailBackend"]


@override_settings(AUTHENTICATION_BACKENDS=BACKENDS)
def test_a_sign_in_whose_groups_map_to_no_role_gets_the_page_and_no_session(db, mapped):
    user = make_user("sam")
    user.email = "other@example.com"
    user.save()
    client = Client()
    response = client.post(reverse("login"), {"username": "sam", "password": "pw-sam-123"})
    assert response.status_code == 403
    assert b"Your account has no role in Cronboard; ask an administrator" in response.content
    assert "_auth_user_id" not in client.session
    assert client.get(reverse("jobs:job_list")).status_code == 302  # to the sign-in page
    (event,) = AuditEvent.objects.filter(subject=AuditEvent.Subject.SIGN_IN)
    assert (event.action, event.user) == ("sign-in-refused", user)


@override_settings(AUTHENTICATION_BACKENDS=BACKENDS)
def test_a_sign_in_whose_groups_map_to_a_role_opens_a_session_with_one_audit_row(db, mapped):
    user = make_user("sam")
    user.email = "payments-dev@example.com"
    user.save()
    client = Client()
    response = client.post(reverse("login"), {"username": "sam", "password": "pw-sam-123"})
    assert response.status_code == 302
    assert client.session["_auth_user_id"] == str(user.pk)
    (event,) = AuditEvent.objects.filter(subject=AuditEvent.Subject.SIGN_IN)
    assert (event.action, event.changes["granted"]) == ("sign-in", "editor:billing")


@override_settings(AUTHENTICATION_BACKENDS=BACKENDS)
def test_a_wrong_password_is_still_the_forms_own_error(db, mapped):
    make_user("sam")
    response = Client().post(reverse("login"), {"username": "sam", "password": "nope"})
    assert response.status_code == 200
    assert b"didn" in response.content and b"no role" not in response.content


def test_the_api_tokens_of_a_user_left_with_no_role_are_refused(db, mapped):
    user = make_user("sam")
    apply_group_mapping(user, ["cn=sre,ou=groups,dc=corp"], source="ldap")
    api = ApiClient(tokens.create_token(user=user, name="ci")[1])
    assert api.get("/api/jobs").status_code == 200
    apply_group_mapping(user, ["other"], source="ldap")
    assert_error(api.get("/api/jobs"), 403, "no_role")
    apply_group_mapping(user, ["payments-dev"], source="ldap")
    assert api.get("/api/jobs").status_code == 200


def test_the_audit_page_shows_a_sign_ins_source_and_roles_as_written(db, mapped, superuser):
    apply_group_mapping(make_user("sam"), ["payments-dev"], source="ldap")
    client = Client()
    client.force_login(superuser)
    page = client.get(reverse("jobs:audit")).content.decode()
    assert "<code>ldap</code>" in page
    assert "<code>editor:billing</code>" in page


@pytest.mark.postgres
@pytest.mark.parametrize("both_databases", ["postgres"], indirect=True)
def test_two_sign_ins_of_one_user_at_once_take_turns(both_databases, postgres_server):
    """The first sign-in holds its transaction open while the second starts:
    the second waits for it and then finds the grant made, instead of adding
    it again against the one-grant-per-scope constraint."""
    import threading

    from django.db import connection, transaction

    from tests.fixtures.processes import wait_for

    user = make_user("sam")
    rules = parse_mapping("payments-dev → editor:billing")
    first_done, release = threading.Event(), threading.Event()
    errors = []

    def first():
        try:
            with transaction.atomic():
                apply_group_mapping(user, ["payments-dev"], source="ldap", rules=rules)
                first_done.set()
                release.wait(60)
        finally:
            connection.close()

    def second():
        try:
            first_done.wait(60)
            again = type(user).objects.get(pk=user.pk)
            apply_group_mapping(again, ["payments-dev"], source="ldap", rules=rules)
        except Exception as exc:  # what the assertion below reports
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    with postgres_server.connect(connection.settings_dict["NAME"]) as admin:
        wait_for(
            lambda: admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone()[0],
            30,
            "the second sign-in waiting for the first",
        )
    release.set()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert grants(user) == {"billing": ("editor", "ldap")}


def test_an_administrators_grant_over_a_sign_ins_grant_makes_it_theirs(db, mapped):
    from io import StringIO

    user = make_user("sam")
    apply_group_mapping(user, ["payments-dev"], source="ldap")
    out = StringIO()
    call_command("roles", "list", "sam", stdout=out)
    assert out.getvalue() == "sam\teditor\tin namespace “billing”\tldap\n"

    call_command("roles", "grant", "sam", "editor", "--namespace", "billing", stdout=StringIO())
    assert grants(user) == {"billing": ("editor", "")}
    row = AuditEvent.objects.filter(subject=AuditEvent.Subject.ROLES).get()
    assert row.changes["source"] == ["ldap", ""]
    # The directory no longer decides it: out of the group, the grant stays.
    apply_group_mapping(user, [], source="ldap")
    assert grants(user) == {"billing": ("editor", "")}
