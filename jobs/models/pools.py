"""Concurrency pools and backfills: what limits how many runs start at once
beyond a job's own overlap policy. A run that must wait for either is written
`waiting` and let through by the scheduler's admission step
(jobs.admission decides; jobs.engine.admission writes)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.timezone import now as _now

# A pool's name, as a job's `pool` names it (jobs-as-code, the API, the CLI).
POOL_NAME_PATTERN = r"[a-z0-9][a-z0-9_-]{0,99}"
MAX_POOL_SIZE = 10_000
# A backfill covers at most this many fires, and starts at most
# MAX_BACKFILL_PARALLEL of them at once.
MAX_BACKFILL_FIRES = 10_000
MAX_BACKFILL_PARALLEL = 100


class Pool(models.Model):
    """A named limit on how many runs of its jobs are live (admitted: queued
    or running) at once, across every scheduler of the cluster."""

    name = models.CharField(max_length=100, unique=True)
    size = models.PositiveIntegerField()
    description = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(default=_now)
    updated_at = models.DateTimeField(default=_now)

    class Meta:
        ordering = ["name"]
        constraints = [
            # The admission step trusts these whoever wrote the row: a pool of
            # size 0 would hold its runs waiting for ever.
            models.CheckConstraint(condition=Q(size__gte=1, size__lte=MAX_POOL_SIZE), name="pool_size_range"),
            models.CheckConstraint(
                condition=Q(name__regex=rf"^{POOL_NAME_PATTERN}\Z"), name="pool_name_valid"
            ),
        ]

    def __str__(self):
        return self.name


class Backfill(models.Model):
    """One request to run a job's past fires again: its runs (trigger
    `backfill`) name it, and start at most `parallel` at a time, in fire order."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="backfills")
    range_start = models.DateTimeField()
    range_end = models.DateTimeField()
    parallel = models.PositiveSmallIntegerField(default=1)
    include_succeeded = models.BooleanField(default=False)
    fires = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=_now)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(parallel__gte=1, parallel__lte=MAX_BACKFILL_PARALLEL),
                name="backfill_parallel_range",
            ),
            models.CheckConstraint(
                condition=Q(range_start__lte=models.F("range_end")), name="backfill_range"
            ),
        ]

    def __str__(self):
        return f"backfill {self.pk} of job {self.job_id}"
