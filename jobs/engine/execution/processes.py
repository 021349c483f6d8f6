"""The process executor (JOBS_EXECUTOR=process, the default): every run
executes in a child process, so a handler that spins past its deadline,
segfaults, exhausts memory or calls os._exit takes only its own process down.

The pool has one child process per concurrent run (JOBS_MAX_CONCURRENT_RUNS),
each reached over a multiprocessing Pipe: the scheduler sends it a run,
receives the run's log as it is written and then its outcome, and watches
its sentinel. The child stays for the next run; one that died, or was
killed, is replaced.

Everything the pool does happens in the scheduler's loop, in `start` and in
`wait`: `start` hands a run to an idle child (one pipe write); `wait` polls
every child's pipe and sentinel at once, and turns what arrived into log
lines, outcomes, dead children and ready replacements. A wait may be
`quiet` for a while: what the children send does not end it then (each
run's end is the child's own time, sent with its outcome), and it is read
when the wait ends, so runs ending one by one cost the loop no wake-up
each. A run may be handed over before its time (`start`'s `at`: a fire
planned ahead): its child waits for the time and starts it then, so fires
due one by one cost the loop no wake-up each either. Until its time it
may be taken back (`withdraw`): the pool and the child each try to take
the run's token, a shared integer under its lock, and the one that takes
it first decides whether the run starts. No thread per child, so a run
costs the loop no thread hand-over and no wait for the GIL (see
docs/benchmarks.md, "The executors").

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
cancelled, the scheduler records the run and the pool terminates the child
(SIGTERM, then SIGKILL after GRACE_SECONDS, both from `wait`). The child's
place counts as busy until the child is gone, then a new child takes it.
"""

import logging
import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
from collections import deque
from collections.abc import Iterable

from jobs.core.logbuffer import Chunk
from jobs.engine.execution.child import child_main, payload_of, settings_snapshot, take_token
from jobs.engine.execution.pool import Flight, HandlerRef, Outcome, executing

log = logging.getLogger("cronboard.scheduler")

GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL
START_TIMEOUT_SECONDS = 60.0  # a child that is not ready by then failed to start
MEMORY_SIGNALS = {signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS}


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


class _Child:
    """One child process and what the pool knows of it."""

    def __init__(self, number: int, process, conn, token):
        self.number = number
        self.process = process
        self.conn = conn
        # The id of the run handed to it before its time, until the child
        # starts it or the pool takes it back (`withdraw`); else 0.
        self.token = token
        self.at: float | None = None  # the time its run was handed over for, if it was
        self.withdrawn = False  # its run was taken back: busy until it says it is idle
        # Whether more has arrived: one poll() of the pipe (the
        # connection's own poll() builds a selector on every call).
        self.more = select.poll()
        self.more.register(conn.fileno(), select.POLLIN)
        self.started = time.monotonic()
        self.ready = False
        self.flight: Flight | None = None  # the run it executes
        self.stopping = False  # its run was given up on: it is being terminated
        self.kill_at: float | None = None  # SIGKILL due (monotonic), after SIGTERM
        self.last_run = False  # it leaves after this run (a MemoryError)


class ProcessPool:
    """Runs each run in a child process from a reusable pool of `size`. The
    same interface as the thread executor (jobs.engine.execution.threads)."""

    ahead = True  # `start` takes `at`: the child waits for the run's time

    def __init__(self, size: int, *, memory_mb: int | None = None, log_keep: int = 0):
        self.size = size
        self.memory_mb = memory_mb or None
        self.log_keep = log_keep
        self.flights: dict[int, Flight] = {}
        self.start_seconds: list[float] = []  # how long each child took to be ready
        self._children: list[_Child] = []
        # Runs waiting for a child, each with the time it starts at (None: now).
        self._pending: deque[tuple[Flight, HandlerRef, float | None]] = deque()
        self._numbers = 0
        self._config: dict | None = None
        # Set when something may want the loop to look again (a wake(), a
        # place that became free) while no wait() was waiting: the next
        # wait() returns at once.
        self._woken = False
        self._rung = False  # the wake pipe was read: wake() was called
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poll = select.poll()  # everything: the wake pipe, every pipe and sentinel
        self._poll.register(self._wake_r, select.POLLIN)
        self._quiet = select.poll()  # what a quiet wait watches: the wake pipe and the sentinels
        self._quiet.register(self._wake_r, select.POLLIN)
        self._by_fd: dict[int, tuple[_Child, str]] = {}
        self._failed_start: list[Outcome] = []  # runs no child could be started for
        self._taken: list[Outcome] = []  # outcomes read by refresh() or warm(), for the next wait()

    # -- the interface ------------------------------------------------------------

    @property
    def free_slots(self) -> int:
        """Places for new runs: a run whose child has finished holds none,
        even before the loop takes its outcome, once `refresh` or `wait`
        read the child's message."""
        withdrawn = sum(1 for child in self._children if child.withdrawn)
        return self.size - executing(self.flights) - self.abandoned_count - withdrawn

    def refresh(self) -> None:
        """Read what the children sent, without waiting: a finished child's
        place is free from now on, and its outcome is kept for the next `wait`."""
        self._woken |= self._wait_once(0, self._taken)

    def release(self, run_ids: Iterable[int]) -> None:
        for run_id in run_ids:
            self.flights.pop(run_id, None)

    @property
    def abandoned_count(self) -> int:
        """Runs given up on whose child is still being stopped."""
        return sum(1 for child in self._children if child.stopping)

    def child_pids(self) -> list[int]:
        return [child.process.pid for child in self._children if child.process.exitcode is None]

    def warm(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        """Start every child now (the first runs do not wait for them);
        returns once they are ready or `timeout` passed."""
        if self._config is not None:
            return
        self._config = {
            "settings": settings_snapshot(),
            "memory_mb": self.memory_mb,
            "log_keep": self.log_keep,
        }
        for _ in range(self.size):
            self._spawn()
        until = time.monotonic() + timeout
        while any(not child.ready for child in self._children) and time.monotonic() < until:
            self._woken |= self._wait_once(until - time.monotonic(), self._taken)

    def start(self, flight: Flight, make_handler: HandlerRef, *, at: float | None = None) -> None:
        if self._config is None:
            self.warm()
        self.flights[flight.run_id] = flight
        self._pending.append((flight, make_handler, at))
        self._dispatch(self._taken)

    def withdraw(self, run_id: int) -> bool:
        """Take back a run handed over before its time (`start`'s `at`) if its
        child has not started it: the child finds the run's token gone at
        the run's time, says so, and is idle again (its place stays busy
        until then). One still waiting for a child is dropped."""
        flight = self.flights.get(run_id)
        if flight is None:
            return False
        for waiting in self._pending:
            if waiting[0] is flight:
                if waiting[2] is None:
                    return False
                self._pending.remove(waiting)
                break
        else:
            child = next((c for c in self._children if c.flight is flight and c.at is not None), None)
            if child is None or child.stopping or not take_token(child.token, run_id):
                return False
            child.withdrawn = True
        del self.flights[run_id]
        flight.done.set()
        return True

    def abandon(self, run_id: int) -> Flight | None:
        """Stop waiting for a run: its child is terminated, and its place is
        free again once the child is gone. A run no child took yet is dropped."""
        flight = self.flights.pop(run_id, None)
        if flight is None:
            return None
        flight.ctx.cancelled.set()
        for child in self._children:
            if child.flight is flight and not child.stopping:
                child.stopping = True
                self._signal(child, signal.SIGTERM)
                child.kill_at = time.monotonic() + GRACE_SECONDS
        return flight

    def wake(self) -> None:
        """Make a pending wait() return now (signal handlers and other threads use this)."""
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass  # the pipe is full: a wake-up is already pending

    def wait(self, timeout: float, *, quiet: float = 0.0) -> list[Outcome]:
        """Wait up to `timeout` seconds for the next outcome, then take all
        that are ready. Log lines that arrive meanwhile are kept; outcomes
        of abandoned runs are dropped. A place that became free (a child
        stopped or replaced) or a wake() ends the wait too, with no outcome.
        For its first `quiet` seconds only a wake() or the timeout ends the
        wait: the children's pipes are not watched, and what they sent is
        read when it ends."""
        outcomes = [o for o in self._taken if o.run_id in self.flights]  # not abandoned since
        self._taken = []
        now = time.monotonic()
        until = now + max(0.0, timeout)
        quiet_until = now + max(0.0, min(quiet, timeout))
        if self._rung or ((outcomes or self._woken) and quiet_until <= now):
            until = 0.0  # something is here already: take what else is ready, no waiting
        self._woken = self._rung = False
        while True:
            looked = self._wait_once(until - time.monotonic(), outcomes, quiet_until=quiet_until)
            now = time.monotonic()
            if self._rung or ((looked or outcomes) and now >= quiet_until) or now >= until:
                self._rung = False
                return outcomes

    def close(self, timeout: float = GRACE_SECONDS + 1) -> None:
        """Stop every child (idle ones leave at once, busy ones are
        terminated) and forget the runs."""
        self.flights.clear()
        self._pending.clear()
        self._taken = []
        for child in self._children:
            if child.flight is not None and not child.stopping:
                child.stopping = True
                self._signal(child, signal.SIGTERM)
            self._close_conn(child)  # an idle child reads the end of the pipe and leaves
        until = time.monotonic() + timeout
        for child in self._children:
            if _reap(child.process, max(0.0, until - time.monotonic())) is None:
                _stop(child.process, wait=0)
            self._forget(child)
        self._children = []
        self._config = None

    # -- children -----------------------------------------------------------------

    def _spawn(self) -> _Child | None:
        """Start a child; it is ready (takes runs) once it says so, in `wait`."""
        ctx = mp_context()
        parent, child_end = ctx.Pipe(duplex=True)
        token = ctx.Value("q", 0)  # see `withdraw`
        self._numbers += 1
        process = ctx.Process(
            target=child_main,
            args=(child_end, self._config, token),
            name=f"cronboard-run-{self._numbers}",
            daemon=True,
        )
        try:
            process.start()
        except Exception as exc:
            parent.close()
            child_end.close()
            log.error("a run process could not start: %s", exc)
            self._fail_pending(f"a run process could not start: {exc}")
            return None
        child_end.close()
        child = _Child(self._numbers, process, parent, token)
        self._children.append(child)
        self._watch(child.conn.fileno(), child, "conn")
        self._watch(process.sentinel, child, "sentinel")
        return child

    def _watch(self, fd: int, child: _Child, what: str) -> None:
        self._by_fd[fd] = (child, what)
        self._poll.register(fd, select.POLLIN)
        if what == "sentinel":
            self._quiet.register(fd, select.POLLIN)

    def _unwatch(self, fd: int) -> None:
        watched = self._by_fd.pop(fd, None)
        if watched is not None:
            self._poll.unregister(fd)
            if watched[1] == "sentinel":
                self._quiet.unregister(fd)

    def _close_conn(self, child: _Child) -> None:
        if child.conn is not None:
            self._unwatch(child.conn.fileno())
            try:
                child.conn.close()
            except OSError:
                pass
            child.conn = None

    def _forget(self, child: _Child) -> None:
        self._close_conn(child)
        self._unwatch(child.process.sentinel)
        if child in self._children:
            self._children.remove(child)

    def _dispatch(self, outcomes: list[Outcome]) -> None:
        """Hand pending runs to idle children; start children for the rest,
        up to the pool's size."""
        while self._pending:
            child = next(
                (
                    c
                    for c in self._children
                    if c.ready and c.flight is None and c.conn is not None and not (c.stopping or c.last_run)
                ),
                None,
            )
            if child is None:
                break
            flight, ref, at = self._pending.popleft()
            if flight.run_id not in self.flights:
                continue  # abandoned before a child took it
            self._send(child, flight, ref, at, outcomes)
        # Never more children than places: one being stopped, or leaving,
        # keeps its place until it is gone.
        for _ in range(min(len(self._pending), self.size - len(self._children))):
            if self._spawn() is None:
                break

    def _send(
        self, child: _Child, flight: Flight, ref: HandlerRef, at: float | None, outcomes: list[Outcome]
    ) -> None:
        child.flight, child.at = flight, at
        if at is not None:
            with child.token.get_lock():
                child.token.value = flight.run_id
        try:
            message = ("run", ref.kind, ref.name, ref.module(), payload_of(flight.ctx), at)
            # Plain pickle: nothing in a run needs multiprocessing's reducers
            # (ForkingPickler copies its dispatch table on every call).
            child.conn.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))
        except (OSError, EOFError):
            self._child_gone(child, outcomes)
        except Exception as exc:  # a payload that does not pickle
            child.flight = None
            self._finish(
                flight,
                Outcome(flight.run_id, "failed", error=f"the run could not be handed to its process: {exc}"),
                outcomes,
            )

    def _finish(self, flight: Flight, outcome: Outcome | None, outcomes: list[Outcome]) -> None:
        """A run ended in its child: its place is free; its outcome (None: it
        was given up on, and recorded already) goes to the loop."""
        flight.done.set()
        if outcome is not None and flight.run_id in self.flights:
            outcome.log = flight.ctx.log_text()
            outcomes.append(outcome)

    def _fail_pending(self, error: str) -> None:
        """No child could start: the oldest run waiting for one fails with why."""
        while self._pending:
            flight, _, _ = self._pending.popleft()
            if flight.run_id in self.flights:
                flight.done.set()
                self._failed_start.append(Outcome(flight.run_id, "failed", error=error))
                return

    # -- waiting ---------------------------------------------------------------------

    def _wait_once(self, timeout: float, outcomes: list[Outcome], *, quiet_until: float = 0.0) -> bool:
        """One poll of every child and the wake pipe, up to `timeout`
        seconds (until `quiet_until`, of the wake pipe and the sentinels
        only, then of everything without waiting); what arrived is handled.
        True when the loop should look again without an outcome: woken, or
        a place became free."""
        now = time.monotonic()
        kills = [c.kill_at for c in self._children if c.kill_at is not None]
        starting = [c.started + START_TIMEOUT_SECONDS for c in self._children if not c.ready]
        until = min([now + max(0.0, timeout), *kills, *starting])
        if now < quiet_until and until > now:
            events = self._poll_for(min(until, quiet_until) - now, self._quiet)
            seen = {fd for fd, _event in events}
            events += [(fd, event) for fd, event in self._poll.poll(0) if fd not in seen]
        else:
            events = self._poll_for(until - now, self._poll)
        freed = False
        gone = []
        for fd, _event in events:
            if fd == self._wake_r:
                try:
                    while os.read(self._wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                freed = self._rung = True
                continue
            watched = self._by_fd.get(fd)
            if watched is None:
                continue
            child, what = watched
            if what == "conn":
                freed |= self._receive(child, outcomes)
            else:
                gone.append(child)
        for child in gone:
            if child in self._children:
                # What it wrote before it ended comes first.
                freed |= self._receive(child, outcomes)
                if child in self._children:
                    self._child_gone(child, outcomes)
                    freed = True
        freed |= self._timers(outcomes)
        if self._failed_start:
            outcomes.extend(o for o in self._failed_start if o.run_id in self.flights)
            self._failed_start = []
        if freed or outcomes:
            self._dispatch(outcomes)
        return freed

    def _poll_for(self, seconds: float, poll) -> list:
        """`poll`.poll() for up to `seconds`, to the microsecond: poll counts whole
        milliseconds, and the loop sleeps until a fire's time this way, so
        the part of a millisecond left is slept (what arrives meanwhile is
        seen right after)."""
        whole = int(max(0.0, seconds) * 1000)
        try:
            events = poll.poll(whole)
            if not events and seconds * 1000 > whole:
                time.sleep(seconds - whole / 1000)
                events = poll.poll(0)
        except InterruptedError:
            return []
        return events

    def _receive(self, child: _Child, outcomes: list[Outcome]) -> bool:
        """Read what the child sent. True when that made a place free (a
        child became ready)."""
        freed = False
        while child.conn is not None:
            try:
                if not child.more.poll(0):
                    return freed
                message = child.conn.recv()
            except (EOFError, OSError):
                self._close_conn(child)  # it is gone: its sentinel says how
                return freed
            kind = message[0]
            if kind == "log":
                if child.flight is not None:
                    child.flight.ctx.merge_log(Chunk(*message[1:]))
            elif kind == "done":
                _, status, result, error, last, ended, started = message
                flight, child.flight = child.flight, None
                child.last_run = last
                if flight is not None and child.stopping:
                    flight.done.set()  # given up on, and recorded already
                elif flight is not None:
                    outcome = Outcome(
                        flight.run_id,
                        status,
                        result=result,
                        error=error,
                        ended_monotonic=ended,
                        started_monotonic=started if child.at is not None else None,
                    )
                    self._finish(flight, outcome, outcomes)
                child.at = None
                if last:
                    self._close_conn(child)  # it leaves; its sentinel replaces it
            elif kind == "withdrawn":  # its run was taken back (`withdraw`): idle again
                child.flight, child.at, child.withdrawn = None, None, False
                freed = True
            elif kind == "ready":
                child.ready = True
                self.start_seconds.append(time.monotonic() - child.started)
                log.debug("run process %d ready (pid %d)", child.number, child.process.pid)
                freed = True
            elif kind == "error":
                log.error("a run process could not start: %s", message[1])
                self._start_failed(child, message[1])
        return freed

    def _child_gone(self, child: _Child, outcomes: list[Outcome]) -> None:
        """The child ended: its run (if any, and not given up on) failed
        with how it ended; a replacement starts if runs wait for one."""
        exitcode = _reap(child.process, 0 if child.stopping else 1)
        if exitcode is None:  # its pipe closed, but it has not ended: it will not be used again
            _stop(child.process, wait=0)
            exitcode = child.process.exitcode
        flight = child.flight
        self._forget(child)
        if flight is not None:
            if child.stopping or child.withdrawn:
                flight.done.set()
            else:
                self._finish(
                    flight,
                    Outcome(flight.run_id, "failed", error=describe_exit(exitcode, self.memory_mb)),
                    outcomes,
                )
        elif not child.ready and not child.last_run:
            self._start_failed(child, describe_exit(exitcode, None))
        if child.ready and self._config is not None and len(self._children) < self.size:
            self._spawn()  # the replacement, ready before the next run needs it

    def _start_failed(self, child: _Child, detail: str) -> None:
        _stop(child.process, wait=0)
        self._forget(child)
        self._fail_pending(f"a run process could not start ({detail})")

    def _timers(self, outcomes: list[Outcome]) -> bool:
        """SIGKILL for children past their grace; children that never got ready."""
        now = time.monotonic()
        freed = False
        for child in list(self._children):
            if child.kill_at is not None and now >= child.kill_at:
                child.kill_at = None
                self._signal(child, signal.SIGKILL)
            elif not child.ready and now >= child.started + START_TIMEOUT_SECONDS:
                self._start_failed(child, f"not ready after {START_TIMEOUT_SECONDS:g} s")
                freed = True
        return freed

    def _signal(self, child: _Child, sig: int) -> None:
        # exitcode polls the child first: a pid already reaped is never signalled.
        if child.process.exitcode is None:
            try:
                os.kill(child.process.pid, sig)
            except ProcessLookupError:
                pass


def _reap(process, timeout: float | None = None) -> int | None:
    """Wait for the child to end (up to `timeout`); its exit code, or None."""
    process.join(timeout)
    return process.exitcode


def _stop(process, *, wait: float) -> None:
    """Give the child `wait` seconds to leave, then kill it."""
    if _reap(process, wait) is None:
        try:
            process.kill()
        except ProcessLookupError:
            pass
        _reap(process)
