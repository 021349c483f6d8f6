"""What the outbox sends (jobs.engine.outbox claims, sends and records it):
an alert's email from its stored row, a storm's email or channel message
listing the alerts it gathers, and the claimed deliveries the sender thread
carries, each with its own `send`."""

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.core.mail.backends.smtp import EmailBackend as SMTPBackend
from django.core.mail.message import sanitize_address
from django.utils.html import escape
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from jobs import channels, links
from jobs.core.mailfailures import reply_text
from jobs.i18n import alert_translation
from jobs.models import Alert, AlertDelivery


def build_email(alert: Alert, *, connection=None) -> EmailMultiAlternatives:
    """The email for an alert, from the stored row: the same text, recipients
    and Message-ID on every attempt."""
    message = EmailMultiAlternatives(
        subject=alert.subject,
        body=alert.body_text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[r for r in alert.recipients if r not in (alert.delivered_to or [])],
        connection=connection,
        headers={
            "Message-ID": alert.message_id,
            "Auto-Submitted": "auto-generated",
            "X-Cronboard-Alert": f"{alert.kind} {alert.pk}",
        },
    )
    message.attach_alternative(alert.body_html, "text/html")
    return message


def build_storm_email(alerts: list[Alert], *, connection=None) -> EmailMultiAlternatives:
    """One email for several alerts to the same recipients: each alert's
    subject and its job's link. Its Message-ID is made from the alerts' ids,
    so a retry of the same storm is recognisably the same email."""
    jobs = {alert.job_id for alert in alerts}
    subject, heading = _storm_words(len(alerts), len(jobs))
    lines = [heading, ""]
    items = []
    for alert in alerts:
        url = links.job_url(alert.job_id)
        lines += [f"- {alert.subject}", f"  {url}"]
        items.append(f'<li>{escape(alert.subject)}<br><a href="{escape(url)}">{escape(url)}</a></li>')
    digest = hashlib.sha256(",".join(str(a.pk) for a in alerts).encode()).hexdigest()[:16]
    domain = alerts[0].message_id.rsplit("@", 1)[-1].rstrip(">") or "cronboard"
    message = EmailMultiAlternatives(
        subject=subject,
        body="\n".join(lines) + "\n",
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=list(alerts[0].recipients),
        connection=connection,
        headers={
            "Message-ID": f"<cronboard.storm.{digest}@{domain}>",
            "Auto-Submitted": "auto-generated",
            "X-Cronboard-Alert": "storm " + ",".join(str(a.pk) for a in alerts),
        },
    )
    message.attach_alternative(f"<p>{escape(subject)}</p><ul>{''.join(items)}</ul>", "text/html")
    return message


def send_email(message: EmailMultiAlternatives) -> dict[str, tuple[int, str]]:
    """Send; return the recipients the server refused while it took the
    message for the others ({address: (code, reply)}). Django's SMTP backend
    drops that answer, so for it the exchange is made here (the same steps as
    its _send); another backend just sends. Raises what the send raises (all
    recipients refused: SMTPRecipientsRefused)."""
    backend = message.connection
    if not isinstance(backend, SMTPBackend):
        message.send(fail_silently=False)
        return {}
    encoding = message.encoding or settings.DEFAULT_CHARSET
    from_email = sanitize_address(message.from_email, encoding)
    recipients = [sanitize_address(addr, encoding) for addr in message.recipients()]
    opened = backend.open()
    try:
        refused = backend.connection.sendmail(
            from_email, recipients, message.message().as_bytes(linesep="\r\n")
        )
    finally:
        if opened:
            backend.close()
    return {rcpt: (code, reply_text(reply)) for rcpt, (code, reply) in (refused or {}).items()}


@dataclass(eq=False)
class Delivery:
    """One claimed alert on its way through the sender thread."""

    alert_id: int
    attempts: int
    created_at: datetime
    claimed_until: datetime  # what the claim wrote to next_attempt_at: the claim's token
    message: EmailMultiAlternatives | None
    error: BaseException | None = None
    refused: dict = field(default_factory=dict)  # a partial refusal: {address: (code, reply)}
    give_up_at: datetime | None = None  # this process's clock: abandon the send after this
    others: list[int] = field(default_factory=list)  # a storm: the alerts sent in the same email

    @property
    def ids(self) -> list[int]:
        return [self.alert_id, *self.others]

    @property
    def label(self) -> str:
        return f"alert {self.alert_id}" + (
            f" (with {', '.join(map(str, self.others))})" if self.others else ""
        )

    def send(self) -> None:
        self.refused = send_email(self.message)

    @property
    def channel_type(self) -> str:
        return "email"

    @property
    def outcome(self) -> str:
        """How the send went, as the metrics count it: sent, partial (some recipients refused) or failed."""
        if self.error is not None:
            return "failed"
        return "partial" if self.refused else "sent"


@dataclass(eq=False)
class ChannelDelivery:
    """One channel's claimed rows (one alert, or a storm's) on their way."""

    claim_token: str
    ids: list[int]
    attempts: int
    created_at: datetime  # the oldest alert's
    claimed_until: datetime
    url: str | None
    title: str
    body: str
    masked: str
    result: channels.SendResult | None = None
    error: BaseException | None = None
    give_up_at: datetime | None = None

    @property
    def label(self) -> str:
        return f"channel {self.masked} (deliveries {', '.join(map(str, self.ids))})"

    @property
    def channel_type(self) -> str:
        """The Apprise scheme (slack, json, ntfy, …), never the rest of the URL."""
        scheme, found, _rest = self.masked.partition("://")
        return scheme.lower() if found else "unknown"

    @property
    def outcome(self) -> str:
        return "sent" if self.result is not None and self.result.ok else "failed"

    def send(self) -> None:
        if self.url is None:
            self.result = channels.SendResult(
                False, True, "the channel URL could not be decrypted (was SECRET_KEY changed?)"
            )
            return
        self.result = channels.send(self.url, title=self.title, body=self.body)


def storm_message(rows: list[AlertDelivery]) -> tuple[str, str]:
    """(title, body) for one channel: the alert itself, or one message
    listing every alert of a storm with its job's link."""
    if len(rows) == 1:
        return rows[0].alert.subject, rows[0].alert.body_text
    jobs = {row.alert.job_id for row in rows}
    title, heading = _storm_words(len(rows), len(jobs))
    lines = [heading, ""]
    for row in rows:
        lines.append(f"- {row.alert.subject}")
        lines.append(f"  {links.job_url(row.alert.job_id)}")
    return title, "\n".join(lines)


def _storm_words(alerts: int, jobs: int) -> tuple[str, str]:
    """(subject, first line) of a storm message, in the alerts' language."""
    with alert_translation():
        subject = "[Cronboard] " + ngettext(
            "{alerts} alerts for {jobs} job", "{alerts} alerts for {jobs} jobs", jobs
        ).format(alerts=alerts, jobs=jobs)
        return subject, _("{alerts} alerts:").format(alerts=alerts)
