"""The benchmark handler. Loaded only by `manage.py bench`, which starts its
schedulers with JOBS_HANDLER_MODULES=jobs.handlers.bench."""

from django.utils import timezone

from jobs.handlers.base import JobContext, JobHandler
from jobs.handlers.registry import register


@register("bench.noop")
class Noop(JobHandler):
    label = "No-op (benchmarks)"
    description = "Does nothing; returns how late it started, in microseconds."

    def run(self, ctx: JobContext) -> str:
        # The handler's own view of its lateness, to check the runs table's
        # started_at against (it is read when the thread actually runs).
        return str(int((timezone.now() - ctx.scheduled_at).total_seconds() * 1_000_000))
