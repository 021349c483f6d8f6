"""`make_pool`: the executor JOBS_EXECUTOR names (jobs.engine.execution.pool
is the interface both have)."""

from django.conf import settings

from jobs.engine.execution.pool import Pool
from jobs.engine.execution.processes import ProcessPool
from jobs.engine.execution.threads import WorkerPool


def make_pool(size: int, *, executor: str | None = None, log_keep: int | None = None) -> Pool:
    """The executor JOBS_EXECUTOR (or `executor`) names, with `size` slots:
    `process` (the default) runs each run in a child process that can be
    killed; `thread` runs it in a thread of the scheduler, sharing its memory."""
    executor = executor or settings.JOBS_EXECUTOR
    log_keep = settings.JOBS_MAX_MESSAGE_CHARS if log_keep is None else log_keep
    if executor == "process":
        return ProcessPool(size, memory_mb=settings.JOBS_RUN_MEMORY_MB, log_keep=log_keep)
    if executor == "thread":
        return WorkerPool(size)
    raise ValueError(f"unknown executor {executor!r} (process or thread)")
