"""Bring the translation catalogs up to date with the sources: Django's
makemessages (GNU xgettext) for the Python and template strings (domain
`django`) and the console's scripts (domain `djangojs`), for every language
in settings.LANGUAGES but English, the source language. Then translate the
new entries in locale/<lang>/LC_MESSAGES/*.po (tests/test_i18n.py fails on
any left empty or fuzzy) and run compilecatalogs."""

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.utils.translation import to_locale

DOMAINS = ("django", "djangojs")
# Not sources: build output, data, the tests, the catalogs themselves.
IGNORED = ["staticfiles", "var", "tests", "docs", "mutants", "locale", ".venv"]


def target_locales() -> list[str]:
    return [to_locale(code) for code, _name in settings.LANGUAGES if code != settings.LANGUAGE_CODE]


def make_messages(*, verbosity: int = 0) -> None:
    """makemessages for each domain and locale, into the catalogs under the current directory's LOCALE_PATHS."""
    for domain in DOMAINS:
        call_command(
            "makemessages",
            locale=target_locales(),
            domain=domain,
            ignore_patterns=IGNORED,
            no_location=True,  # line numbers would churn the catalog on every edit
            verbosity=verbosity,
        )


class Command(BaseCommand):
    help = "Update locale/*/LC_MESSAGES/django.po and djangojs.po from the sources (needs GNU xgettext)."

    def handle(self, *args, **options):
        make_messages(verbosity=options["verbosity"])
