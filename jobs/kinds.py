"""The table of job kinds (python, http, sql, command): for each, whether this
server runs it, which of its properties the job form edits as fields of
their own, how its properties are validated, which handler runs it, and who
may change a job of that kind. The form, the API, services, the console and
the executor read it here."""

from collections.abc import Callable
from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.utils.module_loading import import_string
from django.utils.translation import gettext_lazy

from jobs import secrets
from jobs.handlers import registry
from jobs.models import Job


def _no_property_errors(properties: dict, *, write: bool) -> list:
    return []


def _http_property_errors(properties: dict, *, write: bool) -> list:
    from jobs.handlers.http import validate_http_properties

    return [
        (field, ValidationError(message, code="fence" if field == "url" else "invalid"))
        for field, message in validate_http_properties(properties).items()
    ]


def _sql_property_errors(properties: dict, *, write: bool) -> list:
    from jobs.handlers.sql import validate_sql_properties

    return [
        (field, ValidationError(message, code="invalid"))
        for field, message in validate_sql_properties(properties, write=write).items()
    ]


def _command_property_errors(properties: dict, *, write: bool) -> list:
    from jobs.handlers.command import validate_command_properties

    return [
        (field, ValidationError(refusal.message, code=refusal.code))
        for field, refusal in validate_command_properties(properties).items()
    ]


@dataclass(frozen=True)
class JobKind:
    value: str
    # The handler class that runs a job of this kind, as a dotted path; ""
    # for the registered handler the job names (jobs.handlers.registry).
    handler: str
    # [(field, ValidationError)] for the kind's own rules on its (coerced)
    # properties; `write`: the job's sql_write.
    property_errors: Callable[..., list]
    # Properties the job form edits as fields of their own (the API names
    # them `properties.<name>` in its errors; the console's property bag
    # leaves them out).
    fields: tuple[str, ...] = ()
    # Property defaults the form fills in when they are left out.
    defaults: tuple[tuple[str, str], ...] = ()
    # The handler module's switch (a dotted path to a function returning
    # whether this server runs the kind; "": always).
    switch: str = ""
    # What the job form says on `kind` while the switch is off, before any
    # other check; empty: the kind's property check says it.
    off_message: str = ""
    # It reaches outside the process (the network, a database, the host):
    # demo mode refuses to create, edit or run it.
    reaches_out: bool = False
    # Only superusers may create, edit, or run it with other properties.
    superuser_only: bool = False

    def enabled(self) -> bool:
        return not self.switch or bool(import_string(self.switch)())

    def handler_class(self, name: str) -> type:
        """The handler class that runs a job of this kind named `name`
        (registry.UnknownHandler for a python job whose name is unknown)."""
        return import_string(self.handler) if self.handler else registry.get(name)


HTTP_FIELDS = ("url", "method", "headers", "body")
SQL_FIELDS = ("sql",)

KINDS: dict[str, JobKind] = {
    Job.Kind.PYTHON: JobKind(Job.Kind.PYTHON, handler="", property_errors=_no_property_errors),
    Job.Kind.HTTP: JobKind(
        Job.Kind.HTTP,
        handler="jobs.handlers.http.HttpJobHandler",
        property_errors=_http_property_errors,
        fields=HTTP_FIELDS,
        defaults=(("method", "GET"),),
        reaches_out=True,
    ),
    Job.Kind.SQL: JobKind(
        Job.Kind.SQL,
        handler="jobs.handlers.sql.SqlJobHandler",
        property_errors=_sql_property_errors,
        fields=SQL_FIELDS,
        switch="jobs.handlers.sql.sql_enabled",
        off_message=gettext_lazy("SQL jobs are turned off on this server (JOBS_SQL_ENABLED)."),
        reaches_out=True,
        superuser_only=True,
    ),
    Job.Kind.COMMAND: JobKind(
        Job.Kind.COMMAND,
        handler="jobs.handlers.command.CommandJobHandler",
        property_errors=_command_property_errors,
        switch="jobs.handlers.command.command_enabled",
        reaches_out=True,
        superuser_only=True,
    ),
}
assert set(KINDS) == set(Job.Kind.values), "every kind of job has a row"

# {kind: the properties the form edits as fields} for the kinds that have any.
KIND_FIELDS = {kind.value: kind.fields for kind in KINDS.values() if kind.fields}
PROPERTY_FIELDS = frozenset(name for kind in KINDS.values() for name in kind.fields)
# Kinds that reach outside the process, and kinds only superusers may change.
GUARDED_KINDS = tuple(kind.value for kind in KINDS.values() if kind.reaches_out)
SUPERUSER_KINDS = tuple(kind.value for kind in KINDS.values() if kind.superuser_only)


def get(kind: str | None) -> JobKind:
    """The row of `kind` (a blank kind is a python job, the model's default)."""
    return KINDS[kind or Job.Kind.PYTHON]


def never_starts(job: Job) -> bool:
    """Nothing starts the job on its own (Job.nothing_schedules_it) and its
    handler is no task handler, which code starts when it has work for it
    (registry.register's `task`): the job page and the list warn about it."""
    return job.nothing_schedules_it and not (get(job.kind).handler == "" and registry.is_task(job.handler))


def property_errors(
    kind: str, properties: dict, *, sql_write: bool = False, namespace: str | None = None
) -> list:
    """[(field, ValidationError)] for a job kind's own rules on its (already
    coerced) properties: the one check for a job's properties and for a run's
    overrides merged over them. A reference to a secret that does not exist,
    or that jobs in the job's `namespace` may not use, is refused first
    (jobs.secrets)."""
    refused = secrets.unknown_errors(properties, namespace=namespace) or secrets.clear_credential_errors(
        properties
    )
    if refused:
        return refused
    row = KINDS.get(kind)
    # The kind's rules read a placeholder where a secret is referenced: its
    # value is not known here, and only a run ever reads it.
    return row.property_errors(secrets.with_placeholders(properties), write=sql_write) if row else []


def offered_choices(current: str | None = None) -> list[tuple[str, str]]:
    """The kinds a job form offers: those this server runs, and the kind a
    stored job already has (so it stays editable with its switch off)."""
    return [(value, label) for value, label in Job.Kind.choices if value == current or KINDS[value].enabled()]


def handler_for(kind: str, name: str):
    """An instance of the handler that runs a job of `kind` named `name`."""
    return get(kind).handler_class(name)()
