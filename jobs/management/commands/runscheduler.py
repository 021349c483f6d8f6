"""python manage.py runscheduler [--once]"""

import fcntl
import logging
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import checks
from jobs.core import logcontext
from jobs.engine import metrics as engine_metrics
from jobs.engine.leadership import WorkerIdInUse
from jobs.engine.loop import Scheduler
from jobs.handlers.command import log_cgroup_warnings
from jobs.handlers.sql import log_role_warnings
from jobs.i18n import activate_for_people_without_a_session

log = logging.getLogger("cronboard.scheduler")


class SchedulerLock:
    """SQLite is single-node: one scheduler per database file. An flock on a
    file beside the database dies with its process, so a restart after
    kill -9 is never blocked by the dead one."""

    def __init__(self, db_path: str):
        self.path = Path(f"{db_path}.scheduler.lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise CommandError(
                _(
                    "Another scheduler (pid {holder}) is already running on this SQLite database ({databases}). SQLite is single-node: stop that one first, or move to PostgreSQL to run several schedulers."
                ).format(holder=holder, databases=settings.DATABASES["default"]["NAME"])
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Command(BaseCommand):
    help = "Run the Cronboard scheduler: plan due fires and execute runs until SIGTERM."
    requires_system_checks = checks.FOR_COMMANDS

    def add_arguments(self, parser):
        parser.add_argument(
            "--once", action="store_true", help="Run one pass, wait for the runs it started, and exit."
        )

    def warn(self, warning: str) -> None:
        """A warning already logged, again on stderr for whoever started the
        process, unless the logs are JSON: then stderr carries only JSON lines."""
        if settings.CRONBOARD_LOG_FORMAT != "json":
            self.stderr.write(_("WARNING: {warning}").format(warning=warning))

    def handle(self, *args, once=False, **options):
        activate_for_people_without_a_session()
        if not settings.JOBS_SCHEDULER_ENABLED:
            raise CommandError(_("JOBS_SCHEDULER_ENABLED is false on this node: it serves pages only."))
        checks.require_migrated()
        lock = None
        if connection.vendor == "sqlite":
            lock = SchedulerLock(settings.DATABASES["default"]["NAME"])
            lock.acquire()
        elif not settings.JOBS_WORKER_ID_EXPLICIT:
            # A default (the host name) would silently merge two nodes that share
            # one, e.g. containers started with the same --hostname.
            raise CommandError(
                _(
                    "JOBS_WORKER_ID is not set. On PostgreSQL several scheduler nodes can share the database, so each needs its own id, stable across restarts (a restarted node recovers its own runs by it): e.g. JOBS_WORKER_ID=scheduler-1."
                )
            )
        scheduler = Scheduler()
        logcontext.bind_process(worker_id=scheduler.worker_id)  # on every line this process logs
        if scheduler.clustered:
            try:
                scheduler.leadership.check_identity(timezone.now())
            except WorkerIdInUse as exc:
                raise CommandError(str(exc)) from None
        scheduler.install_signal_handlers()
        if settings.JOBS_METRICS_BIND:
            try:
                engine_metrics.serve(scheduler.metrics, settings.JOBS_METRICS_BIND)
            except OSError as exc:
                raise CommandError(
                    _("JOBS_METRICS_BIND ({bind}): cannot serve metrics there: {error}").format(
                        bind=settings.JOBS_METRICS_BIND, error=exc.strerror or exc
                    )
                ) from None
        log.info(
            "scheduler %s started (pid %s, %s, %d worker slots, %s executor)",
            scheduler.worker_id,
            os.getpid(),
            connection.vendor,
            scheduler.pool.size,
            scheduler.executor,
        )
        # Loud, in the log and on stderr: what the SQL role can do beyond
        # read-only, whether a command run's children can outlive it here,
        # and what was stored before this release's stricter rules and is
        # refused now.
        warnings = [*log_role_warnings(), *log_cgroup_warnings()]
        for refused in checks.stored_refusals():
            log.warning("REFUSED SINCE THE UPGRADE: %s", refused)
            warnings.append(refused)
        for warning in warnings:
            self.warn(warning)
        try:
            scheduler.run_forever(once=once)
        finally:
            if lock:
                lock.release()
        log.info("scheduler %s stopped", scheduler.worker_id)
