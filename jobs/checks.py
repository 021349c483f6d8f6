"""System checks (`manage.py check`, and before migrate, runscheduler…).

Importing the settings creates no folders, so a SQLite database whose folder
does not exist would fail later with SQLite's bare "unable to open database
file"; this says which folder to create instead."""

from pathlib import Path

from django.conf import settings
from django.core.checks import Error, register

# The tag of Cronboard's own checks, which the scheduler runs with the models'
# (runscheduler's requires_system_checks) while `manage.py check` runs all.
TAG = "cronboard"


@register(TAG)
def sqlite_folder_exists(app_configs=None, **kwargs):
    return sqlite_folder_errors(settings.DATABASES["default"])


def sqlite_folder_errors(database: dict) -> list[Error]:
    if database["ENGINE"] != "django.db.backends.sqlite3":
        return []
    name = str(database["NAME"])
    if name == ":memory:" or name.startswith("file:"):
        return []
    folder = Path(name).parent
    if folder.is_dir():
        return []
    return [
        Error(
            f"DATABASE_URL: the folder of the SQLite database does not exist: {folder}",
            hint=f"Create it (mkdir -p {folder}); scripts/run.sh creates var/ for the default database.",
            id="cronboard.E001",
        )
    ]
