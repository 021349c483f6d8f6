"""Demo handlers, used by the seeded demo jobs and handy in tests."""

from jobs.handlers.base import HandlerError, JobContext, JobHandler
from jobs.handlers.registry import register


@register("demo.echo")
class Echo(JobHandler):
    label = "Echo"
    description = "Logs its properties and returns how many there were."

    def run(self, ctx: JobContext) -> str:
        for key, value in sorted(ctx.properties.items()):
            ctx.log(f"{key} = {value}")
        return f"{len(ctx.properties)} properties"


@register("demo.sleep")
class Sleep(JobHandler):
    label = "Sleep"
    description = "Sleeps for `seconds`, stopping early when cancelled."
    properties_help = {"seconds": "how long to sleep (default 1)"}

    def run(self, ctx: JobContext) -> str:
        try:
            seconds = float(ctx.properties.get("seconds", "1"))
        except ValueError:
            raise HandlerError(
                f"property 'seconds' must be a number, got {ctx.properties.get('seconds')!r}"
            ) from None
        ctx.log(f"sleeping {seconds:g} s")
        if ctx.cancelled.wait(seconds):
            raise HandlerError("cancelled while sleeping")
        return f"slept {seconds:g} s"


@register("demo.fail")
class Fail(JobHandler):
    label = "Fail"
    description = "Always fails with `message`."
    properties_help = {"message": "the error to raise"}

    def run(self, ctx: JobContext) -> None:
        raise HandlerError(ctx.properties.get("message") or "demo failure")
