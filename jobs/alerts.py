"""Crash alerts and recovery notices: when they are written, to whom, and
what they say.

The scheduler calls `on_crash` (and `on_success`) inside the transaction
that records the run's outcome, so the alert row — the outbox, delivered by
jobs.outbox — and the in-site messages commit together with the crash: a
process that dies a moment later loses nothing, and an outcome that rolls
back leaves no alert behind. Only the crossing of the threshold calls
`on_crash` (the job goes from enabled to crashed), so one crossing is one
alert; a re-enabled job that crashes again is a new crossing.
"""

import logging
import uuid
from datetime import datetime
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection
from django.core.validators import validate_email
from django.db.models import Q
from django.template.loader import render_to_string

from jobs import channels, links
from jobs.config import get_setting
from jobs.models import Alert, AlertDelivery, Job, Message, Run

log = logging.getLogger("cronboard.alerts")

RECENT_RUNS = 5
ERROR_CHARS = 1500
NO_RECIPIENTS = (
    "No recipients: the job lists no alert emails or channels, and the sys.job.alertEmails and "
    "sys.job.alertChannels settings are empty. Nothing was sent; add recipients to the job or to "
    "the settings."
)
NO_EMAIL = "No email recipients: the alert went to its channels only."


def on_crash(*, job: Job, run: Run | None, now: datetime) -> Alert:
    log.warning(
        "job %s (%s) crashed after %s consecutive failed fires; last error: %s",
        job.pk,
        job.name,
        job.consecutive_failures,
        (job.last_error or "").splitlines()[0][:200] if job.last_error else "-",
    )
    return record_alert(job=job, run=run, kind=Alert.Kind.CRASH, now=now)


def on_success(*, job: Job, run: Run, now: datetime) -> Alert | None:
    """A job that asked for recovery notices, was re-enabled after a crash and
    now succeeded gets one notice (its latest alert is then no longer a crash)."""
    if not job.notify_recovered or job.state != Job.State.ENABLED:
        return None
    latest = (
        Alert.objects.filter(job=job).order_by("-created_at", "-id").values_list("kind", flat=True).first()
    )
    if latest != Alert.Kind.CRASH:
        return None
    return record_alert(job=job, run=run, kind=Alert.Kind.RECOVERED, now=now)


def record_alert(*, job: Job, run: Run | None, kind: str, now: datetime) -> Alert:
    """Write the alert (pending, or undeliverable when nobody is to get it),
    one delivery row per channel, and the in-site messages. Call inside the
    outcome's transaction."""
    recipients = email_recipients(job)
    channel_tokens = alert_channels(job)
    facts = _facts(job=job, run=run, kind=kind, now=now)
    alert = Alert(
        job=job,
        run=run,
        kind=kind,
        recipients=recipients,
        subject=_one_line(render_to_string("jobs/email/alert_subject.txt", facts)),
        body_text=render_to_string("jobs/email/alert.txt", facts),
        body_html=render_to_string("jobs/email/alert.html", facts),
        message_id=new_message_id(job),
        created_at=now,
    )
    if recipients:
        alert.status, alert.next_attempt_at = Alert.Status.PENDING, now
    elif channel_tokens:
        alert.status, alert.last_error = Alert.Status.UNDELIVERABLE, NO_EMAIL
    else:
        alert.status, alert.last_error = Alert.Status.UNDELIVERABLE, NO_RECIPIENTS
        log.error("alert for job %s (%s) is undeliverable: no recipients", job.pk, job.name)
    alert.save()
    AlertDelivery.objects.bulk_create(
        AlertDelivery(
            alert=alert,
            channel=token,
            channel_key=channels.channel_key(url),
            channel_masked=channels.mask(url)[:300],
            status=Alert.Status.PENDING,
            next_attempt_at=now,
        )
        for token, url in channel_tokens.items()
    )
    body = render_to_string("jobs/email/alert_message.txt", {**facts, "alert": alert})
    Message.objects.bulk_create(
        Message(user=user, job=job, subject=alert.subject, body=body, created_at=now)
        for user in message_recipients(job)
    )
    return alert


def email_recipients(job: Job) -> list[str]:
    """The job's own alert emails; when it names none, sys.job.alertEmails."""
    return _valid_emails(job.alert_emails) or _valid_emails(get_setting("sys.job.alertEmails"))


def alert_channels(job: Job) -> dict[str, str]:
    """{stored token: URL} of the job's own channels; when it names none,
    sys.job.alertChannels. One per distinct URL."""
    tokens = job.alert_channels or get_setting("sys.job.alertChannels")
    found: dict[str, str] = {}
    for token in tokens if isinstance(tokens, list) else []:
        url = channels.decrypt(token)
        if url is not None and url not in found.values():
            found[token] = url
    if tokens and not found:
        log.error("job %s: no alert channel could be decrypted (was SECRET_KEY changed?)", job.pk)
    return found


def message_recipients(job: Job) -> list:
    """The job's owner and every superuser, active ones only — never all users."""
    wanted = Q(is_superuser=True)
    if job.owner_id is not None:
        wanted |= Q(pk=job.owner_id)
    return list(get_user_model().objects.filter(wanted, is_active=True).order_by("pk"))


def new_message_id(job: Job) -> str:
    """A Message-ID made once per alert and stored, so every attempt (and a
    re-send after a restart) is recognisably the same email."""
    domain = urlsplit(settings.CRONBOARD_BASE_URL).hostname or "cronboard"
    return f"<cronboard.alert.{job.pk}.{uuid.uuid4().hex}@{domain}>"


def _valid_emails(value) -> list[str]:
    # Stored lists were validated when saved; a hand-edited bad entry is
    # dropped rather than allowed to break the alert.
    emails: list[str] = []
    for item in value if isinstance(value, (list, tuple)) else []:
        try:
            validate_email(item)
        except (ValidationError, TypeError):
            continue
        if item not in emails:
            emails.append(item)
    return emails


def _facts(*, job: Job, run: Run | None, kind: str, now: datetime) -> dict:
    """What the templates show, as it is at the moment of the crash."""
    runs = (
        Run.objects.filter(job=job)
        .exclude(status__in=(*Run.LIVE, Run.Status.SKIPPED))
        .order_by("-scheduled_at", "-id")[:RECENT_RUNS]
    )
    return {
        "kind": kind,
        "crashed": kind == Alert.Kind.CRASH,
        "job": job,
        "job_url": links.job_url(job.pk),
        "state": job.get_state_display(),
        "threshold": job.alert_threshold,
        "failures": job.consecutive_failures,
        "run": run,
        "runs": [
            {
                "scheduled_at": r.scheduled_at,
                "finished_at": r.finished_at,
                "attempt": r.attempt,
                "trigger": r.get_trigger_display(),
                "status": r.get_status_display(),
                "error": _excerpt(r.error),
                "error_indented": "\n".join(f"    {line}" for line in _excerpt(r.error).splitlines()),
            }
            for r in runs
        ],
        "now": now,
    }


def _excerpt(text: str) -> str:
    text = (text or "").strip()
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + " …"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def send_test_email(*, to: list[str], user=None) -> int:
    """Send a test email now, through the configured backend, so an admin can
    check EMAIL_URL from the settings page. Runs in the web request (bounded
    by EMAIL_TIMEOUT per exchange with the server); raises what the backend
    raises."""
    facts = {"user": user, "base_url": settings.CRONBOARD_BASE_URL, "backend": settings.EMAIL_BACKEND}
    message = EmailMultiAlternatives(
        subject="[Cronboard] Test email",
        body=render_to_string("jobs/email/test.txt", facts),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=to,
        connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
        headers={"Auto-Submitted": "auto-generated"},
    )
    message.attach_alternative(render_to_string("jobs/email/test.html", facts), "text/html")
    return message.send(fail_silently=False)
