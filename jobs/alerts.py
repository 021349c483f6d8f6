"""Alerts: when they are written, to whom, and what they say.

Kinds (a job chooses in `alert_on`, else the sys.job.alertOn setting):
`crashed` (the job crossed its alert threshold), `recovered` (it succeeded
again after a crash; also the job's notify_recovered switch), `failed`
(every failed fire that did not crash the job), `late` (a fire not started
N seconds after its time) and `long_running` (a run still going after N
seconds, before its timeout). The last two are noticed by the scheduler's
watch (jobs.engine.alertwatch), a step of every scheduler's loop (so also in the first pass after a start,
before missed fires are planned); each event has a key stored unique
(`Alert.event`), so two schedulers noticing it write one alert.

The scheduler calls `on_crash` (and `on_success`) inside the transaction
that records the run's outcome, so the alert row — the outbox, delivered by
jobs.engine.outbox — and the in-site messages commit together with the crash: a
process that dies a moment later loses nothing, and an outcome that rolls
back leaves no alert behind. Only the crossing of the threshold calls
`on_crash` (the job goes from enabled to crashed), so one crossing is one
alert; a re-enabled job that crashes again is a new crossing.
"""

import logging
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from jobs import access, audit, channelnames, channels, links
from jobs.config import MIN_ALERT_SECONDS, get_setting, get_setting_cached, get_stored
from jobs.core.logcontext import about
from jobs.i18n import alert_translation
from jobs.models import LIVE_RUN, Alert, AlertDelivery, AuditEvent, Job, Message, Run

log = logging.getLogger("cronboard.alerts")

RECENT_RUNS = 5
ERROR_CHARS = 1500
# Stored on the alert in the alert language (sys.ui.language), as its email is.
NO_RECIPIENTS = gettext_lazy(
    "No recipients: the job lists no alert emails or channels, and the sys.job.alertEmails and "
    "sys.job.alertChannels settings are empty. Nothing was sent; add recipients to the job or to "
    "the settings."
)
NO_EMAIL = gettext_lazy("No email recipients: the alert went to its channels only.")
MUTED = gettext_lazy("The job's alerts were muted until {until} UTC: recorded, not sent.")
# How far ahead a job's alerts may be muted.
MAX_MUTE = timedelta(days=366)


WATCH_BATCH = 500
KIND_OF = {
    "crashed": Alert.Kind.CRASH,
    "recovered": Alert.Kind.RECOVERED,
    "failed": Alert.Kind.FAILED,
    "late": Alert.Kind.LATE,
    "long_running": Alert.Kind.LONG_RUNNING,
    "calendar": Alert.Kind.CALENDAR,
}


def kinds_for(job: Job) -> list[str]:
    """The kinds of alert `job` gets: its own choice, else the setting."""
    return list(job.alert_on or get_setting_cached("sys.job.alertOn"))


def wants_recovered(job: Job) -> bool:
    return job.notify_recovered or "recovered" in kinds_for(job)


def on_crash(*, job: Job, run: Run | None, now: datetime) -> Alert | None:
    log.warning(
        "job %s (%s) crashed after %s consecutive failed fires; last error: %s",
        job.pk,
        job.name,
        job.consecutive_failures,
        (job.last_error or "").splitlines()[0][:200] if job.last_error else "-",
        extra=about(job=job, run=run),
    )
    if "crashed" not in kinds_for(job):
        return None
    return record_alert(job=job, run=run, kind=Alert.Kind.CRASH, now=now)


def on_failed(*, job: Job, run: Run, now: datetime) -> Alert | None:
    """A fire that failed (after its last attempt) without crashing the job."""
    if run.status not in Run.COUNTED_FAILURES or "failed" not in kinds_for(job):
        return None
    return record_event(job=job, run=run, kind=Alert.Kind.FAILED, event=f"failed:{run.pk}", now=now)


def on_success(*, job: Job, run: Run, now: datetime) -> Alert | None:
    """A job that asked for recovery notices, was re-enabled after a crash and
    now succeeded gets one notice (its latest alert is then no longer a crash)."""
    if not wants_recovered(job) or job.state != Job.State.ENABLED:
        return None
    latest = (
        Alert.objects.filter(job=job).order_by("-created_at", "-id").values_list("kind", flat=True).first()
    )
    if latest != Alert.Kind.CRASH:
        return None
    return record_alert(job=job, run=run, kind=Alert.Kind.RECOVERED, now=now)


def record_event(*, job: Job, run: Run | None, kind: str, event: str, now: datetime, **extra) -> Alert | None:
    """One alert per event: None if an alert for `event` exists already (or
    another scheduler wrote it in the meantime)."""
    if Alert.objects.filter(event=event).exists():
        return None
    try:
        with transaction.atomic():
            return record_alert(job=job, run=run, kind=kind, now=now, event=event, **extra)
    except IntegrityError:
        return None


def record_alert(*, job: Job, run: Run | None, kind: str, now: datetime, event: str = "", **extra) -> Alert:
    """Write the alert (pending, or undeliverable when nobody is to get it),
    one delivery row per channel, and the in-site messages. Call inside the
    outcome's transaction."""
    recipients = email_recipients(job)
    channel_tokens = alert_channels(job, kind)
    # Its readers have no session: the email, the channel text (rendered from
    # the alert when it is delivered) and the in-site message are written in
    # the config centre's sys.ui.language.
    with alert_translation():
        return _record_alert(
            job=job,
            run=run,
            kind=kind,
            now=now,
            event=event,
            recipients=recipients,
            channel_tokens=channel_tokens,
            **extra,
        )


def _record_alert(*, job, run, kind, now, event, recipients, channel_tokens, **extra) -> Alert:
    facts = _facts(job=job, run=run, kind=kind, now=now, **extra)
    alert = Alert(
        job=job,
        run=run,
        kind=kind,
        event=event,
        recipients=recipients,
        subject=_one_line(render_to_string("jobs/email/alert_subject.txt", facts)),
        body_text=render_to_string("jobs/email/alert.txt", facts),
        body_html=render_to_string("jobs/email/alert.html", facts),
        message_id=new_message_id(job),
        created_at=now,
    )
    muted = job.alerts_muted_until is not None and job.alerts_muted_until > now
    if muted:
        until = f"{job.alerts_muted_until.astimezone(UTC):%Y-%m-%d %H:%M}"
        alert.status, alert.last_error = Alert.Status.MUTED, str(MUTED).format(until=until)
        recipients, channel_tokens = [], {}
    elif recipients:
        alert.status, alert.next_attempt_at = Alert.Status.PENDING, now
    elif channel_tokens:
        alert.status, alert.last_error = Alert.Status.UNDELIVERABLE, str(NO_EMAIL)
    else:
        alert.status, alert.last_error = Alert.Status.UNDELIVERABLE, str(NO_RECIPIENTS)
        log.error(
            "alert for job %s (%s) is undeliverable: no recipients", job.pk, job.name, extra=about(job=job)
        )
    alert.save()
    AlertDelivery.objects.bulk_create(
        AlertDelivery(
            alert=alert,
            channel=channels.encrypt(url),  # encrypted even if the job's entry was written by hand
            channel_key=channels.channel_key(url),
            channel_masked=channels.mask(url)[:300],
            status=Alert.Status.PENDING,
            next_attempt_at=now,
        )
        for url in channel_tokens.values()
    )
    body = render_to_string(
        "jobs/email/alert_message.txt", {**facts, "alert": alert, "channel_count": len(channel_tokens)}
    )
    Message.objects.bulk_create(
        Message(user=user, job=job, subject=alert.subject, body=body, created_at=now)
        for user in ([] if muted else message_recipients(job))
    )
    return alert


def mute_alerts(
    *, job: Job, until: datetime | None, now: datetime, user=None, via: str = AuditEvent.Via.CONSOLE
) -> None:
    """Mute the job's alerts until `until` (None: unmute) without pausing it:
    the alerts written meanwhile are recorded as muted and not sent. Audited.
    ValueError for a time not in the next MAX_MUTE."""
    if until is not None and not now < until <= now + MAX_MUTE:
        raise ValueError(_("Choose a time in the next {days} days.").format(days=MAX_MUTE.days))
    before = job.alerts_muted_until
    with transaction.atomic():
        Job.objects.filter(pk=job.pk).update(alerts_muted_until=until)
        job.alerts_muted_until = until
        audit.record(
            job=job,
            action="mute-alerts" if until else "unmute-alerts",
            user=user,
            via=via,
            changes={"alerts_muted_until": [_iso(before), _iso(until)]},
        )


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(UTC).isoformat()


def email_recipients(job: Job) -> list[str]:
    """The job's own alert emails; when it names none, sys.job.alertEmails."""
    return _valid_emails(job.alert_emails) or _valid_emails(get_setting("sys.job.alertEmails"))


def alert_channels(job: Job, kind: str | None = None) -> dict[str, str]:
    """{name: URL} of the job's own named channels (when it names none,
    sys.job.alertChannels') that receive an alert of `kind` (an Alert.Kind;
    None: every kind). One per distinct URL."""
    names = job.alert_channels or get_stored("sys.job.alertChannels")
    setting_kind = next((name for name, value in KIND_OF.items() if value == kind), None)
    return dict(channelnames.urls_for(names, kind=setting_kind))


def message_recipients(job: Job) -> list:
    """The job's owner and every superuser, active ones only — never all
    users — and of those only who may see the job's namespace (an owner
    whose role there was taken away hears of it no more)."""
    wanted = Q(is_superuser=True)
    if job.owner_id is not None:
        wanted |= Q(pk=job.owner_id)
    viewers = access.users_who_may(access.VIEW, namespace=job.namespace)
    return list(viewers.filter(wanted).order_by("pk"))


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


def _headline(kind: str, job: Job, run: Run | None, extra: dict) -> tuple[str, str]:
    """(subject, first sentence) for the kinds beyond crashed and recovered."""
    name = f"“{job.name}”"
    if kind == Alert.Kind.FAILED:
        status = run.get_status_display().lower() if run else _("failed")
        attempts = run.attempt if run else 1
        return (
            _("Job {name} failed").format(name=name),
            ngettext(
                "The job {name} failed: its fire due {due} ended {status} after {attempts} attempt.",
                "The job {name} failed: its fire due {due} ended {status} after {attempts} attempts.",
                attempts,
            ).format(
                name=name, due=_utc(run.scheduled_at if run else None), status=status, attempts=attempts
            ),
        )
    if kind == Alert.Kind.LATE:
        return (
            _("Job {name} is late").format(name=name),
            _(
                "The job {name} has not started its fire due {due}: {late_by} late, more than the "
                "{threshold} s allowed. The scheduler may be down, waiting for the leader lease, or out of run slots."
            ).format(
                name=name,
                due=_utc(extra["due_at"]),
                late_by=_secs(extra["late_by"]),
                threshold=extra["threshold_seconds"],
            ),
        )
    if kind == Alert.Kind.LONG_RUNNING:
        return (
            _("Job {name} has been running for {running_for}").format(
                name=name, running_for=_secs(extra["running_for"])
            ),
            _(
                "The job {name} has been running for {running_for} (run {run}, started {started}), longer "
                "than the {threshold} s allowed; it times out at {timeout} s."
            ).format(
                name=name,
                running_for=_secs(extra["running_for"]),
                run=run.pk if run else "?",
                started=_utc(run.started_at) if run else "?",
                threshold=extra["threshold_seconds"],
                timeout=run.timeout_seconds if run else "?",
            ),
        )
    if kind == Alert.Kind.CALENDAR:
        year = extra["missing"].year
        return (
            _("Job {name}: calendar data for {year} missing").format(name=name, year=year),
            _(
                "The job {name} fires by the calendar {calendar}, whose installed data ends on {last}: "
                "it will not fire after that date until the data for {year} is installed "
                "(pip install -U holidays, then restart) or a custom calendar covers it."
            ).format(name=name, calendar=job.calendar, last=extra["missing"] - timedelta(days=1), year=year),
        )
    return "", ""


def _utc(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if value else "?"


def _secs(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds >= 120:
        return _("{minutes} min {seconds} s").format(minutes=seconds // 60, seconds=seconds % 60)
    return _("{seconds} s").format(seconds=seconds)


def _facts(*, job: Job, run: Run | None, kind: str, now: datetime, **extra) -> dict:
    """What the templates show, as it is at the moment of the event."""
    runs = (
        Run.objects.filter(job=job)
        .exclude(status__in=(*Run.LIVE, Run.Status.SKIPPED))
        .order_by("-scheduled_at", "-id")[:RECENT_RUNS]
    )
    title, headline = _headline(kind, job, run, extra)
    return {
        "kind": kind,
        "title": title,
        "headline": headline,
        "crashed": kind == Alert.Kind.CRASH,
        "recovered": kind == Alert.Kind.RECOVERED,
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
    # In the alerts' language: the test shows what the alerts' readers will get.
    with alert_translation():
        message = EmailMultiAlternatives(
            subject="[Cronboard] " + _("Test email"),
            body=render_to_string("jobs/email/test.txt", facts),
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=to,
            connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
            headers={"Auto-Submitted": "auto-generated"},
        )
        message.attach_alternative(render_to_string("jobs/email/test.html", facts), "text/html")
    return message.send(fail_silently=False)


# -- late and long-running: the checks that write their alerts (jobs.engine.alertwatch calls them)


def _late_after(job: Job) -> int:
    return job.late_after_seconds or get_setting_cached("sys.job.lateAfterSeconds")


def check_late(now: datetime) -> int:
    """Fires not started N seconds after their time: a job whose next fire
    time passed without being planned (no scheduler, no leader: this is also
    what a scheduler finds at start-up after being down), and a planned fire
    still queued (no free slot) or waiting (for its job's live run or its
    pool). One alert per fire."""
    cutoff = now - timedelta(seconds=MIN_ALERT_SECONDS)
    fires: list[tuple[Job, Run | None, datetime]] = [
        (job, None, job.next_fire_at) for job in Job.objects.due(cutoff)[:WATCH_BATCH]
    ]
    # Only the live-run partial index's condition goes to SQL: with a bound on
    # scheduled_at, SQLite's planner picks the scheduled_at index and walks the
    # whole history. Queued runs are few; the time is checked here.
    queued = (
        Run.objects.filter(
            LIVE_RUN, status__in=Run.NOT_STARTED, trigger__in=Run.SCHEDULED_TRIGGERS, job__isnull=False
        )
        .select_related("job")
        .order_by()[: WATCH_BATCH * 4]
    )
    fires += sorted(
        (
            (run.job, run, run.scheduled_at)
            for run in queued
            if run.trigger in Run.SCHEDULED_TRIGGERS and run.attempt == 1 and run.scheduled_at <= cutoff
        ),
        key=lambda fire: fire[2],
    )
    wrote = 0
    for job, run, due_at in fires:
        if "late" not in kinds_for(job):
            continue
        threshold = _late_after(job)
        if now - due_at < timedelta(seconds=threshold):
            continue
        event = f"late:{job.pk}:{due_at.isoformat()}"
        alert = record_event(
            job=job,
            run=run,
            kind=Alert.Kind.LATE,
            event=event,
            now=now,
            due_at=due_at,
            late_by=now - due_at,
            threshold_seconds=threshold,
        )
        wrote += alert is not None
    return wrote


def check_calendar(now: datetime) -> int:
    """Jobs whose calendar's data ends within CALENDAR_WARNING: one alert per
    job and missing year (they stop firing there; nothing is guessed)."""
    wrote = 0
    jobs = Job.objects.scheduled().exclude(schedule_type=Job.ScheduleType.NONE).exclude(calendar="")
    # Where the data ends depends on the calendar and the zone alone: each
    # pair is asked once, and only the jobs of a pair whose data ends soon
    # are read (the watch runs every few seconds; reading every job on a
    # calendar each time cost a scheduler of 1,000 such jobs about a tenth
    # of its CPU).
    ending = Q()
    for calendar, zone in jobs.values_list("calendar", "timezone").distinct().order_by():
        if Job(schedule_type=Job.ScheduleType.CRON, calendar=calendar, timezone=zone).calendar_missing(now):
            ending |= Q(calendar=calendar, timezone=zone)
    if not ending:
        return 0
    for job in jobs.filter(ending).order_by("id")[:WATCH_BATCH]:
        missing = job.calendar_missing(now)
        if missing is None or "calendar" not in kinds_for(job):
            continue
        alert = record_event(
            job=job,
            run=None,
            kind=Alert.Kind.CALENDAR,
            event=f"calendar:{job.pk}:{missing.year}",
            now=now,
            missing=missing,
        )
        wrote += alert is not None
    return wrote


def check_long_running(now: datetime) -> int:
    """Runs still going N seconds after they started, N below their timeout
    (a job's long_running_seconds, else the setting, else half the timeout);
    one alert per run, or per fire for the pieces of a split one."""
    cutoff = now - timedelta(seconds=MIN_ALERT_SECONDS)
    running = (
        Run.objects.filter(LIVE_RUN, status=Run.Status.RUNNING, started_at__lte=cutoff, job__isnull=False)
        .select_related("job")
        .order_by("started_at", "id")[:WATCH_BATCH]
    )
    default = get_setting_cached("sys.job.longRunningSeconds")
    wrote = 0
    for run in running:
        job = run.job
        if "long_running" not in kinds_for(job):
            continue
        threshold = job.long_running_seconds or default or run.timeout_seconds // 2
        if threshold >= run.timeout_seconds or now - run.started_at < timedelta(seconds=threshold):
            continue
        alert = record_event(
            job=job,
            run=run,
            kind=Alert.Kind.LONG_RUNNING,
            # A split fire's pieces run long together: one alert for the fire.
            event=f"long_running:fire:{run.fire_id}" if run.shard_total > 1 else f"long_running:{run.pk}",
            now=now,
            running_for=now - run.started_at,
            threshold_seconds=threshold,
        )
        wrote += alert is not None
    return wrote
