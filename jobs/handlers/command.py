"""Command jobs (kind `command`): run a program on the scheduler's host.

Properties: `command` — a JSON list (program and arguments), or a string
split like a shell would (shlex) and run WITHOUT a shell unless `shell` is
`true`; `cwd` — an absolute working directory; `env` — a JSON object of
extra environment variables.

The child starts in a session (process group) of its own, and in a cgroup
of its own where the host allows it (jobs.handlers.cgroups,
JOBS_COMMAND_CGROUP), with a clean environment (CLEAN_ENV_NAMES from the scheduler's own environment, plus the
run's CRONBOARD_* variables and the job's `env`): never Cronboard's secrets.
stdout and stderr stream into the run's log as they are written, read in
chunks of READ_CHUNK_BYTES; the log kept in memory is capped (head and tail)
like every run's log, and so is each line on its way there, however long
it runs without a newline. Exit status 0
succeeds; any other fails with the status and the tail of stderr. At the
timeout or on cancel the whole group and cgroup get SIGTERM, then SIGKILL
after JOBS_COMMAND_KILL_GRACE_SECONDS; when the program exits, whatever it
left running in either is killed too.

Security: whoever may create or edit a command job may run anything as the
scheduler's OS user. So: off unless JOBS_COMMAND_ENABLED, superusers only
(refusals.check_job_change), refused in demo mode; JOBS_COMMAND_ALLOWED limits
the commands and JOBS_COMMAND_ENV_ALLOWED the environment names a job may set
(jobs.commandguard), checked at save and again before every run.
"""

import codecs
import collections
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from django.conf import settings

from jobs import commandguard, jsontext
from jobs.core import demo
from jobs.core.logbuffer import LogBuffer
from jobs.handlers import cgroups
from jobs.handlers.base import HandlerError, JobContext, JobHandler

log = logging.getLogger(__name__)

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
# The API's and the import's error codes for what the guard refuses.
CODE_NOT_ALLOWED = "command_not_allowed"
CODE_ENV = "command_env"


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
    """The job's `env` as names to text; ValueError if it is not that shape.
    Which names it may set is env_refusal's question."""
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
        if shape := commandguard.name_shape_refusal(name):
            raise ValueError(shape)
        if isinstance(item, (dict, list)) or "\x00" in str(item):
            raise ValueError(f"the value of “{name}” must be text without NUL characters")
        env[name] = "" if item is None else str(item)
    return env


class Refusal(NamedTuple):
    """Why the guard refuses a command job, with its error code."""

    message: str
    code: str


def programs_limited() -> bool:
    return bool(settings.JOBS_COMMAND_ALLOWED)


def env_refusal(job_env: dict[str, str]) -> Refusal | None:
    """The first name of the job's env that the guard refuses (jobs.commandguard)."""
    for name, value in job_env.items():
        why = commandguard.env_name_refusal(
            name, allowed=list(settings.JOBS_COMMAND_ENV_ALLOWED), programs_limited=programs_limited()
        ) or commandguard.env_value_refusal(name, value)
        if why:
            return Refusal(why, CODE_ENV)
    return None


def program_refusal(argv: list[str], props: dict) -> Refusal | None:
    """Why JOBS_COMMAND_ALLOWED refuses this command (None: allowed)."""
    if not programs_limited():
        return None
    if str(props.get("shell") or "").strip().lower() == "true":
        return Refusal(
            "a shell cannot be used while JOBS_COMMAND_ALLOWED limits the programs", CODE_NOT_ALLOWED
        )
    why = commandguard.command_refusal(argv, list(settings.JOBS_COMMAND_ALLOWED))
    return Refusal(why, CODE_NOT_ALLOWED) if why else None


def validate_command_properties(props: dict) -> dict[str, Refusal]:
    """Field → what is wrong, with its code, for a command job ({} if fine)."""
    if not command_enabled():
        return {"kind": Refusal(f"{DISABLED_MESSAGE}.", "command_disabled")}
    errors = {}
    try:
        argv = parse_command(props)
    except ValueError as exc:
        errors["properties"] = Refusal(f"command: {exc}.", "invalid")
    else:
        refusal = program_refusal(argv, props)
        if refusal:
            errors["properties"] = Refusal(f"command: {refusal.message}.", refusal.code)
    cwd = str(props.get("cwd") or "")
    if cwd and (not cwd.startswith("/") or "\x00" in cwd):
        errors.setdefault("properties", Refusal("cwd: give an absolute directory.", "invalid"))
    try:
        refusal = env_refusal(parse_env(props))
    except ValueError as exc:
        refusal = Refusal(f"env: {exc}", CODE_ENV)
    if refusal:  # the guard's own sentences start with "env may not set"
        errors.setdefault("properties", Refusal(f"{refusal.message}.", refusal.code))
    return errors


def child_environment(ctx: JobContext, job_env: dict[str, str]) -> dict[str, str]:
    """A clean environment: a few harmless names from ours, what the run is,
    then the job's own `env`. Nothing else of the scheduler's (SECRET_KEY,
    DATABASE_URL, EMAIL_URL, JOBS_SQL_DATABASE_URL, channel secrets…)."""
    env = {name: os.environ[name] for name in CLEAN_ENV_NAMES if name in os.environ}
    # Only its absolute directories: an empty or relative entry searches the
    # working directory, which the job chooses, for a permitted program name.
    searched = [d for d in env.get("PATH", "").split(os.pathsep) if d.startswith("/")]
    env["PATH"] = os.pathsep.join(searched) or DEFAULT_PATH
    env.setdefault("HOME", "/")
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        CRONBOARD_JOB=ctx.job_name,
        CRONBOARD_RUN_ID=str(ctx.run_id),
        CRONBOARD_FIRE_ID=ctx.fire_id,
        CRONBOARD_ATTEMPT=str(ctx.attempt),
        CRONBOARD_SHARD_INDEX=str(ctx.shard_index),
        CRONBOARD_SHARD_TOTAL=str(ctx.shard_total),
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
        "env": "extra environment variables, a JSON object (only names JOBS_COMMAND_ENV_ALLOWED lists)",
    }

    def run(self, ctx: JobContext) -> str:
        props = ctx.properties
        if not command_enabled():
            raise HandlerError(DISABLED_MESSAGE)
        refused = demo.refusal("running command jobs")
        if refused:
            raise HandlerError(refused)
        try:
            argv = parse_command(props)
            job_env = parse_env(props)
        except ValueError as exc:
            raise HandlerError(f"invalid properties: {exc}") from None
        # Again at every run: the job may have been saved under older rules or settings.
        refusal = program_refusal(argv, props) or env_refusal(job_env)
        if refusal:
            raise HandlerError(refusal.message)
        cwd = str(props.get("cwd") or "") or None
        cgroup, fd, join = _run_cgroup(ctx)
        try:
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
                    preexec_fn=join,
                )
            except OSError as exc:
                raise HandlerError(f"could not start {argv[0]!r}: {exc.strerror or exc}") from None
            except subprocess.SubprocessError:
                raise HandlerError(f"could not start {argv[0]!r}: it could not join its cgroup") from None
            finally:
                if fd is not None:
                    os.close(fd)
            # Under the process executor this handler runs in the main thread of
            # a child that the scheduler stops with SIGTERM (then SIGKILL after
            # its own short grace): turn that into a cancel, so the program's
            # whole group is stopped before this process goes.
            previous, grace = None, settings.JOBS_COMMAND_KILL_GRACE_SECONDS
            if threading.current_thread() is threading.main_thread():
                previous = signal.signal(signal.SIGTERM, lambda *_: ctx.cancelled.set())
                grace = min(grace, EXECUTOR_GRACE_SHARE)
            try:
                return self._supervise(ctx, proc, grace, cgroup)
            finally:
                if previous is not None:
                    signal.signal(signal.SIGTERM, previous)
        finally:
            if cgroup is not None and not cgroup.remove():
                ctx.log(f"the cgroup {cgroup.path} is still in use; a later run removes it")

    def _supervise(
        self, ctx: JobContext, proc: subprocess.Popen, grace: float, cgroup: cgroups.RunCgroup | None
    ) -> str:
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
                _stop(proc, ctx, grace, cgroup)
                break
            ctx.cancelled.wait(0.1)
        code = proc.wait()
        # Whatever it left running: in its session, and in its cgroup whatever left that.
        _kill_group(proc.pid, signal.SIGKILL)
        if cgroup is not None:
            cgroup.kill()
        for reader in readers:
            reader.join(5)
        out.flush()
        if stopped:
            what = "its cgroup" if cgroup is not None else "the process group"
            raise HandlerError(f"{stopped}: {what} was stopped (exit status {code})")
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


def _stop(proc: subprocess.Popen, ctx: JobContext, grace: float, cgroup: cgroups.RunCgroup | None) -> None:
    """SIGTERM to the whole group (and everything in the cgroup), SIGKILL after the grace."""
    where = f"process group {proc.pid}" + (f" and cgroup {cgroup.path.name}" if cgroup is not None else "")
    ctx.log(f"stopping: SIGTERM to {where}")
    _kill_group(proc.pid, signal.SIGTERM)
    if cgroup is not None:
        cgroup.signal(signal.SIGTERM)
    until = time.monotonic() + grace
    while proc.poll() is None and time.monotonic() < until:
        time.sleep(0.05)
    if proc.poll() is None:
        ctx.log(f"still running after {grace:g} s: SIGKILL to {where}")
    _kill_group(proc.pid, signal.SIGKILL)
    if cgroup is not None:
        cgroup.kill()


def _run_cgroup(ctx: JobContext) -> tuple[cgroups.RunCgroup | None, int | None, Callable | None]:
    """The run's own cgroup, the descriptor its program joins it by, and the
    call that joins it (JOBS_COMMAND_CGROUP: auto, required, off); (None,
    None, None) where there is none, with a line in the log saying what that
    leaves uncovered."""
    mode = settings.JOBS_COMMAND_CGROUP
    if mode == "off":
        reason = "JOBS_COMMAND_CGROUP=off"
    else:
        try:
            cgroup = cgroups.RunCgroup.create()
        except cgroups.CgroupUnavailable as exc:
            reason = str(exc)
        else:
            try:
                fd, join = cgroup.joiner()
            except OSError as exc:
                cgroup.remove()
                reason = f"cannot write {cgroup.path}/cgroup.procs: {exc.strerror}"
            else:
                ctx.log(f"cgroup: {cgroup.path}")
                return cgroup, fd, join
        if mode == "required":
            raise HandlerError(f"no cgroup for this run (JOBS_COMMAND_CGROUP=required): {reason}")
    ctx.log(f"no cgroup ({reason}): a process that leaves the program's process group outlives the run")
    return None, None, None


def log_cgroup_warnings() -> list[str]:
    """At the scheduler's start: whether command runs will go without a
    cgroup of their own here, and what that leaves uncovered (logged, and
    returned for the command's stderr)."""
    if not command_enabled() or settings.JOBS_COMMAND_CGROUP == "off":
        return []
    try:
        cgroups.parent_dir()
    except cgroups.CgroupUnavailable as exc:
        if settings.JOBS_COMMAND_CGROUP == "required":
            warning = f"command runs will fail: JOBS_COMMAND_CGROUP=required, and there is no cgroup for them ({exc})"
        else:
            warning = (
                f"command runs get no cgroup of their own ({exc}): a process that leaves a program's "
                "process group (setsid, set -m) outlives its run (JOBS_COMMAND_CGROUP)"
            )
        log.warning("COMMAND JOBS: %s", warning)
        return [warning]
    return []
