"""Runs: one row per attempt of a fire, a manual run or a one-off task, and
the cursor and raw conditions their history pages and the scheduler use."""

import re
import uuid
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils.timezone import now as _now
from django.utils.translation import gettext_lazy as _

from jobs.core.logbuffer import cap_text
from jobs.models.base import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_RETRY_INTERVAL_SECONDS,
    DEFAULT_TIMEOUT_SECONDS,
    ChoiceLabels,
    keyset_after,
    keyset_before,
)
from jobs.models.jobs import Job
from jobs.text import storable


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
        return self.filter(keyset_before("scheduled_at", scheduled_at, run_id))

    def newer_than(self, scheduled_at: datetime, run_id: int):
        return self.filter(keyset_after("scheduled_at", scheduled_at, run_id))


class Run(ChoiceLabels, models.Model):
    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", _("Schedule")
        MANUAL = "manual", _("Manual")
        CATCH_UP = "catch_up", _("Catch-up")
        API = "api", _("API")
        TASK = "task", _("One-off task")
        UPSTREAM = "upstream", _("After an upstream run")
        BACKFILL = "backfill", _("Backfill")

    class Status(models.TextChoices):
        # Live, but not let through yet: it waits for its job's live run
        # (overlap policy), its pool or its backfill (jobs.admission).
        WAITING = "waiting", _("Waiting")
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

    LIVE = (Status.WAITING, Status.QUEUED, Status.RUNNING)
    # Let through by admission: what counts against a pool's size, a job's
    # max_parallel and a backfill's parallel.
    ADMITTED = (Status.QUEUED, Status.RUNNING)
    # Live and not started: a cancel ends these at once.
    NOT_STARTED = (Status.WAITING, Status.QUEUED)
    FINISHED = (
        Status.SUCCEEDED,
        Status.FAILED,
        Status.TIMED_OUT,
        Status.SKIPPED,
        Status.CANCELLED,
        Status.INTERRUPTED,
    )
    # The groups of finished statuses that count as "failed", each where its
    # meaning applies (tests/test_run_status_sets.py pins them):
    # What a person calls a failed run: it ran and did not succeed, and no
    # one cancelled it. The
    # dashboard's success rate counts these against the succeeded runs, and
    # a dependency `on: failure` follows them.
    FAILED_OUTCOMES = (Status.FAILED, Status.TIMED_OUT, Status.INTERRUPTED)
    # A fire's final attempt ending so counts towards the job's consecutive
    # failures (its crash at the alert threshold) and its `failed` alert. An
    # interrupted run was cut short by its scheduler (a crash, a shutdown),
    # not failed by its job.
    COUNTED_FAILURES = (Status.FAILED, Status.TIMED_OUT)
    # An attempt ending so is tried again within its fire while its retries
    # last; the spec retries neither a timeout nor a cancellation.
    AUTO_RETRIED = (Status.FAILED, Status.INTERRUPTED)
    # Finished without success: the console offers to run these again.
    RETRYABLE = (*FAILED_OUTCOMES, Status.CANCELLED)
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
    # Which piece of its fire the run is (jobs.shards): shard_index of
    # shard_total, 0 of 1 for a fire that is not split. A fire's runs share
    # its fire_id; each shard retries on its own.
    shard_index = models.PositiveSmallIntegerField(default=0)
    shard_total = models.PositiveSmallIntegerField(default=1)
    # A broadcast run is pinned to the node it was planned for (its worker
    # id): only that node claims it, and it never moves. Blank: any node.
    node = models.CharField(max_length=200, blank=True, default="")
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
    # trigger=backfill: the backfill that wrote it (its retries keep it).
    backfill = models.ForeignKey(
        "jobs.Backfill", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs", db_index=False
    )

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
            # One row per fire, shard and attempt, whatever crashes when:
            # the planner's batch insert relies on it (a duplicate fire is
            # refused whole and replanned job by job).
            models.UniqueConstraint(
                "job",
                "scheduled_at",
                "shard_index",
                "attempt",
                condition=Q(trigger__in=["schedule", "catch_up"]),
                name="run_unique_scheduled_shard_attempt",
            ),
            models.UniqueConstraint(
                "job",
                condition=Q(trigger__in=["manual", "api"], status__in=["waiting", "queued", "running"]),
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
                fields=["job", "status"],
                condition=Q(status__in=["waiting", "queued", "running"]),
                name="run_live_idx",
            ),
            # The admission step: the waiting runs in fire order.
            models.Index(
                fields=["scheduled_at", "id"], condition=Q(status="waiting"), name="run_waiting_idx"
            ),
            # A backfill's runs (its page, its cancel, its parallel count).
            models.Index(
                fields=["backfill", "status"], condition=Q(backfill__isnull=False), name="run_backfill_idx"
            ),
            # Job history, newest scheduled first, keyset paginated.
            models.Index(fields=["job", "-scheduled_at", "-id"], name="run_history_idx"),
            # The same, filtered by status (the console's "failed runs only").
            models.Index(fields=["job", "status", "-scheduled_at", "-id"], name="run_status_history_idx"),
            # Retention deletes by age; the all-runs page walks it newest
            # first (scheduled_at, id); the dashboard counts the last day's
            # runs by status from it alone (status and job are in it, so no
            # run row is read).
            models.Index(fields=["scheduled_at", "id", "status", "job"], name="run_scheduled_idx2"),
            # A run's downstream runs (its page), and the SET NULL when a run
            # or a user is deleted. Partial: most runs have neither, and an
            # index Django gives a foreign key holds every run, so each
            # insert paid for two entries no query reads. `x = …` and
            # `x IN (…)` imply `x IS NOT NULL` for both databases' planners.
            models.Index(
                fields=["caused_by"], condition=Q(caused_by__isnull=False), name="run_caused_by_idx"
            ),
            # The trends' rollup reads the runs that finished since it last
            # looked (jobs.trends.roll_up). Partial: a queued or running
            # run has no entry until it ends.
            models.Index(
                fields=["finished_at"], condition=Q(finished_at__isnull=False), name="run_finished_idx"
            ),
            models.Index(
                fields=["created_by"], condition=Q(created_by__isnull=False), name="run_created_by_idx"
            ),
        ]

    def __str__(self):
        return f"run {self.pk} ({self.status})"

    def piece(self) -> dict:
        """What a retry of this run keeps of its place in a fire: one shard
        of a sharded fire is run again as that shard, told the same index
        and total (a handler that splits its data by them would otherwise
        do all of it); any other run's retry is shard 0 of 1."""
        if self.shard_total <= 1:
            return {}
        return {"shard_index": self.shard_index, "shard_total": self.shard_total}

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
# the job ever had (its whole history, on every fire). Filter live runs
# of a job, or of a worker, with these.
LIVE_RUN = _run_column_in("status", Run.LIVE)
# A queued run (run_queued_idx): the claim asks on every pass whether one is
# due; with the status as a bound parameter SQLite would not use the index.
QUEUED_RUN = _run_column_in("status", [Run.Status.QUEUED])
# A run waiting for admission (run_waiting_idx).
WAITING_RUN = _run_column_in("status", [Run.Status.WAITING])
MANUAL_RUN = _run_column_in("trigger", Run.MANUAL_TRIGGERS)
