"""The JSON API under /api/ (DESIGN.md "API", docs/api.md): one NinjaAPI
with a router per resource, every route wrapped in the API's frame
(jobs/api/framework.py), the document at /api/schema with its page, and a
JSON 404 for anything else under /api/."""

import json

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.urls import path, re_path, reverse
from ninja import NinjaAPI
from ninja.errors import HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.utils import normalize_path, replace_path_param_notation

from jobs.api import alerts, calendars, channels, jobs, overview, pools, preview, runs, secrets, tasks
from jobs.api.framework import (
    SAFE_METHODS,
    ApiError,
    JsonTextParser,
    api_view,
    on_http_error,
    on_shape_error,
    reraise,
)
from jobs.api.openapi import finish

# In the document's order: a path's place there is its router's place here.
ROUTERS = (
    jobs.router,
    pools.router,
    channels.router,
    overview.router,
    runs.router,
    alerts.router,
    tasks.router,
    secrets.router,
    preview.router,
    calendars.router,
)


class _Api(NinjaAPI):
    def get_content_type(self) -> str:
        return "application/json"  # as JsonResponse says it, everywhere in the API

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        return finish(super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params))


ninja_api = _Api(
    title="Cronboard API",
    version="1",
    description="Jobs, runs and one-off tasks. Each user reads and changes what their roles allow in their "
    "namespaces (viewer, operator, editor, admin; a token may be narrowed further). "
    "Errors are {code, message, field}.",
    urls_namespace="ninja",
    openapi_url=None,
    docs_url=None,
    parser=JsonTextParser(),
)
ninja_api.add_exception_handler(NinjaValidationError, on_shape_error)
ninja_api.add_exception_handler(HttpError, on_http_error)
ninja_api.add_exception_handler(Exception, reraise)
ninja_api.add_exception_handler(Http404, reraise)
for router in ROUTERS:
    ninja_api.add_router("", router)


def _ninja_urls() -> list:
    """ninja's routes, each wrapped in the API's frame. Body-taking methods
    get the body read first, so a chunked one is not empty."""
    methods, staff = {}, {}
    for router in ROUTERS:
        for route, path_view in router.path_operations.items():
            route = normalize_path(replace_path_param_notation(route)).lstrip("/")
            # In the order declared (the Allow header lists them so).
            methods[route] = list(
                dict.fromkeys(method for operation in path_view.operations for method in operation.methods)
            )
            staff[route] = tuple(
                method
                for operation in path_view.operations
                if operation.operation_id not in preview.OPEN_TO_VIEWERS
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


@api_view("GET", public=True)
def schema(request):
    return JsonResponse(ninja_api.get_openapi_schema(path_prefix="/api/"))


@api_view("GET")
def api_docs(request):
    """Swagger UI for the document, from the assets django-ninja ships (no
    CDN); signed-in users only (api_view: a session or a token)."""
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
