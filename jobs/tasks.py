"""One-off tasks: a registered handler queued by key, run once by the
scheduler (`enqueue`, the API's POST /api/tasks, JobScope.enqueue). One
(handler, key) has at most one queued or running task."""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, transaction

from jobs.core.dbclock import write_time
from jobs.core.wakeup import wake_schedulers
from jobs.handlers import registry
from jobs.models import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_RETRY_INTERVAL_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    Job,
    Run,
)


@dataclass
class TaskRequest:
    handler: str
    key: str
    properties: dict[str, str] = field(default_factory=dict)
    run_after: datetime | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    retry_interval_seconds: int = DEFAULT_RETRY_INTERVAL_SECONDS
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS


def enqueue(
    handler: str,
    *,
    key: str,
    properties: dict[str, str] | None = None,
    run_after: datetime | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    retry_interval_seconds: int = DEFAULT_RETRY_INTERVAL_SECONDS,
    timeout_seconds: int = DEFAULT_TIMEOUT_SECONDS,
) -> Run:
    """Queue a one-off task. One (handler, key) has at most one queued or
    running task: enqueuing it again returns the existing one."""
    (run,) = enqueue_many(
        [
            TaskRequest(
                handler=handler,
                key=key,
                properties=properties or {},
                run_after=run_after,
                max_retries=max_retries,
                retry_interval_seconds=retry_interval_seconds,
                timeout_seconds=timeout_seconds,
            )
        ]
    )
    return run


def enqueue_many(requests: Iterable[TaskRequest], *, now: datetime | None = None) -> list[Run]:
    """Queue several tasks; duplicates inside the batch and against live
    tasks collapse onto one run. Returns one run per request, in order."""
    now = write_time(now)
    requests = list(requests)
    for request in requests:
        _validate_task(request)
    by_key: dict[tuple[str, str], Run] = {}
    with transaction.atomic():
        wanted = {(r.handler, r.key) for r in requests}
        for run in Run.objects.filter(
            trigger=Run.Trigger.TASK,
            status__in=Run.LIVE,
            handler__in={h for h, _ in wanted},
            task_key__in={k for _, k in wanted},
        ):
            by_key.setdefault((run.handler, run.task_key), run)
        for request in requests:
            ident = (request.handler, request.key)
            if ident in by_key:
                continue
            try:
                with transaction.atomic():
                    by_key[ident] = Run.objects.create(
                        trigger=Run.Trigger.TASK,
                        handler=request.handler,
                        task_key=request.key,
                        properties={str(k): str(v) for k, v in request.properties.items()},
                        scheduled_at=request.run_after or now,
                        run_after=request.run_after or now,
                        max_retries=request.max_retries,
                        retry_interval_seconds=request.retry_interval_seconds,
                        timeout_seconds=request.timeout_seconds,
                        created_at=now,
                    )
            except IntegrityError:
                # Another process queued it between our read and our insert.
                by_key[ident] = Run.objects.get(
                    trigger=Run.Trigger.TASK,
                    status__in=Run.LIVE,
                    handler=request.handler,
                    task_key=request.key,
                )
    wake_schedulers()
    return [by_key[(r.handler, r.key)] for r in requests]


def _validate_task(request: TaskRequest) -> None:
    if not registry.is_registered(request.handler):
        raise ValueError(f"handler {request.handler!r} is not registered")
    if not request.key or len(request.key) > 200:
        raise ValueError("a task needs a key of 1 to 200 characters")
    if not 1 <= request.timeout_seconds <= Job.MAX_TIMEOUT_SECONDS:
        raise ValueError(f"timeout must be between 1 and {Job.MAX_TIMEOUT_SECONDS} seconds")
    if request.max_retries < 0 or request.retry_interval_seconds < 0:
        raise ValueError("retries and retry interval cannot be negative")
