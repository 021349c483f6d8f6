"""GET /healthz: 200 when the web process can reach its database, 503 otherwise.
Open to anyone (load balancers, Docker's HEALTHCHECK); reveals nothing."""

from django.db import DatabaseError, connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET


@require_GET
def healthz(request):
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return JsonResponse({"status": "database unavailable"}, status=503)
    return JsonResponse({"status": "ok"})
