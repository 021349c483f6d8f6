"""Handlers that misbehave on purpose, for the executor tests. A module of
its own (not a test file) so a run's child process can import it by name."""

import ctypes
import json
import os
import signal
import time

from jobs.handlers import JobContext, JobHandler, register


@register("hostile.spin")
class Spin(JobHandler):
    """Ignores `cancelled` and its deadline: burns CPU until killed."""

    def run(self, ctx: JobContext) -> None:
        ctx.log(f"spinning in pid {os.getpid()}")
        while True:
            pass


@register("hostile.stubborn")
class Stubborn(JobHandler):
    """Ignores SIGTERM too: only SIGKILL ends it."""

    def run(self, ctx: JobContext) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        ctx.log(f"spinning in pid {os.getpid()}, deaf to SIGTERM")
        while True:
            time.sleep(0.01)


@register("hostile.exit")
class Exit(JobHandler):
    def run(self, ctx: JobContext) -> None:
        os._exit(int(ctx.properties.get("code", "3")))


@register("hostile.segfault")
class Segfault(JobHandler):
    def run(self, ctx: JobContext) -> None:
        ctypes.string_at(0)


@register("hostile.hog")
class Hog(JobHandler):
    """Allocates `mb` megabytes, in `step_mb` pieces (default: at once)."""

    def run(self, ctx: JobContext) -> str:
        mb = int(ctx.properties.get("mb", "1536"))
        step = int(ctx.properties.get("step_mb", "0")) or mb
        held = [bytearray(step * 1024 * 1024) for _ in range(mb // step)]
        return f"held {sum(len(b) for b in held) // 2**20} MB"


@register("hostile.flood")
class Flood(JobHandler):
    """Logs `lines` lines of `width` characters, then `then_sleep` seconds of quiet."""

    def run(self, ctx: JobContext) -> str:
        lines, width = int(ctx.properties.get("lines", "100000")), int(ctx.properties.get("width", "100"))
        for n in range(lines):
            ctx.log(f"{n:09d} " + "x" * width)
        time.sleep(float(ctx.properties.get("then_sleep", "0")))
        return f"logged {lines} lines"


@register("hostile.pid")
class Pid(JobHandler):
    """Returns the process it ran in; logs a line first."""

    def run(self, ctx: JobContext) -> str:
        ctx.log(
            f"deadline {ctx.deadline.isoformat()} remaining {ctx.remaining_seconds:.0f} s fire {ctx.fire_id}"
        )
        return str(os.getpid())


@register("hostile.leak")
class Leak(JobHandler):
    """Writes its `token` property everywhere a run's text goes: its log, and
    (by `mode`) its result, a HandlerError or another exception."""

    def run(self, ctx: JobContext) -> str:
        from jobs.handlers import HandlerError

        token = ctx.properties.get("token", "")
        ctx.log(f"the token is {token}")
        ctx.log(f'as JSON: {{"token": {json.dumps(token)}}}')
        mode = ctx.properties.get("mode", "return")
        if mode == "handler-error":
            raise HandlerError(f"refused with {token}")
        if mode == "crash":
            raise ValueError(f"crashed on {token}")
        return f"result {token}"


@register("hostile.leak-pieces")
class LeakPieces(JobHandler):
    """Logs its `token` property in two lines, cut after `cut` characters,
    as a program that prints a value in two writes would have it logged."""

    def run(self, ctx: JobContext) -> str:
        token = ctx.properties.get("token", "")
        cut = int(ctx.properties.get("cut", len(token) // 2))
        ctx.log(f"first {token[:cut]}")
        if hasattr(ctx, "streamer"):
            ctx.streamer.flush()  # a run process sends what was logged so far
        ctx.log(token[cut:])
        return "done"
