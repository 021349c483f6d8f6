"""Command jobs (kind `command`): run a program on the scheduler's host.

Properties: `command` — a JSON list (program and arguments), or a string
split like a shell would (shlex) and run WITHOUT a shell unless `shell` is
`true`; `cwd` — an absolute working directory; `env` — a JSON object of
extra environment variables.

The child starts in a session (process group) of its own, with a clean
environment (CLEAN_ENV_NAMES from the scheduler's own environment, plus the
run's CRONBOARD_* variables and the job's `env`): never Cronboard's secrets.
stdout and stderr stream into the run's log as they are written, read in
chunks of READ_CHUNK_BYTES; the log kept in memory is capped (head and tail)
like every run's log, and so is each line on its way there, however long
it runs without a newline. Exit status 0
succeeds; any other fails with the status and the tail of stderr. At the
timeout or on cancel the whole group gets SIGTERM, then SIGKILL after
JOBS_COMMAND_KILL_GRACE_SECONDS; when the program exits, whatever it left
running in its group is killed too.

Security: whoever may create or edit a command job may run anything as the
scheduler's OS user. So: off unless JOBS_COMMAND_ENABLED, superusers only
(services.check_job_change), refused in demo mode, and JOBS_COMMAND_ALLOWED
(program names or absolute paths) limits what may be run.
"""

import codecs
import collections
import os
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path

from django.conf import settings

from jobs import jsontext
from jobs.engine.execution.logbuffer import LogBuffer
from jobs.handlers.base import HandlerError, JobContext, JobHandler

# Taken from the scheduler's environment when set; nothing else is.
CLEAN_ENV_NAMES = ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STDERR_TAIL_CHARS = 2000
# The most read from a pipe at once: a line without a newline is taken in
# pieces of this size, never whole.
READ_CHUNK_BYTES = 64 * 1024
MAX_ENV = 100
# In a child of the process executor, which SIGKILLs it 2 s after SIGTERM
# (jobs.engine.execution.processes.GRACE_SECONDS): the program's grace before its SIGKILL.
EXECUTOR_GRACE_SHARE = 1.0
DISABLED_MESSAGE = "Command jobs are turned off on this server (JOBS_COMMAND_ENABLED)"


def command_enabled() -> bool:
    return bool(settings.JOBS_COMMAND_ENABLED)


def parse_command(props: dict) -> list[str]:
    """The argv to run (for shell: true, ["/bin/sh", "-c", text]); ValueError if unusable."""
    raw = props.get("command")
    text = "" if raw is None else str(raw)
    if not text.strip():
        raise ValueError("the command is empty")
    shell = str(props.get("shell") or "").strip().lower()
    if shell not in ("", "true", "false"):
        raise ValueError("“shell” must be true or false")
    if text.lstrip().startswith("["):
        try:
            argv = jsontext.loads(text)
        except jsontext.JsonTextError as exc:
            raise ValueError(
                f"the command looks like a JSON list but does not parse: {exc.message}"
            ) from None
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("a command list must hold the program and its arguments, all text")
        line = shlex.join(argv)
    else:
        line = text
        try:
            argv = shlex.split(text)
        except ValueError as exc:
            raise ValueError(f"the command cannot be split into words: {exc}") from None
    if any("\x00" in a for a in argv) or not argv:
        raise ValueError("the command is empty or contains a NUL character")
    if shell == "true":
        return ["/bin/sh", "-c", line]
    return argv


def parse_env(props: dict) -> dict[str, str]:
    raw = props.get("env")
    if raw in (None, ""):
        return {}
    try:
        value = jsontext.loads(raw) if isinstance(raw, str) else raw
    except jsontext.JsonTextError as exc:
        raise ValueError(f"“env” must be a JSON object: {exc.message}") from None
    if not isinstance(value, dict) or len(value) > MAX_ENV:
        raise ValueError(f"“env” must be a JSON object of at most {MAX_ENV} names to text")
    env = {}
    for name, item in value.items():
        if (
            not name
            or "=" in name
            or "\x00" in name
            or not name.replace("_", "a").isalnum()
            or name[0].isdigit()
        ):
            raise ValueError(f"“{name[:50]}” is not an environment variable name")
        if isinstance(item, (dict, list)) or "\x00" in str(item):
            raise ValueError(f"the value of “{name}” must be text without NUL characters")
        env[name] = "" if item is None else str(item)
    return env


def program_allowed(argv: list[str], props: dict) -> str | None:
    """Why JOBS_COMMAND_ALLOWED refuses this command (None: allowed)."""
    allowed = [a.strip() for a in settings.JOBS_COMMAND_ALLOWED if a.strip()]
    if not allowed:
        return None
    if str(props.get("shell") or "").strip().lower() == "true":
        return "a shell cannot be used while JOBS_COMMAND_ALLOWED limits the programs"
    try:
        env_names = parse_env(props)
    except ValueError:
        env_names = {}  # refused on its own by validate_command_properties / run
    # The job's env would otherwise choose which program a permitted name
    # runs (PATH) or load other code into it (the dynamic loader's LD_*).
    steering = sorted(name for name in env_names if name == "PATH" or name.startswith("LD_"))
    if steering:
        return f"env may not set {steering[0]} while JOBS_COMMAND_ALLOWED limits the programs"
    program = argv[0]
    if program in allowed or ("/" not in program and Path(program).name in allowed):
        return None
    return f"“{program[:200]}” is not in JOBS_COMMAND_ALLOWED ({', '.join(allowed)})"


def validate_command_properties(props: dict) -> dict[str, str]:
    """Field → human error for a command job ({} if fine)."""
    if not command_enabled():
        return {"kind": f"{DISABLED_MESSAGE}."}
    errors = {}
    try:
        argv = parse_command(props)
    except ValueError as exc:
        errors["properties"] = f"command: {exc}."
    else:
        refusal = program_allowed(argv, props)
        if refusal:
            errors["properties"] = f"command: {refusal}."
    cwd = str(props.get("cwd") or "")
    if cwd and (not cwd.startswith("/") or "\x00" in cwd):
        errors.setdefault("properties", "cwd: give an absolute directory.")
    try:
        parse_env(props)
    except ValueError as exc:
        errors.setdefault("properties", f"env: {exc}.")
    return errors


def child_environment(ctx: JobContext, job_env: dict[str, str]) -> dict[str, str]:
    """A clean environment: a few harmless names from ours, what the run is,
    then the job's own `env`. Nothing else of the scheduler's (SECRET_KEY,
    DATABASE_URL, EMAIL_URL, JOBS_SQL_DATABASE_URL, channel secrets…)."""
    env = {name: os.environ[name] for name in CLEAN_ENV_NAMES if name in os.environ}
    env.setdefault("PATH", DEFAULT_PATH)
    env.setdefault("HOME", "/")
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        CRONBOARD_JOB=ctx.job_name,
        CRONBOARD_RUN_ID=str(ctx.run_id),
        CRONBOARD_FIRE_ID=ctx.fire_id,
        CRONBOARD_ATTEMPT=str(ctx.attempt),
    )
    if ctx.upstream:
        env.update(
            CRONBOARD_UPSTREAM_JOB=str(ctx.upstream.get("job", "")),
            CRONBOARD_UPSTREAM_RUN_ID=str(ctx.upstream.get("run_id", "")),
            CRONBOARD_UPSTREAM_STATUS=str(ctx.upstream.get("status", "")),
        )
    env.update(job_env)
    return env


class _CappedLog:
    """Lines into ctx.log up to a budget; past it, only a tail is kept and
    written (with the number of lines left out) when the program ends."""

    def __init__(self, ctx: JobContext, budget: int):
        self.ctx, self.budget, self.used = ctx, budget, 0
        # A line longer than this is kept as its head and tail (≤ 0: whole).
        self.line_keep = budget // 2 if budget > 0 else 0
        self.tail: collections.deque[str] = collections.deque()
        self.tail_chars = 0
        self.dropped = 0
        self.lock = threading.Lock()

    def write(self, line: str) -> None:
        with self.lock:
            if self.budget <= 0 or self.used + len(line) <= self.budget // 2:
                self.used += len(line)
                self.ctx.log(line)
                return
            self.tail.append(line)
            self.tail_chars += len(line)
            while self.tail_chars > self.budget // 2 and len(self.tail) > 1:
                self.tail_chars -= len(self.tail.popleft())
                self.dropped += 1

    def flush(self) -> None:
        with self.lock:
            if self.dropped:
                self.ctx.log(f"[… {self.dropped} line(s) of output omitted …]")
            for line in self.tail:
                self.ctx.log(line)
            self.tail.clear()


class CommandJobHandler(JobHandler):
    label = "Command"
    description = "Runs a program on the scheduler's host."
    properties_help = {
        "command": "the program and its arguments: a JSON list, or a string split like a shell would",
        "shell": "true: run the command with /bin/sh -c (default false)",
        "cwd": "the working directory (absolute)",
        "env": "extra environment variables, a JSON object",
    }

    def run(self, ctx: JobContext) -> str:
        props = ctx.properties
        if not command_enabled():
            raise HandlerError(DISABLED_MESSAGE)
        from jobs import services  # the one place of demo mode's rule

        try:
            services.check_demo_mode("running command jobs")
        except services.DemoModeError as exc:
            raise HandlerError(str(exc)) from None
        try:
            argv = parse_command(props)
            job_env = parse_env(props)
        except ValueError as exc:
            raise HandlerError(f"invalid properties: {exc}") from None
        refusal = program_allowed(argv, props)
        if refusal:
            raise HandlerError(refusal)
        cwd = str(props.get("cwd") or "") or None
        ctx.log(f"$ {shlex.join(argv)}")
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=child_environment(ctx, job_env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise HandlerError(f"could not start {argv[0]!r}: {exc.strerror or exc}") from None
        # Under the process executor this handler runs in the main thread of
        # a child that the scheduler stops with SIGTERM (then SIGKILL after
        # its own short grace): turn that into a cancel, so the program's
        # whole group is stopped before this process goes.
        previous, grace = None, settings.JOBS_COMMAND_KILL_GRACE_SECONDS
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGTERM, lambda *_: ctx.cancelled.set())
            grace = min(grace, EXECUTOR_GRACE_SHARE)
        try:
            return self._supervise(ctx, proc, argv, grace)
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _supervise(self, ctx: JobContext, proc: subprocess.Popen, argv: list[str], grace: float) -> str:
        out = _CappedLog(ctx, settings.JOBS_MAX_MESSAGE_CHARS)
        stderr_tail = LogBuffer(STDERR_TAIL_CHARS)
        readers = [
            threading.Thread(target=_pump, args=(proc.stdout, out, "", None), daemon=True),
            threading.Thread(target=_pump, args=(proc.stderr, out, "stderr: ", stderr_tail), daemon=True),
        ]
        for reader in readers:
            reader.start()
        stopped = None
        while proc.poll() is None:
            if ctx.cancelled.is_set():
                stopped = "cancelled"
            elif ctx.remaining_seconds <= 0:
                stopped = "timed out"
            if stopped:
                _stop_group(proc, ctx, grace)
                break
            ctx.cancelled.wait(0.1)
        code = proc.wait()
        _kill_group(proc.pid, signal.SIGKILL)  # whatever it left running in its session
        for reader in readers:
            reader.join(5)
        out.flush()
        if stopped:
            raise HandlerError(f"{stopped}: the process group was stopped (exit status {code})")
        if code == 0:
            return "exit status 0"
        last = stderr_tail.take()
        tail = (last.tail or last.head).strip()
        reason = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        raise HandlerError(f"{reason}" + (f"; stderr:\n{tail}" if tail else ""))


def _pump(stream, log: _CappedLog, prefix: str, tail: LogBuffer | None) -> None:
    """Lines from a pipe into the log, read in bounded pieces: a line is
    gathered as its capped head and tail (a LogBuffer) until its newline, so
    a program that writes without one costs a chunk and the caps, never the
    line; `tail` keeps the stream's last characters."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    line = LogBuffer(log.line_keep)
    with stream:
        while raw := stream.readline(READ_CHUNK_BYTES):
            text = decoder.decode(raw)
            if tail is not None:
                tail.write(text)
            if text.endswith("\n"):
                line.write(text[:-1])
                log.write(prefix + line.text())
                line = LogBuffer(log.line_keep)
            else:
                line.write(text)
        rest = decoder.decode(b"", final=True)
        if rest:
            line.write(rest)
        if line.length:
            log.write(prefix + line.text())


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_group(proc: subprocess.Popen, ctx: JobContext, grace: float) -> None:
    """SIGTERM to the whole group, SIGKILL after the grace."""
    ctx.log(f"stopping: SIGTERM to process group {proc.pid}")
    _kill_group(proc.pid, signal.SIGTERM)
    until = time.monotonic() + grace
    while proc.poll() is None and time.monotonic() < until:
        time.sleep(0.05)
    if proc.poll() is None:
        ctx.log(f"still running after {grace:g} s: SIGKILL to process group {proc.pid}")
    _kill_group(proc.pid, signal.SIGKILL)
