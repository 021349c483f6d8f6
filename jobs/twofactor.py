"""Two-factor sign-in for local accounts: a TOTP authenticator app and
single-use recovery codes, with django-otp's devices (TOTPDevice,
StaticDevice) and its session marking (django_otp.login). Who must use it
is CRONBOARD_REQUIRE_2FA: `off` (each user chooses), `admins` (users who
may administer: superusers and the admin role anywhere) or `everyone`.

Users signed in through an identity provider (OpenID Connect) rely on its
own second factor and are never asked here; a password typed here, a
Cronboard one or a directory's (LDAP), is one factor and is asked for the
second (PASSWORD_BACKENDS)."""

import secrets as random_source

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY
from django.db import transaction
from django_otp import login as mark_verified
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from jobs import access, audit
from jobs.models import AuditEvent

APP_DEVICE_NAME = "authenticator app"
RECOVERY_DEVICE_NAME = "recovery codes"
RECOVERY_CODES = 10
# 10 characters of an alphabet without look-alikes (no 0/o, 1/l/i): about
# 50 bits each, typed as two groups of five.
_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_CODE_LENGTH = 10

# What the verification form accepts: a 6-digit app code, or a recovery
# code as shown (with or without its hyphen, any case).
MAX_CODE_LENGTH = 16


# What a password sign-in still owes, kept in its session from the moment it
# signs in (so that pages of users without two-factor pay no query for it):
# "verify" (a code from the app) or "enrol" (set an app up first).
SESSION_KEY = "cronboard_two_factor"
VERIFY, ENROL = "verify", "enrol"


def on_sign_in(sender, request, user, **kwargs) -> None:
    """Django's user_logged_in: note in the session what the sign-in still
    owes. The policy is read here, so a role granted during a session
    applies from the user's next sign-in."""
    if request is None or not hasattr(request, "session"):
        return
    request.session.pop(SESSION_KEY, None)
    if not signed_in_locally(request):
        return
    if is_enrolled(user):
        request.session[SESSION_KEY] = VERIFY
    elif required_for(user):
        request.session[SESSION_KEY] = ENROL


def owed(request) -> str | None:
    """VERIFY, ENROL or None: what this session must do before any page."""
    step = request.session.get(SESSION_KEY)
    if step is None:
        return None
    if request.user.is_verified():
        request.session.pop(SESSION_KEY, None)
        return None
    return step


# The backends that sign in with a password typed here: Cronboard's own and
# the directory's (an LDAP bind is one factor too). Only an identity
# provider's sign-in (OpenID Connect) brings its own second factor.
PASSWORD_BACKENDS = audit.LOCAL_BACKENDS | {"jobs.ldapauth.DirectoryBackend"}


def signed_in_locally(request) -> bool:
    """Whether this session was signed in with a password typed here (a
    Cronboard password or a directory's), not by an identity provider, whose
    own second factor counts."""
    backend = request.session.get(BACKEND_SESSION_KEY, "")
    return not backend or backend in PASSWORD_BACKENDS


def required_for(user) -> bool:
    """Whether CRONBOARD_REQUIRE_2FA asks this user to have a second factor."""
    policy = settings.CRONBOARD_REQUIRE_2FA
    if policy == "everyone":
        return True
    if policy == "admins":
        return user.is_superuser or access.can_administer(user)
    return False


def app_device(user, *, confirmed: bool = True) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=confirmed).order_by("-id").first()


def is_enrolled(user) -> bool:
    return TOTPDevice.objects.filter(user=user, confirmed=True).exists()


def recovery_codes_left(user) -> int:
    return StaticToken.objects.filter(device__user=user, device__confirmed=True).count()


def start_enrollment(user) -> TOTPDevice:
    """A new, unconfirmed authenticator for `user` (any earlier unconfirmed
    one is dropped). A confirmed one keeps working until the new one is
    confirmed: setting up a new phone never locks anyone out half-way."""
    with transaction.atomic():
        TOTPDevice.objects.filter(user=user, confirmed=False).delete()
        return TOTPDevice.objects.create(user=user, name=APP_DEVICE_NAME, confirmed=False)


def provisioning_uri(device: TOTPDevice) -> str:
    """The otpauth:// address the QR code carries (django-otp's config_url,
    with the issuer from OTP_TOTP_ISSUER)."""
    return device.config_url


def _new_code() -> str:
    raw = "".join(random_source.choice(_ALPHABET) for _ in range(_CODE_LENGTH))
    return f"{raw[:5]}-{raw[5:]}"


def _normalized(code: str) -> str:
    return "".join(code.split()).replace("-", "").lower()


def _replace_recovery_codes(user) -> list[str]:
    StaticDevice.objects.filter(user=user).delete()
    device = StaticDevice.objects.create(user=user, name=RECOVERY_DEVICE_NAME, confirmed=True)
    codes = [_new_code() for _ in range(RECOVERY_CODES)]
    # Stored without the hyphen, as verify() normalizes what is typed.
    StaticToken.objects.bulk_create(StaticToken(device=device, token=_normalized(code)) for code in codes)
    return codes


def confirm_enrollment(request, code: str) -> list[str] | None:
    """Confirm the pending authenticator with a code it shows. On success
    the earlier app (if any) is replaced, new recovery codes are made and
    returned (to be shown once), this session counts as verified, and the
    audit trail has a row; on a wrong code, None and nothing changes."""
    user = request.user
    if is_enrolled(user) and not getattr(user, "is_verified", lambda: False)():
        return None  # replacing an app needs a session that gave the old one's code
    pending = app_device(user, confirmed=False)
    if pending is None or not _verify_app(pending, code):
        return None
    with transaction.atomic():
        TOTPDevice.objects.filter(user=user, confirmed=True).delete()
        pending.confirmed = True
        pending.save(update_fields=["confirmed"])
        codes = _replace_recovery_codes(user)
        audit.record(action="two-factor-on", subject=AuditEvent.Subject.SIGN_IN, user=user)
    mark_verified(request, pending)
    request.session.pop(SESSION_KEY, None)
    return codes


def new_recovery_codes(user) -> list[str]:
    with transaction.atomic():
        codes = _replace_recovery_codes(user)
        audit.record(action="recovery-codes", subject=AuditEvent.Subject.SIGN_IN, user=user)
    return codes


def _verify_app(device: TOTPDevice, code: str) -> bool:
    typed = "".join(code.split())
    if not typed.isdigit() or len(typed) != device.digits:
        return False
    allowed, _why = device.verify_is_allowed()
    return bool(allowed) and device.verify_token(typed)


def check_code(user, code: str):
    """The device a code belongs to (the app, or the recovery codes, whose
    code is then used up), or None. django-otp throttles each device after a
    wrong code (a growing delay), so guessing 6 digits does not pay."""
    if not code or len(code) > MAX_CODE_LENGTH:
        return None
    device = app_device(user)
    if device is not None and _verify_app(device, code):
        return device
    recovery = StaticDevice.objects.filter(user=user, confirmed=True).first()
    if recovery is not None:
        allowed, _why = recovery.verify_is_allowed()
        if allowed and recovery.verify_token(_normalized(code)):
            return recovery
    return None


def throttled(user) -> bool:
    """Whether the authenticator refuses every code for now, after wrong
    ones (django-otp's delay doubles with each failure)."""
    device = app_device(user)
    return device is not None and not device.verify_is_allowed()[0]


def verify(request, code: str) -> bool:
    """The second step of a sign-in: mark this session verified when `code`
    is right. A wrong code is audited as a failed sign-in step, except while
    the device is throttled: a client hammering the form then writes no
    rows, as with django-axes' lockout of passwords."""
    was_throttled = throttled(request.user)
    device = check_code(request.user, code)
    if device is None:
        if not was_throttled:
            audit.record(action="two-factor-failed", subject=AuditEvent.Subject.SIGN_IN, user=request.user)
        return False
    mark_verified(request, device)
    request.session.pop(SESSION_KEY, None)
    if isinstance(device, StaticDevice):
        audit.record(action="recovery-code-used", subject=AuditEvent.Subject.SIGN_IN, user=request.user)
    return True


def turn_off(user, *, via: str = AuditEvent.Via.CONSOLE, reset: bool = False) -> bool:
    """Remove the user's authenticator and recovery codes: the user, with a
    code, or (`reset`) an administrator's `manage.py twofactor reset` for a
    lost phone. Whether there was anything to remove."""
    with transaction.atomic():
        removed = TOTPDevice.objects.filter(user=user).delete()[0]
        removed += StaticDevice.objects.filter(user=user).delete()[0]
        if removed:
            audit.record(
                action="two-factor-reset" if reset else "two-factor-off",
                subject=AuditEvent.Subject.SIGN_IN,
                user=None if reset else user,
                username=user.get_username() if reset else "",
                via=via,
            )
    return bool(removed)
