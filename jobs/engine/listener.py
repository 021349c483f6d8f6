"""The LISTEN side of `jobs.core.wakeup.wake_schedulers()` (PostgreSQL only).

A daemon thread holds its own connection (not Django's: LISTEN needs a
session that stays open and idle) and calls `on_wake` for each notification,
which cuts the scheduler loop's sleep short. It reconnects after the database
restarts and wakes the loop once on every (re)connect, since notifications
sent while it was deaf are lost. Polling stays as the fallback.
"""

import logging
import threading
from collections.abc import Callable

from jobs.core.wakeup import CHANNEL

log = logging.getLogger("cronboard.scheduler")

# How often the thread looks at its stop flag while no notification comes.
CHECK_EVERY = 1.0


class WakeListener(threading.Thread):
    def __init__(self, connection_params: dict, on_wake: Callable[[], None], *, ignore_sender: str = ""):
        super().__init__(name="cronboard-listen", daemon=True)
        self.connection_params = connection_params
        self.on_wake = on_wake
        # A scheduler's own notifications (it planned fires for the others)
        # would only wake it for a pass with nothing new in it.
        self.ignore_sender = ignore_sender
        self.listening = threading.Event()
        self._stopping = threading.Event()

    @classmethod
    def for_django_connection(cls, connection, on_wake: Callable[[], None], **kwargs) -> "WakeListener":
        params = connection.get_connection_params()
        # Django's cursor and context settings are for its own connection.
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        return cls(params, on_wake, **kwargs)

    def stop(self, timeout: float = 2.0) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout)

    def run(self) -> None:
        import psycopg

        backoff = 0.5
        while not self._stopping.is_set():
            try:
                with psycopg.connect(**self.connection_params, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.listening.set()
                    backoff = 0.5
                    self.on_wake()
                    while not self._stopping.is_set():
                        for notify in conn.notifies(timeout=CHECK_EVERY):
                            if not (self.ignore_sender and notify.payload == self.ignore_sender):
                                self.on_wake()
            except Exception as exc:
                self.listening.clear()
                if self._stopping.is_set():
                    break
                reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                log.warning("wake-up listener lost its connection (%s); polling until it reconnects", reason)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 10)
        self.listening.clear()
