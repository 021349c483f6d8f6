"""Alert channels: Apprise URLs (Slack, Teams, Discord, Telegram, DingTalk,
Feishu, WeCom, ntfy, a JSON webhook …) that alerts are sent to besides email.

One place for what a channel URL may be and how it is kept:

- Parsed by Apprise itself (`Apprise.instantiate`), so a URL that Apprise
  cannot send to is refused when it is saved, not when the first crash comes.
  `mailto://` is refused: email goes through the alert emails (SMTP, with
  the outbox's Message-ID and partial-refusal handling).
- Fenced or refused: a scheme is sent to only if its target is known
  (FENCED_ON_HOST_SCHEMAS, FIXED_ENDPOINT_SCHEMAS) or the operator allowed it
  unfenced (ALERT_CHANNEL_UNFENCED_SCHEMES); a URL without the host it
  would go to is refused, never sent to this machine.
- Encrypted at rest (jobs.core.crypto, with the channels' own key): each
  URL is stored as a Fernet token under a key derived by HKDF-SHA256 from
  SECRET_KEY (SECRET_KEY_FALLBACKS still decrypt, so a rotated key does not
  lose the channels).
- Never shown back in full: `mask()` keeps the scheme, the host of a webhook
  and the first characters of each other part. Saving a masked URL back
  unchanged keeps the stored URL (jobs.channelbook). Jobs and the global
  setting name channels (jobs.channelnames).
- Webhook targets pass the HTTP jobs' fence (jobs.fence) when saved, without
  a lookup of a host name, and again before every send with one (`check_fence`).
"""

import hashlib
import hmac
import ipaddress
import logging
import re
import threading
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from jobs import fence, secrets
from jobs.core import crypto
from jobs.core.mailfailures import REPLY_CHARS

log = logging.getLogger("cronboard.alerts")

MAX_CHANNELS = 20
MAX_URL_CHARS = 2000
MASK = "****"
# Generic webhooks: the host is whatever server the operator names.
WEBHOOK_SCHEMAS = {"json", "jsons", "form", "forms", "xml", "xmls"}

# Every scheme Cronboard sends to, and how its target is fenced; each one read
# in the pinned Apprise's plugin (docs/operations.md lists them, and
# tests/test_channel_schemes.py holds that list, the doc's examples and these
# sets to the installed Apprise). A scheme in neither set is refused unless
# the operator lists it in ALERT_CHANNEL_UNFENCED_SCHEMES: an Apprise plugin
# may connect somewhere its URL does not name (this machine's syslog socket,
# a server found by discovery, a default host), which the fence cannot see.
#
# The URL's host is where Apprise connects (over HTTP, or UDP for rsyslog):
# the host passes the fence, and a URL without one is refused (Apprise would
# fall back to this machine).
FENCED_ON_HOST_SCHEMAS = WEBHOOK_SCHEMAS | {
    "apprise",
    "apprises",
    "gotify",
    "gotifys",
    "mmost",
    "mmosts",
    "ncloud",
    "nclouds",
    "nctalk",
    "nctalks",
    "ntfy",  # ntfy://topic alone is the public ntfy.sh: see fence_url
    "ntfys",
    "rocket",
    "rockets",
    "rsyslog",
    "workflow",  # Microsoft Teams through a Power Automate workflow
    "workflows",
}
# Services Apprise reaches at their own fixed address: the URL's "host" is a
# token (slack://T…/B…/…), not where it connects, so there is nothing to fence.
FIXED_ENDPOINT_SCHEMAS = {
    "dingtalk",
    "discord",
    "feishu",
    "gchat",
    "lark",
    "opsgenie",
    "pagerduty",
    "pover",
    "slack",
    "tgram",
    "wecombot",
    "wxteams",
}
# Email goes through the alert emails (SMTP, with the outbox's Message-ID and
# partial-refusal handling), whatever the operator allows.
REFUSED_SCHEMAS = {"mailto", "mailtos"}
# What Apprise reads as a URL's scheme (apprise.utils.parse.GET_SCHEMA_RE,
# anchored here), lowered: one word of letters and digits.
_SCHEMA_RE = re.compile(r"[a-z0-9]{1,32}")


class ChannelRefused(ValueError):
    """Cronboard does not send to this channel: its target cannot be fenced."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


# Options that say how to send, not where or with which secret: shown as is.
PLAIN_OPTIONS = {"method", "format", "mode", "priority", "image", "footer", "blocks", "redirect", "verify"}
_HTTP_CODE_RE = re.compile(r"error=(\d{3})\b")
_URL_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


class _MaskURLs(logging.Filter):
    """Apprise logs URLs it cannot parse, in full: mask every URL in its
    records, so a secret typed into a bad channel URL never reaches a log."""

    def filter(self, record):
        text = record.getMessage()
        masked = _URL_RE.sub(lambda m: mask(m.group(0)), text)
        if masked != text:
            record.msg, record.args = masked, ()
        return True


logging.getLogger("apprise").addFilter(_MaskURLs())


# -- encryption ------------------------------------------------------------------


def encrypt(url: str) -> str:
    return crypto.encrypt(url, purpose=crypto.CHANNELS, what="alert channels")


def decrypt(token: str) -> str | None:
    """The URL, or None when the token is not ours (another SECRET_KEY)."""
    return crypto.decrypt(token, purpose=crypto.CHANNELS)


def reveal(stored: str) -> str | None:
    """The URL a stored entry stands for: a token decrypted; a plain URL
    written to the database by hand (not through a form or the API, which
    always encrypt) is taken as it is, and encrypted the next time the
    channel is saved. None for a token this SECRET_KEY cannot read."""
    url = decrypt(stored)
    if url is not None:
        return url
    text = str(stored)
    if "://" in text and not text.startswith("gAAAAA"):  # every Fernet token starts so
        return text
    return None


def channel_key(url: str) -> str:
    """Identifies a channel without revealing it (the storm grouping and the
    one-delivery-per-alert-and-channel constraint use it)."""
    return hmac.new(settings.SECRET_KEY.encode(), url.encode(), hashlib.sha256).hexdigest()


# -- masking -----------------------------------------------------------------------


def _hint(text: str) -> str:
    return text if len(text) <= 3 else text[:2] + MASK


def _looks_like_host(host: str) -> bool:
    if host == "localhost" or "." in host:
        return True
    try:
        ipaddress.ip_address(host.strip("[]"))
        return True
    except ValueError:
        return False


def mask(url: str) -> str:
    """The URL with its secrets replaced: the password and query values, and
    all but the first characters of the user name, path segments and (for a
    service whose "host" is a token) the host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return MASK
    schema = parts.scheme.lower()
    host = parts.hostname or ""
    shown_host = host if schema in WEBHOOK_SCHEMAS or _looks_like_host(host) else _hint(host)
    if ":" in shown_host:
        shown_host = f"[{shown_host}]"
    netloc = shown_host + (f":{port}" if port else "")
    if parts.username is not None:
        netloc = (
            f"{quote(_hint(unquote(parts.username)), safe='*')}"
            + (":" + MASK if parts.password else "")
            + "@"
            + netloc
        )
    path = "/".join(_hint(unquote(segment)) for segment in parts.path.split("/"))
    query = [
        (name, value if name.lower() in PLAIN_OPTIONS else MASK)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    text = f"{schema}://{netloc}{path}"
    if query:
        text += "?" + urlencode(query, safe="*")
    return text


def secret_parts(url: str) -> list[str]:
    """The parts of `url` that `mask` hides, whole: the user name and the
    password (and both as Basic credentials carry them), path segments,
    query values, a host that is a token. Parts of three characters or
    fewer `mask` shows, and so are not looked for."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        username, password = parts.username, parts.password
    except ValueError:
        return [url]
    found = [unquote(segment) for segment in parts.path.split("/")]
    found += [value for name, value in parse_qsl(parts.query) if name.lower() not in PLAIN_OPTIONS]
    if parts.scheme.lower() not in WEBHOOK_SCHEMAS and not _looks_like_host(host):
        # A "host" that is a token, as typed (urlsplit lowers hostname), and
        # the halves of one that urlsplit reads as host and port: Telegram's
        # bot token, tgram://123456:ABC-DEF/chat.
        written = parts.netloc.rpartition("@")[2]
        found += [written, *written.split(":")]
    if username is not None:
        found.append(unquote(username))
    if password:
        found += [unquote(password), f"{unquote(username or '')}:{unquote(password)}"]
    return [part for part in found if len(part) > 3 or (password and part == unquote(password))]


def mask_reply(url: str, text: str) -> str:
    """A reply or an error about `url` as it may be shown or stored: the URL
    itself masked, and each of its secret parts replaced by MASK in every
    form jobs.secrets redacts (percent-encoded, in base64, JSON-escaped), so
    a service that echoes the request, or an exception that names the URL,
    shows none of them."""
    if not text:
        return text
    text = text.replace(url, mask(url))
    return secrets.redact(text, secrets.redaction_forms(secret_parts(url)))


def mask_typed(text: str) -> str:
    """A line typed without a scheme, masked as a web address would be: its
    host as written, the rest hidden (mask() would read it all as a secret)."""
    return mask(f"json://{text}").removeprefix("json://")


# -- validation --------------------------------------------------------------------


def _apprise():
    import apprise

    return apprise


def known_to_apprise(schema: str) -> bool:
    """Whether the installed Apprise has a plugin for this scheme."""
    from apprise.manager_plugins import NotificationManager

    return schema in NotificationManager()


def _not_apprise(url: str) -> ValidationError:
    return ValidationError(
        _("“{mask}” is not a channel URL Apprise can send to (see its list of services).").format(
            mask=mask(url)
        ),
        code="invalid_channel",
    )


def instantiate(url: str):
    """The Apprise plugin for `url`, set up to send with a bounded timeout and
    without following redirects; ValidationError if Apprise cannot use it."""
    apprise = _apprise()
    asset = apprise.AppriseAsset(http_redirects=False)
    plugin = apprise.Apprise.instantiate(url, asset=asset, suppress_exceptions=True)
    if plugin is None:
        raise _not_apprise(url)
    plugin.redirects = False
    timeout = float(settings.ALERT_CHANNEL_TIMEOUT)
    plugin.socket_connect_timeout = timeout
    plugin.socket_read_timeout = timeout
    return plugin


def schema_of(url: str) -> str:
    """The URL's scheme as Apprise reads it, lowered; "" when it has none."""
    head, sep, _rest = url.strip().partition("://")
    head = head.lower()
    return head if sep and _SCHEMA_RE.fullmatch(head) else ""


def unfenced_schemes() -> set[str]:
    return set(settings.ALERT_CHANNEL_UNFENCED_SCHEMES)


def check_schema(url: str) -> str:
    """The URL's scheme if Cronboard sends to it; ChannelRefused otherwise.
    Asked before Apprise parses the URL, so a plugin Cronboard does not use
    never even sets itself up."""
    schema = schema_of(url)
    if schema in FENCED_ON_HOST_SCHEMAS or schema in FIXED_ENDPOINT_SCHEMAS or schema in unfenced_schemes():
        return schema
    raise ChannelRefused(
        _(
            "Cronboard does not send to {schema}:// channels: the fence cannot check where they go. "
            "The services it sends to are listed in docs/operations.md; an administrator can allow "
            "this one with ALERT_CHANNEL_UNFENCED_SCHEMES."
        ).format(schema=schema)
    )


def fence_url(url: str, plugin=None) -> str | None:
    """The http(s) URL whose host the fence must pass, or None for a service
    reached at its own fixed address (hooks.slack.com, api.telegram.org …)
    or a scheme the operator allowed unfenced. ChannelRefused for a scheme
    Cronboard does not send to, or a URL that names no host to fence."""
    schema = check_schema(url)
    if schema in unfenced_schemes() or schema in FIXED_ENDPOINT_SCHEMAS:
        return None
    plugin = plugin or instantiate(url)
    if schema in ("ntfy", "ntfys") and getattr(plugin, "mode", "") == "cloud":
        return None  # ntfy://topic: the public ntfy.sh
    host = str(getattr(plugin, "host", "") or "").strip()
    if not host or host.startswith(":"):
        raise ChannelRefused(
            _(
                "A {schema}:// channel needs the host to send to: without one, Apprise sends to this "
                "machine, which the fence does not allow. Name the host, or have an administrator allow "
                "{schema} in ALERT_CHANNEL_UNFENCED_SCHEMES."
            ).format(schema=schema)
        )
    scheme = "https" if getattr(plugin, "secure", False) else "http"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = getattr(plugin, "port", None)
    return f"{scheme}://{host}" + (f":{port}" if isinstance(port, int) else "") + "/"


def check_fence(url: str, plugin=None, *, resolver=None, resolve: bool = True) -> None:
    """Raise fence.FenceError when the channel's target is fenced off, and
    ChannelRefused when Cronboard cannot fence it at all. A save checks with
    resolve=False: a host that does not resolve from the web server may
    resolve from the scheduler, which resolves and fences it at each send."""
    target = fence_url(url, plugin)
    if target is not None:
        fence.check_url(target, resolver=resolver, resolve=resolve)


def validate(url: str) -> str:
    """One channel URL as typed; returns it stripped or raises ValidationError."""
    url = url.strip()
    if not url:
        raise ValidationError(_("A channel URL is empty."), code="invalid_channel")
    if len(url) > MAX_URL_CHARS:
        raise ValidationError(
            _("A channel URL is longer than {max_url_chars} characters.").format(max_url_chars=MAX_URL_CHARS),
            code="invalid_channel",
        )
    if any(ord(c) < 32 for c in url):
        raise ValidationError(_("A channel URL contains control characters."), code="invalid_channel")
    if MASK in url:
        raise ValidationError(
            _(
                "“{url}” is masked: the secret it stood for is not stored here. Enter the full URL (or export with --with-secrets to carry channels to another installation)."
            ).format(url=url),
            code="masked_channel",
        )
    try:
        urlsplit(url)
    except ValueError:  # an unclosed or malformed [IPv6] host
        raise ValidationError(
            _("“{mask}” is not a URL (its host cannot be read).").format(mask=mask(url)),
            code="invalid_channel",
        ) from None
    schema = schema_of(url)
    if not schema:
        raise ValidationError(
            _("“{mask}” is not a URL (it needs a scheme such as json://).").format(mask=mask_typed(url)),
            code="invalid_channel",
        )
    if schema in REFUSED_SCHEMAS:
        raise ValidationError(
            _("Email goes through the alert emails, not a mailto:// channel."), code="invalid_channel"
        )
    if not known_to_apprise(schema):
        raise _not_apprise(url)
    try:
        check_schema(url)
        plugin = instantiate(url)
        check_fence(url, plugin, resolve=False)
    except ChannelRefused as exc:
        raise ValidationError(
            _("“{mask}”: {reason}").format(mask=mask(url), reason=exc.reason), code="unfenced_channel"
        ) from None
    except fence.FenceError as exc:
        raise ValidationError(
            _("“{mask}”: the target is fenced off: {reason}").format(mask=mask(url), reason=exc.reason),
            code="fenced_channel",
        ) from None
    return url


# -- sending -----------------------------------------------------------------------


@dataclass
class SendResult:
    ok: bool
    permanent: bool = False
    reply: str = ""


class _ThreadLogs(logging.Handler):
    """Apprise reports why a send failed only in its log: keep this thread's."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.thread = threading.get_ident()
        self.lines: list[str] = []

    def emit(self, record):
        if record.thread == self.thread and record.levelno >= logging.WARNING:
            self.lines.append(record.getMessage())


def send(url: str, *, title: str, body: str) -> SendResult:
    """Send one message now through Apprise, after the fence check. Blocks up
    to about twice ALERT_CHANNEL_TIMEOUT. A 4xx answer (but 408/429), a URL
    Apprise refuses or a fenced-off target is permanent; the rest is worth
    another try. The reply holds none of the URL's secrets (mask_reply)."""
    result = _send(url, title=title, body=body)
    # Masked whole, then cut: a secret cut in two would not be found.
    result.reply = mask_reply(url, result.reply)[:REPLY_CHARS]
    return result


def _send(url: str, *, title: str, body: str) -> SendResult:
    if schema_of(url) in REFUSED_SCHEMAS:
        return SendResult(False, True, "email goes through the alert emails, not a mailto:// channel")
    try:
        check_schema(url)
        plugin = instantiate(url)
        check_fence(url, plugin)
    except ValidationError as exc:
        return SendResult(False, True, " ".join(exc.messages))
    except ChannelRefused as exc:
        return SendResult(False, True, exc.reason)
    except fence.FenceError as exc:
        transient = exc.reason.startswith("could not resolve")
        return SendResult(False, not transient, f"blocked by the fence: {exc.reason}")
    handler = _ThreadLogs()
    apprise_log = logging.getLogger("apprise")  # its level: settings.LOGGING (WARNING)
    apprise_log.addHandler(handler)
    try:
        ok = bool(plugin.notify(body=body, title=title))
    except Exception as exc:  # a plugin bug must not kill the sender thread
        return SendResult(False, False, f"{type(exc).__name__}: {exc}")
    finally:
        apprise_log.removeHandler(handler)
    if ok:
        return SendResult(True)
    reply = " ".join(handler.lines) or "the service did not accept the message"
    codes = [int(c) for c in _HTTP_CODE_RE.findall(reply)]
    permanent = bool(codes) and all(400 <= c < 500 and c not in (408, 425, 429) for c in codes)
    return SendResult(False, permanent, reply)
