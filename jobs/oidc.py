"""Sign-in through an OpenID Connect provider (mozilla-django-oidc: the code
flow with state, nonce and PKCE). Configured by the OIDC_* settings only; the
provider's endpoints come from its discovery document, fetched on first use
with OIDC_TIMEOUT and kept for DISCOVERY_TTL, so a provider that is down when
Cronboard starts delays nothing but its own sign-ins.

Every way a sign-in can fail ends in `SignInRefused` with a reason from
REASONS: the web view turns it into a page and an audit row, and no session
is made. mozilla-django-oidc leaves the id_token's audience and issuer
unchecked and lets an expired token through as an unhandled error;
`OIDCBackend.verify_token` checks all of them."""

import threading
import time
from dataclasses import dataclass
from urllib.parse import urlencode

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.shortcuts import resolve_url
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings

from jobs import rolemapping
from jobs.models import AuditEvent

SOURCE = "oidc"
BACKEND = "jobs.oidc.OIDCBackend"
DISCOVERY_TTL = 3600
# Asymmetric algorithms only: with an HMAC one the provider's public key
# would be the secret.
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
# Seconds of clock difference tolerated between Cronboard and the provider.
CLOCK_LEEWAY = 60
# Where the id_token is kept for the provider's sign-out (its id_token_hint).
ID_TOKEN_SESSION_KEY = "oidc_id_token"

# reason: (HTTP status of the page, what the page says). A user left with
# no role ("no-role") gets jobs.web.signin's no-role page instead.
NO_ROLE = "no-role"
REASONS = {
    "unreachable": (502, _("The sign-in provider cannot be reached right now. Try again later.")),
    "timeout": (504, _("The sign-in provider did not answer in time. Try again later.")),
    "provider-error": (502, _("The sign-in provider refused to complete the sign-in.")),
    "cancelled": (403, _("The sign-in was cancelled or refused at the provider.")),
    "state": (403, _("This sign-in link has expired or was already used. Start again.")),
    "invalid-token": (403, _("The sign-in provider sent a token that is not valid.")),
    "unknown-key": (403, _("The sign-in provider's token is signed with a key it does not publish.")),
    "expired": (403, _("The sign-in provider's token has expired. Start again.")),
    "nonce": (403, _("The sign-in provider's token does not belong to this sign-in. Start again.")),
    "claims": (403, _("The sign-in provider did not say who you are (the user name claim is missing).")),
    "local-account": (
        403,
        _("A local account of that name exists, so single sign-on cannot use it; ask an administrator."),
    ),
    "refused": (403, _("The sign-in was refused.")),
    "inactive": (403, _("Your account is disabled; ask an administrator.")),
}


class SignInRefused(Exception):
    def __init__(self, reason: str, *, username: str = "", detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.username = username
        self.detail = detail

    @property
    def status(self) -> int:
        return REASONS[self.reason][0]

    @property
    def message(self) -> str:
        return str(REASONS[self.reason][1])


def enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


def _provider_errors(exc: requests.RequestException) -> SignInRefused:
    if isinstance(exc, requests.Timeout):
        return SignInRefused("timeout", detail=str(exc))
    if isinstance(exc, requests.HTTPError):
        return SignInRefused("provider-error", detail=str(exc)[:500])
    return SignInRefused("unreachable", detail=str(exc)[:500])


_discovered: dict = {}
_discovery_lock = threading.Lock()


def discovery() -> dict:
    """The provider's /.well-known/openid-configuration, kept DISCOVERY_TTL
    seconds per issuer; a failure is not kept, so the next sign-in asks again."""
    issuer = settings.OIDC_ISSUER
    with _discovery_lock:
        cached = _discovered.get(issuer)
        if cached and cached[0] > time.monotonic():
            return cached[1]
    try:
        response = requests.get(f"{issuer}/.well-known/openid-configuration", timeout=settings.OIDC_TIMEOUT)
        response.raise_for_status()
        document = response.json()
    except requests.RequestException as exc:
        raise _provider_errors(exc) from exc
    except ValueError as exc:
        raise SignInRefused("provider-error", detail="discovery document is not JSON") from exc
    required = ("authorization_endpoint", "token_endpoint", "jwks_uri")
    if not isinstance(document, dict) or not all(isinstance(document.get(k), str) for k in required):
        raise SignInRefused("provider-error", detail=f"discovery document lacks one of {required}")
    with _discovery_lock:
        _discovered[issuer] = (time.monotonic() + DISCOVERY_TTL, document)
    return document


def forget_discovery() -> None:
    with _discovery_lock:
        _discovered.clear()


# mozilla-django-oidc's setting names, read from Cronboard's settings and the
# discovery document.
_FROM_SETTINGS = {
    "OIDC_RP_CLIENT_ID": "OIDC_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET": "OIDC_CLIENT_SECRET",
    "OIDC_RP_SCOPES": "OIDC_SCOPES",
    "OIDC_TIMEOUT": "OIDC_TIMEOUT",
}
_FROM_DISCOVERY = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
}
_FIXED = {
    "OIDC_USE_PKCE": True,
    "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
    "OIDC_USE_NONCE": True,
    "OIDC_RP_SIGN_ALGO": "RS256",
    "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc_callback",
    "OIDC_CREATE_USER": True,
    "OIDC_OP_LOGOUT_URL_METHOD": "jobs.oidc.sign_out_url",
}


def setting(attr, *default):
    """What mozilla-django-oidc's views and backend read as settings."""
    if attr in _FROM_SETTINGS:
        return getattr(settings, _FROM_SETTINGS[attr])
    if attr in _FROM_DISCOVERY:
        return discovery().get(_FROM_DISCOVERY[attr])
    if attr in _FIXED:
        return _FIXED[attr]
    return import_from_settings(attr, *default)


def callback_url(request) -> str:
    """The redirect URI to register at the provider, as Cronboard sends it."""
    return request.build_absolute_uri(reverse(_FIXED["OIDC_AUTHENTICATION_CALLBACK_URL"]))


def groups_of(claims: dict) -> list[str]:
    """The groups claim as a list of names: a single string counts as one
    group; anything else (missing, a number, an object) as none."""
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


@dataclass(frozen=True)
class Identity:
    username: str
    email: str
    groups: list[str]


def identity_of(claims: dict) -> Identity:
    name = claims.get(settings.OIDC_USERNAME_CLAIM)
    max_length = get_user_model()._meta.get_field("username").max_length
    if not isinstance(name, str) or not name.strip() or len(name) > max_length:
        raise SignInRefused("claims", detail=f"claim {settings.OIDC_USERNAME_CLAIM!r}: {name!r}"[:500])
    email = claims.get("email")
    return Identity(name.strip(), email if isinstance(email, str) else "", groups_of(claims))


class OIDCBackend(OIDCAuthenticationBackend):
    """Signs a person in from the provider's claims: the user named by
    OIDC_USERNAME_CLAIM, made on first sign-in without a usable password,
    roles set from OIDC_GROUPS_CLAIM by jobs.rolemapping. Reads nothing at
    construction: Django builds every backend for each password sign-in too."""

    get_settings = staticmethod(setting)

    def __init__(self, *args, **kwargs):
        self.UserModel = get_user_model()

    def __getattr__(self, name):
        # The parent reads its settings as attributes set in __init__.
        if name.startswith("OIDC_"):
            return setting(name, None)
        raise AttributeError(name)

    def authenticate(self, request, **kwargs):
        # Only the callback passes a nonce; a password sign-in never reaches the provider.
        if request is None or "nonce" not in kwargs or not enabled():
            return None
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as exc:
            raise _provider_errors(exc) from exc

    def verify_token(self, token, **kwargs):
        """The id_token's signature by a key of the provider's JWKS, its
        issuer, audience, expiry and nonce; the userinfo's too when it comes
        as a JWT (without a nonce)."""
        try:
            algorithm = jwt.get_unverified_header(token).get("alg")
        except jwt.InvalidTokenError as exc:
            raise SignInRefused("invalid-token", detail=str(exc)) from exc
        if algorithm not in SIGNING_ALGORITHMS:
            raise SignInRefused("invalid-token", detail=f"algorithm {algorithm!r}")
        try:
            key = self.retrieve_matching_jwk(token)
        except (SuspiciousOperation, jwt.PyJWKError, KeyError, TypeError) as exc:
            raise SignInRefused("unknown-key", detail=str(exc)) from exc
        try:
            payload = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=settings.OIDC_CLIENT_ID,
                issuer=discovery().get("issuer", settings.OIDC_ISSUER),
                leeway=CLOCK_LEEWAY,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise SignInRefused("expired", detail=str(exc)) from exc
        except jwt.InvalidTokenError as exc:
            raise SignInRefused("invalid-token", detail=str(exc)) from exc
        if "nonce" in kwargs and payload.get("nonce") != kwargs["nonce"]:
            raise SignInRefused("nonce")
        return payload

    def store_tokens(self, access_token, id_token):
        # Kept on the backend until the sign-in succeeds: a refused sign-in
        # leaves nothing in the session.
        self._id_token = id_token

    def get_userinfo(self, access_token, id_token, payload):
        """The id_token's claims, with the userinfo endpoint's over them when
        the provider has one (some send groups in only one of the two)."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            extra = super().get_userinfo(access_token, id_token, payload)
            if isinstance(extra, dict) and extra.get("sub", payload["sub"]) == payload["sub"]:
                claims.update(extra)
        return claims

    def get_or_create_user(self, access_token, id_token, payload):
        claims = self.get_userinfo(access_token, id_token, payload)
        who = identity_of(claims)
        user = self.UserModel.objects.filter(username=who.username).first()
        if user is None:
            user = self.UserModel.objects.create_user(who.username, email=who.email)
        elif user.has_usable_password():
            raise SignInRefused("local-account", username=who.username)
        if not rolemapping.claim_source(user, SOURCE):
            raise SignInRefused("local-account", username=who.username)
        elif not user.is_active:
            raise SignInRefused("inactive", username=who.username)
        elif who.email and user.email != who.email:
            user.email = who.email
            user.save(update_fields=["email"])
        result = rolemapping.apply_group_mapping(user, who.groups, source=SOURCE, request=self.request)
        if not result.has_role:
            raise SignInRefused(NO_ROLE, username=who.username)
        self.request.session[ID_TOKEN_SESSION_KEY] = self._id_token
        return user


def sign_out_url(request) -> str:
    """Where to send a person who signs out: after an OIDC sign-in, the
    provider's end_session_endpoint with their id_token as the hint and
    Cronboard's sign-in page to come back to; otherwise (or when the
    provider has no such endpoint, or cannot be reached: the Cronboard
    session ends all the same) the sign-in page itself."""
    sign_in = resolve_url(settings.LOGOUT_REDIRECT_URL)
    id_token = request.session.get(ID_TOKEN_SESSION_KEY)
    if not id_token or not enabled():
        return sign_in
    try:
        endpoint = discovery().get("end_session_endpoint")
    except SignInRefused:
        return sign_in
    if not isinstance(endpoint, str) or not endpoint:
        return sign_in
    query = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": settings.OIDC_CLIENT_ID,
            "post_logout_redirect_uri": request.build_absolute_uri(sign_in),
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


@dataclass(frozen=True)
class LastSignIn:
    at: object  # datetime
    groups: list[str]


def last_sign_in(username: str) -> LastSignIn | None:
    """When `username` last came through the provider and the groups it
    sent then (the provider tells them only at a sign-in), from that
    sign-in's audit row; None if they never did."""
    row = (
        AuditEvent.objects.filter(
            subject=AuditEvent.Subject.SIGN_IN,
            user__username=username,
            action__in=["sign-in", "sign-in-refused"],
            changes__source=SOURCE,
        )
        .order_by("-id")
        .first()
    )
    if row is None:
        return None
    text = row.changes.get("groups") or ""
    return LastSignIn(at=row.created_at, groups=text.split(rolemapping.GROUPS_SEPARATOR) if text else [])
