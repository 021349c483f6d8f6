from io import StringIO

from django.core.management import call_command


def test_migrations_match_models(db):
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=StringIO())
    # --check exits non-zero (SystemExit) when a migration is missing.
