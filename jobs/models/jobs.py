"""Jobs: what runs, when, and what happens when it fails."""

import re
import unicodedata
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.timezone import now as _now
from django.utils.translation import gettext_lazy as _

from jobs import cron, workdays
from jobs.models.base import (
    DEFAULT_ALERT_THRESHOLD,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RETRY_INTERVAL_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    MAX_JITTER_SECONDS,
    MAX_PARALLEL,
    MAX_SHARDS,
    MAX_TIMEOUT_SECONDS,
    MIN_INTERVAL_SECONDS,
    ChoiceLabels,
    QuickLoad,
)
from jobs.models.calendars import find_calendar

# A job that needs an operator: crashed, or failing (its last fires failed in
# a row, whatever its state now). The dashboard lists these first; the
# partial index job_attention_idx holds exactly them.
NEEDS_ATTENTION = Q(state="crashed") | Q(consecutive_failures__gt=0)

# What a namespace may be (a job's, a role's, the namespaces a secret may be
# used in); "" is the jobs outside any namespace.
NAMESPACE_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")
# How long before its calendar's data ends a job says so, and alerts.
CALENDAR_WARNING = timedelta(days=30)


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


class Job(QuickLoad, ChoiceLabels, models.Model):
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

    class OverlapPolicy(models.TextChoices):
        # A fire that comes while an earlier run of the job is live.
        SKIP = "skip", _("Skip the fire")
        QUEUE_ONE = "queue_one", _("Queue one, start it when the live run ends")
        REPLACE = "replace", _("Cancel the live run, then start")
        ALLOW = "allow", _("Run side by side (up to the maximum)")

    class CalendarRule(models.TextChoices):
        WORKING_DAYS = workdays.WORKING_DAYS, _("Working days only")
        NON_WORKING_DAYS = workdays.NON_WORKING_DAYS, _("Non-working days only")
        SKIP_HOLIDAYS = workdays.SKIP_HOLIDAYS, _("Skip holidays")

    class State(models.TextChoices):
        ENABLED = "enabled", _("Enabled")
        PAUSED = "paused", _("Paused")
        CRASHED = "crashed", _("Crashed")

    MIN_INTERVAL_SECONDS = MIN_INTERVAL_SECONDS
    MAX_INTERVAL_SECONDS = 366 * 86_400
    MAX_TIMEOUT_SECONDS = MAX_TIMEOUT_SECONDS
    NAMESPACE_RE = NAMESPACE_RE  # the module's, for callers that hold the model
    MAX_PARALLEL = MAX_PARALLEL
    MAX_SHARDS = MAX_SHARDS
    MAX_JITTER_SECONDS = MAX_JITTER_SECONDS
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
        "calendar",
        "calendar_rule",
        "jitter_seconds",
        "misfire_policy",
        "overlap_policy",
        "max_parallel",
        "pool",
        "shards",
        "broadcast",
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
    overlap_policy = models.CharField(
        max_length=10, choices=OverlapPolicy.choices, default=OverlapPolicy.SKIP
    )
    # overlap_policy=allow: how many runs of the job may be live at once.
    max_parallel = models.PositiveSmallIntegerField(default=1)
    # A concurrency pool's name (jobs.models.pools.Pool), blank for none. A
    # name rather than a key: it reads the same in the API, jobs-as-code and
    # the audit trail; a pool in use cannot be deleted (jobs.pools).
    pool = models.CharField(max_length=100, blank=True, default="")
    # Each fire is this many runs, shard 0 to shards - 1, claimed by any node
    # (jobs.shards); or, broadcast, one run on each live node, pinned to it.
    # Both want the `skip` overlap policy and no pool (jobs.shardfields).
    shards = models.PositiveSmallIntegerField(default=1)
    broadcast = models.BooleanField(default=False)
    # Cron and interval schedules: a built-in calendar code (CN, US-CA) or a
    # custom calendar's name, and which of its dates the job fires on (jobs.workdays).
    calendar = models.CharField(
        _("Calendar"),
        max_length=workdays.MAX_CALENDAR_CHARS,
        blank=True,
        default="",
        help_text=_("A country code with an optional region (CN, US-CA, DE-BY) or a custom calendar's name."),
    )
    calendar_rule = models.CharField(
        _("Fire on"),
        max_length=20,
        choices=CalendarRule.choices,
        default=CalendarRule.WORKING_DAYS,
        blank=True,
    )
    # Cron only: each fire delayed by a stable 0..jitter_seconds (cron.jitter_seconds).
    jitter_seconds = models.PositiveIntegerField(
        _("Jitter (seconds)"),
        default=0,
        blank=True,
        help_text=_("Delay each fire by a stable random amount up to this many seconds (at most 3600)."),
    )

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
    # Until then its alerts are recorded (status muted) but not sent: the job
    # keeps running. Set from the job page (jobs.alerts.mute_alerts), audited.
    alerts_muted_until = models.DateTimeField(null=True, blank=True)
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
            models.CheckConstraint(
                condition=Q(max_parallel__gte=1, max_parallel__lte=MAX_PARALLEL),
                name="job_max_parallel_range",
            ),
            # One shard per fire unless sharded; a broadcast fire is split by node, not by shards.
            models.CheckConstraint(
                condition=Q(shards__gte=1, shards__lte=MAX_SHARDS) & (Q(broadcast=False) | Q(shards=1)),
                name="job_shards_range",
            ),
            # The planner searches back this far for a delayed fire (Job.next_fire_after).
            models.CheckConstraint(
                condition=Q(jitter_seconds__lte=MAX_JITTER_SECONDS), name="job_jitter_range"
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
        try:
            return cron.get_zone(self.timezone)
        except cron.CronError:
            return cron.get_zone("UTC")

    @property
    def alerts_are_muted(self) -> bool:
        return self.alerts_muted_until is not None and self.alerts_muted_until > _now()

    @property
    def zone_is_unknown(self) -> bool:
        try:
            cron.get_zone(self.timezone)
        except cron.CronError:
            return True
        return False

    @property
    def upstream_names(self) -> list[str]:
        """The names in `after`, in its order (the list names them; the
        graph's rows, JobDependency, are what the scheduler follows)."""
        return [item["job"] for item in self.after or () if isinstance(item, dict) and "job" in item]

    @property
    def nothing_schedules_it(self) -> bool:
        """Enabled, yet nothing ever starts it on its own: no schedule and no
        upstream job, so it runs only when a person or a program asks (Run
        now, the API, a scope). Whether that is a mistake depends on its
        handler too: kinds.never_starts."""
        return (
            self.state == self.State.ENABLED
            and self.schedule_type == self.ScheduleType.NONE
            and not self.upstream_names
        )

    def next_fire_after(self, after: datetime, *, last_fire: datetime | None = None) -> datetime | None:
        """The first fire time strictly after `after`.

        Cron: the next matching instant in the job's zone. Interval: the last
        fire plus the interval, or `after` plus the interval when that is
        already past: missed windows are never replayed; with a calendar, the
        first such slot on a date its rule allows (cron.interval_walk)."""
        if self.schedule_type == self.ScheduleType.NONE:
            return None
        if self.schedule_type == self.ScheduleType.INTERVAL:
            step = timedelta(seconds=self.interval_seconds)
            first = last_fire + step if last_fire is not None and last_fire + step > after else after + step
            days = self.day_rule()
            if days is None:
                return first
            if days is False:
                return None  # a calendar that is gone: never guess
            # On the grid still: a refused date's slots are skipped.
            for found in cron.interval_walk(first, step, self.zone, days=days):
                if isinstance(found, cron.Fire):
                    return found.at
                if isinstance(found, cron.Uncovered):
                    return None
            return None
        try:
            schedule = cron.parse(self.cron_expression, self.name)
        except cron.CronError:
            # A stored expression that no longer parses (an older, laxer
            # version saved it) must not stop the scheduler: it just never fires.
            return None
        days = self.day_rule()
        if days is None and not self.jitter_seconds:
            return schedule.next_after(after, self.zone)
        if days is False:
            return None  # a calendar that is gone: never guess (the job page says so)
        for step in schedule.walk(after, self.zone, days=days, jitter=self.jitter_seconds, seed=self.name):
            if isinstance(step, cron.Fire):
                return step.at
            if isinstance(step, cron.Uncovered):
                return None
        return None

    def day_rule(self) -> "workdays.DayRule | bool | None":
        """The job's calendar with its rule; None without one (or without a
        schedule); False when the calendar is unknown (a custom calendar
        deleted since the job named it)."""
        if not self.calendar or self.schedule_type == self.ScheduleType.NONE:
            return None
        try:
            return workdays.day_rule(find_calendar(self.calendar), self.calendar_rule)
        except workdays.CalendarError:
            return False

    def calendar_missing(self, now: datetime) -> date | None:
        """The first date the job's calendar has no data for, once it is
        less than CALENDAR_WARNING ahead (the job stops firing there: the
        job page shows "calendar data for 2027 missing" and a `calendar`
        alert is raised); None otherwise."""
        days = self.day_rule()
        if not days or days.covered_until is None:
            return None
        first_missing = days.covered_until + timedelta(days=1)
        if (now + CALENDAR_WARNING).astimezone(self.zone).date() < first_missing:
            return None
        return first_missing

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

    SCHEDULE_FIELDS = (
        "schedule_type",
        "cron_expression",
        "interval_seconds",
        "timezone",
        "calendar",
        "calendar_rule",
        "jitter_seconds",
    )
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
