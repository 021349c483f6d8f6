"""GET /healthz: 200 when the web process can reach its database, 503 otherwise.

GET /healthz/scheduler (or /healthz?scheduler=1) adds a dead man's switch
for an external monitor: 503 as well when no scheduler process has written
a heartbeat for SCHEDULER_SILENT_AFTER (60 s). The heartbeat is the node
lease every scheduler renews every few seconds (jobs.cluster); on PostgreSQL
the lease must also still be live by the database's clock. A scheduler that
stopped cleanly gives its lease up, so the check fails at once; one that was
killed fails it once its last renewal is 60 s old.

Served by a middleware that sits first, before host validation and the
HTTPS redirect: Docker's HEALTHCHECK and load balancers call it by IP over
plain http, whatever ALLOWED_HOSTS says. Open to anyone; it reveals only
whether a scheduler is alive, how long ago it was last heard from, and how
far the clock of the node furthest off is from the database's.
"""

from datetime import datetime, timedelta

from django.db import DatabaseError, connection
from django.db.models.functions import Now
from django.http import HttpResponseNotAllowed, JsonResponse
from django.utils import timezone

PATH = "/healthz"
SCHEDULER_PATH = "/healthz/scheduler"
SCHEDULER_SILENT_AFTER = timedelta(seconds=60)


def scheduler_heartbeat(now: datetime) -> tuple[bool, float | None, float | None]:
    """(a scheduler is alive, seconds since the last heartbeat or None, the
    clock skew furthest from zero among the live nodes or None: a node's
    clock minus the database's, as it measured it, on PostgreSQL)."""
    from jobs.cluster import NODE_PREFIX
    from jobs.core.dbclock import database_time, skew_in
    from jobs.models import Lease

    clock = database_time(now)
    held = Lease.objects.filter(name__startswith=NODE_PREFIX).exclude(holder="")
    if connection.vendor == "postgresql":
        held = held.filter(expires_at__gte=Now())
    rows = list(held.values_list("renewed_at", "info"))
    renewed = [at for at, _info in rows if at is not None]
    if not renewed:
        return False, None, None
    skews = [skew for _at, info in rows if (skew := skew_in(info)) is not None]
    age = (clock - max(renewed)).total_seconds()
    return (
        age <= SCHEDULER_SILENT_AFTER.total_seconds(),
        max(0.0, round(age, 1)),
        max(skews, key=abs) if skews else None,
    )


def healthz(request, *, scheduler: bool = False):
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        if scheduler:
            alive, age, skew = scheduler_heartbeat(timezone.now())
    except DatabaseError:
        return JsonResponse({"status": "database unavailable"}, status=503)
    if not scheduler:
        return JsonResponse({"status": "ok"})
    body = {
        "status": "ok" if alive else "scheduler silent",
        "scheduler_heartbeat_age_seconds": age,
        "scheduler_clock_skew_seconds": skew,
    }
    return JsonResponse(body, status=200 if alive else 503)


class HealthCheckMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path == PATH:
            return healthz(request, scheduler=request.GET.get("scheduler", "") not in ("", "0"))
        if request.path in (SCHEDULER_PATH, SCHEDULER_PATH + "/"):
            return healthz(request, scheduler=True)
        return self.get_response(request)
