"""The process executor (JOBS_EXECUTOR=process, the default): every run
executes in a child process, so a handler that spins past its deadline,
segfaults, exhausts memory or calls os._exit takes only its own process down.

The pool has one slot per concurrent run (JOBS_MAX_CONCURRENT_RUNS). Each slot
is a thread of the scheduler that owns one child process and talks to it over
a multiprocessing Pipe: it sends a run, receives the run's log as it is
written and then its outcome, and watches the child's sentinel. The child
stays for the next run; one that died, or was killed, is replaced.

Why not concurrent.futures.ProcessPoolExecutor: it cannot kill the process
of one task (a task past its deadline would keep its worker until it
returns, and a worker that dies breaks the whole executor), and it has no
channel for a log streamed while the task runs. multiprocessing's Process
and Pipe give exactly that, with its maintained start methods.

Children come from the "forkserver" start method: a clean server process,
started once, imports Django and sets it up (jobs.engine.execution.forkserver), then forks
each child from itself. So a child starts in milliseconds, and it shares
nothing with the scheduler: no database connection, no lock, no thread
(a plain fork of the scheduler would copy its open connections and the
SQLite scheduler lock). Each child opens its own connections when a handler
needs them and closes them after every run.

The scheduler stays in charge of time: at a run's deadline, or when it is
cancelled, the scheduler records the run and the slot terminates the child
(SIGTERM, then SIGKILL after GRACE_SECONDS). The slot counts as busy until
the child is gone, then a new child takes its place.
"""

import ctypes
import importlib
import logging
import multiprocessing
import os
import pickle
import queue
import resource
import select
import signal
import socket
import threading
import time
from multiprocessing.connection import wait as wait_for

from jobs.engine.execution.executors import Flight, HandlerRef, Outcome, executing, take_outcomes
from jobs.engine.execution.logbuffer import Chunk, LogBuffer, cap_text
from jobs.handlers.base import JobContext

log = logging.getLogger("cronboard.scheduler")

GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL
START_TIMEOUT_SECONDS = 60.0  # a child that is not ready by then failed to start
FLUSH_EVERY = 0.2  # seconds: how often a child sends the log written since
PR_SET_PDEATHSIG = 1
MEMORY_SIGNALS = {signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS}

# Payload of a run, besides the handler: the JobContext fields it is rebuilt from.
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
    "job",
    "run",
)


def memory_error_message(memory_mb: int) -> str:
    return f"MemoryError: the run went past its memory cap of {memory_mb} MB (JOBS_RUN_MEMORY_MB)"


def describe_exit(exitcode: int | None, memory_mb: int | None) -> str:
    """Why a child ended before its run did, for the run's error."""
    if exitcode is None or exitcode >= 0:
        return f"the run's process exited with status {exitcode} before the run finished"
    try:
        sig = signal.Signals(-exitcode)
        what = f"signal {sig.name} ({signal.strsignal(sig) or sig.name})"
    except ValueError:
        sig, what = None, f"signal {-exitcode}"
    text = f"the run's process was killed by {what} before the run finished"
    if memory_mb and sig in MEMORY_SIGNALS:
        # Past RLIMIT_AS an allocation fails: Python raises MemoryError, but
        # C code may abort or crash instead, and the kernel's OOM killer kills.
        text += f"; its memory cap is {memory_mb} MB (JOBS_RUN_MEMORY_MB), which it may have exceeded"
    return text


class ChildStartError(Exception):
    pass


_context = None
_context_lock = threading.Lock()


def mp_context():
    """The forkserver context, its server preloading Django (jobs.engine.execution.forkserver)."""
    global _context
    with _context_lock:
        if _context is None:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["jobs.engine.execution.forkserver"])
            _context = ctx
        return _context


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


class ProcessPool:
    """Runs each run in a child process from a reusable pool of `size`. The
    same interface as the thread executor (jobs.engine.execution.threads)."""

    def __init__(self, size: int, *, memory_mb: int | None = None, log_keep: int = 0):
        self.size = size
        self.memory_mb = memory_mb or None
        self.log_keep = log_keep
        self.flights: dict[int, Flight] = {}
        self._outcomes: queue.SimpleQueue = queue.SimpleQueue()
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running: dict[int, _Slot] = {}  # run id → the slot executing it
        self._stopping: dict[int, Flight] = {}  # abandoned runs whose child is not gone yet
        self._slots: list[_Slot] = []
        self._config: dict | None = None
        self.start_seconds: list[float] = []  # how long each child took to be ready

    @property
    def free_slots(self) -> int:
        with self._lock:
            return self.size - executing(self.flights) - len(self._stopping)

    @property
    def abandoned_count(self) -> int:
        """Runs given up on whose child is still being stopped."""
        with self._lock:
            return len(self._stopping)

    def child_pids(self) -> list[int]:
        return [
            slot.process.pid
            for slot in self._slots
            if slot.process is not None and _exitcode(slot.process) is None
        ]

    def warm(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        """Start every slot and its child now (the first runs do not wait
        for them); returns once they are ready or `timeout` passed."""
        if self._slots:
            return
        self._config = {
            "settings": settings_snapshot(),
            "memory_mb": self.memory_mb,
            "log_keep": self.log_keep,
        }
        self._slots = [_Slot(self, n + 1) for n in range(self.size)]
        for slot in self._slots:
            slot.thread.start()
        until = time.monotonic() + timeout
        for slot in self._slots:
            slot.ready.wait(max(0.0, until - time.monotonic()))

    def start(self, flight: Flight, make_handler: HandlerRef) -> None:
        if not self._slots:
            self.warm()
        with self._lock:
            self.flights[flight.run_id] = flight
        self._work.put((flight, make_handler))

    def abandon(self, run_id: int) -> Flight | None:
        """Stop waiting for a run: its child is terminated, and its slot is
        free again once the child is gone. A run no slot took yet is dropped."""
        with self._lock:
            flight = self.flights.pop(run_id, None)
            if flight is None:
                return None
            flight.ctx.cancelled.set()
            slot = self._running.get(run_id)
            if slot is not None:
                self._stopping[run_id] = flight
                slot.request_stop()
        return flight

    def wake(self) -> None:
        self._outcomes.put(None)

    def wait(self, timeout: float) -> list[Outcome]:
        """Block up to `timeout` seconds for the next outcome, then take all
        that are ready. Outcomes of abandoned runs are dropped; a slot that
        became free wakes this up too."""
        return take_outcomes(self._outcomes, self.flights, timeout)

    def close(self, timeout: float = GRACE_SECONDS + 1) -> None:
        """Stop every child (idle ones leave at once, busy ones are
        terminated) and the slot threads."""
        with self._lock:
            for run_id in list(self.flights):
                slot = self._running.get(run_id)
                if slot is not None:
                    self._stopping[run_id] = self.flights[run_id]
                    slot.request_stop()
            self.flights.clear()
        for _ in self._slots:
            self._work.put(None)
        until = time.monotonic() + timeout
        for slot in self._slots:
            slot.thread.join(max(0.0, until - time.monotonic()))
            slot.retire()
        self._slots = []

    # -- called by the slot threads ------------------------------------------

    def _begin(self, flight: Flight, slot: "_Slot") -> bool:
        with self._lock:
            if flight.run_id not in self.flights:
                return False  # abandoned before a slot took it
            self._running[flight.run_id] = slot
            slot.stop_requested = False
            return True

    def _end(self, flight: Flight, outcome: Outcome | None) -> None:
        with self._lock:
            self._running.pop(flight.run_id, None)
            self._stopping.pop(flight.run_id, None)
        flight.done.set()
        # None still wakes the loop: a slot is free.
        self._outcomes.put(outcome)


class _Slot:
    """One worker slot: a thread of the scheduler and the child it owns."""

    def __init__(self, pool: ProcessPool, number: int):
        self.pool = pool
        self.number = number
        self.process = None
        self.conn = None
        self.ready = threading.Event()
        self.stop_requested = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self.thread = threading.Thread(target=self._loop, name=f"run-slot-{number}", daemon=True)

    def request_stop(self) -> None:
        """(Under the pool's lock.) Terminate the child of the current run."""
        self.stop_requested = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def _loop(self) -> None:
        try:
            self._spawn()
        except ChildStartError as exc:
            log.error("run slot %d: %s", self.number, exc)
        finally:
            self.ready.set()
        while True:
            item = self.pool._work.get()
            if item is None:
                return
            flight, ref = item
            if not self.pool._begin(flight, self):
                self.pool._end(flight, None)
                continue
            try:
                outcome = self._execute(flight, ref)
            except Exception as exc:  # the slot must survive whatever happened
                log.exception("run slot %d: run %s", self.number, flight.run_id)
                outcome = Outcome(flight.run_id, "failed", error=f"the run's process failed: {exc}")
                self.retire()
            if outcome is not None:
                outcome.log = flight.ctx.log_text()
            self.pool._end(flight, outcome)
            if self.process is None:
                try:
                    self._spawn()  # the replacement, ready before the next run
                except ChildStartError as exc:
                    log.error("run slot %d: %s", self.number, exc)

    def _spawn(self) -> None:
        ctx = mp_context()
        parent, child = ctx.Pipe(duplex=True)
        started = time.monotonic()
        process = ctx.Process(
            target=child_main,
            args=(child, self.pool._config),
            name=f"cronboard-run-{self.number}",
            daemon=True,
        )
        with _MP_LOCK:
            process.start()
        child.close()
        ready = wait_for([parent, process.sentinel], START_TIMEOUT_SECONDS)
        message = None
        if parent in ready:
            try:
                message = parent.recv()
            except (EOFError, OSError):
                pass
        if not (isinstance(message, tuple) and message[:1] == ("ready",)):
            _stop(process, wait=0)
            parent.close()
            detail = message[1] if isinstance(message, tuple) and message[:1] == ("error",) else ""
            raise ChildStartError(
                f"a run process could not start ({describe_exit(_exitcode(process), None)}){': ' + detail if detail else ''}"
            )
        self.process, self.conn = process, parent
        self.pool.start_seconds.append(time.monotonic() - started)
        log.debug("run slot %d: child process %d ready", self.number, process.pid)

    def _execute(self, flight: Flight, ref: HandlerRef) -> Outcome | None:
        if self.process is None:
            try:
                self._spawn()
            except ChildStartError as exc:
                return Outcome(flight.run_id, "failed", error=str(exc))
        ctx = flight.ctx
        payload = {name: getattr(ctx, name) for name in CONTEXT_FIELDS}
        try:
            self.conn.send(("run", ref, ref.module(), payload))
        except (OSError, EOFError):
            return self._child_gone(flight.run_id)
        except Exception as exc:  # a payload that does not pickle
            return Outcome(
                flight.run_id, "failed", error=f"the run could not be handed to its process: {exc}"
            )
        buffer = ctx._log
        signalled_at = None
        while True:
            timeout = (
                None if signalled_at is None else max(0.0, signalled_at + GRACE_SECONDS - time.monotonic())
            )
            ready = wait_for([self.conn, self.process.sentinel, self._wake_r], timeout)
            if self._wake_r in ready:
                try:
                    os.read(self._wake_r, 64)
                except BlockingIOError:
                    pass
            if self.conn in ready or (self.process.sentinel in ready and self._poll()):
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    return self._child_gone(flight.run_id)
                kind = message[0]
                if kind == "log":
                    buffer.merge(Chunk(*message[1:]))
                    continue
                if kind == "done":
                    _, status, result, error, recycle = message
                    if recycle:
                        self.retire()
                    return Outcome(flight.run_id, status, result=result, error=error)
            elif self.process.sentinel in ready:
                return self._child_gone(flight.run_id)
            if self.stop_requested:
                if signalled_at is None:
                    signalled_at = time.monotonic()
                    self._signal(signal.SIGTERM)
                elif time.monotonic() >= signalled_at + GRACE_SECONDS:
                    self._signal(signal.SIGKILL)
                    return self._child_gone(flight.run_id)

    def _poll(self) -> bool:
        try:
            return self.conn.poll()
        except (OSError, EOFError):
            return False

    def _signal(self, sig: int) -> None:
        # exitcode polls the child first: a pid already reaped is never signalled.
        if self.process is not None and _exitcode(self.process) is None:
            try:
                os.kill(self.process.pid, sig)
            except ProcessLookupError:
                pass

    def _child_gone(self, run_id: int) -> Outcome | None:
        """The child ended: an outcome that says how, unless the run was
        given up on (then its end was our doing, and it is recorded already)."""
        exitcode = _reap(self.process)
        with self.pool._lock:
            stopped = self.stop_requested
        self.retire()
        if stopped:
            return None
        return Outcome(run_id, "failed", error=describe_exit(exitcode, self.pool.memory_mb))

    def retire(self) -> None:
        """Let the child go: an idle one reads the closed pipe and exits; one
        that does not is killed."""
        process, conn = self.process, self.conn
        self.process = self.conn = None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
        if process is not None:
            _stop(process, wait=1)


# multiprocessing reads a forkserver child's exit status from its sentinel
# once, in whichever thread polls first, and Process.start() polls every
# other child: two slot threads polling at once made one of them read the
# end of the pipe instead (exit status 255). Every start and poll holds this
# lock; blocking waits happen on the sentinel, outside it.
_MP_LOCK = threading.Lock()


def _exitcode(process) -> int | None:
    with _MP_LOCK:
        return process.exitcode


def _reap(process, timeout: float | None = None) -> int | None:
    """Wait for the child to end (up to `timeout`); its exit code, or None."""
    wait_for([process.sentinel], timeout)
    with _MP_LOCK:
        process.join(0)
        return process.exitcode


def _stop(process, *, wait: float) -> None:
    """Give the child `wait` seconds to leave, then kill it."""
    if _reap(process, wait) is None:
        if _exitcode(process) is None:
            try:
                process.kill()
            except ProcessLookupError:
                pass
        _reap(process)


# -- the child --------------------------------------------------------------------


def child_main(conn, config: dict) -> None:
    """A run process: set up, say ready, then run what arrives until the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the scheduler; it drains
    _die_with_parent()
    try:
        _setup(config)
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", os.getpid()))
    threading.Thread(target=_exit_with_scheduler, args=(conn,), name="scheduler-watch", daemon=True).start()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        _, ref, module, payload = message
        if _run(conn, ref, module, payload, config):
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
    from asgiref.local import Local
    from django.apps import apps

    if not apps.ready:
        django.setup()
    from django.conf import settings
    from django.db import connections

    for name, value in config["settings"].items():
        setattr(settings, name, value)
    # Connections are configured from DATABASES at first use; forget what
    # this process may have read or made before the scheduler's values were set.
    connections.__dict__.pop("settings", None)
    connections._settings = None
    connections._connections = Local(connections.thread_critical)
    if config["memory_mb"]:
        limit = config["memory_mb"] * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


class _Streamer:
    """Sends what the handler logs to the scheduler every FLUSH_EVERY
    seconds, from a thread started by the first line."""

    def __init__(self, conn, buffer: LogBuffer):
        self.conn, self.buffer = conn, buffer
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
            chunk = self.buffer.take()
            if chunk.length:
                self.conn.send(("log", *chunk))

    def finish(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        self.flush()


class _ChildContext(JobContext):
    """The handler's JobContext in a child: its log lines go to the scheduler."""

    streamer: "_Streamer"

    def log(self, message: str) -> None:
        super().log(message)
        self.streamer.poke()


def _run(conn, ref: HandlerRef, module: str | None, payload: dict, config: dict) -> bool:
    """One run; True if this process should not take another."""
    from django.db import connections

    from jobs.engine.execution.executors import run_handler

    keep = config["log_keep"]
    ctx = _ChildContext(**payload, log_keep=keep)
    ctx.streamer = _Streamer(conn, ctx._log)
    memory_error = memory_error_message(config["memory_mb"]) if config["memory_mb"] else None

    def make_handler():
        if module:
            importlib.import_module(module)
        return ref()

    outcome = run_handler(ctx, make_handler, **({"memory_error": memory_error} if memory_error else {}))
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
        )
    )
    return recycle
