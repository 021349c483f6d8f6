"""The JSON API under /api/ (DESIGN.md "API"). Every operation is declared
with django-ninja, its shapes in jobs/api_schemas.py; the OpenAPI document
at /api/schema is generated from those declarations.

Same permissions as the console: any signed-in user reads, staff change.
Authentication is a personal token (`Authorization: Bearer cb_…`, see
jobs/tokens.py) or the console's session; a session-authenticated call that
changes something must carry the CSRF token, a token call need not (a
browser never attaches the header by itself).

Every answer is JSON. Errors are `{"code", "message", "field"}`; a
validation failure adds `errors`, the full list in the same shape. The
schemas check a request's shape; each operation then validates its meaning
with the job form (or the task form, the cron module) and calls a service;
nothing writes a job or a run directly.
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
from ninja import Body, NinjaAPI, Query
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.parser import Parser
from ninja.utils import normalize_path, replace_path_param_notation

from jobs import access, cron, jsontext, services, tokens
from jobs import api_schemas as schemas
from jobs.forms import PROPERTY_FIELDS, JobForm, TaskForm, check_instant
from jobs.handlers import registry
from jobs.models import AuditEvent, Job, Run, parse_run_cursor
from jobs.serializers import (
    JOB_FIELDS,
    handler_to_dict,
    job_page,
    job_to_dict,
    json_page,
    run_to_dict,
    spec_to_form_data,
)
from jobs.text import CODE as TEXT_CODE
from jobs.text import find_unstorable, storable

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


def api_view(*methods: str, public: bool = False, read_body: bool = False, staff: tuple[str, ...] = ()):
    """Wrap an endpoint: allowed methods, authentication (and staff for the
    `staff` methods, decided before the request's shape is looked at), JSON
    errors. An exception nothing expected still answers JSON (500, code
    server_error) and is logged; it never shows a stack trace."""

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
            except services.SaveBusy as exc:
                return ApiError(409, "busy", str(exc)).response()
            except services.StaleJobError as exc:
                return ApiError(409, "stale_version", str(exc), "version").response()
            except services.GraphRefused as exc:
                return ApiError.invalid(exc.error_list()).response()
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


# -- operations, declared with django-ninja ------------------------------------------
#
# Their request and answer shapes are the schemas in jobs/api_schemas.py;
# ninja checks a request against them and writes the OpenAPI document from
# them (jobs/openapi.py only adds what is not a shape: security, the
# transport errors every operation may meet, links). They run inside the
# frame above (api_view: URL length, methods, authentication and CSRF, the
# body read once, JSON errors); ninja only parses and routes. An operation
# answers a JsonResponse built by jobs/serializers.py, which ninja passes on
# as it is.


class _JsonTextParser(Parser):
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
        unstorable = [name for name in data if find_unstorable(name)]
        if unstorable:
            raise ApiError.invalid(
                [
                    {
                        "code": TEXT_CODE,
                        "message": f"A field name contains {find_unstorable(name)}.",
                        "field": storable(name),
                    }
                    for name in unstorable
                ]
            )
        return data


class _Api(NinjaAPI):
    def get_content_type(self) -> str:
        return "application/json"  # as JsonResponse says it, everywhere in the API

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        from jobs.openapi import finish

        return finish(super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params))


ninja_api = _Api(
    title="Cronboard API",
    version="1",
    description="Jobs, runs and one-off tasks. Any signed-in user reads; staff change. "
    "Errors are {code, message, field}.",
    urls_namespace="ninja",
    openapi_url=None,
    docs_url=None,
    parser=_JsonTextParser(),
)

# Shape errors under the codes the API (and the job form) always gave them.
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
            problem = find_unstorable(error.get("input")) or "an unpaired surrogate"
            code, message = TEXT_CODE, f"Contains {problem}, which cannot be stored."
        if code == "unknown_field":
            if problem := find_unstorable(field):
                # The field's name is the bad input: named, it could not be shown or stored.
                code, message, field = TEXT_CODE, f"A field name contains {problem}.", storable(field)
            else:
                field = field[:50]
                message = f"Unknown field “{field}”."
        item = {"code": code, "message": message, "field": field}
        # A value that fits no member of a union fails once per member: one is enough.
        if not any(seen["code"] == code and seen["field"] == field for seen in out):
            out.append(item)
    return out


@ninja_api.exception_handler(NinjaValidationError)
def _on_shape_error(request, exc):
    # A job or run that does not exist is a 404 whatever the body says.
    kwargs = request.resolver_match.kwargs if request.resolver_match else {}
    if "job_id" in kwargs:
        _job(request, kwargs["job_id"])
    if "run_id" in kwargs:
        access.get_run_for_user(request.user, kwargs["run_id"])
    return ApiError.invalid(_shape_errors(exc.errors)).response()


@ninja_api.exception_handler(HttpError)
def _on_http_error(request, exc):
    # ninja wraps what the parser raised ("Cannot parse request body").
    if isinstance(exc.__cause__, ApiError):
        return exc.__cause__.response()
    return ApiError(exc.status_code, "bad_request", str(exc.message)[:200]).response()


@ninja_api.exception_handler(Http404)
@ninja_api.exception_handler(Exception)
def _reraise(request, exc):
    # Everything else is answered by api_view, as for every endpoint.
    raise exc


def _ninja_urls() -> list:
    """ninja's routes, each wrapped in the API's frame. Body-taking methods
    get the body read first (_read_body), so a chunked one is not empty."""
    methods, staff = {}, {}
    for route, path_view in ninja_api.default_router.path_operations.items():
        route = normalize_path(replace_path_param_notation(route)).lstrip("/")
        # In the order declared (the Allow header lists them so).
        methods[route] = list(
            dict.fromkeys(method for operation in path_view.operations for method in operation.methods)
        )
        staff[route] = tuple(
            method
            for operation in path_view.operations
            if operation.operation_id not in OPEN_TO_VIEWERS
            for method in operation.methods
            if method not in SAFE_METHODS
        )
    patterns, seen = [], set()
    for pattern in ninja_api.urls[0]:
        route = str(pattern.pattern)
        # Only operations: not the index page ninja adds at "".
        if route in methods and route not in seen:
            seen.add(route)
            view = api_view(*methods[route], read_body=True, staff=staff[route])(pattern.callback)
            patterns.append(path(route, view, name=pattern.name))
    return patterns


# Operations that change nothing although their method is not a safe one.
OPEN_TO_VIEWERS = {"previewCron"}


def _require_edit(request) -> None:
    if not access.can_edit(request.user):
        raise ApiError(403, "forbidden", "Only staff can change jobs and start runs.")


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


def _job(request, job_id) -> Job:
    return access.get_job_for_user(request.user, job_id)


def _spec(payload: schemas.JobFields) -> dict:
    """The fields the client sent, as the jobs-as-code spec reads them."""
    return payload.model_dump(include=payload.model_fields_set & {*JOB_FIELDS, "version"})


ERRORS = {400: schemas.Error, 401: schemas.Error}
EDIT_ERRORS = {**ERRORS, 403: schemas.Error}
OBJECT_ERRORS = {401: schemas.Error, 404: schemas.Error}
JOB_ID = "{int:job_id}"
RUN_ID = "{int:run_id}"


# -- jobs -------------------------------------------------------------------------


@ninja_api.get(
    "/jobs",
    operation_id="listJobs",
    url_name="jobs",
    summary="Live jobs you can see, oldest first, in pages; properties only with include=properties.",
    response={200: schemas.JobList, **ERRORS},
)
def list_jobs(request, filters: Query[schemas.JobFilters]):
    """Keyset-paginated on (created_at, id)."""
    jobs = access.visible_jobs(request.user, namespace=filters.namespace).select_related("owner")
    if filters.state:
        jobs = jobs.filter(state=filters.state)
    if filters.kind:
        jobs = jobs.filter(kind=filters.kind)
    properties = filters.include == schemas.INCLUDE_PROPERTIES
    if not properties:
        jobs = jobs.defer("properties")
    page = job_page(
        jobs,
        limit=filters.limit,
        after=_decode_cursor(filters.cursor) if filters.cursor else None,
        render=lambda job: json.dumps(job_to_dict(job, properties=properties)),
    )
    return HttpResponse(page.envelope(), content_type="application/json")


@ninja_api.post(
    "/jobs",
    operation_id="createJob",
    summary="Create a job (staff).",
    response={201: schemas.Job, **EDIT_ERRORS},
)
def create_job(request, payload: schemas.JobCreate):
    form = JobForm(spec_to_form_data(_spec(payload)), user=request.user)
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    job = services.save_job(job=form.save(commit=False), user=request.user, via=VIA)
    return JsonResponse(job_to_dict(job), status=201)


@ninja_api.get(
    f"/jobs/{JOB_ID}",
    operation_id="getJob",
    url_name="job",
    summary="One job.",
    response={200: schemas.Job, **OBJECT_ERRORS},
)
def get_job(request, job_id: int):
    return JsonResponse(job_to_dict(_job(request, job_id)))


def _save_job(request, job_id: int, payload: schemas.JobFields, *, replace: bool):
    job = _job(request, job_id)
    spec = _spec(payload)
    # PUT replaces (left-out fields take defaults); PATCH keeps them.
    form = JobForm(
        spec_to_form_data(spec, instance=None if replace else job), instance=job, user=request.user
    )
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    job = services.save_job(
        job=form.save(commit=False), user=request.user, via=VIA, expected_version=spec.get("version")
    )
    return JsonResponse(job_to_dict(job))


@ninja_api.put(
    f"/jobs/{JOB_ID}",
    operation_id="replaceJob",
    summary="Replace a job (staff); fields left out take their defaults.",
    response={200: schemas.Job, **EDIT_ERRORS, 404: schemas.Error, 409: schemas.Error},
)
def replace_job(request, job_id: int, payload: schemas.JobCreate):
    return _save_job(request, job_id, payload, replace=True)


@ninja_api.patch(
    f"/jobs/{JOB_ID}",
    operation_id="updateJob",
    summary="Change some fields of a job (staff).",
    response={200: schemas.Job, **EDIT_ERRORS, 404: schemas.Error, 409: schemas.Error},
)
def update_job(request, job_id: int, payload: schemas.JobInput):
    return _save_job(request, job_id, payload, replace=False)


@ninja_api.delete(
    f"/jobs/{JOB_ID}",
    operation_id="deleteJob",
    summary="Soft-delete a job (staff); built-in jobs cannot be deleted (409).",
    response={204: None, 401: schemas.Error, 403: schemas.Error, 404: schemas.Error, 409: schemas.Error},
)
def delete_job(request, job_id: int):
    services.delete_job(job=_job(request, job_id), user=request.user, via=VIA)
    return HttpResponse(status=204)


@ninja_api.post(
    f"/jobs/{JOB_ID}/toggle",
    operation_id="toggleJob",
    url_name="job_toggle",
    summary="Pause an enabled job; resume a paused one or re-enable a crashed one (staff).",
    response={
        200: schemas.Job,
        401: schemas.Error,
        403: schemas.Error,
        404: schemas.Error,
        409: schemas.Error,
    },
)
def toggle_job(request, job_id: int):
    job = _job(request, job_id)
    if job.state == Job.State.ENABLED:
        job = services.pause_job(job=job, user=request.user, via=VIA)
    else:
        job = services.resume_job(job=job, user=request.user, via=VIA)
    return JsonResponse(job_to_dict(job))


@ninja_api.post(
    f"/jobs/{JOB_ID}/run",
    operation_id="runJob",
    url_name="job_run",
    summary="Queue a manual run (staff; refused in demo mode).",
    description="The body may be left out. `properties` overrides the job's properties for this run "
    "only (merged over them, validated like the job's own; 400 with field `properties` if not). "
    "While a manual run is queued or running, that run is the answer (200, not 201).",
    response={
        201: schemas.Run,
        200: schemas.Run,
        **EDIT_ERRORS,
        404: schemas.Error,
        409: schemas.Error,
    },
)
def run_job(request, job_id: int, payload: Body[schemas.RunNow] = None):
    job = _job(request, job_id)
    overrides = payload.properties if payload is not None else None
    try:
        run, created = services.run_now(
            job=job, user=request.user, via=VIA, trigger=Run.Trigger.API, properties=overrides
        )
    except ValidationError as exc:
        raise ApiError.invalid(
            [
                {"code": exc.code or "invalid", "message": message, "field": "properties"}
                for message in exc.messages
            ]
        ) from None
    return JsonResponse(run_to_dict(run), status=201 if created else 200)


@ninja_api.get(
    f"/jobs/{JOB_ID}/runs",
    operation_id="listRuns",
    url_name="job_runs",
    summary="The job's runs, newest scheduled first.",
    response={200: schemas.RunPage, **ERRORS, 404: schemas.Error},
)
def list_job_runs(request, job_id: int, filters: Query[schemas.RunFilters]):
    """Keyset-paginated on (scheduled_at, id)."""
    job = _job(request, job_id)
    return _run_page(Run.objects.filter(job=job), filters)


@ninja_api.get(
    "/runs",
    operation_id="listAllRuns",
    url_name="runs",
    summary="Runs across all jobs (and one-off tasks), newest scheduled first.",
    response={200: schemas.RunPage, **ERRORS},
)
def list_runs(request, filters: Query[schemas.AllRunFilters]):
    runs = access.visible_runs(request.user)
    if filters.job is not None:
        runs = runs.filter(job_id=filters.job)
    return _run_page(runs, filters)


def _run_page(runs, filters: schemas.RunFilters):
    statuses = [s for s in (filters.status or "").split(",") if s]
    if statuses:
        runs = runs.filter(status__in=statuses)
    if filters.trigger:
        runs = runs.filter(trigger=filters.trigger)
    if filters.from_:
        runs = runs.filter(scheduled_at__gte=_parse_time(filters.from_, "from"))
    if filters.to:
        runs = runs.filter(scheduled_at__lt=_parse_time(filters.to, "to"))
    if filters.cursor:
        runs = runs.older_than(*_decode_cursor(filters.cursor))
    # The log (256 K characters) is getRun's alone.
    runs = runs.defer("log").order_by("-scheduled_at", "-id")[: filters.limit + 1]
    page = json_page(runs, limit=filters.limit, render=lambda run: json.dumps(run_to_dict(run)))
    return HttpResponse(page.envelope(), content_type="application/json")


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    parsed = parse_run_cursor(cursor)
    if parsed is None:
        raise ApiError(400, "invalid", "This cursor is not one the API gave out.", "cursor")
    return parsed


@ninja_api.get(
    "/dashboard",
    operation_id="getDashboard",
    url_name="dashboard",
    summary="Jobs by state, the last 24 hours' runs by status and success rate, jobs needing attention, live runs.",
    response={200: schemas.Dashboard, 401: schemas.Error},
)
def dashboard(request):
    """The console dashboard's figures (jobs.overview.dashboard_figures)."""
    from jobs.overview import dashboard_figures

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


@ninja_api.get(
    "/upcoming",
    operation_id="listUpcomingFires",
    url_name="upcoming",
    summary="Fires of the next 24 hours or 7 days across jobs, earliest first.",
    response={200: schemas.UpcomingPage, **ERRORS},
)
def list_upcoming(request, query: Query[schemas.UpcomingQuery]):
    """Fires in the window across the jobs the caller may see, in time order (jobs.upcoming)."""
    from jobs import upcoming as fires

    after = None
    if query.cursor:
        after = fires.parse_cursor(query.cursor)
        if after is None:
            raise ApiError(400, "invalid", "This cursor is not one the API gave out.", "cursor")
    now = timezone.now()
    page, more = fires.upcoming_fires(
        access.visible_jobs(request.user),
        start=now,
        end=now + fires.WINDOWS[query.window],
        limit=query.limit,
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


# -- runs, handlers, tasks ---------------------------------------------------------------


@ninja_api.get(
    f"/runs/{RUN_ID}",
    operation_id="getRun",
    url_name="run",
    summary="One run, with its log.",
    response={200: schemas.RunDetail, **OBJECT_ERRORS},
)
def get_run(request, run_id: int):
    return JsonResponse(run_to_dict(access.get_run_for_user(request.user, run_id), with_log=True))


@ninja_api.post(
    f"/runs/{RUN_ID}/cancel",
    operation_id="cancelRun",
    url_name="run_cancel",
    summary="Cancel a queued run, or ask a running one to stop (staff).",
    response={
        200: schemas.Run,
        401: schemas.Error,
        403: schemas.Error,
        404: schemas.Error,
        409: schemas.Error,
    },
)
def cancel_run(request, run_id: int):
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
    url_name="handlers",
    summary="Registered Python handlers (what the job form offers).",
    response={200: schemas.HandlerList, 401: schemas.Error},
)
def handlers(request):
    return JsonResponse({"results": [handler_to_dict(info) for info in registry.available()]})


@ninja_api.post(
    "/tasks",
    operation_id="enqueueTask",
    url_name="tasks",
    summary="Enqueue a one-off task (staff; refused in demo mode).",
    description="A live task with the same handler and key is the answer instead (200, not 201).",
    response={201: schemas.Run, 200: schemas.Run, **EDIT_ERRORS},
)
def enqueue_task(request, payload: schemas.TaskInput):
    services.check_demo_mode("enqueuing tasks")
    data = payload.model_dump(exclude_none=True)
    form = TaskForm(data)
    if not form.is_valid():
        raise ApiError.invalid(form.error_list())
    now = services.write_time()
    (run,) = services.enqueue_many([form.task_request()], now=now)
    return JsonResponse(run_to_dict(run), status=201 if run.created_at == now else 200)


# -- cron preview ------------------------------------------------------------------


@ninja_api.post(
    "/cron/preview",
    operation_id="previewCron",
    url_name="cron_preview",
    summary="Describe an expression and list its next fire times (any signed-in user).",
    response={200: schemas.Preview, **ERRORS},
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


# -- the document and its page ----------------------------------------------------------


@api_view("GET", public=True)
def schema(request):
    return JsonResponse(ninja_api.get_openapi_schema(path_prefix="/api/"))


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
    path("schema", schema, name="schema"),
    path("docs", api_docs, name="docs"),
    *_ninja_urls(),
    # Anything else under /api/ is a JSON 404, never the HTML error page
    # (a path with a newline in it included: `.` would not match it).
    re_path(r"^(?P<rest>[\s\S]*)\Z", not_found, name="not_found"),
]
