"""Compile the console's translation catalogs (locale/*/LC_MESSAGES/*.po →
.mo) with polib, so a machine without GNU gettext's msgfmt (a slim Docker
image, a fresh laptop) still gets them. The .mo files are build output and
never committed: scripts/run.sh, scripts/test.sh and the Dockerfile call this."""

import os
from pathlib import Path

import polib
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


def catalogs() -> list[Path]:
    return sorted(path for base in settings.LOCALE_PATHS for path in Path(base).glob("*/LC_MESSAGES/*.po"))


def compile_catalogs() -> list[Path]:
    """Write each catalog's .mo beside it when the .po is newer; returns those written."""
    written = []
    for po_path in catalogs():
        mo_path = po_path.with_suffix(".mo")
        if mo_path.exists() and mo_path.stat().st_mtime >= po_path.stat().st_mtime:
            continue
        try:
            catalog = polib.pofile(str(po_path))
        except (OSError, ValueError) as exc:
            raise CommandError(f"{po_path}: {exc}") from exc
        # Fuzzy entries are left out, as msgfmt does: a guess is never shown.
        # Written aside and renamed: test workers (pytest-xdist) compile at
        # once, and none may read a half-written catalog.
        partial = mo_path.with_name(f"{mo_path.name}.{os.getpid()}.tmp")
        catalog.save_as_mofile(str(partial))
        os.replace(partial, mo_path)
        written.append(mo_path)
    return written


class Command(BaseCommand):
    help = "Compile the translation catalogs under LOCALE_PATHS (.po → .mo) with polib."

    def handle(self, *args, **options):
        written = compile_catalogs()
        if options["verbosity"] >= 1:
            for path in written:
                self.stdout.write(f"compiled {path.relative_to(settings.BASE_DIR)}")
