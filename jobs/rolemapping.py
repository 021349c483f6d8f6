"""Directory and identity-provider groups mapped to roles: the rules of
CRONBOARD_GROUP_ROLES, and the grants a sign-in through LDAP or OpenID
Connect makes match them (docs/operations.md, "Groups to roles").

A rule reads `GROUP → ROLE:NAMESPACE` (or `->`), NAMESPACE `*` for
everywhere: `cn=sre,ou=groups,dc=corp → operator:*`,
`payments-dev → editor:billing`. Group names match without regard to case,
and a distinguished name without regard to the spaces around its commas and
equals signs, as directories compare them.

The grants a sign-in keeps carry its source (RoleGrant.source): each sign-in
adds and removes only those, so a grant an administrator gave by hand stays
as it is, and where one holds a scope the mapping leaves that scope alone."""

import re
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction

from jobs import access, audit
from jobs.models import ROLE_ORDER, AuditEvent, GrantSource, Job, Role, RoleGrant

ARROWS = ("→", "->")
# Between the groups a sign-in's audit row lists (a distinguished name has commas).
GROUPS_SEPARATOR = "; "
EVERYWHERE = "*"
# A group's name or distinguished name as a directory may write it; longer
# is a mistake in the setting, not a group.
MAX_GROUP_CHARS = 1000
NAMESPACE_CHARS = Job._meta.get_field("namespace").max_length

_RANK = {role: rank for rank, role in enumerate(ROLE_ORDER)}
# A comma or a plus that an unescaped backslash does not precede: where a
# distinguished name's parts and a part's attributes end.
_DN_COMMA = re.compile(r"(?<!\\)((?:\\\\)*),")


class MappingError(ValueError):
    """A rule that cannot be read; the message names it and says why."""


@dataclass(frozen=True)
class Rule:
    group: str  # as normalise_group() writes it
    role: Role
    namespace: str | None  # None: everywhere

    def __str__(self):
        return f"{self.group} → {scope_label(self.role, self.namespace)}"


@dataclass
class MappingResult:
    """What a sign-in's mapping did: its `source`, `granted` and `removed` as
    "role:namespace" labels, and `roles`, the user's roles after it,
    {namespace or None (everywhere): role}, their own and their groups'
    (jobs.access.roles_held)."""

    source: str = ""
    granted: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    roles: dict = field(default_factory=dict)

    @property
    def has_role(self) -> bool:
        """May the user see anything at all? Without a role, no session."""
        return bool(self.roles)


def scope_label(role, namespace: str | None) -> str:
    return f"{Role(role).value}:{EVERYWHERE if namespace is None else namespace}"


def normalise_group(name: str) -> str:
    """How a group's name is compared: case folded; a distinguished name
    (it has an `=`) also without the spaces around its separators."""
    name = name.strip()
    if "=" in name:
        parts = []
        for rdn in _DN_COMMA.sub(lambda m: m.group(1) + "\0", name).split("\0"):
            attribute, _sep, value = rdn.partition("=")
            parts.append(f"{attribute.strip()}={value.strip()}")
        name = ",".join(parts)
    return name.casefold()


def _entries(text_or_list) -> list[str]:
    if text_or_list is None:
        return []
    items = [text_or_list] if isinstance(text_or_list, str) else list(text_or_list)
    entries = []
    for item in items:
        if not isinstance(item, str):
            raise MappingError(f"A rule must be text, got {item!r}.")
        for line in item.splitlines():
            entries.extend(part.strip() for part in line.split(";"))
    return [entry for entry in entries if entry and not entry.startswith("#")]


def _parse_rule(number: int, entry: str) -> Rule:
    where = f"rule {number} ({entry!r})"
    cut = max(entry.rfind(arrow) for arrow in ARROWS)
    if cut < 0:
        raise MappingError(f"{where}: write GROUP → ROLE:NAMESPACE (or ->), NAMESPACE * for everywhere.")
    arrow = next(arrow for arrow in ARROWS if entry.startswith(arrow, cut))
    group, target = entry[:cut].strip(), entry[cut + len(arrow) :].strip()
    if not group:
        raise MappingError(f"{where}: the group before the arrow is missing.")
    if len(group) > MAX_GROUP_CHARS:
        raise MappingError(f"{where}: a group name has at most {MAX_GROUP_CHARS} characters.")
    role, colon, namespace = target.partition(":")
    role, namespace = role.strip().lower(), namespace.strip()
    if role not in Role.values:
        raise MappingError(f"{where}: unknown role {role!r}; the roles are {', '.join(Role.values)}.")
    if not colon or not namespace:
        raise MappingError(f"{where}: after the role, write :NAMESPACE, or :* for everywhere.")
    if namespace != EVERYWHERE and (
        len(namespace) > NAMESPACE_CHARS or not Job.NAMESPACE_RE.fullmatch(namespace)
    ):
        raise MappingError(
            f"{where}: {namespace!r} is not a namespace (lower-case letters, digits, - and _; "
            f"at most {NAMESPACE_CHARS} characters) nor * for everywhere."
        )
    return Rule(
        group=normalise_group(group),
        role=Role(role),
        namespace=None if namespace == EVERYWHERE else namespace,
    )


def parse_mapping(text_or_list) -> list[Rule]:
    """The rules in `text_or_list`: one text (a rule per line, or rules
    separated by `;`) or a list of them. Blank lines and lines starting with
    # are skipped. MappingError names the first rule that cannot be read."""
    return [_parse_rule(number, entry) for number, entry in enumerate(_entries(text_or_list), start=1)]


def configured_rules() -> list[Rule]:
    """The rules of the setting CRONBOARD_GROUP_ROLES (checked at start by
    jobs.checks, so this raises only if the setting changed since)."""
    return parse_mapping(settings.CRONBOARD_GROUP_ROLES)


def matching_rules(groups, rules: list[Rule] | None = None) -> list[Rule]:
    """The rules that apply to a member of `groups`, in the setting's order."""
    rules = configured_rules() if rules is None else rules
    member_of = {normalise_group(group) for group in groups if isinstance(group, str)}
    return [rule for rule in rules if rule.group in member_of]


def roles_for_groups(groups, rules: list[Rule] | None = None) -> dict:
    """{namespace or None: role} the mapping gives to members of `groups`;
    where several rules give a role in one scope, the highest."""
    wanted: dict = {}
    for rule in matching_rules(groups, rules):
        held = wanted.get(rule.namespace)
        if held is None or _RANK[rule.role] > _RANK[held]:
            wanted[rule.namespace] = rule.role
    return wanted


def apply_group_mapping(
    user, groups, *, source: str, request=None, rules: list[Rule] | None = None
) -> MappingResult:
    """Make `user`'s grants of `source` (GrantSource: "ldap", "oidc") what
    the mapping gives their `groups`: add, change and remove them; grants
    of another source (by hand included) are left as they are, and a scope
    one of them holds is not granted again. Writes one audit row for the
    sign-in: "sign-in" with the source and the roles granted and removed,
    or "sign-in-refused" when the user is left with no role (then the caller
    gives no session: jobs.web.signin refuses it). The result rides on the
    user object as `cronboard_mapping`, so user_logged_in's own row is not
    written again for it (jobs.audit.record_sign_in)."""
    source = GrantSource(source)
    if source == GrantSource.MANUAL:
        raise ValueError("A sign-in's grants need a source other than by hand.")
    wanted = roles_for_groups(groups, rules)
    result = MappingResult(source=source.value)
    with transaction.atomic():
        # Two sign-ins of one user at once (two tabs, two web nodes) take
        # turns here: each would otherwise add the same missing grant, and the
        # second would break the one-grant-per-scope constraint.
        type(user).objects.select_for_update().only("pk").get(pk=user.pk)
        held = {grant.namespace: grant for grant in RoleGrant.objects.select_for_update().filter(user=user)}
        for namespace, grant in held.items():
            if grant.source == source and namespace not in wanted:
                grant.delete()
                result.removed.append(scope_label(grant.role, namespace))
        for namespace, role in wanted.items():
            grant = held.get(namespace)
            if grant is None:
                RoleGrant.objects.create(user=user, namespace=namespace, role=role, source=source)
                result.granted.append(scope_label(role, namespace))
            elif grant.source == source and grant.role != role:
                result.removed.append(scope_label(grant.role, namespace))
                grant.role = role
                grant.save(update_fields=["role"])
                result.granted.append(scope_label(role, namespace))
        access.forget_roles(user)
        result.roles = access.roles_held(user)
        audit.record(
            action="sign-in" if result.has_role else "sign-in-refused",
            subject=AuditEvent.Subject.SIGN_IN,
            user=user,
            via=AuditEvent.Via.SSO,
            changes={
                "source": source.value,
                "granted": ", ".join(result.granted),
                "removed": ", ".join(result.removed),
                # As the source sent them: `manage.py sso check` shows them
                # for a source it cannot ask without the user (OIDC).
                "groups": GROUPS_SEPARATOR.join(group for group in groups if isinstance(group, str)),
            },
        )
    user.cronboard_mapping = result
    if request is not None:
        request.cronboard_mapping = result
    return result


def may_sign_in(user, source: str) -> bool:
    """Whether `source` (ldap, oidc) may sign `user` in: an account is the
    source's that first signed it in, and no other's, so that an identity
    provider's user named like a directory's (or the other way round) never
    becomes it, nor keeps the grants the other source gave."""
    from jobs.models import Profile

    found = Profile.objects.filter(user=user).values_list("sign_in_source", flat=True).first()
    return found in (None, "", source)


def claim_source(user, source: str) -> bool:
    """may_sign_in, and the account becomes the source's if it was nobody's."""
    from jobs.models import Profile

    if not may_sign_in(user, source):
        return False
    profile, _created = Profile.objects.get_or_create(user=user)
    if profile.sign_in_source in ("", source):
        if not profile.sign_in_source:
            profile.sign_in_source = source
            profile.save(update_fields=["sign_in_source"])
        return True
    return False
