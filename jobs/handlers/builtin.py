"""Handlers Cronboard itself schedules: the retention job (its core, the
batched deletion, is jobs.retention)."""

from datetime import timedelta

from jobs.handlers.base import JobContext, JobHandler
from jobs.handlers.registry import register


@register("cronboard.retention")
class Retention(JobHandler):
    label = "Retention (built-in)"
    description = (
        "Deletes runs older than the sys.job.logRetentionDays setting, and trend figures older "
        "than sys.job.rollupRetentionDays."
    )

    def run(self, ctx: JobContext) -> str:
        from django.utils import timezone

        from jobs.config import get_setting
        from jobs.retention import BATCH_BUDGET, delete_runs_before

        days = get_setting("sys.job.logRetentionDays")
        cutoff = timezone.now() - timedelta(days=days)
        ctx.log(f"deleting runs scheduled before {cutoff.isoformat()} ({days} days)")
        batches = []
        deleted = delete_runs_before(
            cutoff,
            should_stop=ctx.cancelled.is_set,
            on_batch=lambda rows, seconds: batches.append((rows, seconds)),
        )
        if batches:
            sizes = [rows for rows, _ in batches]
            held = sorted(seconds * 1000 for _, seconds in batches)
            ctx.log(
                f"{len(batches)} batches of {min(sizes)} to {max(sizes)} runs, aimed at {BATCH_BUDGET * 1000:g} ms "
                f"each; batch transaction p50 {held[len(held) // 2]:.1f} ms, p99 {held[len(held) * 99 // 100]:.1f} ms; "
                f"longest batch transaction {held[-1]:.1f} ms"
            )
        if ctx.cancelled.is_set():
            ctx.log("stopped early: cancelled")
            return f"deleted {deleted} runs"
        from jobs.trends import delete_before

        rollup_days = get_setting("sys.job.rollupRetentionDays")
        rollups = delete_before(timezone.now() - timedelta(days=rollup_days))
        ctx.log(f"deleted {rollups} hourly trend rows older than {rollup_days} days")
        return f"deleted {deleted} runs and {rollups} trend rows"
