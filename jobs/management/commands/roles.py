"""Roles from the command line (docs/operations.md, "Roles and namespaces").

manage.py roles grant USER ROLE [--namespace NS]   ROLE: viewer, operator, editor, admin;
                                                   everywhere unless --namespace ("" for
                                                   the jobs outside any namespace)
manage.py roles revoke USER [--namespace NS]
manage.py roles list [USER]
"""

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from jobs import checks, roles
from jobs.forms import NAMESPACE_RE
from jobs.i18n import activate_for_people_without_a_session
from jobs.management import user_named
from jobs.models import AuditEvent, Role, RoleGrant
from jobs.text import find_unstorable

CLI = AuditEvent.Via.CLI


class Command(BaseCommand):
    help = "Grant, revoke and list users' roles, everywhere or per namespace."
    requires_system_checks = checks.FOR_COMMANDS

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        p = sub.add_parser("grant", help="Give a user a role (replacing the one they hold there).")
        p.add_argument("user")
        p.add_argument("role", choices=Role.values)
        p.add_argument("--namespace", default=None, help="Only in this namespace (default: everywhere).")
        p = sub.add_parser("revoke", help="Take a user's role away.")
        p.add_argument("user")
        p.add_argument("--namespace", default=None, help="The namespace's role (default: the global one).")
        sub.add_parser("list", help="One line per grant.").add_argument("user", nargs="?")

    def handle(self, *args, action, **options):
        activate_for_people_without_a_session()
        checks.require_migrated()
        if find_unstorable([options.get("user") or "", options.get("namespace") or ""]):
            raise CommandError(_("The user or namespace contains text that cannot be stored."))
        namespace = options.get("namespace")
        if namespace and (len(namespace) > 100 or not NAMESPACE_RE.fullmatch(namespace)):
            raise CommandError(_("“{namespace}” is not a namespace.").format(namespace=namespace))
        getattr(self, f"do_{action}")(**options)

    def do_grant(self, *, user, role, namespace, **_options):
        roles.grant_role(user=user_named(user), role=role, namespace=namespace, via=CLI)
        self.stdout.write(
            _("{user}: {role} {where}.").format(user=user, role=role, where=roles.where(namespace))
        )

    def do_revoke(self, *, user, namespace, **_options):
        if not roles.revoke_role(user=user_named(user), namespace=namespace, via=CLI):
            raise CommandError(
                _("{user} holds no role {where}.").format(user=user, where=roles.where(namespace))
            )
        self.stdout.write(_("{user}: no role {where}.").format(user=user, where=roles.where(namespace)))

    def do_list(self, *, user=None, **_options):
        grants = RoleGrant.objects.select_related("user", "group").order_by("user__username", "group__name")
        if user:
            grants = grants.filter(user=user_named(user))
        for grant in grants:
            holder = (
                grant.user.get_username()
                if grant.user_id
                else _("group {name}").format(name=grant.group.name)
            )
            # A grant a sign-in keeps says which (ldap, oidc): it changes with the groups.
            source = f"\t{grant.source}" if grant.source else ""
            self.stdout.write(f"{holder}\t{grant.role}\t{roles.where(grant.namespace)}{source}")
