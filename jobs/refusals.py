"""Why a change a person or program asks for is refused: the services'
errors (each door answers them in its own shape: a form error, a coded API
error, a command's message) and the checks every door asks before a change
(demo mode, who may change which kind of job, a save that lost to another
writer over locks)."""

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import OperationalError
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop

from jobs import access, cron
from jobs.core import demo
from jobs.kinds import GUARDED_KINDS, SUPERUSER_KINDS
from jobs.models import Job


class StaleJobError(Exception):
    """The job changed since the editor loaded it."""


class SaveBusy(StaleJobError):
    """The save waited too long for a lock, or the database chose it as the
    loser of a deadlock with another writer (the scheduler claiming fires, a
    long `jobs import`). Nothing was written; the same save may succeed when
    tried again."""


# SQLSTATEs of a transaction that lost to another over locks: deadlock
# detected, serialization failure, lock not available (lock_timeout).
LOCK_CONFLICTS = frozenset({"40P01", "40001", "55P03"})
# SQLite's: the busy timeout ran out (config/settings.py).
SQLITE_LOCK_CONFLICTS = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED"})


def is_lock_conflict(exc: BaseException) -> bool:
    """Whether a failed write lost to another writer over locks, rather than
    failing for what it wrote: the save is answered as busy (SaveBusy)."""
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    return (
        getattr(cause, "sqlstate", None) in LOCK_CONFLICTS
        or getattr(cause, "sqlite_errorname", None) in SQLITE_LOCK_CONFLICTS
    )


class ServiceError(Exception):
    """An action that does not apply to the job as it is (e.g. resuming a deleted job)."""


class DemoModeError(ServiceError):
    """DEMO_MODE is on and the action would run something or reach outside
    the demo. `field`: the job field that asked for it, when one did."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class JobCrashed(ServiceError):
    """The job has crashed and the action would hide it (a pause): only a
    re-enable leaves that state."""


class NotRetryable(ServiceError):
    """The run is not one a retry applies to (see Run.RETRYABLE)."""


class ForbiddenError(ServiceError):
    """The user may not do this to this job (an SQL job, for a non-superuser;
    a namespace their role does not reach: `field` "namespace")."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class CodedRefusal(ServiceError):
    """A change refused with the spec's numeric code (docs/api.md) and the
    field it concerns: the API answers it as a 400 of that code, a form as
    the field's error, a command as its message. Nothing was written."""

    def __init__(self, message: str, *, code: str, field: str):
        super().__init__(message)
        self.code = code
        self.field = field

    def error_list(self) -> list[dict]:
        """[{code, message, field}], the shape of JobForm.error_list."""
        return [{"code": self.code, "message": str(self), "field": self.field}]


class GraphRefused(ServiceError):
    """The job's `after` breaks a rule of the workflow graph (jobs.workflows),
    found under the graph lock: a save committed since the form checked it
    (two saves racing to close a loop). Nothing was written."""

    def __init__(self, error: ValidationError, field: str = "after"):
        self.error = error
        self.field = field
        super().__init__(error.messages[0])

    def error_list(self) -> list[dict]:
        """[{code, message, field}], the shape of JobForm.error_list."""
        return [{"code": self.error.code, "message": self.error.messages[0], "field": self.field}]


def check_demo_mode(action: str) -> None:
    """Refuse `action` while demo mode is on: a demo shows jobs, it does not run them on request."""
    message = demo.refusal(action)
    if message:
        raise DemoModeError(message)


def require_admin(user, what: str) -> None:
    """Refuse a change of what only an administrator everywhere changes
    (channels, pools, calendars, secrets). `what`: the change's words,
    marked with gettext_noop ("change alert channels"); `user` None: a
    trusted caller such as a command."""
    if user is not None and not access.can_administer(user):
        raise ForbiddenError(_("Only an administrator may {what}.").format(what=_(what)))


def fires_more_than_once_a_minute(*, schedule_type: str, cron_expression: str, interval_seconds) -> bool:
    """Whether a schedule may fire twice within one minute: an interval
    under demo.MIN_PERIOD_SECONDS, or a cron expression with more than one
    value in its seconds field. An invalid schedule answers False: the job
    form reports it."""
    if schedule_type == Job.ScheduleType.INTERVAL:
        return isinstance(interval_seconds, int) and interval_seconds < demo.MIN_PERIOD_SECONDS
    if schedule_type == Job.ScheduleType.CRON and cron_expression:
        try:
            return len(cron.parse(cron_expression).seconds) > 1
        except cron.CronError:
            return False
    return False


# The job fields check_demo_job_fields reads.
DEMO_JOB_FIELDS = ("alert_channels", "state", "schedule_type", "cron_expression", "interval_seconds")


def demo_job_fields(job: Job) -> dict:
    return {name: getattr(job, name) for name in DEMO_JOB_FIELDS}


def check_demo_job_fields(*, before: dict | None, after: dict) -> None:
    """What demo mode refuses in a job's fields whatever its kind, at every
    door (the job form asks, and services.save_job again): a change of its
    alert channels (each alert would reach a URL of the editor's choosing),
    a paused job set to enabled (a resume), and a new or changed schedule
    that fires more than once a minute. `before`: the stored job's fields
    (None for a new job); `after`: the fields to be saved. Raises
    DemoModeError naming the field."""
    if not demo.is_on():
        return
    before = before or {}
    if list(before.get("alert_channels") or []) != list(after.get("alert_channels") or []):
        raise DemoModeError(demo.refusal("changing alert channels"), field="alert_channels")
    if before.get("state") == Job.State.PAUSED and after.get("state") == Job.State.ENABLED:
        raise DemoModeError(demo.refusal("resuming a paused job"), field="state")
    schedule = {name: after.get(name) for name in ("schedule_type", "cron_expression", "interval_seconds")}
    changed = any(before.get(name) != value for name, value in schedule.items())
    if changed and fires_more_than_once_a_minute(**schedule):
        field = (
            "interval_seconds"
            if schedule["schedule_type"] == Job.ScheduleType.INTERVAL
            else "cron_expression"
        )
        raise DemoModeError(demo.refusal("a schedule faster than once a minute"), field=field)


_DEMO_JOB_ACTIONS = {
    "create or edit": gettext_noop("creating or editing {kinds} jobs"),
    "resume": gettext_noop("resuming {kinds} jobs"),
    "re-enable": gettext_noop("re-enabling {kinds} jobs"),
    "override the properties of": gettext_noop("overriding the properties of {kinds} jobs"),
}
# For an action the table does not word: still the one demo sentence, not a KeyError.
_DEMO_JOB_OTHER_ACTION = gettext_noop("changing {kinds} jobs")


# The role each job action needs in the job's namespace (jobs.access).
_ACTION_ROLES = {
    "create or edit": access.EDIT,
    "delete": access.EDIT,
    "override the credentials of": access.EDIT,
    "run now": access.OPERATE,
    "override the properties of": access.OPERATE,
    "pause": access.OPERATE,
    "resume": access.OPERATE,
    "re-enable": access.OPERATE,
    "cancel": access.OPERATE,
    "acknowledge": access.OPERATE,
    "backfill": access.EDIT,
}


def check_job_change(
    *,
    kinds: Iterable[str | None],
    user,
    action: str,
    runs: bool = True,
    namespaces: Iterable[str | None] = (),
) -> None:
    """The one place that decides who may change which job. `kinds`: the
    job's kind before and after the change; `namespaces`: its namespace
    before and after; `action`: a key of _ACTION_ROLES. Raises
    ForbiddenError when `user` lacks the action's role in one of the
    namespaces (jobs.access), DemoModeError when
    DEMO_MODE is on and the change could make an HTTP or SQL job run
    (`runs`: create, edit, resume, re-enable), ForbiddenError when the job is
    or becomes an SQL job and `user` is not a superuser (user None: a trusted
    caller such as `manage.py jobs`). The job form asks the same question,
    so the console and the API show these as errors on `kind`."""
    if user is not None:
        for namespace in {ns for ns in namespaces if ns is not None}:
            if not access.can(user, _ACTION_ROLES[action], namespace=namespace):
                where = (
                    _("namespace “{namespace}”").format(namespace=namespace)
                    if namespace
                    else _("no namespace")
                )
                raise ForbiddenError(
                    _("Your role may not {action} jobs in {where}.").format(
                        action=_(demo.ACTION_WORDS.get(action, action)), where=where
                    ),
                    field="namespace",
                )
    kinds = {kind for kind in kinds if kind}
    guarded = [kind for kind in GUARDED_KINDS if kind in kinds]
    if runs and guarded and demo.is_on():
        label = _(" and ").join(kind.upper() for kind in guarded)
        raise DemoModeError(
            demo.disabled(_(_DEMO_JOB_ACTIONS.get(action, _DEMO_JOB_OTHER_ACTION)).format(kinds=label))
        )
    restricted = [kind for kind in SUPERUSER_KINDS if kind in kinds]
    if restricted and user is not None and not getattr(user, "is_superuser", False):
        label = _(" and ").join("SQL" if kind == Job.Kind.SQL else kind for kind in restricted)
        raise ForbiddenError(
            _("Only superusers can {action} {kinds} jobs.").format(
                action=_(demo.ACTION_WORDS.get(action, action)), kinds=label
            )
        )


BUSY_MESSAGE = gettext_lazy(
    "Other changes were being saved at the same moment, so this one was not saved. "
    "Reload the page, then make your change again."
)

STALE_MESSAGE = gettext_lazy(
    "This job was changed by someone else after you opened it. "
    "Reload the page to see the current version, then make your change again."
)
