"""Cronboard's data model. The database is the only source of truth: every
intent is written to a row before anything runs, every outcome is written
back to that row."""

import re
import unicodedata
import uuid
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils.encoding import force_str
from django.utils.timezone import now as _now
from django.utils.translation import gettext_lazy as _

from jobs import cron
from jobs.core.logbuffer import cap_text
from jobs.text import storable

# What a job or a one-off task gets when it does not say (the model, the job
# form, the API, `jobs import`, services.enqueue).
DEFAULT_MAX_RETRIES = 0
DEFAULT_RETRY_INTERVAL_SECONDS = 60
DEFAULT_TIMEOUT_SECONDS = 600
DEFAULT_ALERT_THRESHOLD = 3
# The limits on them: the interval floor is the cron module's (error 47004);
# a run's timeout (and an HTTP job's own request timeout) is at most a day.
MIN_INTERVAL_SECONDS = cron.MIN_INTERVAL_SECONDS
MAX_TIMEOUT_SECONDS = 86_400


class ChoiceLabels:
    """`get_FOO_display()` without translating every label of the field.
    Django's looks the value up in `dict(make_hashable(field.flatchoices))`,
    and hashing a lazy label translates it: a runs table of 25 rows made
    about 500 gettext calls for its status and trigger cells. This one
    translates only the label it returns."""

    def _get_FIELD_display(self, field):
        value = getattr(self, field.attname)
        for choice, label in field.flatchoices:
            if choice == value:
                return force_str(label, strings_only=True)
        return force_str(value, strings_only=True)


# A job that needs an operator: crashed, or failing (its last fires failed in
# a row, whatever its state now). The dashboard lists these first; the
# partial index job_attention_idx holds exactly them.
NEEDS_ATTENTION = Q(state="crashed") | Q(consecutive_failures__gt=0)


def job_name(text: str) -> str:
    """A job's name as it is stored and looked up: without surrounding
    spaces, in Unicode NFC, so a name typed with a combining accent (e +
    U+0301) is the same name as its precomposed spelling (é): they look
    identical. Every door that finds a job by name (workflows' `after`,
    `jobs import`, the `jobs` command, scopes, the API) goes through it."""
    return unicodedata.normalize("NFC", text.strip())


class JobQuerySet(models.QuerySet):
    def live(self):
        return self.filter(deleted_at__isnull=True)

    def named(self, *names: str):
        """Live jobs with these names, compared as stored (`job_name`)."""
        return self.live().filter(name__in=[job_name(name) for name in names])

    def created_after(self, created_at: datetime, job_id: int):
        """The jobs after a page's last in (created_at, id) order: the API's
        and the export's pages (a job created since comes last, so paging
        through never skips or repeats one)."""
        return self.filter(created_at__gte=created_at).filter(Q(created_at__gt=created_at) | Q(id__gt=job_id))

    def needing_attention(self):
        """Live jobs that are crashed or failing (served by `job_attention_idx`)."""
        return self.live().filter(NEEDS_ATTENTION)

    def scheduled(self):
        """The jobs the scheduler fires: enabled and not deleted."""
        return self.filter(state=Job.State.ENABLED, deleted_at__isnull=True)

    def due(self, now):
        """Enabled jobs whose next fire time has come (served by `job_state_due_idx`)."""
        return self.scheduled().filter(next_fire_at__lte=now).order_by("next_fire_at", "id")


def cap_message(text: str | None, limit: int | None) -> str:
    """A log, result or error as it is written: capped at `limit` characters
    (≤ 0: no cap) and storable on both databases (jobs.text.storable: NUL
    and lone surrogates become U+FFFD). Past the cap the head and the tail
    are kept and the middle is replaced by a marker that states the
    original length (jobs.core.logbuffer.cap_text, which a
    running log is capped by too). Every outcome text a handler produced is
    written through this function."""
    text = text or ""
    return storable(cap_text(text, text, len(text), limit))


class Job(ChoiceLabels, models.Model):
    class Kind(models.TextChoices):
        PYTHON = "python", _("Python handler")
        HTTP = "http", _("HTTP request")
        SQL = "sql", _("SQL statement")
        COMMAND = "command", _("Command on the scheduler's host")

    class ScheduleType(models.TextChoices):
        CRON = "cron", _("Cron")
        INTERVAL = "interval", _("Interval")
        # No schedule of its own: runs by hand or after an upstream job.
        NONE = "none", _("None (by hand or after other jobs)")

    class MisfirePolicy(models.TextChoices):
        SKIP = "skip", _("Skip missed fires")
        FIRE_ONCE_NOW = "fire_once_now", _("Fire once now")

    class State(models.TextChoices):
        ENABLED = "enabled", _("Enabled")
        PAUSED = "paused", _("Paused")
        CRASHED = "crashed", _("Crashed")

    MIN_INTERVAL_SECONDS = MIN_INTERVAL_SECONDS
    MAX_INTERVAL_SECONDS = 366 * 86_400
    MAX_TIMEOUT_SECONDS = MAX_TIMEOUT_SECONDS
    # What a person or program sets on a job (form, API, jobs-as-code file,
    # audit trail); everything else is the scheduler's bookkeeping.
    EDITABLE_FIELDS = [
        "name",
        "description",
        "namespace",
        "kind",
        "handler",
        "properties",
        "after",
        "sql_write",
        "schedule_type",
        "cron_expression",
        "interval_seconds",
        "timezone",
        "misfire_policy",
        "run_once",
        "max_retries",
        "retry_interval_seconds",
        "timeout_seconds",
        "alert_threshold",
        "alert_emails",
        "alert_channels",
        "alert_on",
        "late_after_seconds",
        "long_running_seconds",
        "notify_recovered",
        "state",
    ]

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    namespace = models.CharField(max_length=100, blank=True, default="", db_index=True)
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.PYTHON)
    handler = models.CharField(max_length=200, blank=True)
    properties = models.JSONField(default=dict, blank=True)
    sql_write = models.BooleanField(
        default=False, help_text=_("SQL jobs only: allow the statement to write.")
    )
    # Upstream jobs, as written by a person or file: [{"job": NAME, "on":
    # "success" | "failure" | "finish"}]. Validated by JobForm (unknown
    # names, cycles); services.save_job writes the JobDependency rows the
    # scheduler follows from it (and renames keep it current).
    after = models.JSONField(default=list, blank=True)

    schedule_type = models.CharField(max_length=10, choices=ScheduleType.choices, default=ScheduleType.CRON)
    cron_expression = models.CharField(max_length=cron.MAX_EXPRESSION_CHARS, blank=True)
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=cron.MAX_ZONE_CHARS, default="UTC")
    misfire_policy = models.CharField(
        max_length=20, choices=MisfirePolicy.choices, default=MisfirePolicy.SKIP
    )
    run_once = models.BooleanField(default=False)

    max_retries = models.PositiveSmallIntegerField(default=DEFAULT_MAX_RETRIES)
    retry_interval_seconds = models.PositiveIntegerField(default=DEFAULT_RETRY_INTERVAL_SECONDS)
    timeout_seconds = models.PositiveIntegerField(default=DEFAULT_TIMEOUT_SECONDS)
    alert_threshold = models.PositiveSmallIntegerField(default=DEFAULT_ALERT_THRESHOLD)
    alert_emails = models.JSONField(default=list, blank=True)
    # Apprise URLs, each stored encrypted (jobs.channels); never shown in full.
    alert_channels = models.JSONField(default=list, blank=True)
    notify_recovered = models.BooleanField(
        default=False, help_text=_("Also send a notice when the job next succeeds after a crash.")
    )
    # Which kinds of alert (jobs.alerts.KINDS); empty: the sys.job.alertOn setting.
    alert_on = models.JSONField(default=list, blank=True)
    # `late`: a fire not started this long after its time; `long_running`: a
    # run still going after this long. Null: the config centre's default.
    late_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    long_running_seconds = models.PositiveIntegerField(null=True, blank=True)

    state = models.CharField(max_length=10, choices=State.choices, default=State.ENABLED)
    consecutive_failures = models.PositiveIntegerField(default=0)
    next_fire_at = models.DateTimeField(null=True, blank=True)
    last_fire_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=20, blank=True)
    last_error = models.TextField(blank=True)
    last_duration_ms = models.PositiveIntegerField(null=True, blank=True)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    builtin = models.BooleanField(default=False)
    # Bumped on every edit through a form or the API, and when the scheduler
    # changes the job's state, so a stale save is refused.
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=_now)
    updated_at = models.DateTimeField(default=_now)
    deleted_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                "name", condition=Q(deleted_at__isnull=True), name="job_unique_live_name"
            ),
            models.CheckConstraint(
                condition=(
                    Q(schedule_type="cron") & ~Q(cron_expression="")
                    | Q(schedule_type="interval", interval_seconds__gte=MIN_INTERVAL_SECONDS)
                    | Q(schedule_type="none")
                ),
                name="job_schedule_field_set",
            ),
            models.CheckConstraint(
                condition=Q(timeout_seconds__gte=1, timeout_seconds__lte=MAX_TIMEOUT_SECONDS),
                name="job_timeout_range",
            ),
        ]
        indexes = [
            # The scheduler's due query (Job.objects.due(now) in plan_due(),
            # and the first fire time after now beside it), the upcoming
            # fires, and the dashboard's jobs by state. State first, then the
            # next fire time: the state is a bound parameter, so SQLite cannot
            # use an index whose condition names it (a partial index on
            # next_fire_at "where state = 'enabled'" was never used there,
            # and with an index on state alone each pass read and sorted
            # every enabled job); this one answers "enabled, due by now, in
            # fire order" as one range of the index on both databases.
            models.Index(
                fields=["state", "next_fire_at"],
                condition=Q(deleted_at__isnull=True),
                name="job_state_due_idx",
            ),
            # The dashboard's "needs attention": the few crashed or failing
            # jobs, without reading every job row.
            models.Index(
                fields=["name"],
                condition=Q(deleted_at__isnull=True) & NEEDS_ATTENTION,
                name="job_attention_idx",
            ),
        ]

    def __str__(self):
        return self.name

    @property
    def is_deleted(self):
        return self.deleted_at is not None

    @property
    def zone(self):
        """The job's time zone; a name the system no longer knows reads as UTC
        (the job page warns, see `zone_is_unknown`)."""
        from jobs import cron

        try:
            return cron.get_zone(self.timezone)
        except cron.CronError:
            return cron.get_zone("UTC")

    @property
    def zone_is_unknown(self) -> bool:
        from jobs import cron

        try:
            cron.get_zone(self.timezone)
        except cron.CronError:
            return True
        return False

    def next_fire_after(self, after: datetime, *, last_fire: datetime | None = None) -> datetime | None:
        """The first fire time strictly after `after`.

        Cron: the next matching instant in the job's zone. Interval: the last
        fire plus the interval, or `after` plus the interval when that is
        already past: missed windows are never replayed."""
        if self.schedule_type == self.ScheduleType.NONE:
            return None
        if self.schedule_type == self.ScheduleType.INTERVAL:
            step = timedelta(seconds=self.interval_seconds)
            if last_fire is not None and last_fire + step > after:
                return last_fire + step
            return after + step
        from jobs import cron

        try:
            return cron.parse(self.cron_expression).next_after(after, self.zone)
        except cron.CronError:
            # A stored expression that no longer parses (an older, laxer
            # version saved it) must not stop the scheduler: it just never fires.
            return None

    def next_fire_on_schedule(self, now: datetime) -> datetime | None:
        """The next fire of a job whose schedule is counted afresh: an edit
        that changed it, a job found without a next fire (schedule_unplanned)
        or off its schedule (ScheduleCheck); docs/cron.md states the rule.
        An interval job stays on its grid: its last fire plus the interval,
        or now plus the interval if that is already past; a cron job's first
        fire time after now."""
        return self.next_fire_after(now, last_fire=self.last_fire_at)

    def run_policy(self) -> dict:
        """What a fire copies from its job so later edits do not change it."""
        return dict(
            max_retries=self.max_retries,
            retry_interval_seconds=self.retry_interval_seconds,
            timeout_seconds=self.timeout_seconds,
        )

    SCHEDULE_FIELDS = ("schedule_type", "cron_expression", "interval_seconds", "timezone")
    # The scheduler's bookkeeping on the row. An edit never writes these from
    # the job as the editor loaded it: they may have moved since (a claimed
    # fire, a recorded outcome), and writing them back loses that.
    SCHEDULER_FIELDS = (
        "next_fire_at",
        "last_fire_at",
        "last_status",
        "last_error",
        "last_duration_ms",
        "consecutive_failures",
    )

    @classmethod
    def from_db(cls, db, field_names, values):
        job = super().from_db(db, field_names, values)
        # The state as read, which an editor's changes leave as it was: the
        # base of `state_after_edit`.
        job.loaded_state = job.__dict__.get("state")
        return job

    def refresh_from_db(self, using=None, fields=None, from_queryset=None):
        super().refresh_from_db(using=using, fields=fields, from_queryset=from_queryset)
        if fields is None or "state" in fields:
            self.loaded_state = self.__dict__.get("state")

    def state_after_edit(self, stored: "Job", *, versioned: bool) -> str:
        """The state an edit of this job writes, `stored` being the row as it
        is now (read locked by the save); docs/cron.md states the rule. The
        scheduler changes a job's state as well (crashed at its alert
        threshold, a run-once job paused once it fired), without an editor
        knowing, so the editor's state counts only where the editor changed
        it from the state loaded: left as loaded, the stored state stands.
        A crashed job stays crashed unless the edit was made against it as
        crashed, which only an edit naming its current version shows (the
        console form always does): an edit without a version may come from a
        copy read before the crash. `versioned`: the edit named a version,
        checked against the stored one in the same save."""
        loaded = getattr(self, "loaded_state", None) or stored.state
        if stored.state == self.State.CRASHED and not (versioned and loaded == self.State.CRASHED):
            return self.State.CRASHED
        if self.state == loaded:
            return stored.state
        return self.state

    def mark_saved(self, now: datetime, *, before: "Job | None" = None) -> None:
        """Saving resets the failure count and sets the next fire time; the
        one rule for the console, the API and `jobs import`. `before` is the
        stored job as it is now, read in the saving transaction, when this
        is an edit (None: a new job, or a resume). docs/cron.md states it.

        A save never touches the next fire of a job that was enabled with
        the same schedule type, expression, interval and zone. A fire that
        was already due when the schedule changed keeps its time: it is owed,
        and the scheduler runs or records it, then counts the new schedule
        from it; a change to no schedule (type none) owes nothing. Otherwise
        the next fire is `next_fire_on_schedule`'s (a new job's, or a
        resumed one's, counted from now)."""
        self.consecutive_failures = 0
        self.updated_at = now
        if self.state == self.State.ENABLED and not self.is_deleted:
            was_planned = (
                before is not None and before.state == self.State.ENABLED and before.next_fire_at is not None
            )
            unchanged = was_planned and all(
                getattr(before, name) == getattr(self, name) for name in self.SCHEDULE_FIELDS
            )
            # A fire due when the schedule changed is owed, unless the new
            # schedule fires no more: then nothing is owed.
            owed = was_planned and before.next_fire_at <= now and self.schedule_type != self.ScheduleType.NONE
            if unchanged or owed:
                self.next_fire_at = before.next_fire_at
            elif before is not None:
                # The save copied the stored last fire onto this job.
                self.next_fire_at = self.next_fire_on_schedule(now)
            else:
                self.next_fire_at = self.next_fire_after(now)
        elif self.state == self.State.PAUSED:
            self.next_fire_at = None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# The one run-history cursor's text: "<epoch microseconds>.<id>", both
# without leading zeros, for a time from the year 1653 to 5138 and an id
# below 10**18. parse_run_cursor reads exactly these, and the API's document
# gives this pattern for its `cursor` parameters.
CURSOR_PATTERN = r"^(?:0|-?[1-9][0-9]{0,15}|[1-9][0-9]{16})\.[1-9][0-9]{0,17}$"
_CURSOR_RE = re.compile(CURSOR_PATTERN)


def run_cursor(scheduled_at: datetime, run_id: int) -> str:
    """The one page cursor, for the console's run pages (`before`/`after`),
    the API's `next_cursor` and bench pages: "<epoch microseconds>.<id>" of
    the run (its scheduled_at) or job (its created_at) a page ends (or
    starts) with, read back by parse_run_cursor and used with
    RunQuerySet.older_than / newer_than and JobQuerySet.created_after."""
    delta = scheduled_at - _EPOCH
    return f"{(delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds}.{run_id}"


def parse_run_cursor(value) -> tuple[datetime, int] | None:
    """(scheduled_at, id) from run_cursor's text; None for anything else
    (leading zeros, signs, spaces, another format, out of CURSOR_PATTERN's
    range), so a hand-made cursor is refused, never half-read."""
    if not isinstance(value, str) or not _CURSOR_RE.fullmatch(value):
        return None
    micros, run_id = value.split(".")
    return _EPOCH + timedelta(microseconds=int(micros)), int(run_id)


class RunQuerySet(models.QuerySet):
    """Keyset pages of history in (scheduled_at, id) order, served by
    run_history_idx. In each, the plain bound on scheduled_at lets the index
    seek; the OR only sorts out runs scheduled at the same instant."""

    def older_than(self, scheduled_at: datetime, run_id: int):
        return self.filter(scheduled_at__lte=scheduled_at).filter(
            Q(scheduled_at__lt=scheduled_at) | Q(id__lt=run_id)
        )

    def newer_than(self, scheduled_at: datetime, run_id: int):
        return self.filter(scheduled_at__gte=scheduled_at).filter(
            Q(scheduled_at__gt=scheduled_at) | Q(id__gt=run_id)
        )


class Run(ChoiceLabels, models.Model):
    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", _("Schedule")
        MANUAL = "manual", _("Manual")
        CATCH_UP = "catch_up", _("Catch-up")
        API = "api", _("API")
        TASK = "task", _("One-off task")
        UPSTREAM = "upstream", _("After an upstream run")

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        SUCCEEDED = "succeeded", _("Succeeded")
        FAILED = "failed", _("Failed")
        TIMED_OUT = "timed_out", _("Timed out")
        SKIPPED = "skipped", _("Skipped")
        CANCELLED = "cancelled", _("Cancelled")
        INTERRUPTED = "interrupted", _("Interrupted")

    class SkipReason(models.TextChoices):
        MISFIRE = "misfire", _("Misfire")
        OVERLAP = "overlap", _("Overlap")
        # A downstream job not started after its upstream run finished.
        PAUSED = "paused", _("Job paused")
        CRASHED = "crashed", _("Job crashed")
        # A downstream run the engine refused, whatever the stored graph says:
        # its job already ran earlier in the same chain of runs, or the chain
        # would go deeper than JOBS_MAX_CHAIN_DEPTH (jobs.engine.outcomes).
        LOOP = "loop", _("Loop in its chain")
        DEPTH = "depth", _("Chain too deep")

    # Finished without success: the console offers to run these again.
    RETRYABLE = (Status.FAILED, Status.TIMED_OUT, Status.INTERRUPTED, Status.CANCELLED)
    LIVE = (Status.QUEUED, Status.RUNNING)
    FINISHED = (
        Status.SUCCEEDED,
        Status.FAILED,
        Status.TIMED_OUT,
        Status.SKIPPED,
        Status.CANCELLED,
        Status.INTERRUPTED,
    )
    SCHEDULED_TRIGGERS = (Trigger.SCHEDULE, Trigger.CATCH_UP)
    MANUAL_TRIGGERS = (Trigger.MANUAL, Trigger.API)

    # No index of its own: run_history_idx and run_status_history_idx start
    # with the job, and a run's every insert and delete pays for each index.
    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    # The idempotency key handlers get (ctx.fire_id), the same for every
    # attempt of a fire. No query looks runs up by it, so no index: every
    # insert paid for an entry at a random place in one.
    fire_id = models.UUIDField(default=uuid.uuid4)
    scheduled_at = models.DateTimeField()
    attempt = models.PositiveSmallIntegerField(default=1)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    skip_reason = models.CharField(max_length=10, choices=SkipReason.choices, blank=True)
    # A queued run (a retry, a one-off task) does not start before this.
    run_after = models.DateTimeField(default=_now)
    worker_id = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    result = models.TextField(blank=True)
    error = models.TextField(blank=True)
    log = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    # The leader lease epoch under which the fire was planned (PostgreSQL
    # clusters); null for manual runs, tasks and single-node SQLite.
    planned_epoch = models.PositiveBigIntegerField(null=True, blank=True)
    # trigger=upstream: the upstream run whose final outcome started this one
    # (each attempt of a retried downstream run keeps it).
    # Its index (run_caused_by_idx) holds only the runs that have one.
    caused_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="caused_runs",
        db_index=False,
    )
    # trigger=upstream: the chain of runs this one belongs to, the id of its
    # first run, and how many upstream runs came before it (1 for a run its
    # first run started). Carried from run to run (retries keep them), so a
    # chain stays bounded however the graph changes under it. Null on every
    # other run (a chain's first run, depth 0): adding the columns rewrote
    # no table. No index: the engine walks a chain through caused_by.
    chain_id = models.PositiveBigIntegerField(null=True, blank=True)
    chain_depth = models.PositiveSmallIntegerField(null=True, blank=True)

    # Execution policy, copied from the job when the fire is planned (a later
    # edit does not change a fire under way); set by the caller for tasks.
    max_retries = models.PositiveSmallIntegerField(default=DEFAULT_MAX_RETRIES)
    retry_interval_seconds = models.PositiveIntegerField(default=DEFAULT_RETRY_INTERVAL_SECONDS)
    timeout_seconds = models.PositiveIntegerField(default=DEFAULT_TIMEOUT_SECONDS)

    # One-off tasks (trigger=task) have no job: they name their handler.
    handler = models.CharField(max_length=200, blank=True)
    task_key = models.CharField(max_length=200, blank=True)
    properties = models.JSONField(default=dict, blank=True)

    # Set on manual runs only; its index (run_created_by_idx) holds only those.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    created_at = models.DateTimeField(default=_now)

    objects = RunQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                "job",
                "scheduled_at",
                "attempt",
                condition=Q(trigger__in=["schedule", "catch_up"]),
                name="run_unique_scheduled_attempt",
            ),
            models.UniqueConstraint(
                "job",
                condition=Q(trigger__in=["manual", "api"], status__in=["queued", "running"]),
                name="run_one_live_manual_per_job",
            ),
            models.UniqueConstraint(
                "handler",
                "task_key",
                condition=Q(trigger="task", status__in=["queued", "running"]),
                name="run_one_live_task_per_key",
            ),
            models.CheckConstraint(
                condition=Q(trigger="task") | Q(job__isnull=False), name="run_job_unless_task"
            ),
            # Each upstream run starts (or skips) each downstream job once,
            # however many schedulers record outcomes.
            models.UniqueConstraint(
                "job",
                "caused_by",
                condition=Q(caused_by__isnull=False, attempt=1),
                name="run_one_per_upstream_run",
            ),
        ]
        indexes = [
            # claim_queued(): the oldest runnable queued runs.
            models.Index(fields=["run_after", "id"], condition=Q(status="queued"), name="run_queued_idx"),
            # sweep() and overlap checks: live runs by job / by heartbeat.
            models.Index(
                fields=["job", "status"], condition=Q(status__in=["queued", "running"]), name="run_live_idx"
            ),
            # Job history, newest scheduled first, keyset paginated.
            models.Index(fields=["job", "-scheduled_at", "-id"], name="run_history_idx"),
            # The same, filtered by status (the console's "failed runs only").
            models.Index(fields=["job", "status", "-scheduled_at", "-id"], name="run_status_history_idx"),
            # Retention deletes by age; the all-runs page walks it newest
            # first (scheduled_at, id); the dashboard counts the last day's
            # runs by status from it alone (status and job are in it, so no
            # run row is read: half the time of that count at 1M runs).
            models.Index(fields=["scheduled_at", "id", "status", "job"], name="run_scheduled_idx2"),
            # A run's downstream runs (its page), and the SET NULL when a run
            # or a user is deleted. Partial: most runs have neither, and an
            # index Django gives a foreign key holds every run, so each
            # insert paid for two entries no query reads. `x = …` and
            # `x IN (…)` imply `x IS NOT NULL` for both databases' planners.
            models.Index(
                fields=["caused_by"], condition=Q(caused_by__isnull=False), name="run_caused_by_idx"
            ),
            models.Index(
                fields=["created_by"], condition=Q(created_by__isnull=False), name="run_created_by_idx"
            ),
        ]

    def __str__(self):
        return f"run {self.pk} ({self.status})"

    @property
    def is_task(self):
        return self.trigger == self.Trigger.TASK

    @property
    def is_live(self):
        return self.status in self.LIVE

    @property
    def handler_name(self):
        return self.handler if self.is_task else (self.job.handler if self.job else "")

    @property
    def lateness(self) -> timedelta | None:
        return self.started_at - self.scheduled_at if self.started_at else None


class JobDependency(ChoiceLabels, models.Model):
    """An edge of the workflow graph: `downstream` runs after each final
    outcome of `upstream` that matches `on`. Written from Job.after by
    services.save_job; read by the scheduler when a run finishes."""

    class On(models.TextChoices):
        SUCCESS = "success", _("On success")
        FAILURE = "failure", _("On failure")
        FINISH = "finish", _("On any finish")

    downstream = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="upstream_links")
    upstream = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="downstream_links")
    on = models.CharField(max_length=10, choices=On.choices, default=On.SUCCESS)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint("downstream", "upstream", name="job_dependency_unique_edge"),
        ]
        indexes = [models.Index(fields=["upstream"], name="job_dependency_upstream_idx")]

    def __str__(self):
        return f"{self.upstream_id} → {self.downstream_id} ({self.on})"

    # Which final run statuses each `on` follows. A cancelled run counts
    # only for `finish`; a skipped fire never ran and starts nothing.
    MATCHES = {
        On.SUCCESS: {"succeeded"},
        On.FAILURE: {"failed", "timed_out", "interrupted"},
        On.FINISH: {"succeeded", "failed", "timed_out", "interrupted", "cancelled"},
    }


def _run_column_in(column: str, values) -> RawSQL:
    """`"jobs_run"."<column>" IN ('a', 'b')` (or `= 'a'`), the values written as literals."""
    assert all(str(v).replace("_", "").isalnum() for v in values), values
    listed = ", ".join(f"'{v}'" for v in values)
    # One value as `=`: SQLite matches a partial index's `status = 'queued'`
    # only to the same comparison, not to `IN ('queued')`.
    condition = f"= {listed}" if len(values) == 1 else f"IN ({listed})"
    return RawSQL(f'"{Run._meta.db_table}"."{column}" {condition}', (), output_field=models.BooleanField())


# A run is live (queued or running); a run was started by hand. SQLite uses a
# partial index (run_live_idx, run_one_live_manual_per_job) only when the
# query states the index's condition as literals, never with bound
# parameters: with `status__in=Run.LIVE` the overlap check walked every run
# the job ever had (bench: a job's whole history per fire). Filter live runs
# of a job, or of a worker, with these.
LIVE_RUN = _run_column_in("status", Run.LIVE)
# A queued run (run_queued_idx): the claim asks on every pass whether one is
# due; with the status bound, 0.2 ms of SQLite instead of 0.03 ms.
QUEUED_RUN = _run_column_in("status", [Run.Status.QUEUED])
MANUAL_RUN = _run_column_in("trigger", Run.MANUAL_TRIGGERS)


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

    class Status(models.TextChoices):
        PENDING = "pending", _("Pending")
        SENT = "sent", _("Sent")
        FAILED = "failed", "Gave up"  # temporary failures for too long
        FAILED_PERMANENT = "failed_permanent", "Refused"  # a 5xx reply
        UNDELIVERABLE = "undeliverable", _("No recipients")

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


class AuditEvent(ChoiceLabels, models.Model):
    """Who did what to a job, when, and through which door. Kept when the
    user or the job is deleted (the names are copied)."""

    class Via(models.TextChoices):
        CONSOLE = "console", _("Console")
        API = "api", _("API")
        CLI = "cli", _("Command line")
        SYSTEM = "system", _("System")

    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    job_name = models.CharField(max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=30)
    via = models.CharField(max_length=10, choices=Via.choices, default=Via.CONSOLE)
    changes = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=_now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["job", "-created_at"], name="audit_job_idx")]

    # The actions jobs.services records, as the job page's trail words them.
    ACTION_LABELS = {
        "create": _("create"),
        "edit": _("edit"),
        "pause": _("pause"),
        "resume": _("resume"),
        "re-enable": _("re-enable"),
        "delete": _("delete"),
        "run-now": _("run now"),
        "cancel-run": _("cancel run"),
    }

    def __str__(self):
        return f"{self.username or 'system'} {self.action} {self.job_name}"

    def get_action_display(self) -> str:
        return str(self.ACTION_LABELS.get(self.action, self.action))


class APIToken(models.Model):
    """A personal API token. Only the SHA-256 of the secret is stored; the
    token itself is shown once, when it is created (jobs.tokens). It acts
    with its user's permissions."""

    PREFIX_CHARS = 12

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    # The token's first characters, shown in lists so a user can tell tokens apart.
    prefix = models.CharField(max_length=PREFIX_CHARS)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=_now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Profile(ChoiceLabels, models.Model):
    """What a user chose for themselves in the console: for now, the language
    (blank: follow the browser's Accept-Language). jobs.i18n reads it."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="profile"
    )
    language = models.CharField(max_length=10, blank=True, choices=settings.LANGUAGES)

    def __str__(self):
        return f"{self.user_id}: {self.language or 'browser'}"
