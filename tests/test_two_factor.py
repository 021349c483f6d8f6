"""Two-factor sign-in for local accounts (jobs.twofactor): setting up an
authenticator app from the profile, the second step of a password sign-in,
recovery codes, the CRONBOARD_REQUIRE_2FA policy, and the reset command.
Codes are computed as an app would, from the key the set-up page shows, at
the time of an injected clock (`app_clock`: django-otp reads time.time()),
which moves one 30 s step after each code used: a code works only once."""

import base64
import re

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.shortcuts import resolve_url
from django.test import Client
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice

from jobs import twofactor
from jobs.models import AuditEvent
from tests.fixtures.core import make_user
from tests.fixtures.twofactor import AppClock

pytestmark = pytest.mark.django_db

PASSWORDS = {"staff": "pw-staff-123", "viewer": "pw-viewer-123"}


def sign_in(name: str, next_url: str = "") -> Client:
    client = Client()
    response = client.post("/login/", {"username": name, "password": PASSWORDS[name], "next": next_url})
    assert response.status_code == 302
    return client


_clock = AppClock()


@pytest.fixture(autouse=True)
def app_clock(monkeypatch):
    _clock.now = AppClock().now
    return _clock.install(monkeypatch)


def _code(key: bytes) -> str:
    app = TOTP(key, step=30, t0=0, digits=6)
    app.time = _clock.now
    return f"{app.token():06d}"


def app_code(client: Client) -> str:
    """The code an authenticator app shows, from the key on the set-up page."""
    page = client.get("/profile/two-factor/").content.decode()
    key = re.search(r'id="two-factor-key">([A-Z2-7 ]+)<', page).group(1).replace(" ", "")
    return _code(base64.b32decode(key + "=" * (-len(key) % 8)))


def device_code(user) -> str:
    return _code(twofactor.app_device(user).bin_key)


def wrong_code(user) -> str:
    return f"{(int(device_code(user)) + 1) % 1_000_000:06d}"


def enrol(client: Client) -> list[str]:
    client.post("/profile/two-factor/", {"action": "start"})
    response = client.post("/profile/two-factor/confirm/", {"code": app_code(client)})
    assert response.status_code == 302, response.content.decode()
    _clock.next_step()
    page = client.get("/profile/two-factor/").content.decode()
    return re.findall(r"\b[a-z2-9]{5}-[a-z2-9]{5}\b", page)


@pytest.fixture
def viewer(db):
    return make_user("viewer", "viewer")


@pytest.fixture
def admin(db):
    return make_user("staff", "admin", is_staff=True)


def test_setting_up_an_app_shows_a_qr_code_and_ten_recovery_codes_once(viewer):
    client = sign_in("viewer")
    client.post("/profile/two-factor/", {"action": "start"})
    page = client.get("/profile/two-factor/").content.decode()
    assert 'src="data:image/svg+xml' in page and 'id="two-factor-key"' in page
    assert not twofactor.is_enrolled(viewer)
    codes = enrol(client)
    assert len(codes) == 10 and len(set(codes)) == 10
    assert twofactor.is_enrolled(viewer)
    again = client.get("/profile/two-factor/").content.decode()
    assert not re.findall(r"\b[a-z2-9]{5}-[a-z2-9]{5}\b", again), "recovery codes are shown only once"
    assert "10 recovery codes left" in again
    assert AuditEvent.objects.filter(action="two-factor-on", user=viewer).count() == 1


def test_a_wrong_code_does_not_turn_it_on(viewer):
    client = sign_in("viewer")
    client.post("/profile/two-factor/", {"action": "start"})
    wrong = f"{(int(app_code(client)) + 1) % 1_000_000:06d}"
    response = client.post("/profile/two-factor/confirm/", {"code": wrong})
    assert response.status_code == 400
    assert "That code is not right" in response.content.decode()
    assert not twofactor.is_enrolled(viewer)


def test_a_password_sign_in_then_asks_for_the_code_before_any_page(viewer):
    enrol(sign_in("viewer"))
    client = sign_in("viewer", next_url="/runs/")
    response = client.get("/runs/")
    assert response.status_code == 302 and response["Location"].startswith("/sign-in/verify/")
    assert client.get("/api/jobs").status_code == 401
    assert client.get("/api/jobs").json()["code"] == "two_factor_required"
    # Setting up a new app is closed until the old one's code was given.
    assert client.post("/profile/two-factor/", {"action": "start"})["Location"] == "/sign-in/verify/"
    assert TOTPDevice.objects.filter(user=viewer, confirmed=False).count() == 0
    response = client.post("/sign-in/verify/", {"code": device_code(viewer), "next": "/runs/"})
    assert response.status_code == 302 and response["Location"] == "/runs/"
    assert client.get("/runs/").status_code == 200


def test_the_verify_page_shows_no_menu_and_refuses_a_wrong_code_with_a_row(viewer):
    enrol(sign_in("viewer"))
    client = sign_in("viewer")
    page = client.get("/sign-in/verify/")
    assert page.status_code == 200
    assert 'href="/runs/"' not in page.content.decode(), "no menu before the second step"
    wrong = wrong_code(viewer)
    response = client.post("/sign-in/verify/", {"code": wrong})
    assert response.status_code == 400
    assert AuditEvent.objects.filter(action="two-factor-failed", user=viewer).count() == 1
    assert client.get("/jobs/").status_code == 302


def test_wrong_codes_are_throttled_and_stop_writing_rows(viewer):
    enrol(sign_in("viewer"))
    client = sign_in("viewer")
    wrong = wrong_code(viewer)
    for _ in range(5):
        client.post("/sign-in/verify/", {"code": wrong})
    # django-otp's delay after failures refuses even the right code for now.
    response = client.post("/sign-in/verify/", {"code": device_code(viewer)})
    assert response.status_code == 400
    assert "Too many wrong codes" in response.content.decode()
    assert AuditEvent.objects.filter(action="two-factor-failed").count() == 1


def test_a_recovery_code_signs_in_once(viewer):
    codes = enrol(sign_in("viewer"))
    first = sign_in("viewer")
    assert first.post("/sign-in/verify/", {"code": codes[0].upper()}).status_code == 302
    assert first.get("/jobs/").status_code == 200
    second = sign_in("viewer")
    assert second.post("/sign-in/verify/", {"code": codes[0]}).status_code == 400
    assert twofactor.recovery_codes_left(viewer) == 9
    assert AuditEvent.objects.filter(action="recovery-code-used").count() == 1


def test_turning_it_off_needs_a_current_code(viewer, settings):
    settings.OTP_TOTP_THROTTLE_FACTOR = 0  # the right code right after a wrong one
    client = sign_in("viewer")
    enrol(client)
    response = client.post("/profile/two-factor/", {"action": "off", "code": wrong_code(viewer)})
    assert response.status_code == 400 and twofactor.is_enrolled(viewer)
    client.post("/profile/two-factor/", {"action": "off", "code": device_code(viewer)})
    assert not twofactor.is_enrolled(viewer)
    assert sign_in("viewer").get("/jobs/").status_code == 200


def test_admins_must_set_it_up_when_the_policy_says_so(admin, viewer, settings):
    settings.CRONBOARD_REQUIRE_2FA = "admins"
    client = sign_in("staff")
    response = client.get("/jobs/")
    assert response.status_code == 302 and response["Location"].startswith("/profile/two-factor/")
    assert client.get("/profile/two-factor/").status_code == 200
    assert sign_in("viewer").get("/jobs/").status_code == 200, "a viewer is not an admin"
    enrol(client)
    assert client.get("/jobs/").status_code == 200
    page = client.get("/profile/two-factor/").content.decode()
    assert "cannot be turned off" in page
    refused = client.post("/profile/two-factor/", {"action": "off", "code": device_code(admin)})
    assert refused.status_code == 302 and twofactor.is_enrolled(admin)


def test_everyone_must_set_it_up_when_the_policy_says_so(viewer, settings):
    settings.CRONBOARD_REQUIRE_2FA = "everyone"
    client = sign_in("viewer")
    assert client.get("/jobs/")["Location"].startswith("/profile/two-factor/")
    # The verify page is not a way around set-up: it sends back to the next page.
    assert client.get("/sign-in/verify/").status_code == 302
    assert client.get("/api/jobs").status_code == 401


def test_htmx_requests_are_sent_to_the_second_step_as_a_whole_page(viewer):
    enrol(sign_in("viewer"))
    client = sign_in("viewer")
    response = client.get(
        "/messages/unread/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/runs/"
    )
    assert response["HX-Redirect"].startswith("/sign-in/verify/?next=")


def test_a_token_is_not_asked_for_a_code(viewer):
    from jobs import tokens

    enrol(sign_in("viewer"))
    _token, secret = tokens.create_token(user=viewer, name="ci", namespace=None, read_only=True)
    response = Client().get("/api/jobs", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200


def test_single_sign_on_sessions_are_not_asked_for_a_code(viewer, settings):
    backend = "django.contrib.auth.backends.RemoteUserBackend"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, backend]
    settings.CRONBOARD_REQUIRE_2FA = "everyone"
    client = Client()
    client.force_login(viewer, backend=backend)
    assert client.get("/jobs/").status_code == 200


def test_an_open_redirect_is_not_followed_after_the_code(viewer):
    enrol(sign_in("viewer"))
    client = sign_in("viewer")
    response = client.post("/sign-in/verify/", {"code": device_code(viewer), "next": "https://evil.example/"})
    assert response["Location"] == resolve_url(settings.LOGIN_REDIRECT_URL)


def test_hostile_codes_are_refused_with_a_message(viewer):
    enrol(sign_in("viewer"))
    client = sign_in("viewer")
    for hostile in ["", "\x00123456", "1" * 5000, "' OR 1=1 --", "１２３４５６"]:
        response = client.post("/sign-in/verify/", {"code": hostile})
        assert response.status_code == 400, hostile
        assert b"Traceback" not in response.content


def test_the_reset_command_removes_a_lost_phone(viewer):
    enrol(sign_in("viewer"))
    call_command("twofactor", "reset", "viewer")
    assert not twofactor.is_enrolled(viewer)
    row = AuditEvent.objects.get(action="two-factor-reset")
    assert (row.username, row.via) == ("viewer", "cli")
    with pytest.raises(CommandError, match="no two-factor"):
        call_command("twofactor", "reset", "viewer")
    with pytest.raises(CommandError, match="No user"):
        call_command("twofactor", "reset", "nobody")


def test_a_directory_password_sign_in_is_asked_for_the_code_too(viewer, settings):
    """An LDAP bind is a password, one factor: only an identity provider's
    sign-in brings its own second factor."""
    backend = "jobs.ldapauth.DirectoryBackend"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, backend]
    enrol(sign_in("viewer"))
    client = Client()
    client.force_login(viewer, backend=backend)
    assert client.get("/jobs/")["Location"].startswith("/sign-in/verify/")
