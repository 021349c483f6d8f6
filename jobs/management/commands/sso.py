"""What a sign-in through a directory or an identity provider would make
of a user, without signing in (docs/operations.md, "Groups to roles").

manage.py sso check USER [--source ldap]

Prints the groups the source has for USER and the roles the rules of
CRONBOARD_GROUP_ROLES give them. LDAP asks the directory now. Each source
answers through GROUP_LOOKUPS; one that cannot ask its provider without the
user's own sign-in (OpenID Connect) answers with the groups its last
sign-in brought."""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import checks, oidc, rolemapping
from jobs.i18n import activate_for_people_without_a_session
from jobs.models import GrantSource


@dataclass
class Lookup:
    """A source's answer: where it found the user (a DN, "last sign-in on
    …"), or found=False, and the user's groups."""

    found: bool
    where: str = ""
    groups: list[str] | None = None


def _ldap(username: str) -> Lookup | None:
    if not settings.LDAP_SERVER_URI:
        return None
    import ldap

    from jobs import ldapauth

    try:
        entry = ldapauth.groups_of(username)
    except ldap.LDAPError as exc:
        raise CommandError(
            _("The directory {uri} could not be asked: {error}").format(
                uri=settings.LDAP_SERVER_URI, error=_ldap_message(exc)
            )
        ) from None
    if entry is None:
        return Lookup(found=False)
    return Lookup(found=True, where=entry.dn, groups=entry.groups)


def _ldap_message(exc) -> str:
    detail = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    return " ".join(str(detail.get(key, "")) for key in ("desc", "info")).strip() or str(exc)


def _oidc(username: str) -> Lookup | None:
    if not oidc.enabled():
        return None
    seen = oidc.last_sign_in(username)
    if seen is None:
        return Lookup(found=False)
    when = timezone.localtime(seen.at).strftime("%Y-%m-%d %H:%M %Z")
    return Lookup(
        found=True, where=_("known from their last sign-in, {when}").format(when=when), groups=seen.groups
    )


# source → how to find a user's groups there; None when the source is not
# configured. A source added here is offered by --source.
GROUP_LOOKUPS: dict[str, Callable[[str], Lookup | None]] = {GrantSource.LDAP: _ldap, GrantSource.OIDC: _oidc}


class Command(BaseCommand):
    help = "Show the groups a directory or identity provider has for a user and the roles they map to."
    requires_system_checks = checks.FOR_COMMANDS

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        p = sub.add_parser("check", help="The groups of USER and the roles they map to, without signing in.")
        p.add_argument("user")
        p.add_argument(
            "--source",
            choices=sorted(GROUP_LOOKUPS),
            help="Only this source (default: every one configured).",
        )

    def handle(self, *args, action, user, source=None, **options):
        activate_for_people_without_a_session()
        rules = rolemapping.configured_rules()
        sources = [source] if source else sorted(GROUP_LOOKUPS)
        answered = False
        for name in sources:
            lookup = GROUP_LOOKUPS[name](user)
            if lookup is None:
                if source:
                    raise CommandError(
                        _("{source} is not configured.").format(source=GrantSource(name).label)
                    )
                continue
            answered = True
            self._report(GrantSource(name), user, lookup, rules)
        if not answered:
            raise CommandError(
                _(
                    "No directory or identity provider is configured (LDAP_SERVER_URI, OIDC_ISSUER; "
                    "see docs/operations.md)."
                )
            )

    def _report(self, source, user, lookup: Lookup, rules) -> None:
        label = source.label
        if not lookup.found:
            self.stdout.write(_("{source}: no user “{user}”.").format(source=label, user=user))
            return
        self.stdout.write(
            _("{source}: {user} is {where}").format(source=label, user=user, where=lookup.where)
        )
        groups = lookup.groups or []
        self.stdout.write(_("Groups ({count}):").format(count=len(groups)))
        for group in groups:
            self.stdout.write(f"  {group}")
        matched = rolemapping.matching_rules(groups, rules)
        if not matched:
            self.stdout.write(
                _(
                    "No rule of CRONBOARD_GROUP_ROLES matches these groups: a sign-in gives no role, "
                    "and without one given by hand it is refused."
                )
            )
            return
        self.stdout.write(_("Rules that match:"))
        for rule in matched:
            self.stdout.write(f"  {rule}")
        self.stdout.write(_("Roles a sign-in gives:"))
        for namespace, role in sorted(
            rolemapping.roles_for_groups(groups, rules).items(), key=lambda item: item[0] or ""
        ):
            self.stdout.write(f"  {rolemapping.scope_label(role, namespace)}")
