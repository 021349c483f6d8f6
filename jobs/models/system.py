"""The config centre's settings, the scheduler's leases and leadership
history, the audit trail, API tokens and users' profiles."""

from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils.timezone import now as _now
from django.utils.translation import gettext_lazy as _

from jobs.core.logcontext import REQUEST_ID_CHARS
from jobs.models.base import ChoiceLabels
from jobs.models.jobs import Job


class Setting(models.Model):
    """The config centre: typed key/values editable in the console. The
    types, defaults and validation live in jobs.config."""

    key = models.CharField(max_length=100, primary_key=True)
    value = models.JSONField()
    updated_at = models.DateTimeField(default=_now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self):
        return self.key


class Lease(models.Model):
    """A named, expiring claim: `leader` for the planner, `node:<worker id>`
    for each live scheduler process (its identity and liveness)."""

    name = models.CharField(max_length=200, primary_key=True)
    holder = models.CharField(max_length=200, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Incremented on every change of holder; fire claims carry it so a
    # leader that stalled past its lease cannot claim anything.
    epoch = models.PositiveBigIntegerField(default=0)
    acquired_at = models.DateTimeField(null=True, blank=True)
    renewed_at = models.DateTimeField(null=True, blank=True)
    info = models.JSONField(default=dict, blank=True)

    def __str__(self):
        return f"{self.name} → {self.holder or '-'}"

    def is_live(self, at: datetime) -> bool:
        """Held by someone at `at` (on PostgreSQL, pass the database's clock)."""
        return bool(self.holder) and self.expires_at is not None and self.expires_at >= at


class LeadershipChange(models.Model):
    """One row per acquisition of the `leader` lease (its epoch), for the
    cluster page's "recent leadership changes"."""

    epoch = models.PositiveBigIntegerField()
    worker_id = models.CharField(max_length=200)
    host = models.CharField(max_length=255, blank=True)
    # The database clock's time of the acquisition (the lease's acquired_at).
    acquired_at = models.DateTimeField()

    class Meta:
        ordering = ["-acquired_at", "-id"]

    def __str__(self):
        return f"epoch {self.epoch}: {self.worker_id}"


class AuditEvent(ChoiceLabels, models.Model):
    """Who did what, when, and through which door: to a job (`job`), or to
    what belongs to no job (`subject`: the settings, the global alert
    channels, a sign-in, roles, a secret; `subject_name`). Kept when the
    user or the job is deleted (the names are copied)."""

    class Via(models.TextChoices):
        CONSOLE = "console", _("Console")
        API = "api", _("API")
        CLI = "cli", _("Command line")
        IMPORT = "import", _("Import")
        SSO = "sso", _("SSO sign-in")
        SYSTEM = "system", _("System")

    class Subject(models.TextChoices):
        JOB = "job", _("Job")
        SETTINGS = "settings", _("Settings")
        CHANNELS = "channels", _("Alert channels")
        SIGN_IN = "sign-in", _("Sign-in")
        ROLES = "roles", _("Roles")
        SECRETS = "secrets", _("Secrets")
        POOL = "pool", _("Concurrency pools")
        CALENDAR = "calendar", _("Calendars")

    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    job_name = models.CharField(max_length=200, blank=True)
    subject = models.CharField(max_length=10, choices=Subject.choices, default=Subject.JOB)
    # What a row that is not about a job is about, by name: a secret's name,
    # the user or group a role was granted to.
    subject_name = models.CharField(max_length=200, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=30)
    via = models.CharField(max_length=10, choices=Via.choices, default=Via.CONSOLE)
    changes = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=_now)
    # The web request that wrote the row (X-Request-ID, or the id it was
    # given: jobs.core.logcontext), as on the log lines it caused; empty for
    # commands and the scheduler.
    request_id = models.CharField(max_length=REQUEST_ID_CHARS, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["job", "-created_at"], name="audit_job_idx"),
            # The audit page's keyset pages across all rows (jobs.web.audit).
            models.Index(fields=["-created_at", "-id"], name="audit_created_idx"),
        ]

    # The actions recorded (jobs.services, jobs.audit), as the trails word them.
    ACTION_LABELS = {
        "create": _("create"),
        "edit": _("edit"),
        "pause": _("pause"),
        "resume": _("resume"),
        "re-enable": _("re-enable"),
        "delete": _("delete"),
        "run-now": _("run now"),
        "cancel-run": _("cancel run"),
        "change": _("change"),
        "sign-in": _("sign in"),
        "sign-in-failed": _("failed sign-in"),
        "two-factor-on": _("two-factor on"),
        "two-factor-off": _("two-factor off"),
        "two-factor-reset": _("two-factor reset"),
        "two-factor-failed": _("wrong two-factor code"),
        "recovery-codes": _("new recovery codes"),
        "recovery-code-used": _("recovery code used"),
        "sign-in-refused": _("sign-in refused: no role"),
        "acknowledge": _("acknowledge alert"),
        "grant": _("grant role"),
        "revoke": _("revoke role"),
        "secret-create": _("create secret"),
        "secret-set": _("replace secret"),
        "secret-delete": _("delete secret"),
    }

    def __str__(self):
        return (
            f"{self.username or 'system'} {self.action} {self.job_name or self.subject_name or self.subject}"
        )

    def get_action_display(self) -> str:
        return str(self.ACTION_LABELS.get(self.action, self.action))


class APIToken(models.Model):
    """A personal API token. Only the SHA-256 of the secret is stored; the
    token itself is shown once, when it is created (jobs.tokens). It acts
    with its user's roles as they are at each request, narrowed to one
    namespace and/or to reading when created so (jobs.access.narrow)."""

    PREFIX_CHARS = 12

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The token's first characters, shown in lists so a user can tell tokens apart.
    prefix = models.CharField(max_length=PREFIX_CHARS)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=_now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # NULL: every namespace its user's roles reach; "" the jobs outside any.
    namespace = models.CharField(max_length=100, null=True, blank=True)  # noqa: DJ001
    read_only = models.BooleanField(default=False, db_default=False)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Profile(ChoiceLabels, models.Model):
    """What a user chose for themselves in the console: the language (blank:
    follow the browser's Accept-Language) and the time zone pages show times
    in (blank until the first sign-in sends the browser's; then UTC), or UTC
    whatever the zone while `times_in_utc` (the top bar's one-click switch).
    jobs.web.i18n reads them, once per request."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="profile"
    )
    # The single sign-on source that signs this account in ("ldap", "oidc";
    # blank: none yet). An account made by one source is never signed in by
    # the other (jobs.rolemapping.claim_source).
    sign_in_source = models.CharField(max_length=10, blank=True, default="")
    language = models.CharField(max_length=10, blank=True, choices=settings.LANGUAGES)
    # An IANA name as jobs.cron.zone_name spells it (its length limit too).
    time_zone = models.CharField(max_length=64, blank=True, default="", db_default="")
    times_in_utc = models.BooleanField(default=False, db_default=False)

    def __str__(self):
        return f"{self.user_id}: {self.language or 'browser'}"
