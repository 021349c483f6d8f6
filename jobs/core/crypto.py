"""Encryption at rest for what Cronboard stores but must not keep in clear:
alert channel URLs (jobs.channels) and secrets (jobs.secrets).

Each use has its own key, derived by HKDF-SHA256 from SECRET_KEY with the
use's `purpose` as the info, so one kind of token never decrypts as the
other. Keys in SECRET_KEY_FALLBACKS still decrypt: rotating SECRET_KEY keeps
what was stored, and re-encrypting (`rotate`) moves it to the first key.
"""

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

CHANNELS = b"cronboard alert channels v1"
SECRETS = b"cronboard secrets v1"


def _fernet_for(secret: str, purpose: bytes) -> Fernet:
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=purpose).derive(secret.encode())
    return Fernet(base64.urlsafe_b64encode(key))


@lru_cache(maxsize=8)
def _fernet(secret: str, fallbacks: tuple[str, ...], purpose: bytes) -> MultiFernet:
    return MultiFernet([_fernet_for(secret, purpose), *(_fernet_for(old, purpose) for old in fallbacks)])


def keys(purpose: bytes) -> MultiFernet:
    """SECRET_KEY's key for `purpose` first, then the fallbacks'."""
    return _fernet(settings.SECRET_KEY, tuple(getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ()), purpose)


def encrypt(text: str, *, purpose: bytes, what: str) -> str:
    """`text` as a token under the first key. `what` names the stored thing
    in the refusal when the key is one this process drew for itself."""
    if settings.SECRET_KEY_SOURCE == "process":
        # A key drawn for this process only (config/settings.py): the text
        # would be stored where no other process could ever read it.
        raise ImproperlyConfigured(
            f"No SECRET_KEY: {what} are encrypted with it, so it must be one every process shares. "
            "Set SECRET_KEY, or run `python manage.py bootstrap` once, which writes "
            f"{settings.SECRET_KEY_FILE}."
        )
    return keys(purpose).encrypt(text.encode()).decode()


def decrypt(token: str, *, purpose: bytes) -> str | None:
    """The text, or None when the token is not ours (another SECRET_KEY)."""
    try:
        return keys(purpose).decrypt(str(token).encode()).decode()
    except (InvalidToken, ValueError, TypeError):
        return None


def rotate(token: str, *, purpose: bytes) -> str | None:
    """The token re-encrypted under the first key; None when no key reads it."""
    try:
        return keys(purpose).rotate(str(token).encode()).decode()
    except (InvalidToken, ValueError, TypeError):
        return None
