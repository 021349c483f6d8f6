"""The JSON API under /api/ (DESIGN.md "API"; the OpenAPI document is
jobs/openapi.py, served at /api/schema).

Same permissions as the console: any signed-in user reads, staff change.
Authentication is a personal token (`Authorization: Bearer cb_…`, see
jobs/tokens.py) or the console's session; a session-authenticated call that
changes something must carry the CSRF token, a token call need not (a
browser never attaches the header by itself).

Every answer is JSON. Errors are `{"code", "message", "field"}`; a
validation failure adds `errors`, the full list in the same shape. Each
view validates with the job form or a small parser here, then calls a
service; nothing writes a job or a run directly.
"""

import json
import logging
from datetime import UTC, datetime, time
from functools import wraps

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation, ValidationError
from django.http import Http404, HttpResponse, JsonResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.urls import path, re_path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.parser import Parser
from ninja.utils import normalize_path, replace_path_param_notation

from jobs import access, cron, jsontext, services, tokens
from jobs import api_schemas as schemas
from jobs.forms import PROPERTY_FIELDS, JobForm, TaskForm, check_instant
from jobs.handlers import registry
from jobs.models import AuditEvent, Job, Run, parse_run_cursor, run_cursor
from jobs.serializers import handler_to_dict, job_to_dict, run_to_dict, spec_errors, spec_to_form_data

log = logging.getLogger(__name__)

VIA = AuditEvent.Via.API
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
RUNS_DEFAULT_LIMIT = 20
RUNS_MAX_LIMIT = 100
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
    def invalid(cls, errors: list[dict]) -> "ApiError":
        """400 with every problem listed; 403 when one of them is a refusal
        (a non-superuser's SQL job, demo mode) rather than a mistake."""
        errors = [{**error, "field": _api_field(error["field"])} for error in errors]
        refusals = [error for error in errors if error["code"] in REFUSAL_CODES]
        first = (refusals or errors)[0]
        return cls(403 if refusals else 400, first["code"], first["message"], first["field"], errors=errors)

    def response(self) -> JsonResponse:
        response = JsonResponse(self.body, status=self.status)
        if self.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="cronboard"'
        return response


# -- the frame every endpoint runs in ---------------------------------------------


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


def api_view(*methods: str, public: bool = False, read_body: bool = False):
    """Wrap an endpoint: allowed methods, authentication, JSON errors. An
    exception nothing expected still answers JSON (500, code server_error)
    and is logged; it never shows a stack trace."""

    def decorator(func):
        @csrf_exempt
        @wraps(func)
        def view(request, *args, **kwargs):
            try:
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
            except services.StaleJobError as exc:
                return ApiError(409, "stale_version", str(exc), "version").response()
            except services.DemoModeError as exc:
                return ApiError(403, "demo_mode", str(exc)).response()
            except services.ForbiddenError as exc:
                return ApiError(403, "forbidden", str(exc)).response()
            except services.ServiceError as exc:
                return ApiError(409, "conflict", str(exc)).response()
            except Exception:
                log.exception("API %s %s failed", request.method, request.path)
                return ApiError(
                    500, "server_error", "Something went wrong on the server; it has been logged."
                ).response()

        view.api_methods = methods
        return view

    return decorator


# -- operations declared with django-ninja --------------------------------------------
#
# Their request and answer shapes are the schemas in jobs/api_schemas.py; ninja
# checks a request against them and writes the OpenAPI document from them
# (jobs/openapi.py adds the endpoints not moved yet). They run inside the
# same frame as every other endpoint (api_view: URL length, methods,
# authentication and CSRF, JSON errors); ninja only parses and routes.


class _JsonTextParser(Parser):
    """Bodies are read as everywhere in the API: jsontext (no duplicate
    keys, no NUL, bounded nesting), and only a JSON object."""

    def parse_body(self, request) -> dict:
        try:
            data = jsontext.loads(request.body)
        except jsontext.JsonTextError as exc:
            raise ApiError(400, exc.code, f"The body is not valid JSON: {exc.message}"[:300]) from None
        if not isinstance(data, dict):
            raise ApiError(400, "invalid_json", "The body must be a JSON object.")
        return data


class _Api(NinjaAPI):
    def get_content_type(self) -> str:
        return "application/json"  # as JsonResponse says it, everywhere in the API


ninja_api = _Api(
    title="Cronboard API",
    version="1",
    urls_namespace="ninja",
    openapi_url=None,
    docs_url=None,
    parser=_JsonTextParser(),
)

# Shape errors whose code the API always gave under another name.
_PYDANTIC_CODES = {"missing": "required", "extra_forbidden": "unknown_field"}


def _shape_errors(errors: list[dict]) -> list[dict]:
    out = []
    for error in errors:
        source, *loc = error["loc"]
        if source == "body":
            loc = loc[1:]  # the operation's parameter name
            if not loc:
                # No body (ninja read it as absent) or not an object.
                out.append(
                    {
                        "code": "invalid_json",
                        "message": "Send a JSON object as the request body.",
                        "field": None,
                    }
                )
                continue
        kind = error["type"]
        code = kind if kind in _OWN_CODES else _PYDANTIC_CODES.get(kind, "invalid")
        out.append(
            {"code": code, "message": error["msg"], "field": ".".join(str(part) for part in loc) or None}
        )
    return out


# Codes a schema raises itself (PydanticCustomError) and that pass through.
_OWN_CODES = {"required", str(cron.MALFORMED), str(cron.UNKNOWN_ZONE)}


@ninja_api.exception_handler(NinjaValidationError)
def _on_shape_error(request, exc):
    return ApiError.invalid(_shape_errors(exc.errors)).response()


@ninja_api.exception_handler(HttpError)
def _on_http_error(request, exc):
    # ninja wraps what the parser raised ("Cannot parse request body").
    if isinstance(exc.__cause__, ApiError):
        return exc.__cause__.response()
    return ApiError(exc.status_code, "bad_request", str(exc.message)[:200]).response()


@ninja_api.exception_handler(Exception)
def _reraise(request, exc):
    # Everything else is answered by api_view, as for every endpoint.
    raise exc


def _ninja_urls() -> list:
    """ninja's routes, each wrapped in the API's frame. Body-taking methods
    get the body read first (_read_body), so a chunked one is not empty."""
    methods = {}
    for route, path_view in ninja_api.default_router.path_operations.items():
        route = normalize_path(replace_path_param_notation(route)).lstrip("/")
        methods[route] = sorted(
            {method for operation in path_view.operations for method in operation.methods}
        )
    patterns, seen = [], set()
    for pattern in ninja_api.urls[0]:
        route = str(pattern.pattern)
        # Only operations: not the index page ninja adds at "".
        if route in methods and route not in seen:
            seen.add(route)
            view = api_view(*methods[route], read_body=True)(pattern.callback)
            patterns.append(path(route, view, name=pattern.name))
    return patterns


def _require_edit(request) -> None:
    if not access.can_edit(request.user):
        raise ApiError(403, "forbidden", "Only staff can change jobs and start runs.")


def _json_body(request, *, optional: bool = False) -> dict:
    """The body's JSON object; `optional`: an empty body (or an empty form,
    which is what many clients send for a bare POST) reads as {}."""
    if optional and request.content_type in ("multipart/form-data", "application/x-www-form-urlencoded"):
        if request.POST or request.FILES:
            raise ApiError(400, "invalid_json", "Send a JSON object as the request body.")
        return {}
    raw = _read_body(request)
    if optional and not raw.strip():
        return {}
    if not raw:
        raise ApiError(400, "invalid_json", "Send a JSON object as the request body.")
    try:
        data = jsontext.loads(raw)
    except jsontext.JsonTextError as exc:
        raise ApiError(400, exc.code, f"The body is not valid JSON: {exc.message}"[:300]) from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "The body must be a JSON object.")
    return data


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


def _parse_time(value: str, field: str) -> datetime:
    """An ISO-8601 instant (or a date, meaning its midnight); no zone means UTC."""
    try:
        when = parse_datetime(value)
        if when is None:
            day = parse_date(value)
            when = datetime.combine(day, time()) if day else None
    except ValueError:
        when = None
    if when is None:
        raise ApiError(400, "invalid", f"“{value[:50]}” is not an ISO-8601 date-time.", field)
    if timezone.is_naive(when):
        when = when.replace(tzinfo=UTC)
    try:
        return check_instant(when)
    except ValidationError as exc:
        raise ApiError(400, exc.code, exc.message, field) from None


def _parse_int(value: str, field: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise ApiError(400, "invalid", f"“{field}” must be a whole number from {low} to {high}.", field)
    return number


def _job(request, job_id) -> Job:
    return access.get_job_for_user(request.user, job_id)


# -- jobs -------------------------------------------------------------------------


@api_view("GET", "POST")
def jobs_collection(request):
    if request.method == "POST":
        return _create_job(request)
    jobs = access.visible_jobs(request.user, namespace=request.GET.get("namespace")).select_related("owner")
    for field, choices in (("state", Job.State), ("kind", Job.Kind)):
        wanted = request.GET.get(field)
        if wanted:
            if wanted not in choices.values:
                raise ApiError(
                    400, "invalid_choice", f"“{field}” must be one of {', '.join(choices.values)}.", field
                )
            jobs = jobs.filter(**{field: wanted})
    return JsonResponse({"results": [job_to_dict(job) for job in jobs.order_by("name", "id")]})


def _create_job(request):
    _require_edit(request)
    payload = _json_body(request)
    errors = spec_errors(payload)
    if errors:
        raise ApiError.invalid(errors)
    form = JobForm(spec_to_form_data(payload), user=request.user)
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    job = services.save_job(job=form.save(commit=False), user=request.user, via=VIA)
    return JsonResponse(job_to_dict(job), status=201)


@api_view("GET", "PUT", "PATCH", "DELETE")
def job_detail(request, job_id):
    if request.method == "GET":
        return JsonResponse(job_to_dict(_job(request, job_id)))
    _require_edit(request)
    job = _job(request, job_id)
    if request.method == "DELETE":
        services.delete_job(job=job, user=request.user, via=VIA)
        return HttpResponse(status=204)
    payload = _json_body(request)
    errors = spec_errors(payload)
    if errors:
        raise ApiError.invalid(errors)
    # PUT replaces (left-out fields take defaults); PATCH keeps them.
    data = spec_to_form_data(payload, instance=job if request.method == "PATCH" else None)
    form = JobForm(data, instance=job, user=request.user)
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    job = services.save_job(
        job=form.save(commit=False), user=request.user, via=VIA, expected_version=payload.get("version")
    )
    return JsonResponse(job_to_dict(job))


@api_view("POST")
def job_toggle(request, job_id):
    """Pause an enabled job; resume a paused one or re-enable a crashed one."""
    _require_edit(request)
    job = _job(request, job_id)
    if job.state == Job.State.ENABLED:
        job = services.pause_job(job=job, user=request.user, via=VIA)
    else:
        job = services.resume_job(job=job, user=request.user, via=VIA)
    return JsonResponse(job_to_dict(job))


@api_view("POST")
def job_run(request, job_id):
    """Queue a manual run; while one is queued or running, answer that one (200, not 201)."""
    _require_edit(request)
    job = _job(request, job_id)
    # An empty body is a plain run; {"properties": {...}} overrides for this run only.
    payload = _json_body(request, optional=True)
    unknown = sorted(set(payload) - {"properties"})
    if unknown:
        raise ApiError.invalid(
            [
                {"code": "unknown_field", "message": f"Unknown field “{name[:50]}”.", "field": name[:50]}
                for name in unknown
            ]
        )
    try:
        run, created = services.run_now(
            job=job, user=request.user, via=VIA, trigger=Run.Trigger.API, properties=payload.get("properties")
        )
    except ValidationError as exc:
        raise ApiError.invalid(
            [
                {"code": exc.code or "invalid", "message": message, "field": "properties"}
                for message in exc.messages
            ]
        ) from None
    return JsonResponse(run_to_dict(run), status=201 if created else 200)


@api_view("GET")
def job_runs(request, job_id):
    """The job's runs, newest scheduled first, keyset-paginated on (scheduled_at, id)."""
    job = _job(request, job_id)
    return _run_page(request, Run.objects.filter(job=job))


@api_view("GET")
def runs_collection(request):
    """Runs across every job the caller may see (and one-off tasks), newest
    scheduled first; the same filters and pages as a job's runs, plus ?job=."""
    runs = access.visible_runs(request.user)
    if request.GET.get("job"):
        job_id = _parse_int(request.GET["job"], "job", 1, 2**63 - 1)
        runs = runs.filter(job_id=job_id)
    return _run_page(request, runs)


@api_view("GET")
def dashboard(request):
    """The console dashboard's figures (jobs.views.dashboard_figures)."""
    from jobs.views import dashboard_figures

    figures = dashboard_figures(request.user, now=timezone.now())
    return JsonResponse(
        {
            "jobs_by_state": figures["jobs_by_state"],
            "runs_24h_by_status": figures["runs_24h_by_status"],
            "success_rate_24h": figures["success_rate_24h"],
            "attention": [
                {
                    "id": job.pk,
                    "name": job.name,
                    "state": job.state,
                    "consecutive_failures": job.consecutive_failures,
                }
                for job in figures["attention"]
            ],
            "running": [run_to_dict(run) for run in figures["running"]],
            "running_count": figures["running_count"],
        }
    )


@api_view("GET")
def upcoming(request):
    """Fires of the next 24 hours (?window=24h) or 7 days (7d) across the
    jobs the caller may see, in time order (jobs.upcoming)."""
    from jobs import upcoming as fires

    window = request.GET.get("window", "24h")
    if window not in fires.WINDOWS:
        raise ApiError(
            400, "invalid_choice", f"“window” must be one of {', '.join(fires.WINDOWS)}.", "window"
        )
    limit = _parse_int(request.GET["limit"], "limit", 1, 500) if request.GET.get("limit") else fires.PAGE
    after = None
    if request.GET.get("cursor"):
        after = fires.parse_cursor(request.GET["cursor"])
        if after is None:
            raise ApiError(400, "invalid", "This cursor is not one the API gave out.", "cursor")
    now = timezone.now()
    page, more = fires.upcoming_fires(
        access.visible_jobs(request.user),
        start=now,
        end=now + fires.WINDOWS[window],
        limit=limit,
        after=after,
    )
    return JsonResponse(
        {
            "results": [
                {
                    "job": fire.job.pk,
                    "name": fire.job.name,
                    "at": cron.iso_utc(fire.at),
                    "local": fire.local.isoformat(),
                    "timezone": fire.job.timezone,
                    "dst": fire.dst,
                }
                for fire in page
            ],
            "next_cursor": fires.cursor_of(page[-1]) if more else None,
        }
    )


def _run_page(request, runs):
    params = request.GET
    statuses = [s for s in params.get("status", "").split(",") if s]
    for status in statuses:
        if status not in Run.Status.values:
            raise ApiError(
                400, "invalid_choice", f"“status” must be among {', '.join(Run.Status.values)}.", "status"
            )
    if statuses:
        runs = runs.filter(status__in=statuses)
    trigger = params.get("trigger")
    if trigger:
        if trigger not in Run.Trigger.values:
            raise ApiError(
                400, "invalid_choice", f"“trigger” must be one of {', '.join(Run.Trigger.values)}.", "trigger"
            )
        runs = runs.filter(trigger=trigger)
    if params.get("from"):
        runs = runs.filter(scheduled_at__gte=_parse_time(params["from"], "from"))
    if params.get("to"):
        runs = runs.filter(scheduled_at__lt=_parse_time(params["to"], "to"))
    limit = RUNS_DEFAULT_LIMIT
    if params.get("limit"):
        limit = _parse_int(params["limit"], "limit", 1, RUNS_MAX_LIMIT)
    if params.get("cursor"):
        runs = runs.older_than(*_decode_cursor(params["cursor"]))
    page = list(runs.order_by("-scheduled_at", "-id")[: limit + 1])
    next_cursor = _encode_cursor(page[limit - 1]) if len(page) > limit else None
    return JsonResponse({"results": [run_to_dict(run) for run in page[:limit]], "next_cursor": next_cursor})


def _encode_cursor(run: Run) -> str:
    return run_cursor(run.scheduled_at, run.pk)


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    parsed = parse_run_cursor(cursor)
    if parsed is None:
        raise ApiError(400, "invalid", "This cursor is not one the API gave out.", "cursor")
    return parsed


# -- runs, handlers, tasks ---------------------------------------------------------------


@api_view("GET")
def run_detail(request, run_id):
    return JsonResponse(run_to_dict(access.get_run_for_user(request.user, run_id), with_log=True))


@api_view("POST")
def run_cancel(request, run_id):
    _require_edit(request)
    run = access.get_run_for_user(request.user, run_id)
    if not run.is_live:
        raise ApiError(
            409, "not_live", f"This run is {run.status}; only a queued or running run can be cancelled."
        )
    services.cancel_run(run=run, user=request.user, via=VIA)
    return JsonResponse(run_to_dict(run))


@ninja_api.get(
    "/handlers",
    operation_id="listHandlers",
    summary="Registered Python handlers (what the job form offers).",
    response={200: schemas.HandlerList, 401: schemas.Error},
)
def handlers(request):
    return {"results": [handler_to_dict(info) for info in registry.available()]}


@api_view("POST")
def tasks(request):
    """Enqueue a one-off task; a live task with the same handler and key is answered instead (200)."""
    _require_edit(request)
    services.check_demo_mode("enqueuing tasks")
    payload = _json_body(request)
    unknown = sorted(set(payload) - set(TaskForm.base_fields))
    if unknown:
        raise ApiError.invalid(
            [
                {"code": "unknown_field", "message": f"Unknown field “{name}”.", "field": name}
                for name in unknown
            ]
        )
    bad_types = [
        {"code": "invalid", "message": "Must be a string.", "field": name}
        for name in ("handler", "key", "run_after")
        if payload.get(name) is not None and not isinstance(payload[name], str)
    ] + [
        {"code": "invalid", "message": "Must be a whole number.", "field": name}
        for name in ("max_retries", "retry_interval_seconds", "timeout_seconds")
        if payload.get(name) is not None
        and (isinstance(payload[name], bool) or not isinstance(payload[name], int))
    ]
    if bad_types:
        raise ApiError.invalid(bad_types)
    form = TaskForm({k: v for k, v in payload.items() if v is not None})
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    now = timezone.now()
    (run,) = services.enqueue_many([form.task_request()], now=now)
    return JsonResponse(run_to_dict(run), status=201 if run.created_at == now else 200)


# -- cron preview ------------------------------------------------------------------


@ninja_api.post(
    "/cron/preview",
    operation_id="previewCron",
    summary="Describe an expression and list its next fire times (any signed-in user).",
    response={200: schemas.Preview, 400: schemas.Error, 401: schemas.Error},
)
def cron_preview(request, payload: schemas.PreviewRequest):
    """The next fire times (with DST marks), the description and warnings
    for an expression in a zone; or the cron error with its code. Read-only,
    so any signed-in user may call it."""
    after = timezone.now() if payload.after is None else _parse_time(payload.after, "after")
    try:
        # Bounded (MAX_ZONE_CHARS) and canonical before any cache sees it.
        zone = cron.zone_name(payload.timezone)
    except cron.CronError as exc:
        raise ApiError(400, exc.code, exc.message, "timezone") from None
    try:
        return cron.preview(payload.expression, zone, after=after, count=payload.count)
    except cron.CronError as exc:
        raise ApiError(400, exc.code, exc.message, "expression") from None


# -- the document -------------------------------------------------------------------


@api_view("GET", public=True)
def schema(request):
    from jobs.openapi import document

    return JsonResponse(document(request))


@api_view("GET")
def api_docs(request):
    """Swagger UI for the document, from the assets django-ninja ships (no
    CDN); signed-in users only (api_view: a session or a token)."""
    from django.shortcuts import render

    settings_json = json.dumps({"url": reverse("api:schema"), "layout": "BaseLayout", "deepLinking": True})
    return render(
        request,
        "ninja/swagger.html",
        {"api": ninja_api, "swagger_settings": settings_json, "add_csrf": True},
    )


@api_view("GET", "POST", "PUT", "PATCH", "DELETE", public=True)
def not_found(request, rest=""):
    raise ApiError(404, "not_found", "No such API endpoint; see /api/schema.")


app_name = "api"

urlpatterns = [
    path("jobs", jobs_collection, name="jobs"),
    path("jobs/<int:job_id>", job_detail, name="job"),
    path("jobs/<int:job_id>/toggle", job_toggle, name="job_toggle"),
    path("jobs/<int:job_id>/run", job_run, name="job_run"),
    path("jobs/<int:job_id>/runs", job_runs, name="job_runs"),
    path("runs", runs_collection, name="runs"),
    path("upcoming", upcoming, name="upcoming"),
    path("dashboard", dashboard, name="dashboard"),
    path("runs/<int:run_id>", run_detail, name="run"),
    path("runs/<int:run_id>/cancel", run_cancel, name="run_cancel"),
    path("tasks", tasks, name="tasks"),
    path("schema", schema, name="schema"),
    path("docs", api_docs, name="docs"),
    *_ninja_urls(),
    # Anything else under /api/ is a JSON 404, never the HTML error page.
    re_path(r"^(?P<rest>.*)$", not_found, name="not_found"),
]
