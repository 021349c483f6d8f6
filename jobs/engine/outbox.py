"""Delivering alerts from the outbox (jobs.models.Alert) without ever making
the scheduler wait on a mail server.

The scheduler loop calls `AlertSender.step_if_due(now)` in every pass (its
`send_alerts` step) and asks `next_due(now)` when to wake for it; the sender
paces itself (below). How it works, and why:

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
- Pacing: the outbox is read when an alert is due (by the time read from it
  at most `read_every` ago), when this process just wrote one (the loop
  says so: `alert_written()`), or while a send is in flight; not in every
  pass, which at hundreds of passes a second cost more than a fire.
- Clock: claims are judged and written with the database's clock on
  PostgreSQL (jobs.core.dbclock.database_time), like the leases, so a host
  whose clock is off neither claims early nor holds a claim past its end.
- A partial recipient refusal (the server took the message for some
  recipients and refused others) keeps the accepted ones in `delivered_to`;
  the retry goes to the refused ones alone.
- Channels (jobs.channels, Apprise) have their own rows (AlertDelivery), one
  per alert and channel, claimed, retried and given up on the same way. The
  rows of one channel that are due together go out as one message listing
  the jobs, and a channel gets at most one message a minute after the last
  one it took (GROUP_WINDOW):
  a storm of crashes is one message per channel per minute. Email does the
  same per set of recipients (claim_companions, build_storm_email).
- Results: accepted → `sent`. A 5xx reply → `failed_permanent`, keeping the
  server's reply. Anything else — a 4xx reply, a refused or dropped
  connection, a timeout — is temporary: retried after an exponential backoff
  with jitter (30 s doubling up to 1 h), and given up (`failed`) once the
  next attempt would fall more than 24 h after the alert was written.
"""

import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import get_connection
from django.db.models import F, Max, Min

from jobs import channels
from jobs.core.dbclock import database_time
from jobs.core.mailfailures import REPLY_CHARS, describe_failure
from jobs.engine.clock import Cadence
from jobs.engine.deliveries import ChannelDelivery, Delivery, build_email, build_storm_email, storm_message
from jobs.engine.metrics import OFF, Off
from jobs.models import Alert, AlertDelivery

log = logging.getLogger("cronboard.alerts")

RETRY_BASE = timedelta(seconds=30)
RETRY_CAP = timedelta(hours=1)
GIVE_UP_AFTER = timedelta(hours=24)
CLAIM_BATCH = 10  # candidates read per claim; more than one so a lost race is not a lost pass
GROUP_WINDOW = timedelta(minutes=1)  # at most one message per channel per minute
GROUP_MAX = 50  # alerts listed in one storm message


def claim_lease() -> timedelta:
    """Longer than one send can take: connect, greeting, EHLO, STARTTLS, AUTH,
    MAIL, RCPT, DATA — each waits at most EMAIL_TIMEOUT, and most answer at
    once. A send that outlives it may be repeated (same Message-ID)."""
    return timedelta(seconds=5 * settings.EMAIL_TIMEOUT + 5)


def channel_lease() -> timedelta:
    """Longer than one channel send: the fence's lookup, then Apprise's
    connect and read, each bounded by ALERT_CHANNEL_TIMEOUT."""
    return timedelta(seconds=3 * settings.ALERT_CHANNEL_TIMEOUT + 5)


def retry_delay(attempts: int, rng: random.Random | None = None) -> timedelta:
    """Exponential backoff after `attempts` failed attempts, capped, with
    jitter (half to all of it) so alerts that failed together spread out."""
    delay = min(RETRY_CAP, RETRY_BASE * 2 ** max(0, attempts - 1))
    return delay * (rng or random).uniform(0.5, 1.0)


def _recipient_key(recipients) -> tuple[str, ...]:
    return tuple(sorted(str(r).lower() for r in recipients or []))


def _recently_emailed(clock: datetime) -> dict[tuple[str, ...], datetime]:
    """{recipients: when they were last sent an alert email}, within GROUP_WINDOW."""
    last: dict[tuple[str, ...], datetime] = {}
    for recipients, sent_at in Alert.objects.filter(sent_at__gt=clock - GROUP_WINDOW).values_list(
        "recipients", "sent_at"
    ):
        key = _recipient_key(recipients)
        if key not in last or sent_at > last[key]:
            last[key] = sent_at
    return last


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
                delivery.send()
            except BaseException as exc:
                delivery.error = exc
            self._results.put(delivery)
            if self._wake is not None:
                self._wake()


class AlertSender:
    def __init__(
        self,
        *,
        wake: Callable[[], None] | None = None,
        rng: random.Random | None = None,
        read_every: timedelta = timedelta(0),
        metrics: Off = OFF,
    ):
        self._wake = wake
        self.metrics = metrics  # deliveries by channel type and outcome
        self._rng = rng or random.Random()
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        self._ready: list[Delivery] = []  # taken off the queue by wait_idle(), not yet written
        self._sender: _SenderThread | None = None
        self.in_flight: Delivery | ChannelDelivery | None = None
        self._channels_first = False  # alternate, so neither kind waits behind the other
        # Pacing (step_if_due, next_due): when the next pending alert is due,
        # as read from the outbox at most once per `read_every`.
        self.reads = Cadence(read_every)
        self._written = False  # this process wrote an alert since the outbox was read
        self._next_pending: datetime | None = None

    # -- the scheduler's step, paced -------------------------------------------------

    def alert_written(self) -> None:
        """This process just wrote an alert (a crash, a late fire): read the
        outbox at the next step instead of waiting for the next read."""
        self._written = True

    def step_if_due(self, now: datetime) -> bool:
        """`step`, if there is anything to do: a send in flight, an alert
        written by this process, or one due by the last read of the outbox."""
        if self.in_flight is None and not self._written and not self._pending_due(now):
            return False
        did = self.step(now)
        self.reads.again()  # what is due next changed
        return did

    def next_due(self, now: datetime) -> datetime | None:
        """When the step next has something to do (see next_wakeup), the
        outbox read at most once per `read_every`."""
        if self.in_flight is not None:
            return self.next_wakeup(now)
        return self._next_read(now)

    def _pending_due(self, now: datetime) -> bool:
        next_alert = self._next_read(now)
        return next_alert is not None and next_alert <= now

    def _next_read(self, now: datetime) -> datetime | None:
        if self._written or self.reads.due(now):
            self._next_pending = self.next_wakeup(now)
            self.reads.ran(now)
            self._written = False
        return self._next_pending

    # -- the step ------------------------------------------------------------

    def step(self, now: datetime) -> bool:
        """Write back what the thread reported; if it is idle, claim the next
        due alert and hand it over. Never waits on the network."""
        did = self.collect(now)
        if self.in_flight is not None and now >= self.in_flight.give_up_at:
            log.error("%s: the send outlived its claim; abandoning the sender thread", self.in_flight.label)
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
            self.metrics.delivered(delivery.channel_type, delivery.outcome)
            if delivery is self.in_flight:
                self.in_flight = None
        return did

    def claim_and_send(self, now: datetime) -> bool:
        order = [self._claim_channel, self._claim_email]
        if not self._channels_first:
            order.reverse()
        for claim in order:
            if claim(now):
                self._channels_first = claim == self._claim_email
                return True
        return False

    def _claim_email(self, now: datetime) -> bool:
        alert = self.claim_due(now)
        if alert is None:
            return False
        companions = self.claim_companions(alert)
        self.in_flight = Delivery(
            alert_id=alert.pk,
            attempts=alert.attempts,
            created_at=min(a.created_at for a in [alert, *companions]),
            claimed_until=alert.next_attempt_at,
            message=None,
            give_up_at=now + claim_lease(),
            others=[a.pk for a in companions],
        )
        try:
            connection = get_connection(timeout=settings.EMAIL_TIMEOUT)
            self.in_flight.message = (
                build_storm_email([alert, *companions], connection=connection)
                if companions
                else build_email(alert, connection=connection)
            )
        except Exception as exc:
            self.in_flight.error = exc
            self._results.put(self.in_flight)
            return True
        self._hand_over()
        return True

    def _claim_channel(self, now: datetime) -> bool:
        claimed = self.claim_channel(now)
        if claimed is None:
            return False
        self.in_flight = claimed
        claimed.give_up_at = now + channel_lease()
        self._hand_over()
        return True

    def _hand_over(self) -> None:
        if self._sender is None:
            self._sender = _SenderThread(self._results, self._wake)
        self._sender.inbox.put(self.in_flight)
        return True

    def claim_due(self, now: datetime) -> Alert | None:
        """The compare-and-set: only the sender whose update still finds the
        alert pending at the time it read gets it, until `claim_lease()`.
        Judged by the database's clock on PostgreSQL."""
        clock = database_time(now)
        due = (
            Alert.objects.filter(status=Alert.Status.PENDING, next_attempt_at__lte=clock)
            .order_by("next_attempt_at", "id")
            .values_list("id", "next_attempt_at", "recipients")[:CLAIM_BATCH]
        )
        until = clock + claim_lease()
        recent = _recently_emailed(clock)
        for alert_id, expected, recipients in due:
            last = recent.get(_recipient_key(recipients))
            if last is not None:
                # One email a minute to the same recipients: it waits, and goes
                # out with the others that came meanwhile (a storm).
                Alert.objects.filter(
                    id=alert_id, status=Alert.Status.PENDING, next_attempt_at=expected
                ).update(next_attempt_at=last + GROUP_WINDOW)
                continue
            claimed = Alert.objects.filter(
                id=alert_id, status=Alert.Status.PENDING, next_attempt_at=expected
            ).update(next_attempt_at=until, attempts=F("attempts") + 1, last_attempt_at=clock)
            if claimed:
                return Alert.objects.get(pk=alert_id)
        return None

    def claim_companions(self, alert: Alert) -> list[Alert]:
        """The other due alerts for the same recipients, none of them partly
        delivered, claimed with the same compare-and-set and the same lease
        end: they go out in one email with `alert` (a storm)."""
        if alert.delivered_to:
            return []
        clock = alert.last_attempt_at
        key = _recipient_key(alert.recipients)
        candidates = (
            Alert.objects.filter(status=Alert.Status.PENDING, next_attempt_at__lte=clock)
            .exclude(pk=alert.pk)
            .order_by("next_attempt_at", "id")
            .values_list("id", "next_attempt_at", "recipients", "delivered_to")[: GROUP_MAX * 4]
        )
        claimed_ids = []
        for other_id, expected, recipients, delivered in candidates:
            if delivered or _recipient_key(recipients) != key or len(claimed_ids) >= GROUP_MAX - 1:
                continue
            if Alert.objects.filter(
                id=other_id, status=Alert.Status.PENDING, next_attempt_at=expected
            ).update(
                next_attempt_at=alert.next_attempt_at, attempts=F("attempts") + 1, last_attempt_at=clock
            ):
                claimed_ids.append(other_id)
        return list(Alert.objects.filter(pk__in=claimed_ids).order_by("created_at", "id"))

    def claim_channel(self, now: datetime) -> ChannelDelivery | None:
        """Claim the due rows of the channel whose turn is first, all at once
        (a storm is one message), unless that channel had a message less than
        GROUP_WINDOW ago: then its due rows wait for the window's end and are
        sent together. Concurrent claimers get disjoint rows: the UPDATE
        re-checks the row is still due, and marks it with its claim token."""
        clock = database_time(now)
        due = AlertDelivery.objects.filter(status=Alert.Status.PENDING, next_attempt_at__lte=clock)
        keys = due.order_by("next_attempt_at", "id").values_list("channel_key", flat=True)[:CLAIM_BATCH]
        for key in dict.fromkeys(keys):
            mine = due.filter(channel_key=key)
            # The last message the channel took (a failed attempt is no message:
            # retries keep their own backoff).
            last = AlertDelivery.objects.filter(channel_key=key).aggregate(m=Max("sent_at"))["m"]
            if last is not None and clock - last < GROUP_WINDOW:
                mine.update(next_attempt_at=last + GROUP_WINDOW)
                continue
            token = uuid.uuid4().hex
            ids = list(mine.order_by("id").values_list("id", flat=True)[:GROUP_MAX])
            until = clock + channel_lease()
            claimed = AlertDelivery.objects.filter(
                id__in=ids, status=Alert.Status.PENDING, next_attempt_at__lte=clock
            ).update(
                claim_token=token, next_attempt_at=until, attempts=F("attempts") + 1, last_attempt_at=clock
            )
            if not claimed:
                continue
            rows = list(
                AlertDelivery.objects.filter(claim_token=token)
                .select_related("alert")
                .order_by("alert__created_at", "id")
            )
            title, body = storm_message(rows)
            return ChannelDelivery(
                claim_token=token,
                ids=[row.pk for row in rows],
                attempts=max(row.attempts for row in rows),
                created_at=min(row.alert.created_at for row in rows),
                claimed_until=until,
                url=channels.reveal(rows[0].channel),
                title=title,
                body=body,
                masked=rows[0].channel_masked,
            )
        return None

    def record(self, delivery: Delivery | ChannelDelivery, now: datetime) -> None:
        """Write one result. "Sent" is recorded whoever's claim it was (it is
        the truth); a failure only by the claim that is still current."""
        if isinstance(delivery, ChannelDelivery):
            self.record_channel(delivery, now)
            return
        if delivery.error is None and delivery.refused:
            self.record_partial(delivery, now)
            return
        if delivery.error is None:
            Alert.objects.filter(pk__in=delivery.ids, status=Alert.Status.PENDING).update(
                status=Alert.Status.SENT, sent_at=database_time(now), next_attempt_at=None
            )
            log.info("%s sent (attempt %s)", delivery.label, delivery.attempts)
            return
        permanent, reply = describe_failure(delivery.error)
        ours = Alert.objects.filter(
            pk__in=delivery.ids, status=Alert.Status.PENDING, next_attempt_at=delivery.claimed_until
        )
        self._failed(ours, delivery, permanent, reply, now)

    def record_partial(self, delivery: Delivery, now: datetime) -> None:
        """The server took the message for some recipients and refused the
        others: the accepted ones are done (kept in delivered_to, never sent
        again); the refused ones are retried alone, or, when every refusal is
        a 5xx, the alert stops there, naming them."""
        alert = Alert.objects.filter(pk=delivery.alert_id).first()
        if alert is None:
            return
        refused = {rcpt.lower() for rcpt in delivery.refused}
        attempted = [r for r in alert.recipients if r not in (alert.delivered_to or [])]
        accepted = [r for r in attempted if r.lower() not in refused]
        delivered = list(alert.delivered_to or []) + accepted
        # A storm's alerts share their recipients (and none was partly delivered).
        Alert.objects.filter(pk__in=delivery.ids).update(delivered_to=delivered)
        text = "; ".join(f"{rcpt}: {code} {reply}" for rcpt, (code, reply) in delivery.refused.items())
        reply = f"delivered to {', '.join(delivered) or '—'}; refused: {text}"[:REPLY_CHARS]
        permanent = all(500 <= code < 600 for code, _ in delivery.refused.values())
        ours = Alert.objects.filter(
            pk__in=delivery.ids, status=Alert.Status.PENDING, next_attempt_at=delivery.claimed_until
        )
        self._failed(ours, delivery, permanent, reply, now)

    def record_channel(self, delivery: ChannelDelivery, now: datetime) -> None:
        result = delivery.result
        if result is None:  # the send raised (a plugin's bug)
            exc = delivery.error
            reply = f"{type(exc).__name__}: {exc}"
            if delivery.url:
                reply = channels.mask_reply(delivery.url, reply)
            result = channels.SendResult(False, False, reply[:REPLY_CHARS])
        if result.ok:
            AlertDelivery.objects.filter(pk__in=delivery.ids, status=Alert.Status.PENDING).update(
                status=Alert.Status.SENT,
                sent_at=database_time(now),
                next_attempt_at=None,
                last_error="",
            )
            log.info("%s sent (attempt %s)", delivery.label, delivery.attempts)
            return
        ours = AlertDelivery.objects.filter(claim_token=delivery.claim_token, status=Alert.Status.PENDING)
        self._failed(ours, delivery, result.permanent, result.reply[:REPLY_CHARS], now)

    def _failed(self, ours, delivery, permanent: bool, reply: str, now: datetime) -> None:
        """A failed attempt: refused for good, given up, or retried after a backoff."""
        if permanent:
            ours.update(status=Alert.Status.FAILED_PERMANENT, last_error=reply, next_attempt_at=None)
            log.error("%s refused: %s", delivery.label, reply)
            return
        clock = database_time(now)
        retry_at = clock + retry_delay(delivery.attempts, self._rng)
        if retry_at - delivery.created_at > GIVE_UP_AFTER:
            ours.update(
                status=Alert.Status.FAILED,
                next_attempt_at=None,
                last_error=f"{reply} (gave up after {delivery.attempts} attempts)",
            )
            log.error("%s: gave up after %s attempts: %s", delivery.label, delivery.attempts, reply)
            return
        ours.update(next_attempt_at=retry_at, last_error=reply)
        log.warning(
            "%s: attempt %s failed, retrying at %s: %s", delivery.label, delivery.attempts, retry_at, reply
        )

    # -- the loop's helpers ------------------------------------------------------

    def next_wakeup(self, now: datetime) -> datetime | None:
        """When the step next has something to do: the in-flight claim's end
        (the thread's result wakes the loop sooner), else the next due alert."""
        if self.in_flight is not None:
            return self.in_flight.give_up_at
        times = [
            model.objects.filter(status=Alert.Status.PENDING).aggregate(m=Min("next_attempt_at"))["m"]
            for model in (Alert, AlertDelivery)
        ]
        times = [t for t in times if t is not None]
        return min(times) if times else None

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
