"""`manage.py fence URL [URL ...]`: would the fence let an HTTP job call these?

Prints one line per URL, in the order given: `allowed` or `blocked: <reason>`
(the reason names the address and the rule), using the same check as saving
a job (real DNS), and exits 1 if any URL is blocked. With `-v 2` each line is
prefixed with its URL.
"""

from django.core.management.base import BaseCommand, CommandError
from django.utils.translation import gettext as _

from jobs.fence import FenceError, check_url


class Command(BaseCommand):
    help = "Check URLs against the HTTP job fence; exits 1 if any is blocked."
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("urls", nargs="+", metavar="URL")

    def handle(self, *args, urls, verbosity=1, **options):
        blocked = 0
        for url in urls:
            prefix = f"{url if url.isprintable() else repr(url)}: " if verbosity >= 2 else ""
            try:
                check_url(url)
            except FenceError as exc:
                blocked += 1
                self.stdout.write(_("{prefix}blocked: {reason}").format(prefix=prefix, reason=exc.reason))
            else:
                self.stdout.write(_("{prefix}allowed").format(prefix=prefix))
        if blocked:
            raise CommandError(
                _("{blocked} of {value} URLs blocked").format(blocked=blocked, value=len(urls)), returncode=1
            )
