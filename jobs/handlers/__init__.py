"""Job handlers: the base class, the run context and the registry.

from jobs.handlers import JobHandler, JobContext, register

@register("reports.daily")
class DailyReport(JobHandler):
    def run(self, ctx: JobContext) -> str | None:
        ctx.log("report done")
        return "42 rows"
"""

from jobs.handlers.base import HandlerError, JobContext, JobHandler
from jobs.handlers.registry import register

__all__ = ["HandlerError", "JobContext", "JobHandler", "register"]
