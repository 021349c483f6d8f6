"""The console's and the API's request middleware that is Cronboard's own:
query strings with text no database stores are refused before any view."""

from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponseBadRequest, JsonResponse

from jobs.text import CODE, find_unstorable


class StorableQueryMiddleware:
    """The input rule for query parameters, console and API alike: a request
    whose query string names or carries text no database stores (`?q=%00`)
    is refused with 400 before any view reads it (a view filtering on it
    would fail on PostgreSQL and pass on SQLite). API paths answer in the
    API's JSON error shape. Form bodies are the forms' to refuse
    (StorableTextMixin), with a form error."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            found = _query_problem(request.GET)
        except SuspiciousOperation:
            # Too many fields and the like: the view answers it, in its own shape.
            return self.get_response(request)
        if found is None:
            return self.get_response(request)
        problem, field = found
        message = f"The query parameters contain {problem}, which cannot be stored."
        if request.path.startswith("/api/"):
            # The API's error shape (its Error schema): code, message, field.
            return JsonResponse({"code": CODE, "message": message, "field": field}, status=400)
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


def _query_problem(params) -> tuple[str, str | None] | None:
    """(what is wrong and where, the parameter's name if it is not the bad part)."""
    for name, values in params.lists():
        if found := find_unstorable(name):
            return f"{found} in a parameter name", None
        for value in values:
            if found := find_unstorable(value):
                return f"{found} in “{name}”", name
    return None
