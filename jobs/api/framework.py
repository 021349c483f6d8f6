"""What the API does that django-ninja does not: the frame every view under
/api/ runs in (`api_view`: URL length, methods, authentication by token or
session with the CSRF check, staff, the body read once, JSON errors), the
`ApiError` it answers with, the parser that reads bodies as jsontext, and
the shaping of pydantic's errors into the API's `{code, message, field}`.

ninja's own authentication classes and CSRF check are not used: they add a
`security` entry to every operation of the document and run after ninja
has matched the operation, while the frame decides authentication, staff
and the URL's length first, for the document's two pages and the JSON 404
too.
"""

import logging
from functools import wraps

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from ninja.parser import Parser

from jobs import access, cron, jsontext, refusals, text, tokens
from jobs.kinds import PROPERTY_FIELDS
from jobs.models import AuditEvent

log = logging.getLogger(__name__)

VIA = AuditEvent.Via.API
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
# Path plus query string. gunicorn (gunicorn.conf.py) lets request lines of up
# to 8190 bytes through, so Django answers longer URLs under /api/ as JSON.
MAX_URL_CHARS = 4096


# Form error codes that mean "not allowed" rather than "not valid".
REFUSAL_CODES = {"forbidden", "demo_mode"}


def _api_field(field: str | None) -> str | None:
    return f"properties.{field}" if field in PROPERTY_FIELDS else field


class ApiError(Exception):
    """Stops a view with a JSON error answer."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        *,
        errors: list[dict] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.body = {"code": str(code), "message": message, "field": field}
        if errors:
            self.body["errors"] = errors

    @classmethod
    def invalid(cls, errors: list[dict], *, job: bool = True) -> "ApiError":
        """400 with every problem listed; 403 when one of them is a refusal
        (a non-superuser's SQL job, demo mode) rather than a mistake. A
        job's kind fields are named as its properties (`job`)."""
        if job:
            errors = [{**error, "field": _api_field(error["field"])} for error in errors]
        refusals = [error for error in errors if error["code"] in REFUSAL_CODES]
        first = (refusals or errors)[0]
        return cls(403 if refusals else 400, first["code"], first["message"], first["field"], errors=errors)

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body, status=self.status)
        if self.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="cronboard"'
        return response


# -- the frame every view runs in ---------------------------------------------------


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return reason


def _csrf_failure(request) -> str | None:
    """Why the request fails Django's CSRF check, or None when it passes."""
    check = _CsrfCheck(lambda req: None)
    check.process_request(request)
    return check.process_view(request, None, (), {})


def _authenticate(request) -> None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header:
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer" or not raw.strip():
            raise ApiError(401, "unauthenticated", "Send the token as “Authorization: Bearer <token>”.")
        token = tokens.authenticate(raw.strip())
        if token is None or not token.user.is_active:
            raise ApiError(401, "invalid_token", "This token is not valid: it may have been revoked.")
        if not access.has_role(token.user):
            # Tokens follow their user's grants: a user whose last role was
            # removed (by hand, or at a sign-in whose groups map to none)
            # may do nothing with them.
            raise ApiError(
                403, "no_role", "This token's user has no role in Cronboard; ask an administrator for one."
            )
        if token.namespace is not None or token.read_only:
            access.narrow(token.user, namespace=token.namespace, read_only=token.read_only)
            if not access.has_role(token.user):
                # Narrowed to a namespace where its user no longer holds a
                # role: it would answer empty lists as if nothing were there.
                raise ApiError(
                    403,
                    "no_role",
                    f"This token is for the namespace “{token.namespace}”, where its user no longer "
                    "has a role; ask an administrator for one.",
                )
        request.user = token.user
        request.api_token = token
        return
    request.api_token = None
    if not access.can_view(getattr(request, "user", None)):
        raise ApiError(401, "unauthenticated", "Sign in, or send a token as “Authorization: Bearer <token>”.")
    if request.method not in SAFE_METHODS:
        reason = _csrf_failure(request)
        if reason:
            raise ApiError(
                403,
                "csrf_failed",
                f"CSRF check failed: {reason}. Send the X-CSRFToken header, or use a token.",
            )


def _require_edit(request) -> None:
    """The least role any change needs, somewhere; each view then asks for
    its own action in its object's namespace (jobs.access)."""
    if not access.can_operate(request.user):
        raise ApiError(403, "forbidden", "Your role may not change jobs or start runs.")


def _check_query(request) -> None:
    """The query string carries or names text no database stores (text.py's
    input rule): refused before anything else looks at the request."""
    try:
        found = text.query_problem(request.GET)
    except SuspiciousOperation:
        return  # too many fields and the like: answered below, in its turn
    if found is not None:
        message, field = found
        raise ApiError(400, text.CODE, message, field)


def _read_body(request) -> bytes:
    """The request body. A chunked body (no Content-Length) is read from the
    WSGI stream when the server says it ends (gunicorn sets
    wsgi.input_terminated); Django alone would read it as empty. Bounded by
    DATA_UPLOAD_MAX_MEMORY_SIZE like any body (413); a server that cannot
    frame it is answered 411."""
    meta = request.META
    chunked = "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower()
    if not chunked or meta.get("CONTENT_LENGTH"):
        return request.body
    if not meta.get("wsgi.input_terminated"):
        raise ApiError(
            411,
            "length_required",
            "Send the body with a Content-Length header (chunked bodies are not read here).",
        )
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    stream = meta["wsgi.input"]
    raw = stream.read() if limit is None else stream.read(limit + 1)
    if limit is not None and len(raw) > limit:
        raise RequestDataTooBig("The request body is too large.")
    return raw


def api_view(*methods: str, public: bool = False, read_body: bool = False, staff: tuple[str, ...] = ()):
    """Wrap a view: allowed methods, authentication (and staff for the
    `staff` methods, decided before the request's shape is looked at), JSON
    errors. An exception nothing expected still answers JSON (500, code
    server_error) and is logged; it never shows a stack trace."""

    def decorator(func):
        @csrf_exempt
        @wraps(func)
        def view(request, *args, **kwargs):
            try:
                _check_query(request)
                if (
                    len(request.META.get("PATH_INFO", "")) + len(request.META.get("QUERY_STRING", ""))
                    > MAX_URL_CHARS
                ):
                    raise ApiError(
                        414, "uri_too_long", f"The URL is longer than {MAX_URL_CHARS:,} characters."
                    )
                if request.method not in methods:
                    response = ApiError(
                        405, "method_not_allowed", f"Use {' or '.join(methods)} here."
                    ).response()
                    response["Allow"] = ", ".join(methods)
                    return response
                if not public:
                    _authenticate(request)
                if request.method in staff:
                    _require_edit(request)
                if read_body and request.method not in SAFE_METHODS:
                    request._body = _read_body(request)
                return func(request, *args, **kwargs)
            except ApiError as exc:
                return exc.response()
            except Http404 as exc:
                return ApiError(404, "not_found", str(exc) or "Not found.").response()
            except PermissionDenied as exc:
                return ApiError(403, "forbidden", str(exc) or "You may not do this.").response()
            except RequestDataTooBig:
                return ApiError(413, "too_large", "The request body is too large.").response()
            except SuspiciousOperation as exc:
                # Django's own refusals of a malformed request (too many fields, …).
                return ApiError(400, "bad_request", str(exc)[:200] or "Malformed request.").response()
            except RecursionError:
                # Nothing here recurses on purpose; input nested beyond the
                # stack is the client's mistake, not a server error.
                return ApiError(400, "invalid", "The request is nested too deeply.").response()
            except refusals.SaveBusy as exc:
                return ApiError(409, "busy", str(exc)).response()
            except refusals.StaleJobError as exc:
                return ApiError(409, "stale_version", str(exc), "version").response()
            except refusals.GraphRefused as exc:
                return ApiError.invalid(exc.error_list()).response()
            except refusals.DemoModeError as exc:
                return ApiError(403, "demo_mode", str(exc), _api_field(exc.field)).response()
            except refusals.ForbiddenError as exc:
                return ApiError(403, "forbidden", str(exc)).response()
            except refusals.ServiceError as exc:
                return ApiError(409, "conflict", str(exc)).response()
            except Exception:
                log.exception("API %s %s failed", request.method, request.path)
                return ApiError(
                    500, "server_error", "Something went wrong on the server; it has been logged."
                ).response()

        view.api_methods = methods
        return view

    return decorator


# -- what ninja is given: the parser and the error handlers ----------------------------


class JsonTextParser(Parser):
    """Bodies are read as everywhere in the API: jsontext (no duplicate
    keys, no NUL, bounded nesting), and only a JSON object. A blank body is
    no body (an operation whose body is optional reads it as left out)."""

    def parse_body(self, request) -> dict | None:
        if request.content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
            # What many clients send for a bare POST: an empty form is no body.
            if request.POST or request.FILES:
                raise ApiError(400, "invalid_json", "Send a JSON object as the request body.")
            return None
        if not request.body.strip():
            return None
        try:
            data = jsontext.loads(request.body)
        except jsontext.JsonTextError as exc:
            raise ApiError(400, exc.code, f"The body is not valid JSON: {exc.message}"[:300]) from None
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_json", "The body must be a JSON object.")
        # A field's name that no database stores cannot even be named back
        # by pydantic: refused here, named as it can be stored.
        unstorable = [name for name in data if text.find_unstorable(name)]
        if unstorable:
            raise ApiError.invalid(
                [
                    {
                        "code": text.CODE,
                        "message": f"A field name contains {text.find_unstorable(name)}.",
                        "field": text.storable(name),
                    }
                    for name in unstorable
                ]
            )
        return data


# Shape errors under the codes the job form gives the same mistakes.
_PYDANTIC_CODES = {
    "missing": "required",
    "extra_forbidden": "unknown_field",
    "string_too_short": "required",
    "string_too_long": "max_length",
    "too_long": "too_many",
    "literal_error": "invalid_choice",
    "enum": "invalid_choice",
}
# Codes a schema raises itself (PydanticCustomError) and that pass through.
_OWN_CODES = {
    "required",
    "invalid_channel",
    str(cron.MALFORMED),
    str(cron.UNKNOWN_ZONE),
    str(cron.INTERVAL_TOO_SHORT),
    text.CODE,
}
_NO_BODY = {"code": "invalid_json", "message": "Send a JSON object as the request body.", "field": None}


def _shape_errors(errors: list[dict]) -> list[dict]:
    """pydantic's errors as the API's [{code, message, field}]; `field` is
    the top-level field (a query parameter, or a body field: a problem deep
    in `properties` is the field `properties`, as the job form says it)."""
    out = []
    for error in errors:
        source, *loc = error["loc"]
        kind = error["type"]
        if source == "body":
            loc = loc[1:]  # the operation's parameter name
            if not loc:
                out.append(dict(_NO_BODY))  # no body, or not an object
                continue
        code = kind if kind in _OWN_CODES else _PYDANTIC_CODES.get(kind, "invalid")
        field = str(loc[0]) if loc else None
        message = error["msg"]
        if kind == "string_unicode":
            # A lone surrogate in a text whose length the schema checks.
            problem = text.find_unstorable(error.get("input")) or "an unpaired surrogate"
            code, message = text.CODE, f"Contains {problem}, which cannot be stored."
        if code == "unknown_field":
            if problem := text.find_unstorable(field):
                # The field's name is the bad input: named, it could not be shown or stored.
                code, message, field = text.CODE, f"A field name contains {problem}.", text.storable(field)
            else:
                field = field[:50]
                message = f"Unknown field “{field}”."
        item = {"code": code, "message": message, "field": field}
        # A value that fits no member of a union fails once per member: one is enough.
        if not any(seen["code"] == code and seen["field"] == field for seen in out):
            out.append(item)
    return out


def on_shape_error(request, exc):
    """ninja's ValidationError: the API's 400 with every problem listed."""
    # A job or run that does not exist is a 404 whatever the body says.
    kwargs = request.resolver_match.kwargs if request.resolver_match else {}
    if "job_id" in kwargs:
        access.get_job_for_user(request.user, kwargs["job_id"])
    if "run_id" in kwargs:
        access.get_run_for_user(request.user, kwargs["run_id"])
    # A body that is not a job's (a channel's `url`) keeps its own field names.
    job = not request.path.startswith("/api/channels")
    return ApiError.invalid(_shape_errors(exc.errors), job=job).response()


def on_http_error(request, exc):
    """ninja's HttpError, which wraps what the parser raised ("Cannot parse request body")."""
    if isinstance(exc.__cause__, ApiError):
        return exc.__cause__.response()
    return ApiError(exc.status_code, "bad_request", str(exc.message)[:200]).response()


def reraise(request, exc):
    """Everything else is answered by api_view, as for every view."""
    raise exc
