"""Command jobs (kind command): a real program in its own session, its
output in the log, its exit status, the kill of its whole group at the
timeout, a clean environment, and who may create them."""

import json
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.engine.loop import Scheduler
from jobs.handlers import cgroups
from jobs.handlers.base import HandlerError
from jobs.handlers.command import CommandJobHandler, log_cgroup_warnings, parse_command
from jobs.models import Job, Run
from tests.fixtures.commands import T0, cgroups_or_skip, gone, make_ctx, pump, ready_pid, reap

PY = sys.executable


@pytest.fixture(autouse=True)
def _enabled(settings):
    settings.JOBS_COMMAND_ENABLED = True
    settings.JOBS_COMMAND_KILL_GRACE_SECONDS = 1


def test_a_command_that_prints_and_exits_3_fails_with_its_status_and_stderr():
    script = "import sys; print('hello out', flush=True); print('bad thing', file=sys.stderr); sys.exit(3)"
    ctx = make_ctx({"command": json.dumps([PY, "-c", script])})
    with pytest.raises(HandlerError) as info:
        CommandJobHandler().run(ctx)
    assert str(info.value).startswith("exit status 3") and "bad thing" in str(info.value)
    assert "hello out" in ctx.log_text() and "stderr: bad thing" in ctx.log_text()


def test_a_string_command_is_split_like_a_shell_and_run_without_one(tmp_path):
    ctx = make_ctx({"command": f"{PY} -c 'print(\"a; b\")' ; echo", "cwd": str(tmp_path)})
    assert CommandJobHandler().run(ctx) == "exit status 0"
    assert "a; b" in ctx.log_text(), "no shell: the ; is an argument, not a second command"
    shell = make_ctx({"command": "echo one; echo two", "shell": "true"})
    CommandJobHandler().run(shell)
    assert "one" in shell.log_text() and "two" in shell.log_text()


def test_the_environment_is_clean_plus_the_jobs_env(monkeypatch, settings):
    settings.JOBS_COMMAND_ENV_ALLOWED = ["FOO"]
    for name in ("SECRET_KEY", "DATABASE_URL", "EMAIL_URL", "JOBS_SQL_DATABASE_URL", "CRONBOARD_CHANNEL_KEY"):
        monkeypatch.setenv(name, "leak-" + name)
    script = "import json, os; print(json.dumps(dict(os.environ)))"
    ctx = make_ctx({"command": json.dumps([PY, "-c", script]), "env": '{"FOO": "bar"}'})
    ctx.upstream = {"job": "up", "run_id": 5, "status": "succeeded", "result": ""}
    CommandJobHandler().run(ctx)
    line = next(line for line in ctx.log_text().splitlines() if "{" in line)
    env = json.loads(line[line.index("{") :])
    assert "leak-" not in line
    assert env["FOO"] == "bar" and env["CRONBOARD_RUN_ID"] == "7" and env["CRONBOARD_JOB"] == "cmd"
    assert env["CRONBOARD_UPSTREAM_RUN_ID"] == "5" and env["CRONBOARD_UPSTREAM_STATUS"] == "succeeded"
    assert (env["CRONBOARD_SHARD_INDEX"], env["CRONBOARD_SHARD_TOTAL"]) == ("0", "1")
    assert set(env) <= {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "FOO",
        "LC_CTYPE",
    } | {n for n in env if n.startswith("CRONBOARD_")}


STUBBORN = (
    "import signal, subprocess, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)'])\n"
    "print('rea' + 'dy', child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def test_a_command_ignoring_sigterm_past_its_timeout_is_killed_with_its_children():
    # The clock passes the deadline once the program and its child are up.
    holder = {}
    clock = lambda: T0 + (timedelta(hours=1) if " ready " in holder["ctx"].log_text() else timedelta(0))
    ctx = holder["ctx"] = make_ctx({"command": json.dumps([PY, "-c", STUBBORN])}, clock=clock, seconds=30)
    with pytest.raises(HandlerError) as info:
        CommandJobHandler().run(ctx)
    assert str(info.value).startswith("timed out")
    text = ctx.log_text()
    child = ready_pid(text)
    assert "SIGTERM" in text and "SIGKILL" in text
    assert gone(child)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("executor", ["thread", "process"])
def test_through_the_scheduler_a_timeout_is_recorded_and_the_group_killed(make_job, settings, executor):
    settings.JOBS_EXECUTOR = executor
    job = make_job(
        kind=Job.Kind.COMMAND,
        handler="",
        properties={"command": json.dumps([PY, "-c", STUBBORN])},
        timeout_seconds=60,
    )
    # A real clock: a run in a child process reads its deadline by the real time.
    # The timeout is long so that a slow machine has the program up well before
    # it; the test then moves the scheduler's clock past it.
    base = timezone.now()
    now = [base]
    s = Scheduler(worker_id="node-c", max_workers=2, clock=lambda: now[0], misfire_threshold=60)
    try:
        run = Run.objects.create(
            job=job, scheduled_at=base, run_after=base, trigger="manual", timeout_seconds=60
        )
        assert s.claim_queued(base)
        flight = s.pool.flights[run.pk]
        assert pump(s.pool, lambda: " ready " in flight.ctx.log_text()), (
            flight.ctx.log_text(),
            Run.objects.get(pk=run.pk).error,
        )
        child = ready_pid(flight.ctx.log_text())
        now[0] = base + timedelta(seconds=70)
        assert s.enforce_deadlines(now[0])
        run.refresh_from_db()
        assert run.status == "timed_out"
        assert gone(child)
    finally:
        for f in list(s.pool.flights.values()):
            s.pool.abandon(f.run_id)
        if hasattr(s.pool, "close"):
            s.pool.close()


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"command": ""}, "empty"),
        ({"command": "'unclosed"}, "split"),
        ({"command": "[1, 2]"}, "text"),
        ({"command": "ls", "shell": "maybe"}, "shell"),
    ],
)
def test_unusable_commands_are_refused(props, message):
    with pytest.raises(ValueError, match=message):
        parse_command(props)


CMD_JOB = {
    "name": "backup",
    "kind": "command",
    "cron_expression": "0 0 3 * * *",
    "properties": {"command": '["/bin/echo", "hi"]'},
}


@pytest.mark.django_db
def test_only_superusers_create_or_change_command_jobs(staff_api, superuser_api, make_job):
    refused = staff_api.post("/api/jobs", CMD_JOB)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    created = superuser_api.post("/api/jobs", CMD_JOB)
    assert created.status_code == 201, created.content
    job_id = created.json()["id"]
    assert staff_api.patch(f"/api/jobs/{job_id}", {"description": "x"}).status_code == 403
    other = make_job(name="plain")
    to_command = staff_api.patch(
        f"/api/jobs/{other.pk}", {"kind": "command", "properties": CMD_JOB["properties"]}
    )
    assert to_command.status_code == 403
    override = staff_api.post(f"/api/jobs/{job_id}/run", {"properties": {"command": "rm -rf /tmp/x"}})
    assert override.status_code == 403 and not Run.objects.filter(job_id=job_id).exists()


@pytest.mark.django_db
def test_command_jobs_are_off_by_default_and_blocked_in_demo_mode(superuser_api, settings):
    settings.JOBS_COMMAND_ENABLED = False
    off = superuser_api.post("/api/jobs", CMD_JOB)
    assert off.status_code == 400 and off.json()["code"] == "command_disabled"
    settings.JOBS_COMMAND_ENABLED = True
    settings.DEMO_MODE = True
    demo = superuser_api.post("/api/jobs", CMD_JOB)
    assert demo.status_code == 403 and demo.json()["code"] == "demo_mode"
    assert not Job.objects.filter(name="backup").exists()
    with pytest.raises(HandlerError, match="disabled in demo mode"):
        CommandJobHandler().run(make_ctx({"command": "/bin/echo hi"}))


@pytest.mark.django_db
def test_jobs_command_allowed_limits_the_programs(superuser_api, settings):
    settings.JOBS_COMMAND_ALLOWED = ["echo", "/usr/bin/pg_dump"]
    allowed = {**CMD_JOB, "properties": {"command": "echo hi"}}
    assert superuser_api.post("/api/jobs", allowed).status_code == 201
    for command, shell in (('["/bin/rm", "-rf", "/"]', ""), ("echo hi", "true"), ("/tmp/echo x", "")):
        body = {
            **CMD_JOB,
            "name": f"n{len(command)}{shell}",
            "properties": {"command": command, "shell": shell},
        }
        response = superuser_api.post("/api/jobs", body)
        assert response.status_code == 400 and response.json()["field"] == "properties", response.content
    with pytest.raises(HandlerError, match="JOBS_COMMAND_ALLOWED"):
        CommandJobHandler().run(make_ctx({"command": "/bin/true"}))


@pytest.mark.django_db
def test_a_cancelled_command_run_is_recorded_cancelled_and_its_group_killed(make_job):
    from jobs import services

    job = make_job(
        kind=Job.Kind.COMMAND, handler="", properties={"command": json.dumps([PY, "-c", STUBBORN])}
    )
    s = Scheduler(worker_id="node-c2", max_workers=2, clock=lambda: T0, misfire_threshold=60)
    try:
        run = Run.objects.create(job=job, scheduled_at=T0, run_after=T0, trigger="manual")
        assert s.claim_queued(T0)
        flight = s.pool.flights[run.pk]
        assert pump(s.pool, lambda: " ready " in flight.ctx.log_text()), (
            flight.ctx.log_text(),
            Run.objects.get(pk=run.pk).error,
        )
        child = ready_pid(flight.ctx.log_text())
        run.refresh_from_db()
        services.cancel_run(run=run)
        s.heartbeat(T0)
        run.refresh_from_db()
        assert run.status == "cancelled"
        assert pump(s.pool, flight.done.is_set)
        assert gone(child)
    finally:
        for f in list(s.pool.flights.values()):
            s.pool.abandon(f.run_id)


# -- children that leave the process group -------------------------------------------

# A child in a session of its own (what setsid(1) and daemons do), which
# killpg on the program's group does not reach.
SETSID = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)'], start_new_session=True)\n"
    "print('rea' + 'dy', child.pid, flush=True)\n"
    "time.sleep(1000)\n"
)
# A shell with job control (`set -m`) puts a background job in a process group of its own.
SET_M = "set -m; sleep 1000 & echo rea''dy $!; wait"
ESCAPING = {"setsid": [PY, "-c", SETSID], "set -m": ["bash", "-c", SET_M]}


@pytest.mark.parametrize("how", list(ESCAPING))
def test_a_grandchild_that_leaves_the_process_group_is_killed_at_the_timeout(how):
    cgroups_or_skip()
    holder = {}
    clock = lambda: T0 + (timedelta(hours=1) if " ready " in holder["ctx"].log_text() else timedelta(0))
    ctx = holder["ctx"] = make_ctx({"command": json.dumps(ESCAPING[how])}, clock=clock, seconds=30)
    with pytest.raises(HandlerError) as info:
        CommandJobHandler().run(ctx)
    grandchild = ready_pid(ctx.log_text())
    try:
        assert gone(grandchild), ctx.log_text()
        assert str(info.value).startswith("timed out: its cgroup was stopped"), str(info.value)
    finally:
        reap(grandchild)


def test_what_a_program_leaves_running_in_its_cgroup_is_killed_when_it_exits():
    cgroups_or_skip()
    daemon = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)'],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print('rea' + 'dy', child.pid, flush=True)\n"
    )
    ctx = make_ctx({"command": json.dumps([PY, "-c", daemon])})
    assert CommandJobHandler().run(ctx) == "exit status 0"
    grandchild = ready_pid(ctx.log_text())
    try:
        assert gone(grandchild)
        made = next(line for line in ctx.log_text().splitlines() if " cgroup: " in line).split()[-1]
        assert not Path(made).exists(), "the run's cgroup is removed after it"
    finally:
        reap(grandchild)


def test_without_cgroups_kill_the_cgroup_is_frozen_and_each_process_killed(monkeypatch):
    """Linux before 5.14 has no cgroup.kill."""
    cgroups_or_skip()
    monkeypatch.setattr(cgroups, "KILL_FILE", "cgroup.kill-absent")
    holder = {}
    clock = lambda: T0 + (timedelta(hours=1) if " ready " in holder["ctx"].log_text() else timedelta(0))
    ctx = holder["ctx"] = make_ctx({"command": json.dumps(ESCAPING["setsid"])}, clock=clock, seconds=30)
    with pytest.raises(HandlerError, match="timed out"):
        CommandJobHandler().run(ctx)
    grandchild = ready_pid(ctx.log_text())
    try:
        assert gone(grandchild)
    finally:
        reap(grandchild)


def test_where_there_is_no_cgroup_the_log_says_what_escapes_and_required_refuses(
    settings, monkeypatch, tmp_path
):
    def unavailable():
        raise cgroups.CgroupUnavailable("/sys/fs/cgroup is read-only")

    monkeypatch.setattr(cgroups, "parent_dir", unavailable)
    ctx = make_ctx({"command": "/bin/true"})
    assert CommandJobHandler().run(ctx) == "exit status 0"
    assert "no cgroup (/sys/fs/cgroup is read-only): a process that leaves" in ctx.log_text()
    settings.JOBS_COMMAND_CGROUP = "required"
    marker = tmp_path / "ran"
    with pytest.raises(HandlerError, match="JOBS_COMMAND_CGROUP=required"):
        CommandJobHandler().run(make_ctx({"command": json.dumps(["touch", str(marker)])}))
    assert not marker.exists()
    settings.JOBS_COMMAND_CGROUP = "off"
    off = make_ctx({"command": "/bin/true"})
    CommandJobHandler().run(off)
    assert "no cgroup (JOBS_COMMAND_CGROUP=off)" in off.log_text()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("executor", ["thread", "process"])
def test_through_the_scheduler_a_grandchild_in_its_own_session_is_killed_on_cancel(
    make_job, settings, executor
):
    from jobs import services

    cgroups_or_skip()
    settings.JOBS_EXECUTOR = executor
    job = make_job(kind=Job.Kind.COMMAND, handler="", properties={"command": json.dumps(ESCAPING["setsid"])})
    base = timezone.now()
    s = Scheduler(worker_id="node-c3", max_workers=1, clock=lambda: base, misfire_threshold=60)
    grandchild = None
    try:
        run = Run.objects.create(job=job, scheduled_at=base, run_after=base, trigger="manual")
        assert s.claim_queued(base)
        flight = s.pool.flights[run.pk]
        assert pump(s.pool, lambda: " ready " in flight.ctx.log_text()), flight.ctx.log_text()
        grandchild = ready_pid(flight.ctx.log_text())
        run.refresh_from_db()
        services.cancel_run(run=run)
        s.heartbeat(base)
        run.refresh_from_db()
        assert run.status == "cancelled"
        assert gone(grandchild)
    finally:
        if grandchild:
            reap(grandchild)
        for f in list(s.pool.flights.values()):
            s.pool.abandon(f.run_id)
        if hasattr(s.pool, "close"):
            s.pool.close()


def test_a_cgroup_whose_run_process_died_is_swept_by_the_next_run():
    """A run process killed before it removed its run's cgroup (the OOM
    killer, a crashed scheduler) left the cgroup and what ran in it."""
    cgroups_or_skip()
    creator = subprocess.Popen([PY, "-c", "pass"])
    creator.wait()  # a pid that is gone
    left = cgroups.parent_dir() / f"{cgroups.PREFIX}{cgroups._pid_namespace()}-{creator.pid}-dead"
    left.mkdir()
    orphan = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        (left / "cgroup.procs").write_text(str(orphan.pid))
        assert CommandJobHandler().run(make_ctx({"command": "/bin/true"})) == "exit status 0"
        assert orphan.wait(10) == -signal.SIGKILL
        assert not left.exists()
    finally:
        reap(orphan.pid)
        orphan.wait(10)
        if left.exists():
            left.rmdir()


def test_a_cgroup_being_made_is_not_swept_by_another_threads_run(monkeypatch, tmp_path):
    """Under the thread executor, another run's sweep between this run's
    mkdir and its entry in the live set removed the new cgroup (it looked
    like one this process had left behind)."""
    swept = []
    parent_type = type(tmp_path)

    class Parent(parent_type):
        def mkdir(self, *args, **kwargs):
            super().mkdir(*args, **kwargs)
            cgroups._sweep(Parent(tmp_path))  # another thread's run, at the worst moment

    monkeypatch.setattr(cgroups, "parent_dir", lambda: Parent(tmp_path))
    monkeypatch.setattr(cgroups.RunCgroup, "remove", lambda self, timeout=0: swept.append(self.path))
    made = cgroups.RunCgroup.create()
    assert made.path.is_dir() and swept == [], swept
    cgroups._sweep(tmp_path)
    assert swept == [], "still live: its run has not removed it"
    with cgroups._live_lock:  # its run died without removing it: the next sweep takes it
        cgroups._live.discard(made.path)
    cgroups._sweep(tmp_path)
    assert swept == [made.path]


def test_the_scheduler_says_at_its_start_when_command_runs_get_no_cgroup(settings, monkeypatch):
    def unavailable():
        raise cgroups.CgroupUnavailable("/sys/fs/cgroup is read-only")

    monkeypatch.setattr(cgroups, "parent_dir", unavailable)
    (warning,) = log_cgroup_warnings()
    assert "no cgroup of their own (/sys/fs/cgroup is read-only)" in warning and "outlives its run" in warning
    settings.JOBS_COMMAND_CGROUP = "required"
    assert "command runs will fail" in log_cgroup_warnings()[0]
    settings.JOBS_COMMAND_CGROUP = "off"
    assert log_cgroup_warnings() == []
    settings.JOBS_COMMAND_CGROUP, settings.JOBS_COMMAND_ENABLED = "auto", False
    assert log_cgroup_warnings() == []


# Run in a process of its own, so that its peak resident memory is the
# handler's alone: 300 MB on stdout in one line, and 300 MB on stderr.
ONE_LONG_LINE = """
import json, resource, sys
from jobs.handlers.base import HandlerError, JobContext
from jobs.handlers.command import CommandJobHandler
from datetime import UTC, datetime, timedelta
T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
program = "import os\\nblock = b'x' * 1048576\\nfor _ in range(300):\\n    os.write({fd}, block)\\nraise SystemExit(1)\\n"
ctx = JobContext(run_id=1, fire_id="f", attempt=1, scheduled_at=T0, deadline=T0 + timedelta(hours=1),
                 properties={{"command": json.dumps([sys.executable, "-c", program])}}, clock=lambda: T0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    result = CommandJobHandler().run(ctx)
except HandlerError as exc:
    result = str(exc)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
text = ctx.log_text()
print(json.dumps({{"grown_kib": grown, "log": len(text), "result": result[:3000],
                  "stated": "original length 3145728" in text}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("fd", [1, 2], ids=["stdout", "stderr"])
def test_one_300_mb_line_without_a_newline_is_read_in_bounded_memory(tmp_path, fd):
    from tests.fixtures.processes import Site

    site = Site(tmp_path, f"sqlite:///{tmp_path / 'unused.sqlite3'}", JOBS_COMMAND_ENABLED="1")
    out = json.loads(site.django(ONE_LONG_LINE.format(fd=fd), timeout=240).strip().splitlines()[-1])
    # Whatever the line's length, the handler holds a few capped copies of
    # the log (JOBS_MAX_MESSAGE_CHARS, 256 K characters) and a read chunk.
    assert out["grown_kib"] < 48 * 1024, out
    assert out["log"] <= 262_144, out
    # The line is in the log as its head and tail, with its length stated.
    assert out["stated"], out
    assert out["result"].startswith("exit status 1"), out
