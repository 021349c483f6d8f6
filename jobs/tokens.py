"""Personal API tokens: create (the secret is returned once), authenticate
a presented token, revoke.

A token is `cb_` + 40 random URL-safe characters. The database keeps only
its SHA-256 (a fast hash is right here: the secret is random, not a
password) and its first characters for display."""

import hashlib
import secrets
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from jobs.models import APIToken

TOKEN_PREFIX = "cb_"
# last_used_at is a hint for the user, not an access log: writing it at most
# once a minute keeps a busy client from turning every read into a write.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def create_token(
    *, user, name: str, namespace: str | None = None, read_only: bool = False, now: datetime | None = None
) -> tuple[APIToken, str]:
    """A new token for `user`, narrowed to `namespace` and/or to reading
    when asked; returns the row and the secret, which is not stored."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(30)
    token = APIToken.objects.create(
        user=user,
        name=(name or "").strip()[:100] or "API token",
        prefix=raw[: APIToken.PREFIX_CHARS],
        token_hash=hash_token(raw),
        namespace=namespace,
        read_only=read_only,
        created_at=now or timezone.now(),
    )
    return token, raw


def authenticate(raw: str, *, now: datetime | None = None) -> APIToken | None:
    """The live token matching `raw` (its user loaded), or None. Records when it was used."""
    if not raw or not raw.startswith(TOKEN_PREFIX) or len(raw) > 200:
        return None
    now = now or timezone.now()
    token = (
        APIToken.objects.select_related("user")
        .filter(token_hash=hash_token(raw), revoked_at__isnull=True)
        .first()
    )
    if token is None:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        APIToken.objects.filter(pk=token.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
        ).update(last_used_at=now)
        token.last_used_at = now
    return token


def revoke_token(*, user, token_id, now: datetime | None = None) -> bool:
    """Revoke one of `user`'s own tokens; False when there is no such live token."""
    try:
        token_id = int(token_id)
    except (TypeError, ValueError):
        return False
    return bool(
        APIToken.objects.filter(pk=token_id, user=user, revoked_at__isnull=True).update(
            revoked_at=now or timezone.now()
        )
    )
