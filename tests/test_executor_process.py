"""`manage.py runscheduler` with the process executor, as a real process on a
real SQLite file, beside hostile jobs: the scheduler stays up, ordinary jobs
keep their times, each hostile run is recorded with the right status, and a
scheduler killed with -9 leaves no run process behind."""

import itertools
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.fixtures.processes import SqliteSite

pytestmark = pytest.mark.slow


def every(name, handler, **fields):
    return {
        "name": name,
        "handler": handler,
        "schedule_type": "interval",
        "interval_seconds": 5,
        "timeout_seconds": 60,
        "max_retries": 0,
        **fields,
    }


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie is gone, whoever reaps it


def still_alive(pids: set[int], within: float = 10) -> list[int]:
    """The processes of `pids` still alive after up to `within` seconds."""
    deadline = time.monotonic() + within
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


@pytest.fixture
def site(tmp_path, migrated_sqlite):
    s = SqliteSite(
        tmp_path,
        migrated_sqlite,
        "process",
        JOBS_HANDLER_MODULES="tests.hostile_handlers",
        JOBS_RUN_MEMORY_MB="512",
        JOBS_SQL_ENABLED="true",
    )
    yield s
    s.stop_all()


def test_hostile_jobs_are_recorded_and_ordinary_jobs_keep_their_times(site):
    site.import_jobs(
        every("ticker", "demo.echo", properties={"n": "1"}),
        every("spinner", "hostile.spin", timeout_seconds=20),
        every("segfault", "hostile.segfault"),
        every("exit", "hostile.exit", properties={"code": "7"}),
        every("hog", "hostile.hog", properties={"mb": "1536"}),
        every("flood", "hostile.flood", properties={"lines": "200000", "width": "100"}),
    )
    site.manage(
        "jobs",
        "import",
        "-",
        input=json.dumps(
            [every("count", "", kind="sql", properties={"sql": "SELECT count(*) AS jobs FROM jobs_job"})]
        ),
    )
    proc = site.start_scheduler()

    def last(name, statuses="'succeeded','failed','timed_out'"):
        return site.sql(
            f"SELECT r.status, r.error, r.result, length(r.log) FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
            f"WHERE j.name = ? AND r.status IN ({statuses}) ORDER BY r.id DESC LIMIT 1",
            (name,),
        )

    site.wait_for_rows(
        "SELECT 1",
        lambda rows: all(last(n) for n in ("spinner", "segfault", "exit", "hog", "flood", "count")),
        60,
    )
    assert last("spinner")[0][:2] == ("timed_out", "timed out after 20 s; the handler was asked to stop")
    assert last("segfault")[0][0] == "failed" and "killed by signal SIGSEGV" in last("segfault")[0][1]
    assert last("exit")[0][:2] == (
        "failed",
        "the run's process exited with status 7 before the run finished",
    ), last("exit")
    assert last("hog")[0][0] == "failed" and "memory cap of 512 MB (JOBS_RUN_MEMORY_MB)" in last("hog")[0][1]
    status, _, result, log_length = last("flood")[0]
    assert (status, result) == ("succeeded", "logged 200000 lines") and log_length <= 262_144
    status, _, result, _ = last("count")[0]
    assert (status, result) == ("succeeded", "1 row"), (
        "an SQL job reads the scheduler's database from its child"
    )

    # Meanwhile the ticker fired on its grid. A loop held by a hostile run
    # would be held for that run's whole life: the spinner's 20 s, four ticks
    # in a row skipped, or run late by seconds. A machine the test suite
    # itself keeps busy (its other workers, on two cores) may starve the
    # scheduler for a moment past one 5 s tick; the scheduler then skips that
    # tick as designed (skipped/misfire or skipped/overlap) and keeps to the
    # grid. So: every tick is recorded (one run per 5 s: a held loop records
    # one skip for the whole hold), a tick that ran succeeded and started less
    # than 3 s late, and a skip stands alone, never two in a row.
    # Only the ticks due once the scheduler was up (its first run started):
    # a tick that fell due while the process was still booting is skipped as
    # a misfire by design, on a busy machine more so.
    fires = site.wait_for_rows(
        "SELECT r.status, r.skip_reason, (julianday(r.started_at) - julianday(r.scheduled_at)) * 86400, "
        "julianday(r.scheduled_at) * 86400, r.error FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
        "WHERE j.name = 'ticker' AND r.status != 'running' "
        "AND r.scheduled_at >= (SELECT min(started_at) FROM jobs_run) ORDER BY r.scheduled_at",
        lambda rows: sum(status == "succeeded" for status, *_ in rows) >= 3,
        30,
    )
    ran = [late for status, _, late, *_ in fires if status != "skipped"]
    assert {status for status, *_ in fires} <= {"succeeded", "skipped"}, fires
    assert {reason for status, reason, *_ in fires if status == "skipped"} <= {"misfire", "overlap"}, fires
    assert not any(a[0] == b[0] == "skipped" for a, b in itertools.pairwise(fires)), fires
    assert max(ran) < 3.0, fires
    grid = [at for _, _, _, at, _ in fires]
    assert all(abs(b - a - 5) < 0.01 for a, b in itertools.pairwise(grid)), fires
    assert proc.poll() is None, site.logs()
    assert "Traceback" not in site.logs()


def test_a_scheduler_killed_with_9_leaves_no_run_process_behind(site):
    site.import_jobs(every("spinner", "hostile.spin", timeout_seconds=600))
    proc = site.start_scheduler()
    site.wait_for_rows("SELECT id FROM jobs_run WHERE status='running'", lambda rows: len(rows) == 1)
    family = descendants(proc.pid)
    assert len(family) >= 9, "the fork server and a child per slot (8)"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert not still_alive(family)


def test_sigterm_stops_the_run_processes_with_the_scheduler(site):
    site.import_jobs(every("ticker", "demo.echo"))
    proc = site.start_scheduler()
    site.wait_for_rows("SELECT id FROM jobs_run WHERE status='succeeded'", lambda rows: len(rows) >= 1)
    family = descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(15) == 0
    assert not still_alive(family)
    assert os.path.exists(site.database_url.removeprefix("sqlite:///"))
