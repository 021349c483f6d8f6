"""The console's request middleware that is Cronboard's own: query strings
with text no database stores are refused before any view, and a password
sign-in's second step is asked for before any page."""

from urllib.parse import urlencode

from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponseBadRequest, HttpResponseRedirect, JsonResponse
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django_htmx.http import HttpResponseClientRedirect

from jobs import twofactor
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


class TwoFactorMiddleware:
    """The second step of a password sign-in (jobs.twofactor). A session
    signed in with a password whose user has an authenticator, and has not
    yet given a code, reaches only the verification page; a user whom
    CRONBOARD_REQUIRE_2FA asks for one and who has none yet reaches only the
    page that sets it up. Signing out and the language switch stay open.
    The API answers such a session 401 in its own JSON shape (tokens, which
    are made after a full sign-in, are not affected)."""

    # Open to a session that owes its second step; setting up an app is open
    # only to a user who has none (else a new app would skip the old one).
    OPEN_URL_NAMES = ("logout", "set_language", "javascript-catalog", "favicon")
    VERIFY_URL_NAMES = ("two_factor_verify",)
    ENROL_URL_NAMES = ("two_factor", "two_factor_confirm")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return self.get_response(request)
        if request.path.startswith("/api/") and request.META.get("HTTP_AUTHORIZATION"):
            return self.get_response(request)
        step = twofactor.owed(request)
        if step == twofactor.VERIFY:
            target, message = "jobs:two_factor_verify", _("Enter the code from your authenticator app.")
            open_names = self.OPEN_URL_NAMES + self.VERIFY_URL_NAMES
        elif step == twofactor.ENROL:
            target, message = "jobs:two_factor", _("Set up two-factor sign-in to continue.")
            open_names = self.OPEN_URL_NAMES + self.ENROL_URL_NAMES
        else:
            return self.get_response(request)
        # base.html then shows no menu, only the language and signing out.
        request.two_factor_pending = True
        match = getattr(request, "resolver_match", None) or _resolve(request.path_info)
        if match is not None and match.url_name in open_names:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            body = {"code": "two_factor_required", "message": str(message), "field": None}
            return JsonResponse(body, status=401)
        next_url = request.get_full_path() if request.method == "GET" else ""
        if request.htmx:
            next_url = request.htmx.current_url_abs_path or ""
        url = reverse(target)
        if next_url and url_has_allowed_host_and_scheme(next_url, allowed_hosts=None) and next_url != url:
            url = f"{url}?{urlencode({'next': next_url})}"
        if request.htmx:
            return HttpResponseClientRedirect(url)
        return HttpResponseRedirect(url)


def _resolve(path: str):
    try:
        return resolve(path)
    except Resolver404:
        return None
