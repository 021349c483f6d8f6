"""Delivering alerts from the outbox (jobs.models.Alert) without ever making
the scheduler wait on a mail server.

The scheduler calls `AlertSender.step(now)` on every pass (its
`send_alerts` step). How it works, and why:

- The row is the outbox. jobs.alerts writes it in the transaction that
  crashes the job, so a process that dies before sending loses nothing.
- The step never talks SMTP. It claims one due alert with a compare-and-set,
  `filter(id=…, status="pending", next_attempt_at=<as read>).update(…)`, that
  counts the attempt and pushes `next_attempt_at` to the end of a claim
  lease; builds the email from the stored row; and hands it to the one
  sender thread. The thread only sends (it never touches the database) and
  puts the result on a queue, then wakes the scheduler loop; the next step
  writes the result back. A slow or dead server holds the sender thread,
  never the loop: jobs keep firing while a send times out.
- One alert is in flight per process: the step claims the next one only
  after the thread reported. Alerts are rare, and the lease then only has to
  cover one send — a few SMTP round trips, each bounded by EMAIL_TIMEOUT.
- If the process dies mid-send, the lease runs out and any scheduler claims
  the alert again, so it may go out once more — with the same stored
  Message-ID, which mail clients use to show it once. If the thread itself
  hangs past the lease, the step abandons it (Python cannot kill a thread;
  it is a daemon and its late result is only used if it says "sent") and
  starts a fresh one.
- Results: accepted → `sent`. A 5xx reply → `failed_permanent`, keeping the
  server's reply. Anything else — a 4xx reply, a refused or dropped
  connection, a timeout — is temporary: retried after an exponential backoff
  with jitter (30 s doubling up to 1 h), and given up (`failed`) once the
  next attempt would fall more than 24 h after the alert was written.
"""

import logging
import queue
import random
import smtplib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db.models import F, Min

from jobs.models import Alert

log = logging.getLogger("cronboard.alerts")

RETRY_BASE = timedelta(seconds=30)
RETRY_CAP = timedelta(hours=1)
GIVE_UP_AFTER = timedelta(hours=24)
CLAIM_BATCH = 10  # candidates read per claim; more than one so a lost race is not a lost pass
REPLY_CHARS = 2000


def claim_lease() -> timedelta:
    """Longer than one send can take: connect, greeting, EHLO, STARTTLS, AUTH,
    MAIL, RCPT, DATA — each waits at most EMAIL_TIMEOUT, and most answer at
    once. A send that outlives it may be repeated (same Message-ID)."""
    return timedelta(seconds=5 * settings.EMAIL_TIMEOUT + 5)


def retry_delay(attempts: int, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff after `attempts` failed attempts, capped, with
    jitter (half to all of it) so alerts that failed together spread out."""
    delay = min(RETRY_CAP, RETRY_BASE * 2 ** max(0, attempts - 1))
    return delay * (rng or random).uniform(0.5, 1.0)


def build_email(alert: Alert, *, connection=None) -> EmailMultiAlternatives:
    """The email for an alert, from the stored row: the same text, recipients
    and Message-ID on every attempt."""
    message = EmailMultiAlternatives(
        subject=alert.subject,
        body=alert.body_text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=list(alert.recipients),
        connection=connection,
        headers={
            "Message-ID": alert.message_id,
            "Auto-Submitted": "auto-generated",
            "X-Cronboard-Alert": f"{alert.kind} {alert.pk}",
        },
    )
    message.attach_alternative(alert.body_html, "text/html")
    return message


def describe_failure(exc: BaseException) -> tuple[bool, str]:
    """(permanent?, what to show): a 5xx reply is permanent; a 4xx reply, a
    refused or dropped connection or a timeout is worth another try."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        replies = {rcpt: (code, _text(msg)) for rcpt, (code, msg) in exc.recipients.items()}
        text = "; ".join(f"{rcpt}: {code} {msg}" for rcpt, (code, msg) in replies.items())
        permanent = bool(replies) and all(500 <= code < 600 for code, _ in replies.values())
        return permanent, f"recipients refused: {text}"[:REPLY_CHARS]
    if isinstance(exc, smtplib.SMTPResponseException):
        return 500 <= exc.smtp_code < 600, f"{exc.smtp_code} {_text(exc.smtp_error)}"[:REPLY_CHARS]
    if _timed_out(exc):
        return False, f"timed out: the mail server did not answer within {settings.EMAIL_TIMEOUT} s"
    return False, f"{type(exc).__name__}: {exc}"[:REPLY_CHARS]


def _timed_out(exc: BaseException | None) -> bool:
    # smtplib reports a reply that never came as SMTPServerDisconnected,
    # raised while handling the socket's timeout.
    while exc is not None:
        if isinstance(exc, (TimeoutError, socket.timeout)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass(eq=False)
class Delivery:
    """One claimed alert on its way through the sender thread."""

    alert_id: int
    attempts: int
    created_at: datetime
    claimed_until: datetime  # what the claim wrote to next_attempt_at: the claim's token
    message: EmailMultiAlternatives | None
    error: BaseException | None = None


class _SenderThread:
    """One daemon thread that sends what it is given, in order."""

    def __init__(self, results: queue.SimpleQueue, wake: Callable[[], None] | None):
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._results = results
        self._wake = wake
        self.thread = threading.Thread(target=self._serve, name="alert-sender", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            delivery = self.inbox.get()
            if delivery is None:
                return
            try:
                delivery.message.send(fail_silently=False)
            except BaseException as exc:
                delivery.error = exc
            self._results.put(delivery)
            if self._wake is not None:
                self._wake()


class AlertSender:
    def __init__(self, *, wake: Callable[[], None] | None = None, rng: random.Random | None = None):
        self._wake = wake
        self._rng = rng or random.Random()
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._ready: list[Delivery] = []  # taken off the queue by wait_idle(), not yet written
        self._sender: _SenderThread | None = None
        self.in_flight: Delivery | None = None

    # -- the step ------------------------------------------------------------

    def step(self, now: datetime) -> bool:
        """Write back what the thread reported; if it is idle, claim the next
        due alert and hand it over. Never waits on the network."""
        did = self.collect(now)
        if self.in_flight is not None and now >= self.in_flight.claimed_until:
            log.error(
                "alert %s: the send outlived its claim; abandoning the sender thread", self.in_flight.alert_id
            )
            self._abandon()
        if self.in_flight is None:
            did |= self.claim_and_send(now)
        return did

    def collect(self, now: datetime) -> bool:
        """Write back every result the thread reported."""
        while True:
            try:
                self._ready.append(self._results.get_nowait())
            except queue.Empty:
                break
        did = bool(self._ready)
        while self._ready:
            delivery = self._ready[0]
            self.record(delivery, now)
            # Only once written: a database error leaves it for the next pass.
            self._ready.pop(0)
            if delivery is self.in_flight:
                self.in_flight = None
        return did

    def claim_and_send(self, now: datetime) -> bool:
        alert = self.claim_due(now)
        if alert is None:
            return False
        self.in_flight = Delivery(
            alert_id=alert.pk,
            attempts=alert.attempts,
            created_at=alert.created_at,
            claimed_until=alert.next_attempt_at,
            message=None,
        )
        try:
            connection = get_connection(timeout=settings.EMAIL_TIMEOUT)
            self.in_flight.message = build_email(alert, connection=connection)
        except Exception as exc:
            self.in_flight.error = exc
            self._results.put(self.in_flight)
            return True
        if self._sender is None:
            self._sender = _SenderThread(self._results, self._wake)
        self._sender.inbox.put(self.in_flight)
        return True

    def claim_due(self, now: datetime) -> Alert | None:
        """The compare-and-set: only the sender whose update still finds the
        alert pending at the time it read gets it, until `claim_lease()`."""
        due = (
            Alert.objects.filter(status=Alert.Status.PENDING, next_attempt_at__lte=now)
            .order_by("next_attempt_at", "id")
            .values_list("id", "next_attempt_at")[:CLAIM_BATCH]
        )
        until = now + claim_lease()
        for alert_id, expected in due:
            claimed = Alert.objects.filter(
                id=alert_id, status=Alert.Status.PENDING, next_attempt_at=expected
            ).update(next_attempt_at=until, attempts=F("attempts") + 1, last_attempt_at=now)
            if claimed:
                return Alert.objects.get(pk=alert_id)
        return None

    def record(self, delivery: Delivery, now: datetime) -> None:
        """Write one result. "Sent" is recorded whoever's claim it was (it is
        the truth); a failure only by the claim that is still current."""
        if delivery.error is None:
            Alert.objects.filter(pk=delivery.alert_id, status=Alert.Status.PENDING).update(
                status=Alert.Status.SENT, sent_at=now, next_attempt_at=None
            )
            log.info("alert %s sent (attempt %s)", delivery.alert_id, delivery.attempts)
            return
        permanent, reply = describe_failure(delivery.error)
        ours = Alert.objects.filter(
            pk=delivery.alert_id, status=Alert.Status.PENDING, next_attempt_at=delivery.claimed_until
        )
        if permanent:
            ours.update(status=Alert.Status.FAILED_PERMANENT, last_error=reply, next_attempt_at=None)
            log.error("alert %s refused by the mail server: %s", delivery.alert_id, reply)
            return
        retry_at = now + retry_delay(delivery.attempts, self._rng)
        if retry_at - delivery.created_at > GIVE_UP_AFTER:
            ours.update(
                status=Alert.Status.FAILED,
                next_attempt_at=None,
                last_error=f"{reply} (gave up after {delivery.attempts} attempts)",
            )
            log.error("alert %s: gave up after %s attempts: %s", delivery.alert_id, delivery.attempts, reply)
            return
        ours.update(next_attempt_at=retry_at, last_error=reply)
        log.warning(
            "alert %s: attempt %s failed, retrying at %s: %s",
            delivery.alert_id,
            delivery.attempts,
            retry_at,
            reply,
        )

    # -- the loop's helpers ------------------------------------------------------

    def next_wakeup(self, now: datetime) -> datetime | None:
        """When the step next has something to do: the in-flight claim's end
        (the thread's result wakes the loop sooner), else the next due alert."""
        if self.in_flight is not None:
            return self.in_flight.claimed_until
        return Alert.objects.filter(status=Alert.Status.PENDING).aggregate(m=Min("next_attempt_at"))["m"]

    def wait_idle(self, timeout: float) -> bool:
        """Block until the in-flight send has reported (for shutdown and tests)."""
        until = time.monotonic() + timeout
        while self.in_flight is not None and self.in_flight not in self._ready:
            try:
                self._ready.append(self._results.get(timeout=max(0.0, until - time.monotonic())))
            except queue.Empty:
                return False
        return True

    def stop(self, clock: Callable[[], datetime], *, wait: float) -> None:
        """Shutdown: give the in-flight send up to `wait` seconds, record it,
        and let the thread go. An unrecorded send is retried after the lease."""
        if self.in_flight is not None and self.wait_idle(wait):
            self.collect(clock())
        if self._sender is not None:
            self._sender.inbox.put(None)
            self._sender = None

    def _abandon(self) -> None:
        if self._sender is not None:
            self._sender.inbox.put(None)  # it exits once its stuck send returns
        self._sender = None
        self.in_flight = None
