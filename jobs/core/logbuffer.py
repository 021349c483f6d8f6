"""A run's log as the scheduler keeps it: the first and the last `keep`
characters and the total length, never more, however much a handler logs.

Both executors write a handler's `ctx.log()` lines into one of these (the
process executor streams them from the child in chunks, see jobs.engine.execution.processes),
and the run's stored log is `text()`: exactly what `cap_text` makes of the
whole log, so the head and tail the database keeps are never lost on the way.
No Django here: the child process uses it before anything else is set up.
"""

import threading
from collections import deque
from typing import NamedTuple


def cap_text(head: str, tail: str, length: int, limit: int | None) -> str:
    """A text of `length` characters capped at `limit` (≤ 0 or None: no cap),
    from its first characters `head` and its last characters `tail` (each at
    least min(length, limit) long). Past the cap the head and the tail are
    kept and the middle is replaced by a marker that states the original
    length."""
    if limit is None or limit <= 0 or length <= limit:
        return head
    marker = f"\n[… {{omitted}} characters omitted; original length {length} characters …]\n"
    room = max(limit - len(marker.format(omitted=length)), 2)
    first = room // 2
    last = room - first
    return head[:first] + marker.format(omitted=length - first - last) + tail[len(tail) - last :]


class Chunk(NamedTuple):
    """A piece of log on its way from a child: its first and last `keep`
    characters (`tail` is empty when `head` is the whole piece) and its length."""

    head: str
    tail: str
    length: int


class LogBuffer:
    """The head and the tail of a text written piece by piece. Thread-safe.

    `keep` ≤ 0 keeps everything (JOBS_MAX_MESSAGE_CHARS=0: no cap)."""

    def __init__(self, keep: int):
        self.keep = keep
        self.length = 0  # characters written, whatever was kept
        self.peak_held = 0  # the most characters ever held at once (tests, sanity)
        self._lines = 0
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Characters held in memory now."""
        return self._head_len + self._tail_len

    @property
    def lines(self) -> int:
        """Lines added with add_line (take() keeps the count)."""
        return self._lines

    def add_line(self, line: str) -> None:
        """A log line: lines are joined by newlines."""
        with self._lock:
            if self._lines:
                self._write("\n")
            self._lines += 1
            self._write(line)

    def write(self, text: str) -> None:
        """Append text as it is (a piece of a line: no newline added)."""
        with self._lock:
            self._write(text)

    def merge(self, chunk: Chunk) -> None:
        """Append a chunk another buffer took (`take`)."""
        if chunk.length <= 0:
            return
        with self._lock:
            if self.keep <= 0 or not chunk.tail:
                self._write(chunk.head)
                self.length += chunk.length - len(chunk.head)  # 0 unless the chunk was cut
                return
            self._add_head(chunk.head)
            self._add_tail(chunk.tail)
            self.length += chunk.length
            self._note_peak()

    def take(self) -> Chunk:
        """What was written since the last take, and start over (the line
        count stays, so the next line still starts with its newline)."""
        with self._lock:
            head, tail = "".join(self._head), "".join(self._tail)
            chunk = Chunk(head, tail if self.length > len(head) else "", self.length)
            self._head, self._head_len, self._tail, self._tail_len, self.length = [], 0, deque(), 0, 0
            return chunk

    def text(self) -> str:
        """The log capped at `keep`, as cap_text caps it."""
        with self._lock:
            head = "".join(self._head)
            if self.keep <= 0 or self.length <= len(head):
                return head
            return cap_text(head, "".join(self._tail), self.length, self.keep)

    def _write(self, text: str) -> None:
        if not text:
            return
        self.length += len(text)
        if self.keep <= 0:
            self._head.append(text)
            self._head_len += len(text)
        else:
            self._add_head(text)
            self._add_tail(text)
        self._note_peak()

    def _add_head(self, text: str) -> None:
        room = self.keep - self._head_len
        if room > 0:
            piece = text[:room]
            self._head.append(piece)
            self._head_len += len(piece)

    def _add_tail(self, text: str) -> None:
        keep = self.keep
        if len(text) >= keep:
            self._tail.clear()
            self._tail.append(text[len(text) - keep :])
            self._tail_len = keep
            return
        self._tail.append(text)
        self._tail_len += len(text)
        while self._tail_len > keep:
            over = self._tail_len - keep
            first = self._tail[0]
            if len(first) <= over:
                self._tail.popleft()
                self._tail_len -= len(first)
            else:
                self._tail[0] = first[over:]
                self._tail_len -= over

    def _note_peak(self) -> None:
        if self.held > self.peak_held:
            self.peak_held = self.held
