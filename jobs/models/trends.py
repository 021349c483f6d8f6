"""Trends: finished runs rolled up per job and hour, and per namespace and
hour (hours in UTC), so that the dashboard's and a job page's trends over
days read a few rows instead of the run history. The scheduler keeps them
(jobs.trends.roll_up, from jobs.engine.rollup); they outlive the raw runs'
retention and have their own (sys.job.rollupRetentionDays)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.models.jobs import Job

# The upper bounds (ms) of the duration and lateness buckets, 1 ms to 1 h;
# a last bucket holds what is above. The percentiles the pages show are
# read from them (to the bucket: jobs.trends.percentile).
BOUNDS_MS = (
    1,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    30_000,
    60_000,
    300_000,
    900_000,
    3_600_000,
)

# The outcomes counted, one column each (Run.Status values).
COUNTED = ("succeeded", "failed", "timed_out", "interrupted", "cancelled", "skipped")


def _bucket_fields(prefix: str, what: str) -> dict:
    return {
        f"{prefix}{i}": models.PositiveIntegerField(default=0, help_text=f"{what} ≤ {bound} ms")
        for i, bound in enumerate(BOUNDS_MS)
    }


DURATION_BUCKETS = tuple(f"d{i}" for i in range(len(BOUNDS_MS)))
LATENESS_BUCKETS = tuple(f"l{i}" for i in range(len(BOUNDS_MS)))


class RollupFigures(models.Model):
    """What one hour's finished runs add up to. Buckets are cumulative, as
    Prometheus' are: d<i> counts the durations ≤ BOUNDS_MS[i], l<i> the
    lateness; the counts are the totals. A column each (not a list), so the
    scheduler adds a slice's figures in one INSERT … ON CONFLICT DO UPDATE
    (jobs.trends.roll_up) without reading the rows back."""

    hour = models.DateTimeField()
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    timed_out = models.PositiveIntegerField(default=0)
    interrupted = models.PositiveIntegerField(default=0)
    cancelled = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    # Runs that started and ended (every outcome but skipped, and cancelled
    # before starting): their durations.
    duration_count = models.PositiveIntegerField(default=0)
    duration_ms_sum = models.BigIntegerField(default=0)
    # Scheduled fires' first attempts: started_at - scheduled_at.
    lateness_count = models.PositiveIntegerField(default=0)
    lateness_ms_sum = models.BigIntegerField(default=0)

    class Meta:
        abstract = True

    @property
    def duration_buckets(self) -> list[int]:
        return [getattr(self, name) for name in DURATION_BUCKETS]

    @property
    def lateness_buckets(self) -> list[int]:
        return [getattr(self, name) for name in LATENESS_BUCKETS]


for _name, _field in {**_bucket_fields("d", "durations"), **_bucket_fields("l", "lateness")}.items():
    RollupFigures.add_to_class(_name, _field)


class JobRollup(RollupFigures):
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    # The job's namespace when its runs finished: the dashboard's lists
    # filter by it as the jobs are filtered (jobs.access).
    namespace = models.CharField(max_length=100, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint("job", "hour", name="job_rollup_unique")]
        indexes = [models.Index(fields=["hour", "job"], name="job_rollup_hour_idx")]
        verbose_name = _("job rollup")

    def __str__(self):
        return f"job {self.job_id} at {self.hour:%Y-%m-%d %H}:00"


class NamespaceRollup(RollupFigures):
    namespace = models.CharField(max_length=100, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint("namespace", "hour", name="namespace_rollup_unique")]
        indexes = [models.Index(fields=["hour"], name="namespace_rollup_hour_idx")]
        verbose_name = _("namespace rollup")

    def __str__(self):
        return f"namespace {self.namespace or '-'} at {self.hour:%Y-%m-%d %H}:00"


class RollupMark(models.Model):
    """How far the rollup has read: runs finished before `finished_before`
    are in it, later ones not yet. The marks `window:<window>` hold the
    start of the hours a window's JobWindowTotal rows add up."""

    name = models.CharField(max_length=50, primary_key=True)
    finished_before = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.name} before {self.finished_before}"


class JobWindowTotal(models.Model):
    """A job's figures over one of the dashboard's windows (jobs.trends.WINDOWS),
    for its lists of the slowest and most-failing jobs: the sum of its
    JobRollup rows from the window's start, kept by the rollup step (each
    slice added, the hours that leave the window taken off), so the lists
    read a row per job and namespace instead of every hour of the window.
    The start these rows hold is RollupMark `window:<window>`. Signed
    columns: the step adds and takes off in one upsert."""

    window = models.CharField(max_length=8)
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    # As JobRollup's: a job moved to another namespace has a row in each.
    namespace = models.CharField(max_length=100, blank=True)
    succeeded = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)
    timed_out = models.BigIntegerField(default=0)
    interrupted = models.BigIntegerField(default=0)
    duration_count = models.BigIntegerField(default=0)
    duration_ms_sum = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint("window", "job", "namespace", name="job_window_total_unique")]
        verbose_name = _("job window total")

    def __str__(self):
        return f"job {self.job_id} over {self.window}"
