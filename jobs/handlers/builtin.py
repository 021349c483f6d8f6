"""Handlers Cronboard itself schedules: the retention job."""

from datetime import timedelta

from jobs.handlers.base import JobContext, JobHandler
from jobs.handlers.registry import register

RETENTION_BATCH = 500


def delete_runs_before(cutoff, *, batch: int = RETENTION_BATCH, should_stop=lambda: False) -> int:
    """Delete finished runs scheduled before `cutoff`, `batch` rows per short
    transaction so no writer waits long on us. Returns the number deleted."""
    from jobs.models import Run

    deleted = 0
    while not should_stop():
        ids = list(
            Run.objects.filter(scheduled_at__lt=cutoff, status__in=Run.FINISHED)
            .order_by("scheduled_at")
            .values_list("id", flat=True)[:batch]
        )
        if not ids:
            break
        count, _ = Run.objects.filter(id__in=ids).delete()
        deleted += count
    return deleted


@register("cronboard.retention")
class Retention(JobHandler):
    label = "Retention (built-in)"
    description = "Deletes runs older than the sys.job.logRetentionDays setting."

    def run(self, ctx: JobContext) -> str:
        from django.utils import timezone

        from jobs.config import get_setting

        days = get_setting("sys.job.logRetentionDays")
        cutoff = timezone.now() - timedelta(days=days)
        ctx.log(f"deleting runs scheduled before {cutoff.isoformat()} ({days} days)")
        deleted = delete_runs_before(cutoff, should_stop=ctx.cancelled.is_set)
        if ctx.cancelled.is_set():
            ctx.log("stopped early: cancelled")
        return f"deleted {deleted} runs"
