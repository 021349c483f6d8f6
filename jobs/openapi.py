"""The OpenAPI 3.1 document for /api/, served at /api/schema.

The operations declared with django-ninja (jobs/api.py, shapes in
jobs/api_schemas.py) are described by ninja from their declarations; the
ones not moved yet are written here by hand, each in one place only.
tests/test_api_schema.py checks that every route and method in the URLconf
is here (and nothing else), and validates real answers against these
schemas."""

from jobs import cron
from jobs.api import MAX_URL_CHARS
from jobs.channels import MAX_CHANNELS
from jobs.channels import MAX_URL_CHARS as MAX_CHANNEL_URL_CHARS
from jobs.config import ALERT_KINDS, MAX_ALERT_SECONDS, MAX_EMAILS, MIN_ALERT_SECONDS
from jobs.forms import MAX_ALERT_THRESHOLD, MAX_DESCRIPTION_CHARS
from jobs.models import Job, Run
from jobs.serializers import JOB_FIELDS


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str, **extra) -> dict:
    return {"type": [kind, "null"], **extra}


TIME = _nullable("string", format="date-time")

ERROR_RESPONSES = {
    "400": "The request is invalid: `code` says why, `field` says where; `errors` lists every problem.",
    "401": "No valid token or session.",
    "403": "Signed in, but not allowed: not staff, a CSRF check failed, demo mode, or an SQL job by a non-superuser.",
    "404": "No such object, or not visible to you.",
    "405": "Method not allowed here.",
    "409": "Conflict: a stale `version`, or an action that does not apply to the object as it is.",
    "411": "A chunked body this server cannot read: send Content-Length (code length_required).",
    "413": "The body is larger than the server accepts (code too_large).",
    "414": f"The URL (path and query) is longer than {MAX_URL_CHARS:,} characters (code uri_too_long).",
}
# Every operation may meet these (400: e.g. more query fields than Django reads); a body-taking one also 411 and 413.
ANY_ERRORS = ("400", "414")
BODY_ERRORS = ("411", "413")


def _errors(*statuses: str) -> dict:
    return {
        status: {
            "description": ERROR_RESPONSES[status],
            "content": {"application/json": {"schema": _ref("Error")}},
        }
        for status in statuses
    }


def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: dict) -> dict:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def _id_param(name: str, what: str) -> dict:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": f"The {what}'s id.",
        "schema": {"type": "integer"},
    }


def _query(name: str, description: str, schema: dict) -> dict:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


RUN_FILTERS = [
    _query("status", "Only these statuses (comma-separated).", {"type": "string"}),
    _query("trigger", "Only this trigger.", {"type": "string", "enum": list(Run.Trigger.values)}),
    _query("from", "Scheduled at or after (ISO-8601; no zone means UTC).", {"type": "string"}),
    _query("to", "Scheduled before (ISO-8601).", {"type": "string"}),
    _query("limit", "Page size.", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}),
    _query("cursor", "next_cursor from the previous page.", {"type": "string"}),
]


JOB_INPUT_PROPERTIES = {
    "name": {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "description": "Unique among live jobs; no control, bidi-override or zero-width characters "
        "(code invalid_characters).",
    },
    "description": {"type": "string", "maxLength": MAX_DESCRIPTION_CHARS},
    "namespace": {
        "type": "string",
        "maxLength": 100,
        "description": "Lower-case letters, digits, - and _; empty for none.",
    },
    "kind": {"type": "string", "enum": list(Job.Kind.values)},
    "handler": {
        "type": "string",
        "description": "For python jobs: a registered handler (GET /api/handlers).",
    },
    "properties": {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "maxProperties": 100,
        "propertyNames": {"maxLength": 200},
        "description": "Parameters for the handler; url/method/headers/body for http, sql for sql. "
        "Names are trimmed; two equal names are refused (code duplicate_key).",
    },
    "after": {
        "type": "array",
        "maxItems": 50,
        "description": "Upstream jobs: this job runs after each final run of each that matches `on` "
        "(default success). An unknown upstream is refused with code 47007, a cycle with 47008.",
        "items": {
            "type": "object",
            "additionalProperties": False,
            "required": ["job"],
            "properties": {
                "job": {"type": "string", "maxLength": 200},
                "on": {"type": "string", "enum": ["success", "failure", "finish"], "default": "success"},
            },
        },
    },
    "schedule_type": {
        "type": "string",
        "enum": list(Job.ScheduleType.values),
        "description": "none: no schedule of its own (runs by hand or after upstream jobs).",
    },
    "cron_expression": {
        "type": "string",
        "maxLength": cron.MAX_EXPRESSION_CHARS,
        "description": "Six fields, seconds first (five get 0 seconds); for schedule_type cron.",
    },
    "interval_seconds": _nullable(
        "integer", minimum=Job.MIN_INTERVAL_SECONDS, maximum=Job.MAX_INTERVAL_SECONDS
    ),
    "timezone": {
        "type": "string",
        "maxLength": cron.MAX_ZONE_CHARS,
        "description": "IANA name, any case (stored canonically: europe/berlin → Europe/Berlin); "
        "empty means UTC; cron fields are read in it.",
    },
    "misfire_policy": {"type": "string", "enum": list(Job.MisfirePolicy.values)},
    "run_once": {"type": "boolean"},
    "sql_write": {"type": "boolean"},
    "max_retries": {"type": "integer", "minimum": 0, "maximum": 100},
    "retry_interval_seconds": {"type": "integer", "minimum": 0, "maximum": Job.MAX_TIMEOUT_SECONDS},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": Job.MAX_TIMEOUT_SECONDS},
    "alert_threshold": {
        "type": "integer",
        "minimum": 0,
        "maximum": MAX_ALERT_THRESHOLD,
        "description": "Consecutive failed fires that crash the job; 0 never.",
    },
    "alert_emails": {
        "type": "array",
        "maxItems": MAX_EMAILS,
        "items": {"type": "string", "format": "email"},
        "description": f"At most {MAX_EMAILS} distinct addresses (code too_many).",
    },
    "alert_channels": {
        "type": "array",
        "maxItems": MAX_CHANNELS,
        "items": {"type": "string", "maxLength": MAX_CHANNEL_URL_CHARS},
        "description": (
            "Apprise URLs (slack://…, json://host/path …). Read back masked; "
            "sending a masked URL back unchanged keeps the stored one."
        ),
    },
    "alert_on": {
        "type": "array",
        "items": {"type": "string", "enum": list(ALERT_KINDS)},
        "description": "Kinds of alert for this job; empty: the sys.job.alertOn setting.",
    },
    "late_after_seconds": {
        "type": ["integer", "null"],
        "minimum": MIN_ALERT_SECONDS,
        "maximum": MAX_ALERT_SECONDS,
        "description": "late: a fire not started this long after its time; null: sys.job.lateAfterSeconds.",
    },
    "long_running_seconds": {
        "type": ["integer", "null"],
        "minimum": MIN_ALERT_SECONDS,
        "maximum": MAX_ALERT_SECONDS,
        "description": "long_running: a run still going after this long (below the timeout); null: the setting.",
    },
    "notify_recovered": {
        "type": "boolean",
        "description": "Also send a notice when the job next succeeds after a crash.",
    },
    "state": {
        "type": "string",
        "enum": [Job.State.ENABLED, Job.State.PAUSED],
        "description": "A crashed job is re-enabled by the toggle, not by setting its state.",
    },
}
JOB_OUTPUT_PROPERTIES = {**JOB_INPUT_PROPERTIES, "state": {"type": "string", "enum": list(Job.State.values)}}

RUN_PROPERTIES = {
    "id": {"type": "integer"},
    "job_id": _nullable("integer", description="null for a one-off task."),
    "fire_id": {"type": "string", "format": "uuid", "description": "Shared by the attempts of one fire."},
    "scheduled_at": {"type": "string", "format": "date-time"},
    "attempt": {"type": "integer", "minimum": 1},
    "trigger": {"type": "string", "enum": list(Run.Trigger.values)},
    "status": {"type": "string", "enum": list(Run.Status.values)},
    "skip_reason": {"type": "string", "enum": ["", *Run.SkipReason.values]},
    "worker_id": {"type": "string"},
    "started_at": TIME,
    "finished_at": TIME,
    "duration_ms": _nullable("integer"),
    "result": {"type": "string"},
    "error": {"type": "string"},
    "properties": {
        "type": "object",
        "additionalProperties": {"type": "string"},
        "description": "A task's properties; a job's run: its property overrides ({} if none).",
    },
    "caused_by": _nullable(
        "integer", description="trigger upstream: the upstream run that started this one."
    ),
}
TASK_RUN_PROPERTIES = {
    "handler": {"type": "string", "description": "One-off tasks only: the task's handler."},
    "task_key": {"type": "string", "description": "One-off tasks only: the dedupe key."},
}

SCHEMAS = {
    "JobInput": {
        "type": "object",
        "description": "PATCH: fields left out keep their values. "
        "Read-only fields of Job are accepted and ignored; other unknown fields are an error.",
        "properties": {
            **JOB_INPUT_PROPERTIES,
            "version": {
                "type": "integer",
                "description": "PUT/PATCH: the version you read; a stale one is refused with 409.",
            },
        },
    },
    "JobCreate": {
        "type": "object",
        "description": "POST and PUT: fields left out take their defaults (a python job needs a handler, "
        "a cron job a cron_expression, an interval job interval_seconds). "
        "Read-only fields of Job are accepted and ignored; other unknown fields are an error.",
        "required": ["name"],
        "properties": {
            **JOB_INPUT_PROPERTIES,
            "version": {
                "type": "integer",
                "description": "PUT: the version you read; a stale one is refused with 409.",
            },
        },
    },
    "Job": {
        "type": "object",
        "additionalProperties": False,
        "required": [
            *JOB_FIELDS,
            "id",
            "version",
            "next_fire_at",
            "last_fire_at",
            "last_status",
            "consecutive_failures",
            "created_at",
            "updated_at",
        ],
        "properties": {
            "id": {"type": "integer"},
            **JOB_OUTPUT_PROPERTIES,
            "version": {"type": "integer", "minimum": 1},
            "next_fire_at": TIME,
            "last_fire_at": TIME,
            "last_status": {"type": "string"},
            "last_error": {"type": "string"},
            "last_duration_ms": _nullable("integer"),
            "consecutive_failures": {"type": "integer", "minimum": 0},
            "owner": _nullable("string", description="The owner's username."),
            "builtin": {"type": "boolean"},
            "created_at": {"type": "string", "format": "date-time"},
            "updated_at": {"type": "string", "format": "date-time"},
        },
    },
    "JobList": {
        "type": "object",
        "required": ["results"],
        "properties": {"results": {"type": "array", "items": _ref("Job")}},
    },
    "Run": {
        "type": "object",
        "required": list(RUN_PROPERTIES),
        "additionalProperties": False,
        "properties": {**RUN_PROPERTIES, **TASK_RUN_PROPERTIES},
    },
    "RunDetail": {
        "type": "object",
        "additionalProperties": False,
        "required": [*RUN_PROPERTIES, "log"],
        "properties": {**RUN_PROPERTIES, **TASK_RUN_PROPERTIES, "log": {"type": "string"}},
    },
    "RunPage": {
        "type": "object",
        "required": ["results", "next_cursor"],
        "properties": {
            "results": {"type": "array", "items": _ref("Run")},
            "next_cursor": _nullable(
                "string", description="Pass as `cursor` for the next page; null on the last."
            ),
        },
    },
    "Dashboard": {
        "type": "object",
        "required": [
            "jobs_by_state",
            "runs_24h_by_status",
            "success_rate_24h",
            "attention",
            "running",
            "running_count",
        ],
        "properties": {
            "jobs_by_state": {"type": "object", "additionalProperties": {"type": "integer"}},
            "runs_24h_by_status": {"type": "object", "additionalProperties": {"type": "integer"}},
            "success_rate_24h": _nullable(
                "number",
                description="Percent of finished runs (succeeded, failed, timed out, interrupted) that succeeded.",
            ),
            "attention": {
                "type": "array",
                "description": "Crashed jobs, then failing ones (most failures first), at most 20.",
                "items": {
                    "type": "object",
                    "required": ["id", "name", "state", "consecutive_failures"],
                    "properties": {
                        "id": {"type": "integer"},
                        "name": {"type": "string"},
                        "state": {"type": "string"},
                        "consecutive_failures": {"type": "integer"},
                    },
                },
            },
            "running": {
                "type": "array",
                "items": _ref("Run"),
                "description": "Queued and running runs, newest first, at most 20.",
            },
            "running_count": {"type": "integer"},
        },
    },
    "UpcomingPage": {
        "type": "object",
        "required": ["results", "next_cursor"],
        "properties": {
            "results": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["job", "name", "at", "local", "timezone", "dst"],
                    "properties": {
                        "job": {"type": "integer"},
                        "name": {"type": "string"},
                        "at": {"type": "string", "format": "date-time", "description": "UTC."},
                        "local": {
                            "type": "string",
                            "format": "date-time",
                            "description": "In the job's zone.",
                        },
                        "timezone": {"type": "string"},
                        "dst": _nullable(
                            "string",
                            enum=["repeated", "shifted", None],
                            description="repeated: a local time that happens twice; shifted: the first fire after clocks changed.",
                        ),
                    },
                },
            },
            "next_cursor": _nullable(
                "string", description="Pass as `cursor` for the next page; null on the last."
            ),
        },
    },
    "TaskInput": {
        "type": "object",
        "required": ["handler", "key"],
        "additionalProperties": False,
        "properties": {
            "handler": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "A registered handler.",
            },
            "key": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "Dedupe key: one live task per (handler, key).",
            },
            "properties": {"type": "object", "additionalProperties": {"type": "string"}},
            "run_after": {"type": "string", "format": "date-time"},
            "max_retries": {"type": "integer", "minimum": 0, "maximum": 100},
            "retry_interval_seconds": {"type": "integer", "minimum": 0, "maximum": Job.MAX_TIMEOUT_SECONDS},
            "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": Job.MAX_TIMEOUT_SECONDS},
        },
    },
}

JOB_ID = _id_param("job_id", "job")
# From a created job to what can be done with it (clients and Schemathesis's stateful phase follow these).
JOB_LINKS = {
    name: {"operationId": operation, "parameters": {"job_id": "$response.body#/id"}}
    for name, operation in (
        ("GetJob", "getJob"),
        ("ReplaceJob", "replaceJob"),
        ("UpdateJob", "updateJob"),
        ("ToggleJob", "toggleJob"),
        ("RunJob", "runJob"),
        ("ListRuns", "listRuns"),
        ("DeleteJob", "deleteJob"),
    )
}
RUN_ID = _id_param("run_id", "run")

PATHS = {
    "/api/jobs": {
        "get": {
            "operationId": "listJobs",
            "summary": "Live jobs you can see, by name.",
            "parameters": [
                _query("namespace", "Only this namespace (empty: jobs outside any).", {"type": "string"}),
                _query("state", "Only this state.", {"type": "string", "enum": list(Job.State.values)}),
                _query("kind", "Only this kind.", {"type": "string", "enum": list(Job.Kind.values)}),
            ],
            "responses": {"200": _json(_ref("JobList"), "The jobs."), **_errors("400", "401")},
        },
        "post": {
            "operationId": "createJob",
            "summary": "Create a job (staff).",
            "requestBody": _body(_ref("JobCreate")),
            "responses": {
                "201": {**_json(_ref("Job"), "The new job."), "links": JOB_LINKS},
                **_errors("400", "401", "403"),
            },
        },
    },
    "/api/jobs/{job_id}": {
        "parameters": [JOB_ID],
        "get": {
            "operationId": "getJob",
            "responses": {"200": _json(_ref("Job"), "The job."), **_errors("401", "404")},
        },
        "put": {
            "operationId": "replaceJob",
            "summary": "Replace a job (staff); fields left out take their defaults.",
            "requestBody": _body(_ref("JobCreate")),
            "responses": {
                "200": _json(_ref("Job"), "The saved job."),
                **_errors("400", "401", "403", "404", "409"),
            },
        },
        "patch": {
            "operationId": "updateJob",
            "summary": "Change some fields of a job (staff).",
            "requestBody": _body(_ref("JobInput")),
            "responses": {
                "200": _json(_ref("Job"), "The saved job."),
                **_errors("400", "401", "403", "404", "409"),
            },
        },
        "delete": {
            "operationId": "deleteJob",
            "summary": "Soft-delete a job (staff); built-in jobs cannot be deleted (409).",
            "responses": {"204": {"description": "Deleted."}, **_errors("401", "403", "404", "409")},
        },
    },
    "/api/jobs/{job_id}/toggle": {
        "parameters": [JOB_ID],
        "post": {
            "operationId": "toggleJob",
            "summary": "Pause an enabled job; resume a paused one or re-enable a crashed one (staff).",
            "responses": {
                "200": _json(_ref("Job"), "The job after the change."),
                **_errors("401", "403", "404", "409"),
            },
        },
    },
    "/api/jobs/{job_id}/run": {
        "parameters": [JOB_ID],
        "post": {
            "operationId": "runJob",
            "summary": "Queue a manual run (staff; refused in demo mode).",
            "description": (
                "The body may be empty. `properties` overrides the job's properties for this run only "
                "(merged over them, validated like the job's own; 400 with field `properties` if not)."
            ),
            "requestBody": {
                "required": False,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "properties": {
                                    "type": "object",
                                    "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
                                }
                            },
                        }
                    }
                },
            },
            "responses": {
                "201": _json(_ref("Run"), "The queued run."),
                "200": _json(_ref("Run"), "A manual run was already queued or running: that run."),
                **_errors("401", "403", "404", "409"),
            },
        },
    },
    "/api/jobs/{job_id}/runs": {
        "parameters": [JOB_ID],
        "get": {
            "operationId": "listRuns",
            "summary": "The job's runs, newest scheduled first.",
            "parameters": RUN_FILTERS,
            "responses": {"200": _json(_ref("RunPage"), "One page of runs."), **_errors("400", "401", "404")},
        },
    },
    "/api/dashboard": {
        "get": {
            "operationId": "getDashboard",
            "summary": "Jobs by state, the last 24 hours' runs by status and success rate, jobs needing attention, live runs.",
            "responses": {"200": _json(_ref("Dashboard"), "The figures."), **_errors("401")},
        },
    },
    "/api/upcoming": {
        "get": {
            "operationId": "listUpcomingFires",
            "summary": "Fires of the next 24 hours or 7 days across jobs, earliest first.",
            "parameters": [
                _query(
                    "window", "How far ahead.", {"type": "string", "enum": ["24h", "7d"], "default": "24h"}
                ),
                _query(
                    "limit", "Page size.", {"type": "integer", "minimum": 1, "maximum": 500, "default": 100}
                ),
                _query("cursor", "next_cursor from the previous page.", {"type": "string"}),
            ],
            "responses": {"200": _json(_ref("UpcomingPage"), "One page of fires."), **_errors("400", "401")},
        },
    },
    "/api/runs": {
        "get": {
            "operationId": "listAllRuns",
            "summary": "Runs across all jobs (and one-off tasks), newest scheduled first.",
            "parameters": [
                _query("job", "Only this job's runs.", {"type": "integer", "minimum": 1}),
                *RUN_FILTERS,
            ],
            "responses": {"200": _json(_ref("RunPage"), "One page of runs."), **_errors("400", "401")},
        },
    },
    "/api/runs/{run_id}": {
        "parameters": [RUN_ID],
        "get": {
            "operationId": "getRun",
            "responses": {"200": _json(_ref("RunDetail"), "The run with its log."), **_errors("401", "404")},
        },
    },
    "/api/runs/{run_id}/cancel": {
        "parameters": [RUN_ID],
        "post": {
            "operationId": "cancelRun",
            "summary": "Cancel a queued run, or ask a running one to stop (staff).",
            "responses": {
                "200": _json(_ref("Run"), "The run after the request."),
                **_errors("401", "403", "404", "409"),
            },
        },
    },
    "/api/tasks": {
        "post": {
            "operationId": "enqueueTask",
            "summary": "Enqueue a one-off task (staff; refused in demo mode).",
            "requestBody": _body(_ref("TaskInput")),
            "responses": {
                "201": _json(_ref("Run"), "The queued task."),
                "200": _json(_ref("Run"), "A live task with this handler and key already existed: that one."),
                **_errors("400", "401", "403"),
            },
        },
    },
    "/api/docs": {
        "get": {
            "operationId": "getDocs",
            "summary": "This document as an interactive page (Swagger UI, served locally; signed-in users).",
            "responses": {
                "200": {"description": "The page.", "content": {"text/html": {"schema": {"type": "string"}}}},
                **_errors("401"),
            },
        },
    },
    "/api/schema": {
        "get": {
            "operationId": "getSchema",
            "summary": "This document (no authentication needed).",
            "security": [],
            "responses": {"200": _json({"type": "object"}, "The OpenAPI document.")},
        },
    },
}


def _with_transport_errors(paths: dict) -> dict:
    """Add the answers any operation may get (414) and a body-taking one
    (411, 413) to every operation."""
    out = {}
    for path, item in paths.items():
        out[path] = dict(item)
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete") or path == "/api/schema":
                continue
            extra = ANY_ERRORS + (BODY_ERRORS if "requestBody" in operation else ())
            out[path][method] = {**operation, "responses": {**operation["responses"], **_errors(*extra)}}
    return out


def _with_handler_names(schemas: dict) -> dict:
    """Inputs name a handler from the registry (filled at start-up, hence
    here and not in SCHEMAS): a job may leave it empty (http and sql jobs),
    a task may not."""
    from jobs.handlers import registry

    names = sorted(info.name for info in registry.available())
    out = dict(schemas)
    for name, allowed in (("JobInput", ["", *names]), ("JobCreate", ["", *names]), ("TaskInput", names)):
        properties = dict(out[name]["properties"])
        properties["handler"] = {**properties["handler"], "enum": allowed}
        out[name] = {**out[name], "properties": properties}
    return out


def document(request=None) -> dict:
    from jobs.api import ninja_api

    generated = ninja_api.get_openapi_schema(path_prefix="/api/")
    paths = {
        path: {
            method: {**op, "responses": {str(k): v for k, v in op["responses"].items()}}
            for method, op in item.items()
        }
        for path, item in generated["paths"].items()
    }
    overlap = set(paths) & set(PATHS)
    assert not overlap, f"described twice: {overlap}"
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Cronboard API",
            "version": "1",
            "description": "Jobs, runs and one-off tasks. Any signed-in user reads; staff change. "
            "Errors are {code, message, field}.",
        },
        "security": [{"bearerAuth": []}, {"sessionAuth": []}],
        "paths": _with_transport_errors({**PATHS, **paths}),
        "components": {
            "schemas": {**_with_handler_names(SCHEMAS), **generated["components"]["schemas"]},
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A personal token from your profile page.",
                },
                "sessionAuth": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "sessionid",
                    "description": "The console's session; changes also need the X-CSRFToken header.",
                },
            },
        },
    }
