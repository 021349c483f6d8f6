"""Single sign-on through a real OpenID Connect provider (tests/oidc_provider,
started by tests/fixtures/oidc.py): the code flow with state, nonce and
PKCE, roles from the provider's groups at every sign-in, sign-out at the
provider, and every way a sign-in can fail ending on a page that says why,
with an audit row and without a session."""

import os
import subprocess
import sys
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model

from jobs.models import AuditEvent, RoleGrant
from tests.fixtures.oidc import CLIENT_ID
from tests.fixtures.processes import REPO, free_port

pytestmark = [pytest.mark.oidc, pytest.mark.slow]

GROUP_ROLES = "sre → operator:*; payments-dev → editor:billing"


@pytest.fixture(autouse=True)
def mapping(settings):
    settings.CRONBOARD_GROUP_ROLES = GROUP_ROLES


def signed_in_as(client):
    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id).username if user_id else None


def grants(username):
    return sorted(
        (grant.namespace or "*", grant.role) for grant in RoleGrant.objects.filter(user__username=username)
    )


def last_sign_in_row():
    return AuditEvent.objects.filter(subject=AuditEvent.Subject.SIGN_IN).order_by("-id").first()


def test_the_sign_in_page_offers_the_provider_beside_the_password_form(oidc, client):
    page = client.get("/login/?next=/runs/").content.decode()
    assert "Sign in with Test provider" in page
    assert 'href="/oidc/authenticate/?next=/runs/"' in page
    assert 'name="password"' in page


def test_the_start_sends_state_nonce_and_a_pkce_challenge(oidc, client):
    response = client.get("/oidc/authenticate/")
    assert response.status_code == 302
    url = urlsplit(response["Location"])
    assert f"{url.scheme}://{url.netloc}{url.path}" == oidc.discovery["authorization_endpoint"]
    query = parse_qs(url.query)
    assert query["client_id"] == [CLIENT_ID]
    assert query["redirect_uri"] == ["http://testserver/oidc/callback/"]
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) == 43
    assert query["state"][0] and query["nonce"][0]
    assert query["scope"] == ["openid profile email"]


def test_first_sign_in_creates_the_user_without_a_password_and_grants_the_mapped_roles(oidc, client):
    oidc.add_user("ann", groups=["SRE"], email="ann@corp.example")

    response = oidc.sign_in(client, "ann", next_url="/runs/")

    assert response.status_code == 302
    assert response["Location"] == "/runs/"
    assert signed_in_as(client) == "ann"
    ann = get_user_model().objects.get(username="ann")
    assert not ann.has_usable_password()
    assert ann.email == "ann@corp.example"
    assert grants("ann") == [("*", "operator")]
    row = last_sign_in_row()
    assert (row.action, row.via, row.username) == ("sign-in", "sso", "ann")
    assert row.changes["source"] == "oidc"
    assert row.changes["granted"] == "operator:*"
    assert client.get("/runs/").status_code == 200


def test_a_group_change_at_the_provider_changes_the_roles_at_the_next_sign_in(oidc, client):
    oidc.add_user("ann", groups=["sre"])
    oidc.sign_in(client, "ann")
    assert grants("ann") == [("*", "operator")]
    client.post("/logout/")

    oidc.set_groups("ann", ["payments-dev"])
    oidc.sign_in(client, "ann")

    assert signed_in_as(client) == "ann"
    assert grants("ann") == [("billing", "editor")]
    row = last_sign_in_row()
    assert (row.changes["granted"], row.changes["removed"]) == ("editor:billing", "operator:*")


def test_a_user_in_no_mapped_group_gets_a_page_and_no_session(oidc, client):
    oidc.add_user("ann", groups=["sre"])
    oidc.sign_in(client, "ann")
    client.post("/logout/")
    oidc.set_groups("ann", ["marketing"])

    response = oidc.sign_in(client, "ann")

    assert response.status_code == 403
    assert "Your account has no role in Cronboard; ask an administrator" in response.content.decode()
    assert signed_in_as(client) is None
    assert grants("ann") == []
    row = last_sign_in_row()
    assert (row.action, row.via, row.username) == ("sign-in-refused", "sso", "ann")
    assert row.changes["removed"] == "operator:*"
    assert client.get("/jobs/").status_code == 302


@pytest.mark.parametrize(
    ("mode", "reason", "says"),
    [
        ("unknown-key", "unknown-key", "signed with a key it does not publish"),
        ("expired", "expired", "token has expired"),
        ("wrong-nonce", "nonce", "does not belong to this sign-in"),
        ("invalid-token", "invalid-token", "sent a token that is not valid"),
        ("other-audience", "invalid-token", "sent a token that is not valid"),
    ],
)
def test_a_bad_id_token_is_refused_with_a_page_an_audit_row_and_no_session(oidc, client, mode, reason, says):
    oidc.add_user("ann", groups=["sre"])
    oidc.misbehave(mode)

    response = oidc.sign_in(client, "ann")

    assert response.status_code == 403
    assert says in response.content.decode()
    assert signed_in_as(client) is None
    assert "oidc_id_token" not in client.session
    assert not get_user_model().objects.filter(username="ann").exists()
    row = last_sign_in_row()
    assert (row.action, row.via, row.changes["reason"]) == ("sign-in-failed", "sso", reason)


def test_a_slow_provider_times_out_after_oidc_timeout(oidc, client, settings):
    settings.OIDC_TIMEOUT = 1
    oidc.add_user("ann", groups=["sre"])
    oidc.delay("/o/token/", 4)

    response = oidc.sign_in(client, "ann")

    assert response.status_code == 504
    assert "did not answer in time" in response.content.decode()
    assert signed_in_as(client) is None
    assert last_sign_in_row().changes["reason"] == "timeout"


def test_a_provider_that_is_down_gets_a_page_and_local_accounts_still_sign_in(oidc, client, settings):
    settings.OIDC_ISSUER = f"http://127.0.0.1:{free_port()}"
    get_user_model().objects.create_user("lee", password="pw-lee-123")
    RoleGrant.objects.create(user=get_user_model().objects.get(username="lee"), role="viewer")

    response = client.get("/oidc/authenticate/")
    assert response.status_code == 502
    assert "cannot be reached" in response.content.decode()
    assert last_sign_in_row().changes["reason"] == "unreachable"

    response = client.post("/login/", {"username": "lee", "password": "pw-lee-123"})
    assert response.status_code == 302
    assert signed_in_as(client) == "lee"


def test_a_callback_with_a_state_this_browser_never_started_is_refused(oidc, client):
    oidc.add_user("ann", groups=["sre"])
    start = client.get("/oidc/authenticate/")
    back = oidc.authorize(start["Location"], "ann")
    query = parse_qs(urlsplit(back.headers["Location"]).query)

    forged = client.get("/oidc/callback/", {"code": query["code"], "state": "forged-state"})
    assert forged.status_code == 403
    assert "expired or was already used" in forged.content.decode()

    assert client.get("/oidc/callback/", query).status_code == 302
    replayed = client.get("/oidc/callback/", query)
    assert replayed.status_code == 403
    assert last_sign_in_row().changes["reason"] == "state"


def test_a_sign_in_refused_at_the_provider_says_so(oidc, client):
    start = client.get("/oidc/authenticate/")
    state = parse_qs(urlsplit(start["Location"]).query)["state"][0]

    response = client.get("/oidc/callback/", {"error": "access_denied", "state": state})

    assert response.status_code == 403
    assert "cancelled or refused at the provider" in response.content.decode()
    assert signed_in_as(client) is None


def test_single_sign_on_never_takes_over_a_local_account_of_the_same_name(oidc, client):
    get_user_model().objects.create_superuser("root", password="pw-root-123")
    oidc.add_user("root", groups=["sre"])

    response = oidc.sign_in(client, "root")

    assert response.status_code == 403
    assert "A local account of that name exists" in response.content.decode()
    assert signed_in_as(client) is None
    assert last_sign_in_row().changes["reason"] == "local-account"


def test_single_sign_on_never_takes_over_a_directory_users_account(oidc, client):
    """With LDAP and OIDC both on, an account the directory made stays the
    directory's: a provider's user of the same name is refused."""
    from jobs.models import Profile

    directory_user = get_user_model().objects.create_user("dora")  # no usable password
    Profile.objects.create(user=directory_user, sign_in_source="ldap")
    oidc.add_user("dora", groups=["sre"])

    response = oidc.sign_in(client, "dora")

    assert response.status_code == 403
    assert signed_in_as(client) is None
    assert not directory_user.role_grants.exists()


def test_the_username_claim_names_the_user(oidc, client, settings):
    settings.OIDC_USERNAME_CLAIM = "email"
    oidc.add_user("ann", groups=["sre"], email="ann@corp.example")

    oidc.sign_in(client, "ann")

    assert signed_in_as(client) == "ann@corp.example"


def test_sign_out_ends_the_session_here_and_at_the_provider(oidc, client):
    oidc.add_user("ann", groups=["sre"])
    provider = requests.Session()
    start = client.get("/oidc/authenticate/")
    back = oidc.authorize(start["Location"], "ann", session=provider)
    client.get("/oidc/callback/", parse_qs(urlsplit(back.headers["Location"]).query))
    assert signed_in_as(client) == "ann"

    response = client.post("/logout/")

    assert signed_in_as(client) is None
    assert response.status_code == 200
    provider_url = response.context["provider_url"]
    assert f'content="0;url={provider_url}"'.replace("&", "&amp;") in response.content.decode()
    end = urlsplit(provider_url)
    assert f"{end.scheme}://{end.netloc}{end.path}" == oidc.discovery["end_session_endpoint"]
    query = parse_qs(end.query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/login/"]
    assert query["id_token_hint"][0].count(".") == 2
    at_provider = provider.get(provider_url, allow_redirects=False)
    assert at_provider.headers["Location"] == "http://testserver/login/"
    # Signed out there too: the provider asks for the password again.
    again = provider.get(client.get("/oidc/authenticate/")["Location"], allow_redirects=False)
    assert "/accounts/login/" in again.headers["Location"]


def test_a_local_user_signs_out_to_the_sign_in_page(oidc, client):
    client.force_login(get_user_model().objects.create_user("lee", password="pw-lee-123"))

    response = client.post("/logout/")

    assert response["Location"] == "/login/"
    assert signed_in_as(client) is None


@pytest.fixture
def local_login_off(oidc, settings):
    settings.CRONBOARD_LOCAL_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = [
        backend for backend in settings.AUTHENTICATION_BACKENDS if not backend.endswith("ModelBackend")
    ]


def test_with_local_login_off_only_the_provider_signs_in(local_login_off, oidc, client):
    get_user_model().objects.create_superuser("root", password="pw-root-123")

    page = client.get("/login/").content.decode()
    assert "Sign in with Test provider" in page
    assert 'name="password"' not in page

    refused = client.post("/login/", {"username": "root", "password": "pw-root-123"})
    assert refused.status_code == 403
    assert "Signing in with a password is turned off" in refused.content.decode()
    client.post("/admin/login/", {"username": "root", "password": "pw-root-123"})
    assert signed_in_as(client) is None

    oidc.add_user("ann", groups=["sre"])
    oidc.sign_in(client, "ann")
    assert signed_in_as(client) == "ann"
    assert client.get("/jobs/").status_code == 200


def test_without_a_provider_the_sign_in_routes_do_not_exist(client, settings, db):
    settings.OIDC_ISSUER = ""
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/?code=x&state=y").status_code == 404
    assert "Sign in with" not in client.get("/login/").content.decode()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OIDC_ISSUER": "http://idp.example", "OIDC_CLIENT_SECRET": "s"}, "OIDC_CLIENT_ID"),
        ({"OIDC_ISSUER": "idp.example", "OIDC_CLIENT_ID": "c", "OIDC_CLIENT_SECRET": "s"}, "OIDC_ISSUER"),
        (
            {
                "OIDC_ISSUER": "http://idp.example",
                "OIDC_CLIENT_ID": "c",
                "OIDC_CLIENT_SECRET": "s",
                "OIDC_SCOPES": "email",
            },
            "OIDC_SCOPES",
        ),
        ({"OIDC_TIMEOUT": "soon"}, "OIDC_TIMEOUT"),
        ({"CRONBOARD_LOCAL_LOGIN": "false"}, "CRONBOARD_LOCAL_LOGIN"),
    ],
)
def test_a_bad_sign_in_setting_names_the_variable(env, named, tmp_path):
    environ = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("OIDC_", "CRONBOARD_LOCAL"))},
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        **env,
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert named in result.stderr
    assert "Traceback" not in result.stderr


def test_sso_check_shows_the_groups_of_the_last_sign_in_and_their_roles(oidc, client):
    from io import StringIO

    from django.core.management import call_command

    oidc.add_user("ann", groups=["sre", "payments-dev", "cn=odd, ou=x"])
    oidc.sign_in(client, "ann")
    out = StringIO()

    call_command("sso", "check", "ann", "--source", "oidc", stdout=out)

    text = out.getvalue()
    assert "ann is known from their last sign-in" in text
    assert "  sre\n  payments-dev\n  cn=odd, ou=x\n" in text
    assert "operator:*" in text and "editor:billing" in text
    out = StringIO()
    call_command("sso", "check", "bob", "--source", "oidc", stdout=out)
    assert "no user “bob”" in out.getvalue()


def test_with_local_login_off_a_directory_keeps_the_password_form(local_login_off, client, settings):
    settings.LDAP_SERVER_URI = "ldap://127.0.0.1:1"

    page = client.get("/login/").content.decode()

    assert 'name="password"' in page
    assert "Sign in with Test provider" in page
