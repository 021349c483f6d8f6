"""Secrets: named values a job uses by reference and nobody reads back.

A property value (an HTTP URL, header or body, an SQL statement, a command's
`env`, any python job's property) may hold references of exactly two shapes:

- `{{ secret.NAME }}`: the value of the stored secret NAME (the Secret rows,
  encrypted with jobs.core.crypto under its SECRETS purpose);
- `{{ env:NAME }}`: the scheduler's environment variable CRONBOARD_SECRET_NAME,
  for deployments that keep secrets outside the database.

Only these shapes are references (spaces inside the braces optional); any
other `{{` is literal text. The job row, a run's stored overrides, the
export, the API and the audit trail keep the reference: `resolve` swaps in
the values inside the run, just before its handler starts, and returns the
values so that everything the run writes is redacted (`redact`) before it
leaves the handler. In a property whose text is JSON (an object or a list,
like `headers` or `env`), a value goes in JSON-escaped, so a quote in it
cannot change the document's shape.

Saving a job that names a stored secret that does not exist is refused
(`unknown_errors`, code UNKNOWN_CODE), and so is one whose namespace is not
among those the secret names (NOT_ALLOWED_CODE; none named: every one); an
environment reference's value is not checked at save, since the web process
need not share the scheduler's environment; which namespaces may use it is
the operator's setting (`env_allows`), checked at save and in the run. A
secret deleted since, or no longer allowed in the job's namespace (or an unset
variable), fails the run.
"""

import base64
import json
import os
import re
from dataclasses import dataclass, field
from urllib.parse import quote, quote_plus

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import jsontext
from jobs.core import crypto
from jobs.models import NAMESPACE_RE, AuditEvent, Secret
from jobs.models.secrets import MAX_VALUE_BYTES, NAME_PATTERN
from jobs.text import validate_storable

ENV_PREFIX = "CRONBOARD_SECRET_"
MASK = "****"
UNKNOWN_CODE = "unknown_secret"
NOT_ALLOWED_CODE = "secret_not_allowed"
MAX_NAMESPACES = 100
REFERENCE_REQUIRED_CODE = "secret_reference_required"
MAX_DESCRIPTION_CHARS = Secret._meta.get_field("description").max_length
# Written where a value changed (the audit trail never holds a value).
CHANGED = "changed"

NAME_RE = re.compile(rf"{NAME_PATTERN}\Z")
REFERENCE_RE = re.compile(rf"\{{\{{ *(?:secret\.({NAME_PATTERN})|env:([A-Za-z0-9_]{{1,100}})) *\}}\}}")
# Stands for a reference while a kind's own rules check the properties at
# save (the value is not known then, and is never read outside a run).
PLACEHOLDER = "secret"


class SecretMissing(Exception):
    """A run names a secret that no longer exists (or cannot be read)."""


# -- references -----------------------------------------------------------------


def stored_names(properties: dict) -> set[str]:
    """The stored secrets that `properties`' values name."""
    return {
        match.group(1)
        for value in (properties or {}).values()
        for match in REFERENCE_RE.finditer(str(value))
        if match.group(1)
    }


def allows(namespaces: list, namespace: str | None) -> bool:
    """Whether a secret that may be used in `namespaces` (empty: every one)
    may be used by a job in `namespace` (None: no job, a one-off task,
    which only roles held everywhere enqueue)."""
    return not namespaces or namespace is None or namespace in namespaces


def env_allows(name: str, namespace: str | None) -> bool:
    """Whether a job in `namespace` may use the environment secret `name`.
    The scheduler's environment is the operator's, not a team's: jobs
    outside any namespace and one-off tasks (both changed only with a role
    held everywhere) may use each; a namespace's jobs, those that
    CRONBOARD_ENV_SECRET_NAMESPACES gives it (or gives "*")."""
    if not namespace:
        return True
    given = settings.CRONBOARD_ENV_SECRET_NAMESPACES.get(name, frozenset())
    return "*" in given or namespace in given


def _where(namespace: str) -> str:
    return _("namespace “{namespace}”").format(namespace=namespace) if namespace else _("no namespace")


def unknown_errors(properties: dict, *, namespace: str | None = None) -> list[tuple[str, ValidationError]]:
    """[(property, ValidationError)] for each property that names a stored
    secret that does not exist, or one that jobs in `namespace` may not use
    (one error per property, naming the first)."""
    names = stored_names(properties)
    scopes = dict(Secret.objects.filter(name__in=names).values_list("name", "namespaces")) if names else {}
    errors = []
    for key, value in (properties or {}).items():
        for match in REFERENCE_RE.finditer(str(value)):
            name, env = match.group(1), match.group(2)
            if env and not env_allows(env, namespace):
                message = _(
                    "The environment secret “{name}” may not be used by jobs in {where}: "
                    "CRONBOARD_ENV_SECRET_NAMESPACES does not give it to them."
                ).format(name=env, where=_where(namespace or ""))
                errors.append((key, ValidationError(message, code=NOT_ALLOWED_CODE)))
                break
            if name and name not in scopes:
                message = _("No secret named “{name}” exists.").format(name=name)
                errors.append((key, ValidationError(message, code=UNKNOWN_CODE)))
                break
            if name and not allows(scopes[name], namespace):
                message = _("The secret “{name}” may not be used by jobs in {where}.").format(
                    name=name, where=_where(namespace or "")
                )
                errors.append((key, ValidationError(message, code=NOT_ALLOWED_CODE)))
                break
    return errors


def with_placeholders(properties: dict) -> dict:
    """`properties` with each reference replaced by PLACEHOLDER, for the
    kind's own checks at save time."""
    return {key: REFERENCE_RE.sub(PLACEHOLDER, str(value)) for key, value in (properties or {}).items()}


@dataclass
class Resolved:
    properties: dict[str, str]
    # Every value substituted: what `redact` hides in the run's output.
    values: list[str] = field(default_factory=list)


def _is_json(text: str) -> bool:
    """Whether `text` is a JSON object or list once its references are
    values (a reference alone, `{{ … }}`, is not)."""
    shape = REFERENCE_RE.sub(PLACEHOLDER, text).lstrip()[:1]
    if shape not in ("{", "["):
        return False
    try:
        return isinstance(jsontext.loads(REFERENCE_RE.sub(PLACEHOLDER, text)), (dict, list))
    except ValueError:
        return False


def resolve(properties: dict, *, namespace: str | None = None) -> Resolved:
    """The properties with every reference replaced by its value, for a run
    of a job in `namespace` (None: a one-off task). Raises SecretMissing
    naming the first reference that cannot be resolved, or that names a
    secret that jobs in `namespace` may no longer use."""
    names = stored_names(properties)
    rows = Secret.objects.filter(name__in=names).values_list("name", "token", "namespaces") if names else []
    tokens = {name: (token, scope) for name, token, scope in rows}
    values: dict[tuple[str, str], str] = {}

    def value_of(match: re.Match) -> str:
        stored, env = match.group(1), match.group(2)
        key = ("secret", stored) if stored else ("env", env)
        if key not in values:
            if stored:
                if stored not in tokens:
                    raise SecretMissing(
                        f"the secret {stored!r} does not exist (deleted since the job was saved?)"
                    )
                token, scope = tokens[stored]
                if not allows(scope, namespace):
                    raise SecretMissing(
                        f"the secret {stored!r} may not be used by jobs in "
                        f"{f'namespace {namespace!r}' if namespace else 'no namespace'} "
                        "(its namespaces changed since the job was saved?)"
                    )
                value = crypto.decrypt(token, purpose=crypto.SECRETS)
                if value is None:
                    raise SecretMissing(
                        f"the secret {stored!r} cannot be decrypted (was SECRET_KEY changed?)"
                    )
            else:
                if not env_allows(env, namespace):
                    raise SecretMissing(
                        f"the environment secret {env!r} may not be used by jobs in namespace "
                        f"{namespace!r} (CRONBOARD_ENV_SECRET_NAMESPACES does not give it to them)"
                    )
                value = os.environ.get(ENV_PREFIX + env)
                if value is None:
                    raise SecretMissing(
                        f"the environment variable {ENV_PREFIX}{env} is not set on this scheduler"
                    )
            values[key] = value
        return values[key]

    resolved = {}
    for key, text in (properties or {}).items():
        if not isinstance(text, str):  # a number or a list stored by hand holds no reference
            resolved[key] = text
        elif _is_json(text):
            resolved[key] = REFERENCE_RE.sub(lambda m: json.dumps(value_of(m))[1:-1], text)
        else:
            resolved[key] = REFERENCE_RE.sub(value_of, text)
    return Resolved(resolved, [value for value in values.values() if value])


def redaction_forms(values: list[str]) -> list[str]:
    """What to look for in a run's output: each value as it is, as JSON
    writes it, percent-encoded as a URL carries it (both ways) and in
    base64 (an HTTP client's Basic credentials, a token passed on encoded),
    longest first (a value inside another is hidden with it)."""
    found = set()
    for value in values:
        if value:
            found.add(value)
            found.add(json.dumps(value)[1:-1])
            found.add(quote(value, safe=""))
            found.add(quote_plus(value, safe=""))
            encoded = base64.b64encode(value.encode()).decode()
            found.update({encoded, encoded.rstrip("=")})
    return sorted(found, key=len, reverse=True)


def redact(text: str, hidden: list[str]) -> str:
    """`text` with every form of a secret's value replaced by MASK."""
    for value in hidden:
        if value in text:
            text = text.replace(value, MASK)
    return text


class HeldRedaction:
    """Redaction of a text that arrives in pieces (a run's log lines, a
    program's output read in chunks), so that a value split between two
    pieces is hidden too. Each piece is a separator, written as it is (a
    line's newline and time stamp), and content, searched as if the pieces'
    contents were one text. The last len(longest form) - 1 characters of
    content stay held back until the next piece shows whether they begin a
    value, or until `release_all`."""

    def __init__(self, hidden: list[str]):
        self.hidden = hidden
        self.hold = max((len(form) for form in hidden), default=1) - 1
        # [separator, content] not yet written; a separator already written is "".
        self._pending: list[list[str]] = []

    def add(self, separator: str, content: str) -> str:
        """Take one piece; the text that may be written now."""
        self._pending.append([separator, content])
        return self._release(final=False)

    def release_all(self) -> str:
        """Everything held (the text has ended)."""
        return self._release(final=True)

    def _release(self, *, final: bool) -> str:
        joined = "".join(content for _separator, content in self._pending)
        ranges = self._ranges(joined)
        boundary = len(joined) if final else len(joined) - self.hold
        for start, end in ranges:
            if start < boundary < end:
                boundary = end
        out, offset, kept = [], 0, []
        for separator, content in self._pending:
            start, end = offset, offset + len(content)
            offset = end
            if start >= boundary and not (final and start == boundary):
                kept.append([separator, content])
                continue
            out.append(separator)
            position = start
            for a, b in ranges:
                if a >= min(end, boundary) or b <= position:
                    continue
                out.append(joined[position:a] if a > position else "")
                if a >= start:
                    out.append(MASK)
                position = max(position, b)
            if position < min(end, boundary):
                out.append(joined[position : min(end, boundary)])
            if end > boundary:
                kept.append(["", joined[max(position, boundary) : end]])
        self._pending = kept
        return "".join(out)

    def _ranges(self, text: str) -> list[tuple[int, int]]:
        """The spans of `text` that hold a form, longest forms first and
        never overlapping (as `redact` replaces them), in order."""
        ranges: list[tuple[int, int]] = []
        for form in self.hidden:
            at = text.find(form)
            while at >= 0:
                end = at + len(form)
                if all(end <= a or at >= b for a, b in ranges):
                    ranges.append((at, end))
                    at = text.find(form, end)
                else:
                    at = text.find(form, at + 1)
        return sorted(ranges)


# -- the store ------------------------------------------------------------------


def check_name(name: str) -> str:
    name = str(name or "").strip()
    if not NAME_RE.match(name):
        raise ValidationError(
            _("A secret's name is 1 to 100 letters, digits, “_”, “.” or “-”."), code="invalid"
        )
    return name


def check_value(value: str) -> str:
    if value is None or value == "":
        raise ValidationError(_("Enter the secret's value."), code="required")
    if len(value.encode(errors="surrogatepass")) > MAX_VALUE_BYTES:
        raise ValidationError(
            _("A secret's value can be at most {max_bytes} bytes.").format(max_bytes=MAX_VALUE_BYTES),
            code="max_length",
        )
    validate_storable(value)
    return value


def check_namespaces(value) -> list[str]:
    """The namespaces a secret may be used in, from a list or from text
    separated by commas or spaces: sorted, each once; empty is every
    namespace. "" in a list is the jobs outside any namespace."""
    items = value.replace(",", " ").split() if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(item, str) for item in items):
        raise ValidationError(_("Namespaces are a list of names."), code="invalid")
    # Counted as sent (the API document's maxItems), before repeats are dropped.
    if len(items) > MAX_NAMESPACES:
        raise ValidationError(
            _("A secret may name at most {count} namespaces.").format(count=MAX_NAMESPACES), code="invalid"
        )
    found = sorted({item.strip() for item in items})
    for namespace in found:
        if namespace and (len(namespace) > 100 or not NAMESPACE_RE.fullmatch(namespace)):
            raise ValidationError(
                _("“{namespace}” is not a namespace: lowercase letters, digits, “_” and “-”.").format(
                    namespace=namespace[:100]
                ),
                code="invalid",
            )
    return found


def check_description(description: str) -> str:
    description = str(description or "")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise ValidationError(
            _("A description can be at most {max_chars} characters.").format(max_chars=MAX_DESCRIPTION_CHARS),
            code="max_length",
        )
    validate_storable(description)
    return description


def _audit(*, name: str, action: str, user, via: str, changes: dict) -> None:
    """A row under the subject "secrets" (written here: jobs.audit is above
    this module); a value is only ever CHANGED."""
    real_user = user if getattr(user, "pk", None) else None
    AuditEvent.objects.create(
        subject=AuditEvent.Subject.SECRETS,
        subject_name=name,
        user=real_user,
        username=real_user.get_username() if real_user else "",
        action=action,
        via=via,
        changes=changes,
    )


def set_secret(
    *,
    name: str,
    value: str,
    description: str | None = None,
    namespaces: list[str] | str | None = None,
    user=None,
    via: str,
) -> Secret:
    """Create the secret `name` or replace its value (and its description
    and the namespaces that may use it, unless None). Raises
    ValidationError for a bad name, value or namespace."""
    name, value = check_name(name), check_value(value)
    if description is not None:
        description = check_description(description)
    if namespaces is not None:
        namespaces = check_namespaces(namespaces)
    token = crypto.encrypt(value, purpose=crypto.SECRETS, what="secrets")
    fields = dict(name=name, token=token, description=description, namespaces=namespaces, user=user, via=via)
    fields["by"] = user.get_username() if getattr(user, "pk", None) else ""
    try:
        return _write(**fields)
    except IntegrityError:
        # Another writer created the name between our look and our insert:
        # this write replaces what it wrote.
        return _write(**fields)


def _write(
    *, name: str, token: str, description: str | None, namespaces: list[str] | None, by: str, user, via: str
) -> Secret:
    with transaction.atomic():
        secret = Secret.objects.select_for_update().filter(name=name).first()
        created = secret is None
        if created:
            secret = Secret(name=name)
        changes = {"value": CHANGED}
        if description is not None and description != secret.description:
            changes["description"] = [None if created else secret.description, description]
            secret.description = description
        if namespaces is not None and namespaces != (secret.namespaces or []):
            changes["namespaces"] = [None if created else secret.namespaces, namespaces]
            secret.namespaces = namespaces
        secret.token, secret.set_at, secret.set_by = token, timezone.now(), by
        secret.save()
        action = "secret-create" if created else "secret-set"
        _audit(name=name, action=action, user=user, via=via, changes=changes)
    return secret


def delete_secret(*, name: str, user=None, via: str) -> bool:
    """Delete the secret `name`; False if there was none. Jobs that name it
    keep the reference, and their runs fail until it exists again."""
    if not NAME_RE.match(str(name)):
        return False  # no secret has such a name (and the database need not read it)
    with transaction.atomic():
        deleted, _rows = Secret.objects.filter(name=name).delete()
        if deleted:
            _audit(name=name, action="secret-delete", user=user, via=via, changes={"value": CHANGED})
    return bool(deleted)


def rotate_all() -> tuple[int, list[str]]:
    """Re-encrypt every secret under SECRET_KEY's key: (how many, the names
    of those no key reads, left as they are)."""
    crypto.encrypt("", purpose=crypto.SECRETS, what="secrets")  # refuses a key of this process only
    rotated, unreadable = 0, []
    for secret in Secret.objects.only("pk", "name", "token"):
        token = crypto.rotate(secret.token, purpose=crypto.SECRETS)
        if token is None:
            unreadable.append(secret.name)
            continue
        Secret.objects.filter(pk=secret.pk, token=secret.token).update(token=token)
        rotated += 1
    return rotated, unreadable


def describe(secret: Secret) -> str:
    """“set on … by …”: all that is ever shown of a secret's value."""
    when = timezone.localtime(secret.set_at).strftime("%Y-%m-%d %H:%M")
    if secret.set_by:
        return _("set on {when} by {user}").format(when=when, user=secret.set_by)
    return _("set on {when}").format(when=when)


# -- credentials typed in clear ----------------------------------------------------

# Headers that carry a credential whatever their value looks like.
CREDENTIAL_HEADERS = {"authorization", "proxy-authorization", "cookie", "x-api-key"}
# A header, property or variable whose name holds one of these holds a credential.
CREDENTIAL_WORDS = ("token", "secret", "password", "key")
# Properties whose text is a list of named values (an HTTP job's headers, a
# command job's env): each value is judged by its own name.
NAMED_VALUE_PROPERTIES = ("headers", "env")


def is_credential_name(name: str) -> bool:
    name = str(name).strip().lower()
    return name in CREDENTIAL_HEADERS or any(word in name for word in CREDENTIAL_WORDS)


# Words a credential's value may hold beside its references without holding
# a credential itself: the HTTP authentication schemes.
AUTH_SCHEMES = {"bearer", "basic", "token", "digest", "apikey"}


def _hide(value: str) -> str:
    """A credential typed in clear as MASK. A value made of references (with
    an authentication scheme's word, `Bearer {{ secret.t }}`, or punctuation
    between them) holds no credential and stays readable; other text typed
    beside a reference may be one, and is masked with it."""
    if not value:
        return value
    rest = REFERENCE_RE.sub(" ", value).split()
    if REFERENCE_RE.search(value) and all(
        word.lower() in AUTH_SCHEMES or not any(c.isalnum() for c in word) for word in rest
    ):
        return value
    return MASK


def _mask_named_values(text: str) -> str:
    try:
        parsed = jsontext.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        if not any(is_credential_name(name) for name in parsed):
            return text
        return json.dumps(
            {name: _hide(str(v)) if is_credential_name(name) else v for name, v in parsed.items()},
            ensure_ascii=False,
        )
    lines = []
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        lines.append(f"{name}: {_hide(value.strip())}" if sep and is_credential_name(name) else line)
    return "\n".join(lines)


def mask_credentials(properties: dict) -> dict:
    """`properties` as someone without edit rights sees them: a value typed
    in clear under a credential's name (a property, an HTTP header, a
    command's variable) shown as MASK; references are shown as written."""
    shown = {}
    for name, value in (properties or {}).items():
        value = str(value)
        if is_credential_name(name):
            shown[name] = _hide(value)
        elif name in NAMED_VALUE_PROPERTIES:
            shown[name] = _mask_named_values(value)
        else:
            shown[name] = value
    return shown


def _named_entries(text: str) -> list[tuple[str, str]]:
    """The (name, value) pairs of a JSON object or of `Name: value` lines."""
    try:
        parsed = jsontext.loads(text) if text.lstrip().startswith("{") else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        return [(str(name), str(value)) for name, value in parsed.items()]
    pairs = []
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep:
            pairs.append((name.strip(), value.strip()))
    return pairs


def clear_credentials(properties: dict) -> list[tuple[str, str, str]]:
    """(property, name, value) for each credential typed in clear in
    `properties`, by the names `mask_credentials` hides: `name` is the
    header's or variable's name inside a property of NAMED_VALUE_PROPERTIES,
    the property's own name otherwise."""
    found = []
    for key, value in (properties or {}).items():
        value = str(value)
        if is_credential_name(key):
            named = [(key, value)]
        elif key in NAMED_VALUE_PROPERTIES:
            named = [pair for pair in _named_entries(value) if is_credential_name(pair[0])]
        else:
            continue
        found.extend((key, name, item) for name, item in named if _hide(item) == MASK)
    return found


def suggested_name(job_name: str, name: str) -> str:
    """A name for the secret a credential typed in clear moves to: the job's
    name and the credential's, in the letters a secret's name allows."""
    text = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{job_name}.{name}" if job_name else name)
    return text.strip("_.-")[:100].strip("_.-") or "secret"


def clear_credential_errors(properties: dict) -> list[tuple[str, ValidationError]]:
    """With JOBS_REQUIRE_SECRET_REFERENCES on, [(property, ValidationError)]
    for the first credential typed in clear in each property
    (`clear_credentials`): such a value must be a reference."""
    if not settings.JOBS_REQUIRE_SECRET_REFERENCES:
        return []
    errors, seen = [], set()
    for key, name, _value in clear_credentials(properties):
        if key in seen:
            continue
        seen.add(key)
        message = _(
            "“{name}” holds a credential typed in clear: this server requires a secret reference "
            "such as {reference} (JOBS_REQUIRE_SECRET_REFERENCES)."
        ).format(name=name, reference="{{ secret.NAME }}")
        errors.append((key, ValidationError(message, code=REFERENCE_REQUIRED_CODE)))
    return errors
