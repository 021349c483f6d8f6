"""What a log line is about, for every process: the request id of the web
request being served, the scheduler node's worker id, and the job, run and
fire time a piece of work concerns.

Kept in context variables, so a value set while serving one request (a
gunicorn thread) or doing one step never leaks into another. `ContextFilter`
copies them onto each log record, where the JSON formatter
(CRONBOARD_LOG_FORMAT=json, config/settings.py) writes them as fields; the
plain format ignores them. The audit trail reads the request id from here
(`request_id()`), so an audit row and the log lines of the request that
wrote it share it.

A line about one job or run passes its fields itself, e.g.
`log.warning("...", extra=about(run=run))`: the fields win over the context.
"""

import contextvars
import logging
import re
import uuid
from collections.abc import Mapping
from contextlib import contextmanager
from types import MappingProxyType

# The fields, in the order the JSON line shows them.
FIELDS = ("request_id", "worker_id", "job_id", "job_name", "run_id", "fire_time")

_context: contextvars.ContextVar[Mapping] = contextvars.ContextVar(
    "cronboard_log_context", default=MappingProxyType({})
)

# A request id taken from X-Request-ID as sent: a proxy's or a client's token
# (a UUID, a hex string); anything else is replaced by a fresh one, so a
# header cannot write arbitrary text into the logs and the audit trail.
REQUEST_ID_CHARS = 64
_REQUEST_ID = re.compile(rf"[A-Za-z0-9._:-]{{1,{REQUEST_ID_CHARS}}}")


def usable_request_id(sent: str | None) -> str:
    """The id a request goes by: the one it sent if it is a plain token, else a new one."""
    if sent and _REQUEST_ID.fullmatch(sent):
        return sent
    return uuid.uuid4().hex


def current() -> Mapping:
    return _context.get()


def request_id() -> str:
    return _context.get().get("request_id", "")


@contextmanager
def bound(**fields):
    """Add `fields` to the context for the duration of the block."""
    token = _context.set({**_context.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _context.reset(token)


def bind_process(**fields) -> None:
    """Fields true for the rest of this process's life (a scheduler's worker id)."""
    _context.set({**_context.get(), **fields})


def about(*, job=None, run=None) -> dict:
    """The `extra` of a log line about one job and/or run."""
    fields: dict = {}
    if run is not None:
        fields["run_id"] = run.pk
        if run.scheduled_at is not None:
            fields["fire_time"] = run.scheduled_at.isoformat()
        if job is None and run.job_id is not None:
            fields["job_id"] = run.job_id
            job = run.job if type(run).job.is_cached(run) else None
    if job is not None:
        fields["job_id"], fields["job_name"] = job.pk, job.name
    return fields


class ContextFilter(logging.Filter):
    """Puts the context's fields on every record (those the call passed in
    `extra` are kept). Django logs a request's 4xx and 5xx answer
    ("Not Found: /x") after the middleware returned, with the request
    attached: its id is read from there."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in _context.get().items():
            if not hasattr(record, name):
                setattr(record, name, value)
        if not hasattr(record, "request_id"):
            request_id = getattr(getattr(record, "request", None), "request_id", None)
            if request_id:
                record.request_id = request_id
        return True
