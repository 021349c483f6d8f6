"""Secrets from the command line. A value is read from stdin, never from
the command line (which `ps` and shell histories show).

manage.py secrets set NAME [--description TEXT] [--namespaces A,B]
                                                  value from stdin (one trailing
                                                  newline dropped); --namespaces ""
                                                  lets every namespace use it
manage.py secrets list                            names, “set on … by …”, namespaces, descriptions
manage.py secrets delete NAME
manage.py secrets rotate                          re-encrypt every value with SECRET_KEY's key
"""

import sys

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from jobs import checks, refusals, secrets, services
from jobs.i18n import activate_for_people_without_a_session
from jobs.models import AuditEvent, Secret
from jobs.text import find_unstorable

CLI = AuditEvent.Via.CLI


class Command(BaseCommand):
    help = "Set, list, delete and re-encrypt secrets."
    requires_system_checks = checks.FOR_COMMANDS

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        p = sub.add_parser("set", help="Create or replace a secret; its value is read from stdin.")
        p.add_argument("name")
        p.add_argument("--description", default=None, help="What the secret is for (kept when not given).")
        p.add_argument(
            "--namespaces",
            default=None,
            help='The namespaces whose jobs may use it, separated by commas ("": every namespace; '
            "kept when not given).",
        )
        sub.add_parser("list", help="One line per secret (never its value).")
        sub.add_parser("delete", help="Delete a secret.").add_argument("name")
        sub.add_parser("rotate", help="Re-encrypt every value with SECRET_KEY's key (after a key rotation).")

    def handle(self, *args, action, **options):
        activate_for_people_without_a_session()
        checks.require_migrated()
        # Bytes on the command line that are not UTF-8 arrive as lone
        # surrogates: refused here, before a query or a message trips on them.
        typed = [options.get(key) or "" for key in ("name", "description", "namespaces")]
        if problem := find_unstorable(typed):
            raise CommandError(
                _("The name or description contains {problem}, which cannot be stored.").format(
                    problem=problem
                )
            )
        try:
            getattr(self, f"do_{action}")(**options)
        except ImproperlyConfigured as exc:  # no SECRET_KEY that every process shares
            raise CommandError(str(exc)) from None

    def do_set(self, *, name, description, namespaces, **_options):
        if sys.stdin.isatty():
            self.stderr.write(_("Type the value, then Ctrl-D:"))
        # One byte past the limit is enough to refuse it (and a newline).
        raw = sys.stdin.buffer.read(secrets.MAX_VALUE_BYTES + 2)
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        # Bytes that are not UTF-8 become lone surrogates, which the value's
        # check refuses as text that cannot be stored.
        value = raw.decode(errors="surrogateescape")
        try:
            services.set_secret(
                name=name, value=value, description=description, namespaces=namespaces, via=CLI
            )
        except ValidationError as exc:
            raise CommandError(exc.messages[0]) from None
        except refusals.DemoModeError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(_("Secret “{name}” saved.").format(name=name))

    def do_list(self, **_options):
        for secret in Secret.objects.all():
            line = f"{secret.name}\t{secrets.describe(secret)}"
            line += "\t" + (
                _("namespaces: {names}").format(names=", ".join(secret.namespaces))
                if secret.namespaces
                else _("every namespace")
            )
            if secret.description:
                line += f"\t{secret.description}"
            self.stdout.write(line)

    def do_delete(self, *, name, **_options):
        try:
            deleted = services.delete_secret(name=name, via=CLI)
        except refusals.DemoModeError as exc:
            raise CommandError(str(exc)) from None
        if not deleted:
            raise CommandError(_("No secret named “{name}”.").format(name=name))
        self.stdout.write(_("Secret “{name}” deleted.").format(name=name))

    def do_rotate(self, **_options):
        rotated, unreadable = secrets.rotate_all()
        self.stdout.write(_("{count} secret(s) re-encrypted.").format(count=rotated))
        if unreadable:
            raise CommandError(
                _("No key reads these secrets (set them again): {names}").format(names=", ".join(unreadable))
            )
