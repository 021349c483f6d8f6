"""python manage.py health: is this node's scheduler alive?

Exits 0 when the scheduler running as this node's JOBS_WORKER_ID holds its
node lease (jobs.engine.leases.node_problem), 1 otherwise with a one-line reason.
The Docker image's health check (scripts/healthcheck.sh) runs it in a
scheduler container; the web containers are checked on /healthz instead.
"""

import sys

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import DatabaseError
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs.engine import leases
from jobs.i18n import activate_for_people_without_a_session


class Command(BaseCommand):
    help = "Exit 0 if this node's scheduler is alive (its lease is fresh), 1 with the reason otherwise."
    # Run every 30 s by Docker: skip the system checks, they cost more than the query.
    requires_system_checks = []

    def handle(self, *args, **options):
        activate_for_people_without_a_session()
        worker_id = settings.JOBS_WORKER_ID
        try:
            problem = leases.node_problem(worker_id, now=timezone.now())
        except DatabaseError as exc:
            lines = str(exc).strip().splitlines()  # one line, whatever the driver says
            problem = f"database unavailable: {lines[0] if lines else type(exc).__name__}"
        if problem is not None:
            self.stderr.write(_("unhealthy: {problem}").format(problem=problem), style_func=lambda text: text)
            sys.exit(1)
        self.stdout.write(_("ok: scheduler {worker_id} is alive").format(worker_id=worker_id))
