"""Two-factor sign-in from the command line (docs/operations.md,
"Two-factor sign-in").

manage.py twofactor status [USER]   who has an authenticator app, recovery codes left
manage.py twofactor reset USER      remove a user's app and recovery codes (a lost
                                    phone); they set one up again at their next
                                    sign-in where CRONBOARD_REQUIRE_2FA asks for it
"""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from jobs import checks, twofactor
from jobs.i18n import activate_for_people_without_a_session
from jobs.management import user_named
from jobs.models import AuditEvent
from jobs.text import find_unstorable


class Command(BaseCommand):
    help = "Show users' two-factor sign-in, or reset it for a user who lost their phone."
    requires_system_checks = checks.FOR_COMMANDS

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        sub.add_parser("status", help="One line per user.").add_argument("user", nargs="?")
        sub.add_parser("reset", help="Remove a user's authenticator app and recovery codes.").add_argument(
            "user"
        )

    def handle(self, *args, action, **options):
        activate_for_people_without_a_session()
        checks.require_migrated()
        if find_unstorable([options.get("user") or ""]):
            raise CommandError(_("The user name contains text that cannot be stored."))
        getattr(self, f"do_{action}")(**options)

    def do_status(self, *, user=None, **_options):
        users = (
            [user_named(user)]
            if user
            else get_user_model().objects.filter(is_active=True).order_by("username")
        )
        for person in users:
            if twofactor.is_enrolled(person):
                state = _("on, {left} recovery codes left").format(left=twofactor.recovery_codes_left(person))
            else:
                state = _("off")
            if twofactor.required_for(person):
                state += " " + _("(required)")
            self.stdout.write(f"{person.get_username()}: {state}")

    def do_reset(self, *, user, **_options):
        person = user_named(user)
        if not twofactor.turn_off(person, via=AuditEvent.Via.CLI, reset=True):
            raise CommandError(_("{user} has no two-factor sign-in set up.").format(user=user))
        self.stdout.write(_("{user}: two-factor sign-in removed.").format(user=user))
