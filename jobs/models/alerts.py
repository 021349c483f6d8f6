"""The alert outbox (an alert and its deliveries per channel) and the
in-site messages."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.timezone import now as _now
from django.utils.translation import gettext_lazy as _

from jobs.models.base import ChoiceLabels
from jobs.models.jobs import Job
from jobs.models.runs import Run


class Message(models.Model):
    """An in-site notification for one user."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="cronboard_messages"
    )
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    subject = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    created_at = models.DateTimeField(default=_now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user"], condition=Q(read_at__isnull=True), name="message_unread_idx"),
        ]

    def __str__(self):
        return self.subject


class Alert(ChoiceLabels, models.Model):
    """The alert outbox: one row per crash (or recovery) notice, written in the
    transaction that records the outcome (jobs.alerts), delivered later by the
    scheduler's send_alerts step (jobs.engine.outbox). The row keeps what was true at
    the crash moment (recipients, rendered bodies) and a stable Message-ID, so
    a retry or a re-send after a restart is the same email."""

    class Kind(models.TextChoices):
        CRASH = "crash", _("Crashed")
        RECOVERED = "recovered", _("Recovered")
        FAILED = "failed", _("Failed")
        LATE = "late", _("Late")
        LONG_RUNNING = "long_running", _("Long running")
        CALENDAR = "calendar", _("Calendar data missing")

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        SENT = "sent", _("Sent")
        FAILED = "failed", _("Gave up")  # temporary failures for too long
        FAILED_PERMANENT = "failed_permanent", _("Refused")  # a 5xx reply
        UNDELIVERABLE = "undeliverable", _("No recipients")
        MUTED = "muted", _("Muted")  # the job's alerts were muted: recorded, not sent

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="alerts")
    # The run whose outcome crossed the threshold (or recovered the job).
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    # What happened, once: "late:<job>:<fire time>", "failed:<run>", "long_running:<run>".
    # Unique, so a second scheduler noticing the same event writes nothing.
    event = models.CharField(max_length=200, blank=True, default="")
    recipients = models.JSONField(default=list, blank=True)
    # Recipients the mail server already accepted: a partial refusal is
    # retried for the others alone.
    delivered_to = models.JSONField(default=list, blank=True)
    subject = models.CharField(max_length=300)
    body_text = models.TextField()
    body_html = models.TextField()
    message_id = models.CharField(max_length=250, unique=True)
    attempts = models.PositiveIntegerField(default=0)
    # Pending: when the next attempt may start. A claimed alert has it pushed
    # to the end of the claim's lease, so a sender that died lets it go.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=_now)
    # An operator took it on (jobs.acknowledge): when and who, by user name
    # (kept if the user goes). Not a message's read/unread, which is per reader.
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(status="pending") | Q(next_attempt_at__isnull=False),
                name="alert_pending_has_next_attempt",
            ),
            # One crossing, one alert, even if the hook were called twice.
            models.UniqueConstraint("run", condition=Q(kind="crash"), name="alert_one_crash_per_run"),
            models.UniqueConstraint("event", condition=~Q(event=""), name="alert_one_per_event"),
        ]
        indexes = [
            # outbox.AlertSender.claim_due(): pending alerts whose time has come.
            models.Index(
                fields=["next_attempt_at", "id"], condition=Q(status="pending"), name="alert_due_idx"
            ),
            # A job's alerts, newest first (the job page).
            models.Index(fields=["job", "-created_at", "-id"], name="alert_job_idx"),
            # outbox: who was emailed within the last minute (the storm window).
            models.Index(fields=["sent_at"], name="alert_sent_idx"),
        ]

    def __str__(self):
        return f"{self.kind} alert {self.pk} ({self.status})"

    @property
    def is_pending(self):
        return self.status == self.Status.PENDING

    @property
    def job_path(self):
        from jobs import links

        return links.job_path(self.job_id)


class AlertDelivery(ChoiceLabels, models.Model):
    """The outbox for one alert on one channel (an Apprise URL): written with
    the alert, delivered by the scheduler's send_alerts step with the same
    guarantees as the email (claim lease, backoff, a permanent refusal shown).
    Alerts for the same channel that are due together go out as one message
    (a storm), and each of their rows records the result."""

    Status = Alert.Status

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    # HMAC of the URL: one row per alert and channel, and the storm grouping.
    channel_key = models.CharField(max_length=64)
    channel = models.TextField()  # the URL, encrypted (jobs.channels)
    channel_masked = models.CharField(max_length=300)
    status = models.CharField(max_length=16, choices=Alert.Status.choices, default=Alert.Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    # Set by the claim that holds the row; the result is written by it only.
    claim_token = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint("alert", "channel_key", name="alert_delivery_one_per_channel"),
            models.CheckConstraint(
                condition=~Q(status="pending") | Q(next_attempt_at__isnull=False),
                name="alert_delivery_pending_has_next_attempt",
            ),
        ]
        indexes = [
            models.Index(
                fields=["next_attempt_at", "id"], condition=Q(status="pending"), name="alert_delivery_due_idx"
            ),
            models.Index(fields=["channel_key", "-sent_at"], name="alert_delivery_channel_idx"),
        ]

    def __str__(self):
        return f"{self.channel_masked} ({self.status})"


# A channel's name, as a job's `alert_channels` and sys.job.alertChannels name
# it: the pools' rule (jobs.models.pools.POOL_NAME_PATTERN).
CHANNEL_NAME_PATTERN = r"[a-z0-9][a-z0-9_-]{0,99}"


class AlertChannel(models.Model):
    """A named Apprise URL that alerts are sent to: jobs and the global
    setting name it. The URL is stored encrypted (jobs.channels.encrypt) and
    shown masked; `kinds` narrows which alerts it receives (empty: every kind
    the job or the global setting asks for)."""

    name = models.CharField(max_length=100, unique=True)
    url = models.TextField()
    kinds = models.JSONField(default=list, blank=True)
    description = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=_now)
    updated_at = models.DateTimeField(default=_now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(name__regex=rf"^{CHANNEL_NAME_PATTERN}\Z"), name="alertchannel_name_valid"
            ),
        ]

    def __str__(self):
        return self.name
