"""A command run's own cgroup (cgroup v2), so that everything the program
starts is stopped with it.

A process group is what `killpg` reaches, and a child leaves it with one
call (`setsid`, or a shell's `set -m` job control); a cgroup it cannot leave
without write access to the cgroup tree. Each run gets a child cgroup of the
process's own cgroup (`/proc/self/cgroup`, under the cgroup2 mount), the
program is moved into it between fork and exec (so nothing it starts can be
outside it), and stopping the run writes `cgroup.kill` (Linux 5.14+; before
it, the cgroup is frozen and every process in it killed).

This needs a writable cgroup2 hierarchy at the process's own cgroup: a systemd
service with `Delegate=yes` gives its (unprivileged) user one.
Where there is none, `available` says why and the caller falls back to the
process group. A cgroup left behind by a run process that was killed itself
is removed (its processes killed) by the next run of a process in the same
PID namespace, once its creator is gone.
"""

import functools
import os
import secrets
import signal
import threading
import time
from pathlib import Path

PREFIX = "cronboard-run-"
KILL_FILE = "cgroup.kill"  # Linux 5.14+
REMOVE_TIMEOUT_SECONDS = 5.0

_live: set[Path] = set()
_live_lock = threading.Lock()


class CgroupUnavailable(Exception):
    """Why a run cannot have a cgroup of its own here."""


def _cgroup2_mount() -> Path | None:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields, _, rest = line.partition(" - ")
            if rest.split()[:1] == ["cgroup2"]:
                return Path(fields.split()[4])
    return None


def _own_cgroup() -> str | None:
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    return None


def parent_dir() -> Path:
    """Where this process may make cgroups for its runs: its own cgroup."""
    try:
        mount, own = _cgroup2_mount(), _own_cgroup()
    except OSError as exc:
        raise CgroupUnavailable(f"cannot read /proc: {exc.strerror}") from None
    if mount is None or own is None:
        raise CgroupUnavailable("no cgroup v2 hierarchy is mounted")
    parent = mount / own.lstrip("/")
    if not parent.is_dir():
        raise CgroupUnavailable(f"this process's cgroup {own} is not visible under {mount}")
    if not os.access(parent, os.W_OK) or not os.access(parent / "cgroup.procs", os.W_OK):
        raise CgroupUnavailable(f"{parent} is not writable (delegate it to this user: systemd Delegate=yes)")
    return parent


def _pid_namespace() -> str:
    return os.readlink("/proc/self/ns/pid").partition("[")[2].rstrip("]")


class RunCgroup:
    """One run's cgroup: made empty, joined by the program, killed and
    removed when the run ends."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls) -> "RunCgroup":
        parent = parent_dir()
        _sweep(parent)
        path = parent / f"{PREFIX}{_pid_namespace()}-{os.getpid()}-{secrets.token_hex(4)}"
        # Live before it exists: another thread's run sweeps what it finds
        # of this process that is not live, and would remove it in between.
        with _live_lock:
            _live.add(path)
        try:
            path.mkdir()
        except OSError as exc:
            with _live_lock:
                _live.discard(path)
            raise CgroupUnavailable(f"cannot make a cgroup in {parent}: {exc.strerror}") from None
        return cls(path)

    def joiner(self) -> tuple[int, functools.partial]:
        """An open descriptor of cgroup.procs, and the call that moves the
        calling process into the cgroup: for subprocess's preexec_fn, where
        it runs in the child between fork and exec. It is one write of a
        descriptor opened here, in C (no import, no lock, no allocation that
        another thread could hold at the fork). Close the descriptor after
        the program started."""
        fd = os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        return fd, functools.partial(os.write, fd, b"0")  # "0": the writing process

    def pids(self) -> list[int]:
        try:
            return [int(line) for line in (self.path / "cgroup.procs").read_text().split()]
        except (FileNotFoundError, ValueError):
            return []

    def signal(self, sig: int) -> None:
        for pid in self.pids():
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def populated(self) -> bool:
        try:
            return "populated 1" in (self.path / "cgroup.events").read_text()
        except FileNotFoundError:
            return False

    def kill(self) -> None:
        """SIGKILL to every process in the cgroup, however many it forks meanwhile."""
        try:
            (self.path / KILL_FILE).write_text("1")
            return
        except FileNotFoundError:
            if not self.path.is_dir():
                return
        except OSError:
            pass
        # Before Linux 5.14: frozen, nothing in it can fork while it is killed.
        freeze = self.path / "cgroup.freeze"
        try:
            freeze.write_text("1")
        except OSError:
            pass
        for _ in range(100):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        try:
            freeze.write_text("0")  # nothing stays frozen if a kill missed it
        except OSError:
            pass

    def remove(self, timeout: float = REMOVE_TIMEOUT_SECONDS) -> bool:
        """Kill what is left in it and remove it; whether it is gone (if not,
        a later run's sweep removes it)."""
        self.kill()
        until = time.monotonic() + timeout
        while self.populated() and time.monotonic() < until:
            time.sleep(0.02)
        try:
            self.path.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return False
        finally:
            with _live_lock:
                _live.discard(self.path)
        return True


def _sweep(parent: Path) -> None:
    """Remove the cgroups of runs whose process died before removing them:
    made in this PID namespace by a process that is gone, or by this one and
    no longer in use."""
    namespace, me = _pid_namespace(), os.getpid()
    try:
        candidates = [p for p in parent.iterdir() if p.name.startswith(PREFIX) and p.is_dir()]
    except OSError:
        return
    for path in candidates:
        ns, _, rest = path.name[len(PREFIX) :].partition("-")
        creator = rest.partition("-")[0]
        if ns != namespace or not creator.isdigit():
            continue
        with _live_lock:
            if path in _live:
                continue
        if int(creator) != me and _alive(int(creator)):
            continue
        RunCgroup(path).remove(timeout=1.0)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
