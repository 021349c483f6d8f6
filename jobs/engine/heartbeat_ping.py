"""The scheduler's outgoing heartbeat (a dead man's switch kept elsewhere):
with CRONBOARD_HEARTBEAT_URL set, every scheduler process GETs it once a
minute, so a service such as healthchecks alerts when the pings stop, i.e.
when Cronboard itself is down.

The ping goes through the HTTP jobs' fence (jobs.fence.fenced_request: the
address checked, then connected to exactly; redirects checked hop by hop),
with a bounded timeout, in a thread of its own: the scheduler loop never
waits on it. A ping still under way when the next is due is not doubled.
"""

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings

from jobs import fence
from jobs.engine.clock import Cadence

log = logging.getLogger("cronboard.scheduler")

EVERY = timedelta(minutes=1)
TIMEOUT = 10.0  # seconds for the whole exchange


class HeartbeatPinger:
    def __init__(self, url: str | None = None, *, request: Callable = fence.fenced_request):
        self.url = (settings.CRONBOARD_HEARTBEAT_URL if url is None else url).strip()
        self._request = request
        self.cadence = Cadence(EVERY)
        self._thread: threading.Thread | None = None
        self.last_error = ""

    def step(self, now: datetime) -> bool:
        """Start a ping if one is due; True if it started one. Never blocks."""
        if not self.url:
            return False
        if not self.cadence.due(now):
            return False
        if self._thread is not None and self._thread.is_alive():
            return False
        self.cadence.ran(now)
        self._thread = threading.Thread(target=self._ping, name="heartbeat-ping", daemon=True)
        self._thread.start()
        return True

    def _ping(self) -> None:
        try:
            response = self._request("GET", self.url, timeout=TIMEOUT, max_body=4096)
        except (fence.FenceError, fence.RequestFailed) as exc:
            self.last_error = str(getattr(exc, "reason", exc))
            log.warning("heartbeat ping to CRONBOARD_HEARTBEAT_URL failed: %s", self.last_error)
            return
        except Exception as exc:  # never let the thread die noisily
            self.last_error = f"{type(exc).__name__}: {exc}"
            log.warning("heartbeat ping to CRONBOARD_HEARTBEAT_URL failed: %s", self.last_error)
            return
        if response.status >= 400:
            self.last_error = f"HTTP {response.status}"
            log.warning("heartbeat ping to CRONBOARD_HEARTBEAT_URL answered %s", response.status)
        else:
            self.last_error = ""

    def wait(self, timeout: float) -> bool:
        """Block until the ping under way has finished (tests and shutdown)."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True
