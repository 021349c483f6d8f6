"""System checks (`manage.py check`, and before migrate, runscheduler…), and
what the commands that use Cronboard's tables check before they start
(`require_migrated`).

Importing the settings creates no folders, so a SQLite database whose folder
does not exist would fail later with SQLite's bare "unable to open database
file"; this says which folder to create instead."""

from pathlib import Path

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django.utils.translation import gettext as _

# The tag of Cronboard's own checks.
TAG = "cronboard"

# What the commands that serve no page check (their requires_system_checks:
# runscheduler, jobs, cluster): the models and Cronboard's own, not the web
# side's (URLs, templates, admin, security), whose URL check imports every view
# and builds the API's schemas, 0.2-0.3 s of CPU at each start and their memory
# for the life of the process. `manage.py check` runs them all.
FOR_COMMANDS = [Tags.models, TAG]


def require_migrated() -> None:
    """Raise a CommandError naming what to run if the database has
    migrations not applied: the commands that read and write Cronboard's
    tables call it first, so a new or half-upgraded database gets one
    sentence instead of a traceback on the first missing table or column.
    (Not a system check: `migrate` runs every check before it migrates.)"""
    executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        first = plan[0][0]
        raise CommandError(
            _(
                "The database is not migrated: %(count)d migrations are not applied (the first: %(name)s). Run  python manage.py migrate  first."
            )
            % {"count": len(plan), "name": f"{first.app_label}.{first.name}"}
        )


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
