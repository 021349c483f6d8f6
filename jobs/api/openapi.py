"""What the OpenAPI document at /api/schema says besides the shapes.

django-ninja writes the document from the operations of jobs/api/ and the
schemas in jobs/api/schemas/; `finish` only adds what is no shape: how to
authenticate, the answers the API's frame (jobs.api.framework.api_view)
gives any operation before it runs (411, 413, 414, each with the Error
shape), the two operations that frame serves itself (the document and its
page), and links from a created job to what can be done with it. Nothing
here describes a request or an answer body of its own."""

from jobs.api.framework import MAX_URL_CHARS

ERROR = {"$ref": "#/components/schemas/Error"}
# Answers from the frame, before an operation runs.
FRAME_ERRORS = {
    "400": "The request is invalid: `code` says why, `field` says where; `errors` lists every problem.",
    "414": f"The URL (path and query) is longer than {MAX_URL_CHARS:,} characters (code uri_too_long).",
}
BODY_ERRORS = {
    "411": "A chunked body this server cannot read: send Content-Length (code length_required).",
    "413": "The body is larger than the server accepts (code too_large).",
}
DESCRIPTIONS = {
    "200": "OK.",
    "201": "Created.",
    "204": "Done; no content.",
    "401": "No valid token or session.",
    "403": "Signed in, but not allowed: the role lacks the action, a CSRF check failed, demo mode, or an SQL job by a non-superuser.",
    "404": "No such object, or not visible to you.",
    "409": "Conflict: a stale `version`, or an action that does not apply to the object as it is.",
    **FRAME_ERRORS,
    **BODY_ERRORS,
}
# From a created job to its operations (clients and Schemathesis's stateful phase follow these).
JOB_LINKS = ("getJob", "replaceJob", "updateJob", "toggleJob", "runJob", "listRuns", "deleteJob")

SECURITY_SCHEMES = {
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
}

FRAME_OPERATIONS = {
    "/api/docs": {
        "get": {
            "operationId": "getDocs",
            "summary": "This document as an interactive page (Swagger UI, served locally; signed-in users).",
            "responses": {
                "200": {"description": "The page.", "content": {"text/html": {"schema": {"type": "string"}}}},
                "401": {
                    "description": DESCRIPTIONS["401"],
                    "content": {"application/json": {"schema": ERROR}},
                },
            },
        },
    },
    "/api/schema": {
        "get": {
            "operationId": "getSchema",
            "summary": "This document (no authentication needed).",
            "security": [],
            "responses": {
                "200": {
                    "description": "The OpenAPI document.",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                }
            },
        },
    },
}


def _error(status: str) -> dict:
    return {"description": DESCRIPTIONS[status], "content": {"application/json": {"schema": ERROR}}}


def _finish_operation(operation: dict) -> dict:
    responses = {}
    for status, response in operation["responses"].items():
        status = str(status)
        if status in DESCRIPTIONS:
            response = {**response, "description": DESCRIPTIONS[status]}
        responses[status] = response
    frame = {**FRAME_ERRORS, **(BODY_ERRORS if "requestBody" in operation else {})}
    for status in frame:
        responses.setdefault(status, _error(status))
    operation = {**operation, "responses": responses}
    if operation.get("operationId") == "createJob":
        links = {
            name: {"operationId": name, "parameters": {"job_id": "$response.body#/id"}} for name in JOB_LINKS
        }
        operation["responses"]["201"] = {**responses["201"], "links": links}
    return operation


def finish(document: dict) -> dict:
    """ninja's document with the frame's answers, authentication and links."""
    paths = {
        path: {
            method: _finish_operation(operation)
            if isinstance(operation, dict) and "responses" in operation
            else operation
            for method, operation in item.items()
        }
        for path, item in document["paths"].items()
    }
    return {
        **document,
        "security": [{"bearerAuth": []}, {"sessionAuth": []}],
        "paths": {**paths, **FRAME_OPERATIONS},
        "components": {**document.get("components", {}), "securitySchemes": SECURITY_SCHEMES},
    }
