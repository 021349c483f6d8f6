"""The console's request middleware that is Cronboard's own: query strings
with text no database stores are refused before any view."""

from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponseBadRequest

from jobs.core import logcontext
from jobs.text import query_problem


class StorableQueryMiddleware:
    """The input rule for query parameters (`text.query_problem`): a console
    request whose query string names or carries text no database stores
    (`?q=%00`) is refused with 400 before any view reads it (a view filtering
    on it would fail on PostgreSQL and pass on SQLite). Requests under /api/
    are passed on: the API's frame refuses them with the same rule, first of
    all and in its JSON error shape. Form bodies are the forms' to refuse
    (StorableTextMixin), with a form error."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            return self.get_response(request)
        try:
            found = query_problem(request.GET)
        except SuspiciousOperation:
            # Too many fields and the like: the view answers it, in its own shape.
            return self.get_response(request)
        if found is None:
            return self.get_response(request)
        message, _field = found
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


class RequestIdMiddleware:
    """Every request goes by an id: the X-Request-ID a proxy or client sent
    (a plain token), else a new one. It is on every log line the request
    causes and on every audit row it writes (jobs.core.logcontext), and the
    response carries it back in X-Request-ID."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = logcontext.usable_request_id(request.headers.get("X-Request-ID"))
        request.request_id = request_id
        with logcontext.bound(request_id=request_id):
            response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response
