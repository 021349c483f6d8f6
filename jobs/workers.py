"""Executors: where handlers run, so the scheduler loop never waits on one.

JOBS_EXECUTOR picks one (`make_pool`): `process` (the default,
jobs.processes.ProcessPool) runs each run in a child process that can be
killed; `thread` (WorkerPool, below) runs it in a thread of the scheduler,
sharing its memory. Both keep only the capped head and tail of a run's log
(jobs.logbuffer) and report the same outcomes.

The thread executor: each run is handed to an idle daemon worker thread; a new one is started
only when none is idle (starting a thread per run cost the loop more than a
no-op handler does). A run that passes its deadline (or is cancelled) has
its `cancelled` event set and is *abandoned*: its slot is freed at once and
its outcome, if it ever comes, is ignored. Python cannot kill a thread, so a
handler that ignores `cancelled` keeps its thread until it returns; it no
longer holds a worker slot. `abandoned_count` says how many such handlers
are still running.
"""

import queue
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import connections

from jobs.handlers import registry
from jobs.handlers.base import HandlerError, JobContext, JobHandler

TRACEBACK_CHARS = 8000


@dataclass
class Outcome:
    run_id: int
    status: str  # "succeeded" | "failed"
    result: str = ""
    error: str = ""
    log: str = ""


MEMORY_ERROR = "MemoryError: the handler ran out of memory"


@dataclass
class Flight:
    """A run this process is executing."""

    run_id: int
    job_id: int | None
    is_task: bool
    attempt: int
    started_at: datetime
    deadline: datetime
    timeout_seconds: int
    ctx: JobContext
    thread: threading.Thread | None = None
    log_flushed: int = field(default=0)
    done: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class HandlerRef:
    """Which handler a run executes, in a form a child process can resolve
    too: the job's kind and, for python jobs, the registered name. Calling
    it makes the handler instance."""

    kind: str
    name: str = ""

    def __call__(self) -> JobHandler:
        return resolve_handler(self.kind, self.name)

    def module(self) -> str | None:
        """The module that registered a python handler here (a child process
        imports it before looking the name up); None if it is not registered."""
        if self.kind in ("http", "sql") or not registry.is_registered(self.name):
            return None
        return registry.get(self.name).__module__


def make_pool(size: int, *, executor: str | None = None, log_keep: int | None = None):
    """The executor JOBS_EXECUTOR (or `executor`) names, with `size` slots."""
    executor = executor or settings.JOBS_EXECUTOR
    log_keep = settings.JOBS_MAX_MESSAGE_CHARS if log_keep is None else log_keep
    if executor == "process":
        from jobs.processes import ProcessPool

        return ProcessPool(size, memory_mb=settings.JOBS_RUN_MEMORY_MB, log_keep=log_keep)
    if executor == "thread":
        return WorkerPool(size)
    raise ValueError(f"unknown executor {executor!r} (process or thread)")


def run_handler(
    ctx: JobContext, make_handler: Callable[[], JobHandler], *, memory_error: str = MEMORY_ERROR
) -> Outcome:
    """Run one handler and turn how it ended into an outcome (without its log)."""
    try:
        handler = make_handler()
        value = handler.run(ctx)
        return Outcome(ctx.run_id, "succeeded", result="" if value is None else str(value))
    except HandlerError as exc:
        return Outcome(ctx.run_id, "failed", error=str(exc) or type(exc).__name__)
    except registry.UnknownHandler as exc:
        return Outcome(ctx.run_id, "failed", error=str(exc))
    except MemoryError:
        # No traceback: formatting one may need the memory that ran out.
        return Outcome(ctx.run_id, "failed", error=memory_error)
    except BaseException as exc:
        detail = traceback.format_exc()[-TRACEBACK_CHARS:]
        return Outcome(ctx.run_id, "failed", error=f"{type(exc).__name__}: {exc}\n\n{detail}")


def resolve_handler(kind: str, name: str) -> JobHandler:
    """The handler instance for a job's kind (and, for python, its registered name)."""
    if kind == "http":
        from jobs.handlers.http import HttpJobHandler

        return HttpJobHandler()
    if kind == "sql":
        from jobs.handlers.sql import SqlJobHandler

        return SqlJobHandler()
    return registry.get(name)()


class WorkerPool:
    IDLE_EXIT_SECONDS = 60.0  # an idle worker thread that long unused exits

    def __init__(self, size: int):
        self.size = size
        self.flights: dict[int, Flight] = {}
        self._abandoned: list[Flight] = []
        self._outcomes: queue.SimpleQueue = queue.SimpleQueue()
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = 0
        self._idle_lock = threading.Lock()
        self._threads = 0

    @property
    def free_slots(self) -> int:
        return self.size - len(self.flights)

    @property
    def abandoned_count(self) -> int:
        self._abandoned = [f for f in self._abandoned if not f.done.is_set()]
        return len(self._abandoned)

    def start(self, flight: Flight, make_handler: Callable[[], JobHandler]) -> None:
        self.flights[flight.run_id] = flight
        with self._idle_lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._work.put((flight, make_handler))
        if spawn:
            self._threads += 1
            threading.Thread(target=self._worker, name=f"worker-{self._threads}", daemon=True).start()

    def abandon(self, run_id: int) -> Flight | None:
        """Stop waiting for a run: ask it to stop and free its slot."""
        flight = self.flights.pop(run_id, None)
        if flight is not None:
            flight.ctx.cancelled.set()
            if not flight.done.is_set():
                self._abandoned.append(flight)
        return flight

    def wake(self) -> None:
        """Make a pending wait() return now (signal handlers use this)."""
        self._outcomes.put(None)

    def wait(self, timeout: float) -> list[Outcome]:
        """Block up to `timeout` seconds for the next outcome, then take all
        that are ready. Outcomes of abandoned runs are dropped."""
        outcomes: list[Outcome] = []
        try:
            item = (
                self._outcomes.get(timeout=max(0.0, timeout)) if timeout > 0 else self._outcomes.get_nowait()
            )
        except queue.Empty:
            return outcomes
        while True:
            if item is not None and item.run_id in self.flights:
                outcomes.append(item)
            try:
                item = self._outcomes.get_nowait()
            except queue.Empty:
                return outcomes

    def _worker(self) -> None:
        """Take runs off the work queue until idle for IDLE_EXIT_SECONDS. The
        thread that starts a worker hands it its first run, so a fresh thread
        counts as busy, never idle, until that run is done."""
        while True:
            try:
                flight, make_handler = self._work.get(timeout=self.IDLE_EXIT_SECONDS)
            except queue.Empty:
                with self._idle_lock:
                    if self._idle > 0 and self._work.empty():
                        self._idle -= 1
                        return
                continue
            flight.thread = threading.current_thread()
            outcome = self._execute(flight, make_handler)
            flight.done.set()
            # Idle before the outcome is seen, so the run the loop starts next
            # can reuse this thread instead of starting another.
            with self._idle_lock:
                self._idle += 1
            self._outcomes.put(outcome)

    def warm(self) -> None:
        """Nothing to start ahead: a thread starts in microseconds."""

    def close(self, timeout: float = 0) -> None:
        """Nothing to stop: idle worker threads exit by themselves."""

    def _execute(self, flight: Flight, make_handler: Callable[[], JobHandler]) -> Outcome:
        ctx = flight.ctx
        outcome = run_handler(ctx, make_handler)
        try:
            # Handlers that used the ORM opened connections in this thread.
            connections.close_all()
        except Exception:
            pass
        outcome.log = ctx.log_text()
        return outcome
