"""The child side of the process executor (jobs.engine.execution.processes):
what a run process does, and the payload a run travels in.

A child sets itself up once (the scheduler's settings, its memory cap, a
death signal tied to the fork server), says it is ready, then runs what
arrives over its pipe until the pipe closes: each run's log goes back every
FLUSH_EVERY seconds, then its outcome. Django is imported inside the
functions that run in the child, after `_setup` applied the scheduler's
settings.
"""

import ctypes
import enum
import functools
import importlib
import operator
import os
import pickle
import resource
import select
import signal
import socket
import threading
import time
from collections.abc import Callable

from jobs.core.logbuffer import Chunk, cap_text
from jobs.engine.clock import Clock
from jobs.engine.execution.pool import HandlerRef, run_handler
from jobs.handlers.base import RunContext

FLUSH_EVERY = 0.2  # seconds: how often a child sends the log written since
PR_SET_PDEATHSIG = 1


# Payload of a run, besides the handler: the JobContext fields it is rebuilt
# from. The job and run rows travel as their column values (`_row`), which
# pickle in a third of the time a model instance takes.
CONTEXT_FIELDS = (
    "run_id",
    "fire_id",
    "attempt",
    "scheduled_at",
    "deadline",
    "properties",
    "job_id",
    "job_name",
    "task_key",
    "sql_write",
    "upstream",
    "shard_index",
    "shard_total",
)


def memory_error_message(memory_mb: int) -> str:
    return f"MemoryError: the run went past its memory cap of {memory_mb} MB (JOBS_RUN_MEMORY_MB)"


@functools.cache
def _values(model) -> Callable:
    """Reads a `model` instance's column values, in field order, as a tuple;
    a choices member (`Run.Status.RUNNING`, as the engine sets it) as its
    plain value, as a row read from the database has it, which pickles in a
    tenth of the time (an enum member pickles through Python code)."""
    fields = model._meta.concrete_fields
    read = operator.attrgetter(*(field.attname for field in fields))
    chosen = [i for i, field in enumerate(fields) if field.choices]

    def values(obj) -> tuple:
        row = read(obj)
        members = [i for i in chosen if isinstance(row[i], enum.Enum)]
        if not members:
            return row
        row = list(row)
        for i in members:
            row[i] = row[i].value
        return tuple(row)

    return values


def _row(obj):
    """A model instance as (model label, its column values), for a child
    to rebuild (`_instance`); None stays None."""
    if obj is None:
        return None
    return obj._meta.label, _values(type(obj))(obj)


def _instance(row):
    if row is None:
        return None
    from django.apps import apps
    from django.db import DEFAULT_DB_ALIAS

    label, values = row
    return apps.get_model(label).from_db(DEFAULT_DB_ALIAS, None, values)


def payload_of(ctx: RunContext) -> dict:
    """What a child needs to rebuild the run's JobContext (`context_from`)."""
    payload = {name: getattr(ctx, name) for name in CONTEXT_FIELDS}
    payload["job"], payload["run"] = _row(ctx.job), _row(ctx.run)
    payload["clock_offset"] = ctx.clock_offset
    return payload


def settings_snapshot() -> dict:
    """The scheduler's settings as they are now, for its children: a child
    loads the same settings module, but a value set at run time (tests, the
    test database's name) exists only here. Values that do not pickle stay
    as the child loads them."""
    from django.conf import settings

    snapshot = {}
    for name in dir(settings):
        if not name.isupper():
            continue
        value = getattr(settings, name)
        try:
            pickle.dumps(value)
        except Exception:
            continue
        snapshot[name] = value
    return snapshot


def take_token(token, run_id: int) -> bool:
    """Take the token of the run `run_id`, handed over before its time (a
    shared integer under its lock): True for the one process, the pool
    (ProcessPool.withdraw) or the child (at the run's time), that takes it
    first; that one decides whether the run starts."""
    with token.get_lock():
        if token.value != run_id:
            return False
        token.value = 0
        return True


def _wait_until(at: float) -> None:
    """Sleep until time.monotonic() reaches `at` (the run's time)."""
    while (left := at - time.monotonic()) > 0:
        time.sleep(left)


def child_main(conn, config: dict, token=None) -> None:
    """A run process: set up, say ready, then run what arrives until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the scheduler; it drains
    _die_with_parent()
    try:
        _setup(config)
    except BaseException as exc:
        message = ("error", f"{type(exc).__name__}: {exc}")
    else:
        message = ("ready", os.getpid())
    try:
        conn.send(message)
    except OSError:
        return  # the scheduler let go of this process before it was ready (it closed the pool)
    if message[0] == "error":
        return
    threading.Thread(target=_exit_with_scheduler, args=(conn,), name="scheduler-watch", daemon=True).start()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        _, kind, name, module, payload, at = message
        if at is not None:
            # Handed over before its time: start it then, unless the pool
            # took it back meanwhile (ProcessPool.withdraw).
            _wait_until(at)
            if not take_token(token, payload["run_id"]):
                conn.send(("withdrawn", payload["run_id"]))
                continue
        if _run(conn, HandlerRef(kind, name), module, payload, config):
            return  # after a MemoryError: a fresh process for the next run


def _exit_with_scheduler(conn) -> None:
    """End this process when the scheduler is gone (its end of the pipe
    closes), even in the middle of a run. PR_SET_PDEATHSIG alone does not
    do it: the fork server is our parent, and it stays up while any child
    (holding its liveness pipe, as multiprocessing makes every child do) is
    alive. The scheduler never writes during a run, so the pipe turns
    readable then only at its end; between runs a message may be waiting
    for the main thread, which is peeked at, not read."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    while True:
        select.select([sock], [], [])
        try:
            data = sock.recv(1, socket.MSG_PEEK)
        except OSError:
            data = b""
        if not data:
            os._exit(1)
        time.sleep(0.05)


def _die_with_parent() -> None:
    """Killed when the process that forked us (the forkserver, which exits
    with the scheduler) goes: a scheduler killed with -9 leaves no run behind."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        parent = os.getppid()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)
    except (OSError, AttributeError):
        pass  # not Linux: the closed pipe still ends an idle child


def _setup(config: dict) -> None:
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from django.conf import settings
    from django.db import connections

    for name, value in config["settings"].items():
        setattr(settings, name, value)
    # Connections are configured from DATABASES at first use; forget what
    # this process may have read or made before the scheduler's values were
    # set (the fork server's set-up): the handler's connection wrappers and
    # the cached settings (a cached_property, read again once deleted).
    for wrapper in connections.all(initialized_only=True):
        del connections[wrapper.alias]
    connections.__dict__.pop("settings", None)
    if config["memory_mb"]:
        limit = config["memory_mb"] * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class _Streamer:
    """Sends what the handler logs to the scheduler every FLUSH_EVERY
    seconds, from a thread started by the first line."""

    def __init__(self, conn, take: Callable[[], Chunk]):
        self.conn, self.take = conn, take
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def poke(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="log-stream", daemon=True)
            self.thread.start()

    def _loop(self) -> None:
        while not self.done.wait(FLUSH_EVERY):
            self.flush()

    def flush(self) -> None:
        with self.lock:
            chunk = self.take()
            if chunk.length:
                self.conn.send(("log", *chunk))

    def finish(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        self.flush()


class _ChildContext(RunContext):
    """The handler's JobContext in a child: its log lines go to the scheduler."""

    streamer: _Streamer

    def stream_to(self, conn) -> _Streamer:
        self.streamer = _Streamer(conn, self.take_log)
        return self.streamer

    def log(self, message: str) -> None:
        super().log(message)
        self.streamer.poke()


def context_from(payload: dict) -> dict:
    """The JobContext fields `payload_of` sent, with the job and run rows
    rebuilt (the run's job cached on it, as it was in the scheduler)."""
    fields = dict(payload)
    job, run = _instance(payload["job"]), _instance(payload["run"])
    if run is not None and job is not None and run.job_id == job.pk:
        type(run)._meta.get_field("job").set_cached_value(run, job)
    fields["job"], fields["run"] = job, run
    fields["clock"] = Clock(offset=fields.pop("clock_offset"))
    return fields


def _run(conn, ref: HandlerRef, module: str | None, payload: dict, config: dict) -> bool:
    """One run; True if this process should not take another."""
    started = time.monotonic()  # sent with the outcome (ProcessPool: a run handed over ahead)
    from django.db import connections

    keep = config["log_keep"]
    ctx = _ChildContext(**context_from(payload), log_keep=keep)
    ctx.stream_to(conn)
    memory_error = memory_error_message(config["memory_mb"]) if config["memory_mb"] else None

    def make_handler():
        if module:
            importlib.import_module(module)
        return ref()

    outcome = run_handler(ctx, make_handler, **({"memory_error": memory_error} if memory_error else {}))
    # When it ended, on the monotonic clock the scheduler shares (the loop
    # may read the outcome later: ProcessPool.wait's `quiet`).
    ended = time.monotonic()
    recycle = outcome.error.startswith("MemoryError")
    try:
        connections.close_all()
    except Exception:
        pass
    ctx.streamer.finish()
    conn.send(
        (
            "done",
            outcome.status,
            cap_text(outcome.result, outcome.result, len(outcome.result), keep),
            cap_text(outcome.error, outcome.error, len(outcome.error), keep),
            recycle,
            ended,
            started,
        )
    )
    return recycle
