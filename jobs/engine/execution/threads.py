"""The thread executor (JOBS_EXECUTOR=thread): handlers run in threads of
the scheduler, sharing its memory (for handlers that must).

Each run is handed to an idle daemon worker thread; a new one is started
only when none is idle (starting a thread costs the loop more than a no-op
handler does). A run that passes its deadline (or is cancelled) has
its `cancelled` event set and is *abandoned*: its slot is freed at once and
its outcome, if it ever comes, is ignored. Python cannot kill a thread, so a
handler that ignores `cancelled` keeps its thread until it returns; it no
longer holds a worker slot. `abandoned_count` says how many such handlers
are still running.
"""

import queue
import threading
from collections.abc import Callable, Iterable

from django.db import connections

from jobs.engine.execution.pool import Flight, Outcome, executing, run_handler, take_outcomes
from jobs.handlers.base import JobHandler


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
        return self.size - executing(self.flights)

    @property
    def abandoned_count(self) -> int:
        self._abandoned = [f for f in self._abandoned if not f.done.is_set()]
        return len(self._abandoned)

    ahead = False  # a thread starts in microseconds: the loop hands each run over at its time

    def start(
        self, flight: Flight, make_handler: Callable[[], JobHandler], *, at: float | None = None
    ) -> None:
        if at is not None:
            raise ValueError("the thread pool starts runs now: it holds none until a time")
        self.flights[flight.run_id] = flight
        with self._idle_lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._work.put((flight, make_handler))
        if spawn:
            self._threads += 1
            threading.Thread(target=self._worker, name=f"worker-{self._threads}", daemon=True).start()

    def withdraw(self, run_id: int) -> bool:
        return False  # nothing is held (`ahead`)

    def abandon(self, run_id: int) -> Flight | None:
        """Stop waiting for a run: ask it to stop and free its slot."""
        flight = self.flights.pop(run_id, None)
        if flight is not None:
            flight.ctx.cancelled.set()
            if not flight.done.is_set():
                self._abandoned.append(flight)
        return flight

    def refresh(self) -> None:
        """Nothing to take in: a worker thread frees its slot itself (`done`)."""

    def release(self, run_ids: Iterable[int]) -> None:
        for run_id in run_ids:
            self.flights.pop(run_id, None)

    def wake(self) -> None:
        """Make a pending wait() return now (signal handlers use this)."""
        self._outcomes.put(None)

    def wait(self, timeout: float, *, quiet: float = 0.0) -> list[Outcome]:
        """Block up to `timeout` seconds for the next outcome, then take all
        that are ready. Outcomes of abandoned runs are dropped. `quiet` is
        the process pool's; an outcome here costs no pipe read, and ends the
        wait as it comes."""
        return take_outcomes(self._outcomes, self.flights, timeout)

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
            # Idle before the slot is free (done) and the outcome is seen, so
            # the run the loop starts next can reuse this thread instead of
            # starting another.
            with self._idle_lock:
                self._idle += 1
            flight.done.set()
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
