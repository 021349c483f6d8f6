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
    """DEMO_MODE is on and the action would run something."""


class JobCrashed(ServiceError):
    """The job has crashed and the action would hide it (a pause): only a
    re-enable leaves that state."""


class NotRetryable(ServiceError):
    """The run is not one a retry applies to (see Run.RETRYABLE)."""


class ForbiddenError(ServiceError):
    """The user may not do this to this job (an SQL job, for a non-superuser)."""


class GraphRefused(ServiceError):
    """The job's `after` breaks a rule of the workflow graph (jobs.workflows),
    found under the graph lock: a save committed since the form checked it
    (two saves racing to close a loop). Nothing was written."""

    def __init__(self, error: ValidationError):
        self.error = error
        super().__init__(error.messages[0])

    def error_list(self) -> list[dict]:
        """[{code, message, field}], the shape of JobForm.error_list."""
        return [{"code": self.error.code, "message": self.error.messages[0], "field": "after"}]


def check_demo_mode(action: str) -> None:
    """Refuse `action` while demo mode is on: a demo shows jobs, it does not run them on request."""
    message = demo.refusal(action)
    if message:
        raise DemoModeError(message)


_PARTICIPLES = {
    "create or edit": gettext_noop("created or edited"),
    "resume": gettext_noop("resumed"),
    "re-enable": gettext_noop("re-enabled"),
}


def check_job_change(*, kinds: Iterable[str | None], user, action: str, runs: bool = True) -> None:
    """The one place that decides who may change which job. `kinds`: the
    job's kind before and after the change; `action`: "create or edit",
    "resume", "re-enable", "pause", "delete". Raises DemoModeError when
    DEMO_MODE is on and the change could make an HTTP or SQL job run
    (`runs`: create, edit, resume, re-enable), ForbiddenError when the job is
    or becomes an SQL job and `user` is not a superuser (user None: a trusted
    caller such as `manage.py jobs`). The job form asks the same question,
    so the console and the API show these as errors on `kind`."""
    kinds = {kind for kind in kinds if kind}
    guarded = [kind for kind in GUARDED_KINDS if kind in kinds]
    if runs and guarded and demo.is_on():
        label = _(" and ").join(kind.upper() for kind in guarded)
        raise DemoModeError(
            _("Demo mode: {kinds} jobs cannot be {done}.").format(
                kinds=label, done=_(_PARTICIPLES.get(action, action))
            )
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
