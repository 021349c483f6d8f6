"""Personal API tokens: created on the profile page, shown once, stored
hashed, revocable, acting with their user's permissions."""

import hashlib
import re
from datetime import timedelta

from django.utils import timezone

from jobs import roles, tokens
from jobs.models import APIToken, RoleGrant
from tests.fixtures.api import ApiClient, assert_error
from tests.fixtures.core import make_user


def create_on_profile(client, name="deploy"):
    """POST, then the GET it redirects to (the one page that shows the secret)."""
    response = client.post("/profile/", {"name": name})
    assert response.status_code == 302 and response.url == "/profile/"
    html = client.get(response.url).content.decode()
    match = re.search(r"<code[^>]*>(cb_[A-Za-z0-9_-]+)</code>", html)
    assert match, html
    return match.group(1), html


def test_profile_creates_a_token_and_shows_it_once(staff_client):
    secret, _html = create_on_profile(staff_client)
    token = APIToken.objects.get()
    assert token.name == "deploy" and secret.startswith(token.prefix)
    later = staff_client.get("/profile/").content.decode()
    assert secret not in later
    assert token.prefix in later


def test_a_token_is_stored_only_as_its_hash(staff_client):
    secret, _html = create_on_profile(staff_client)
    token = APIToken.objects.get()
    assert token.token_hash == hashlib.sha256(secret.encode()).hexdigest()
    stored = [
        str(value)
        for value in APIToken.objects.values_list(*[f.attname for f in APIToken._meta.fields]).get()
    ]
    assert secret not in stored


def test_the_profile_token_works_against_the_api(staff_client):
    secret, _html = create_on_profile(staff_client)
    assert ApiClient(secret).get("/api/jobs").status_code == 200


def test_using_a_token_records_when(staff_user):
    token, secret = tokens.create_token(user=staff_user, name="ci")
    assert token.last_used_at is None
    ApiClient(secret).get("/api/handlers")
    token.refresh_from_db()
    first = token.last_used_at
    assert first is not None and timezone.now() - first < timedelta(seconds=5)
    # Within a minute, a second call does not write again.
    ApiClient(secret).get("/api/handlers")
    token.refresh_from_db()
    assert token.last_used_at == first


def test_revoking_on_the_profile_page_stops_the_token(staff_client):
    secret, _html = create_on_profile(staff_client)
    token = APIToken.objects.get()
    response = staff_client.post("/profile/", {"revoke": token.pk})
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert ApiClient(secret).get("/api/jobs").status_code == 401
    assert "revoked" in staff_client.get("/profile/").content.decode()


def test_a_user_cannot_revoke_someone_elses_token(viewer_client, staff_user):
    token, secret = tokens.create_token(user=staff_user, name="theirs")
    viewer_client.post("/profile/", {"revoke": token.pk})
    token.refresh_from_db()
    assert token.revoked_at is None
    assert "theirs" not in viewer_client.get("/profile/").content.decode()


def test_revoke_with_a_bad_id_changes_nothing(staff_user):
    assert tokens.revoke_token(user=staff_user, token_id="abc") is False
    assert tokens.revoke_token(user=staff_user, token_id=None) is False


def test_tokens_are_unique_and_unguessable(staff_user):
    secrets = {tokens.create_token(user=staff_user, name=str(i))[1] for i in range(20)}
    assert len(secrets) == 20
    assert all(len(s) >= 40 for s in secrets)


def test_the_profile_page_needs_a_login(client):
    response = client.get("/profile/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_viewer_can_have_a_read_only_token(viewer_client):
    secret, _html = create_on_profile(viewer_client)
    api = ApiClient(secret)
    assert api.get("/api/jobs").status_code == 200
    assert api.post("/api/jobs", {"name": "x"}).status_code == 403


def test_a_token_stops_at_once_when_its_users_last_role_is_revoked(db):
    user = make_user("eddie", "editor")
    api = ApiClient(tokens.create_token(user=user, name="ci")[1])
    assert api.get("/api/jobs").status_code == 200
    assert roles.revoke_role(user=user, namespace=None, by=None, via="cli")
    assert_error(api.get("/api/jobs"), 403, "no_role")


def test_a_token_narrowed_to_a_namespace_its_user_lost_stops_there(db):
    """The user keeps a role elsewhere; the token's own namespace is gone
    from their grants, so it is refused rather than answering empty lists."""
    user = make_user("eddie", "editor", namespace="team-a")
    RoleGrant.objects.create(user=user, role="viewer", namespace="team-b")
    api = ApiClient(tokens.create_token(user=user, name="ci", namespace="team-a")[1])
    assert api.get("/api/jobs").status_code == 200
    assert roles.revoke_role(user=user, namespace="team-a", by=None, via="cli")
    body = assert_error(api.get("/api/jobs"), 403, "no_role")
    assert "team-a" in body["message"]
    # The same user's token for the namespace they keep still works.
    other = ApiClient(tokens.create_token(user=user, name="ops", namespace="team-b")[1])
    assert other.get("/api/jobs").status_code == 200
