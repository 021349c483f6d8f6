"""GET /healthz: 200 when the web process can reach its database, 503 otherwise.

Served by a middleware that sits first, before host validation and the
HTTPS redirect: Docker's HEALTHCHECK and load balancers call it by IP over
plain http, whatever ALLOWED_HOSTS says. Open to anyone; it reveals nothing.
"""

from django.db import DatabaseError, connection
from django.http import HttpResponseNotAllowed, JsonResponse

PATH = "/healthz"


def healthz(request):
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return JsonResponse({"status": "database unavailable"}, status=503)
    return JsonResponse({"status": "ok"})


class HealthCheckMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path == PATH:
            return healthz(request)
        return self.get_response(request)
