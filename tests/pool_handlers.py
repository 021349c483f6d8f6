"""A handler for the pool tests' scheduler processes (loaded by
JOBS_HANDLER_MODULES); never by the application itself.

"test.file_gate" writes `started-<run id>` in its properties' `dir`, then
waits until `release-<run id>` or `release-all` appears there (or the run is
cancelled), so a test decides when each run ends without sleeping."""

from pathlib import Path

from jobs.handlers import HandlerError, JobContext, JobHandler, register


@register("test.file_gate")
class FileGate(JobHandler):
    def run(self, ctx: JobContext) -> str:
        folder = Path(ctx.properties["dir"])
        (folder / f"started-{ctx.run_id}").touch()
        while not (folder / f"release-{ctx.run_id}").exists() and not (folder / "release-all").exists():
            if ctx.cancelled.wait(0.05):
                raise HandlerError("cancelled")
        return "released"
