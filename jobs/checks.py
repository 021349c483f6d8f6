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

from jobs.text import first_names

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


@register(TAG)
def group_roles_readable(app_configs=None, **kwargs):
    """CRONBOARD_GROUP_ROLES: every rule names a group, a role and a scope."""
    from jobs import rolemapping

    try:
        rolemapping.parse_mapping(settings.CRONBOARD_GROUP_ROLES)
    except rolemapping.MappingError as exc:
        return [
            Error(
                f"CRONBOARD_GROUP_ROLES: {exc}",
                hint="Write one rule per line or separated by ;, as GROUP → ROLE:NAMESPACE, "
                "for example  payments-dev → editor:billing  or  cn=sre,ou=groups,dc=corp → operator:*",
                id="cronboard.E002",
            )
        ]
    return []


def stored_refusals() -> list[str]:
    """What was stored before this release's stricter rules and is refused
    by them now, a sentence per kind with the count and the first names:
    command jobs the command guard refuses (JOBS_COMMAND_ENV_ALLOWED,
    JOBS_COMMAND_ALLOWED), read-only SQL jobs refused by their text or by the
    SQL role, jobs naming an environment secret their namespace is not
    given, and named alert channels with a scheme Cronboard no longer
    sends to. One query per kind, no DNS lookup.
    runscheduler warns with them at its start; the Settings page shows them."""
    from jobs import channels, kinds
    from jobs.handlers import command, sql
    from jobs.models import AlertChannel, Job

    found = []
    if kinds.get(Job.Kind.COMMAND).enabled():
        refused = {}
        for name, props in Job.objects.live().filter(kind=Job.Kind.COMMAND).values_list("name", "properties"):
            errors = command.validate_command_properties(props if isinstance(props, dict) else {})
            if errors:
                refused[name] = next(iter(errors.values())).message
        if refused:
            first = next(iter(refused.values()))
            found.append(
                f"{len(refused)} command job(s) are refused by the command guard and their runs fail until "
                f"they are edited or JOBS_COMMAND_ENV_ALLOWED / JOBS_COMMAND_ALLOWED allow them: "
                f"{first_names(list(refused))} (the first: {first})"
            )
    if kinds.get(Job.Kind.SQL).enabled():
        read_only = list(
            Job.objects.live().filter(kind=Job.Kind.SQL, sql_write=False).values_list("name", "properties")
        )
        by_text = [
            name
            for name, props in read_only
            if sql.read_only_problem(str((props or {}).get("sql") or "") if isinstance(props, dict) else "")
        ]
        if by_text:
            found.append(
                f"{len(by_text)} read-only SQL job(s) are refused by their statement's text (COPY to a file "
                f"or program, server functions, advisory locks, DO/EXECUTE): {first_names(by_text)}"
            )
        if read_only:
            import psycopg

            try:
                powers = sql.configured_role_powers()
            except psycopg.Error:  # role_warnings() says so already
                powers = None
            if powers is not None and powers.problems():
                found.append(
                    f"{len(read_only)} read-only SQL job(s) are refused because SQL jobs run as "
                    f"{powers.user}: {first_names([name for name, _props in read_only])}; set "
                    "JOBS_SQL_DATABASE_URL to a role of their own (docs/operations.md, “A role for SQL jobs”)"
                )
    env_refused = _env_secrets_refused(Job)
    if env_refused:
        found.append(
            f"{len(env_refused)} job(s) name an environment secret that CRONBOARD_ENV_SECRET_NAMESPACES "
            f"does not give their namespace, and their runs fail until it does: {first_names(env_refused)}"
        )
    refused_channels = [
        name
        for name, token in AlertChannel.objects.values_list("name", "url")
        if _refused_channel([token], channels)
    ]
    if refused_channels:
        found.append(
            f"alert channels with a scheme Cronboard no longer sends to, whose deliveries fail: "
            f"{first_names(refused_channels)}; edit them, or allow the scheme with ALERT_CHANNEL_UNFENCED_SCHEMES"
        )
    return found


def _env_secrets_refused(Job) -> list[str]:
    """The live jobs of a namespace whose properties name an {{ env:NAME }}
    the setting does not give that namespace (jobs.secrets.env_allows)."""
    from jobs import secrets

    return [
        name
        for name, namespace, props in Job.objects.live()
        .exclude(namespace="")
        .order_by("name")
        .values_list("name", "namespace", "properties")
        if isinstance(props, dict)
        and any(
            match.group(2) and not secrets.env_allows(match.group(2), namespace)
            for value in props.values()
            for match in secrets.REFERENCE_RE.finditer(str(value))
        )
    ]


def _refused_channel(tokens, channels) -> bool:
    for token in tokens if isinstance(tokens, list) else []:
        url = channels.reveal(token)
        if url is None:
            continue
        try:
            channels.check_schema(url)
        except channels.ChannelRefused:
            return True
    return False
