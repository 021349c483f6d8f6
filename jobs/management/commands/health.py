"""python manage.py health: is this node's scheduler alive?

Exits 0 when the scheduler running as this node's JOBS_WORKER_ID holds its
node lease and its clock is near enough the database's for it to work
(jobs.cluster.node_health), 1 otherwise with a one-line reason. On
PostgreSQL the answer says how far the node's clock is from the database's.
The Docker image's health check (scripts/healthcheck.sh) runs it in a
scheduler container; the web containers are checked on /healthz instead.
"""

import sys

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import cluster
from jobs.i18n import activate_for_people_without_a_session


class Command(BaseCommand):
    help = "Exit 0 if this node's scheduler is alive (its lease is fresh), 1 with the reason otherwise."
    # Run every 30 s by Docker: skip the system checks, they cost more than the query.
    requires_system_checks = []

    def handle(self, *args, **options):
        activate_for_people_without_a_session()
        worker_id = settings.JOBS_WORKER_ID
        try:
            health = cluster.node_health(worker_id, now=timezone.now())
        except DatabaseError as exc:
            lines = str(exc).strip().splitlines()  # one line, whatever the driver says
            health = cluster.NodeHealth(f"database unavailable: {lines[0] if lines else type(exc).__name__}")
        if health.problem is not None:
            self.stderr.write(
                _("unhealthy: {problem}").format(problem=health.problem), style_func=lambda text: text
            )
            sys.exit(1)
        if health.clock_skew is None:
            self.stdout.write(_("ok: scheduler {worker_id} is alive").format(worker_id=worker_id))
        else:
            self.stdout.write(
                _("ok: scheduler {worker_id} is alive, its clock {skew} s from the database's").format(
                    worker_id=worker_id, skew=f"{health.clock_skew:+.3f}"
                )
            )
