import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from jobs import secrets
from jobs.core.logbuffer import Chunk, LogBuffer


class HandlerError(Exception):
    """A failure a handler reports on purpose: recorded as the run's error
    without a traceback."""


@dataclass
class JobContext:
    """What a running handler gets: its parameters (secret references
    already replaced by their values), a log, a cancel flag and a deadline. `fire_id` is the same for every attempt of one fire, so it is
    the idempotency key for side effects."""

    run_id: int
    fire_id: str
    attempt: int
    scheduled_at: datetime
    deadline: datetime
    properties: dict[str, str]
    job_id: int | None = None
    job_name: str = ""
    task_key: str = ""
    sql_write: bool = False
    # A run started after an upstream job's run (trigger `upstream`):
    # {"job": name, "run_id": id, "status": final status, "result": text}.
    upstream: dict | None = None
    # Which piece of its fire the run is: shard `shard_index` of
    # `shard_total` (a sharded job's, or a broadcast job's one per node);
    # 0 of 1 for a fire that is not split.
    shard_index: int = 0
    shard_total: int = 1
    # The Job and Run rows as they were when the run started: read them, do
    # not save them (the scheduler owns every write to both).
    job: Any = None
    run: Any = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    # The log is held as its capped head and tail only (jobs.core.logbuffer):
    # `log_keep` characters of each, JOBS_MAX_MESSAGE_CHARS unless given.
    log_keep: int | None = field(default=None, repr=False)
    # The secrets' values the run's properties were given (jobs.secrets):
    # hidden in every line logged, as in the result and error (run_handler).
    redacted: list[str] = field(default_factory=list, repr=False)
    # The clock the deadline and the log's stamps go by: the scheduler's
    # (the database's on PostgreSQL, jobs.engine.clock).
    clock: Callable[[], datetime] = field(default=timezone.now, repr=False)
    _log: LogBuffer = field(init=False, repr=False)
    _held: "secrets.HeldRedaction | None" = field(default=None, init=False, repr=False)
    _lines_held: int = field(default=0, init=False, repr=False)

    def __post_init__(self):
        self._log = LogBuffer(settings.JOBS_MAX_MESSAGE_CHARS if self.log_keep is None else self.log_keep)

    def log(self, message: str) -> None:
        stamp = self.clock().strftime("%H:%M:%S")
        if not self.redacted:
            self._log.add_line(f"{stamp} {message}")
            return
        # A value logged in two lines (or read from a program in two pieces)
        # is hidden too: the log's last characters wait for the next line.
        if self._held is None:
            self._held = secrets.HeldRedaction(self.redacted)
        newline = "\n" if self._log.lines or self._lines_held else ""
        separator = f"{newline}{stamp} "
        self._lines_held += 1
        self._log.write(self._held.add(separator, str(message)))

    def release_log(self) -> None:
        """Write what redaction held back: the handler has ended."""
        if self._held is not None:
            self._log.write(self._held.release_all())

    def log_text(self) -> str:
        """The log so far, capped (head and tail kept, a marker between)."""
        return self._log.text()

    @property
    def log_chars(self) -> int:
        """How many characters were logged so far, before any cap."""
        return self._log.length

    @property
    def remaining_seconds(self) -> float:
        return max(0.0, (self.deadline - self.clock()).total_seconds())

    def check_cancelled(self) -> None:
        """Raise if the run was cancelled or timed out; for loops that want to stop early."""
        if self.cancelled.is_set():
            raise HandlerError("cancelled")


class RunContext(JobContext):
    """The JobContext the engine hands a handler, with what the executors
    do to it besides: merge log lines a child process sent, take the lines
    written since the last take (to send them), and say how far the clock it
    judges its deadline by is from this host's."""

    def merge_log(self, chunk: Chunk) -> None:
        self._log.merge(chunk)

    def take_log(self) -> Chunk:
        return self._log.take()

    @property
    def clock_offset(self) -> timedelta:
        """The deadline is on the scheduler's clock (the database's on
        PostgreSQL, jobs.engine.clock.Clock): a child process shifts its own
        clock by this much to match."""
        return getattr(self.clock, "offset", timedelta(0))


class JobHandler:
    """Subclass and implement run(). Register with @register("name").

    `label` and `description` show in the console's handler drop-down;
    `properties_help` documents the properties the handler reads.
    """

    label: str = ""
    description: str = ""
    properties_help: dict[str, str] = {}

    def run(self, ctx: JobContext) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError


def with_shard(text: str, *, index: int, total: int, style: str) -> str:
    """`text` with a run's shard numbers where it names them
    (docs/handlers.md): `{{shard_index}}` and `{{shard_total}}` in an HTTP
    body (style "braces"), `:shard_index` and `:shard_total` in an SQL
    statement (style "colon"). Whole numbers of ours, never a client's
    text, so writing them in place is as safe as binding them."""
    numbers = {"shard_index": index, "shard_total": total}
    pattern = (
        r"\{\{(shard_index|shard_total)\}\}"
        if style == "braces"
        else r"(?<![:\w]):(shard_index|shard_total)\b"
    )
    return re.sub(pattern, lambda match: str(numbers[match.group(1)]), text)
