"""What every executor shares, and the interface the loop and the starter
use: a pool has `size` slots; it holds a `Flight` for each run it executes
and reports an `Outcome` for each run that ends. `HandlerRef` says which
handler a run calls, in a form a child process resolves too, and
`run_handler` turns how a handler ended into an outcome. The executors
(jobs.engine.execution.processes, .threads) import this module and nothing
of each other; `make_pool` (jobs.engine.execution.executors) picks one.
"""

import queue
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from jobs import kinds, secrets
from jobs.handlers import registry
from jobs.handlers.base import HandlerError, JobContext, JobHandler, RunContext

TRACEBACK_CHARS = 8000


@dataclass
class Outcome:
    run_id: int
    status: str  # "succeeded" | "failed"
    result: str = ""
    error: str = ""
    log: str = ""
    # The run's end as written, on the loop's clock, however long the write
    # waits (jobs.engine.pending.COLLECT_WITHIN): when the loop took it from
    # the pool, or by `ended_monotonic`, if the pool said.
    ended_at: datetime | None = None
    # When the handler returned, on time.monotonic() (a clock every process
    # of the host shares): a child process says, since the loop may read its
    # outcome some time after (ProcessPool.wait's `quiet`).
    ended_monotonic: float | None = None
    # A run handed over before its time (`Pool.start`'s `at`): when its
    # handler started, on time.monotonic(), as its child says; and that on
    # the loop's clock, once the loop took the outcome (jobs.engine.pending).
    started_monotonic: float | None = None
    started_at: datetime | None = None


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
    ctx: RunContext
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
        return kinds.handler_for(self.kind, self.name)

    def module(self) -> str | None:
        """The module that registered a python handler here (a child process
        imports it before looking the name up); None if it is not registered."""
        if kinds.get(self.kind).handler or not registry.is_registered(self.name):
            return None
        return registry.get(self.name).__module__


class Pool(Protocol):
    """What the loop, the starter and the recorder call on an executor."""

    size: int
    flights: dict[int, Flight]  # run id → the run it executes, until its outcome is written
    # Whether `start` takes `at`: the pool holds a run until its time itself,
    # so the loop need not wake to hand it over (the process pool).
    ahead: bool

    @property
    def free_slots(self) -> int:
        """Slots for new runs: `size` less the runs `executing` (and, for
        the process pool, the children still being stopped)."""

    @property
    def abandoned_count(self) -> int:
        """Runs given up on whose handler is still running."""

    def start(self, flight: Flight, make_handler: "HandlerRef", *, at: float | None = None) -> None:
        """Execute a run; its outcome comes from a later `wait`. `at` (a pool
        that is `ahead`): not before this time.monotonic(); until then the
        run may be taken back (`withdraw`)."""

    def withdraw(self, run_id: int) -> bool:
        """Take back a run started with `at` whose handler has not started:
        True, and it is forgotten (its slot is free once its worker is).
        False: it started, or is starting, and goes on as any run."""

    def abandon(self, run_id: int) -> Flight | None:
        """Stop waiting for a run: ask it to stop and free its slot."""

    def refresh(self) -> None:
        """Take in, without waiting, what tells of runs that ended since the
        last look, so `free_slots` counts their slots free; their outcomes
        come from the next `wait`."""

    def release(self, run_ids: Iterable[int]) -> None:
        """Forget runs whose outcome is written (jobs.engine.outcomes)."""

    def wait(self, timeout: float, *, quiet: float = 0.0) -> list[Outcome]:
        """Block up to `timeout` seconds for the next outcome, then take all
        that are ready. `quiet`: for that long at the start, an outcome need
        not end the wait (it is taken when the wait ends)."""

    def wake(self) -> None:
        """Make a pending `wait` return now (signal handlers use this)."""

    def warm(self) -> None:
        """Start what the first runs need, before they need it."""

    def close(self) -> None:
        """Stop executing and forget the runs."""


def executing(flights: dict[int, Flight]) -> int:
    """How many of a pool's `flights` hold a worker slot: those whose
    handler has not finished. A finished run whose outcome the loop has not
    written yet holds none: its thread (and child process) is free for the
    next run, so JOBS_MAX_CONCURRENT_RUNS caps the handlers running at once,
    and a burst of short runs does not wait for the loop's next write to
    find a slot. (Such a run stays in `flights`, and `running` in the
    database, until its outcome is written.)"""
    return sum(1 for flight in list(flights.values()) if not flight.done.is_set())


def take_outcomes(outcomes: queue.SimpleQueue, flights: dict[int, Flight], timeout: float) -> list[Outcome]:
    """A pool's `wait`: block up to `timeout` seconds for the next item on
    its `outcomes` queue, then take all that are ready. Outcomes of runs no
    longer in `flights` (abandoned) are dropped; a None only wakes."""
    taken: list[Outcome] = []
    try:
        item = outcomes.get(timeout=max(0.0, timeout)) if timeout > 0 else outcomes.get_nowait()
    except queue.Empty:
        return taken
    while True:
        if item is not None and item.run_id in flights:
            taken.append(item)
        try:
            item = outcomes.get_nowait()
        except queue.Empty:
            return taken


def run_handler(
    ctx: JobContext, make_handler: Callable[[], JobHandler], *, memory_error: str = MEMORY_ERROR
) -> Outcome:
    """Run one handler and turn how it ended into an outcome (without its
    log). The run's secret references are resolved here, in whichever
    process or thread runs the handler, as late as can be; what the handler
    returns or raises leaves with every secret's value hidden (its log
    lines are hidden as they are written, JobContext.log, and what it held
    back in case a value went on in the next line is written here)."""
    try:
        # A job's run may use only the secrets its namespace may; a task's, any.
        namespace = ctx.job.namespace if ctx.job is not None else None
        resolved = secrets.resolve(ctx.properties, namespace=namespace)
    except secrets.SecretMissing as exc:
        return Outcome(ctx.run_id, "failed", error=str(exc))
    except Exception as exc:  # the database is away: no value could be read
        return Outcome(
            ctx.run_id, "failed", error=f"the run's secrets could not be read: {type(exc).__name__}: {exc}"
        )
    ctx.properties = resolved.properties
    ctx.redacted = secrets.redaction_forms(resolved.values)
    outcome = _outcome(ctx, make_handler, memory_error)
    ctx.release_log()
    if ctx.redacted:
        outcome.result = secrets.redact(outcome.result, ctx.redacted)
        outcome.error = secrets.redact(outcome.error, ctx.redacted)
    return outcome


def _outcome(ctx: JobContext, make_handler: Callable[[], JobHandler], memory_error: str) -> Outcome:
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
