"""The process executor (jobs.engine.execution.processes) with real child
processes: hostile handlers are killed or recorded, the pool replaces what
died, and the log a handler writes reaches the scheduler as it is written
without the scheduler holding more than its capped head and tail. The scheduler side runs here on
the test database; the handlers (tests.hostile_handlers) need none."""

import multiprocessing.connection
import os
import time
from datetime import timedelta

import pytest
from django.utils import timezone

import tests.hostile_handlers  # noqa: F401  (registers the hostile.* handlers)
from jobs import services
from jobs.engine.loop import Scheduler
from jobs.models import Run

pytestmark = pytest.mark.django_db
CAP_CHARS = 10_000


@pytest.fixture
def make_scheduler(settings):
    made = []

    def make(*, executor="process", slots=3, memory_mb=0):
        settings.JOBS_RUN_MEMORY_MB = memory_mb
        scheduler = Scheduler(
            worker_id="node-a",
            max_workers=slots,
            misfire_threshold=60,
            max_message_chars=CAP_CHARS,
            executor=executor,
        )
        scheduler.pool.warm()
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        scheduler.pool.close()


@pytest.fixture
def scheduler(make_scheduler):
    return make_scheduler()


def drive(scheduler, until, timeout=20.0):
    """Run the scheduler's passes (real clock) until `until()` is true."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        scheduler.run_pass(timezone.now())
        if until():
            return
        scheduler.collect(scheduler.pool.wait(0.05), timezone.now())
    raise AssertionError("timed out driving the scheduler")


def next_outcomes(pool, timeout=10.0):
    """What the pool's next wait() with outcomes gives (a wait may also end
    without one: a wake-up, a place that became free)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if outcomes := pool.wait(end - time.monotonic()):
            return outcomes
    return []


def fire_now(make_job, handler, **fields):
    """A job due now whose next fire is next 1 January (unless told otherwise):
    make_job's every-minute default fired the job again at the next :00, into
    the slot a test was waiting to see free (seen under load: run 2, attempt 1,
    scheduled at hh:mm:00, running while run 1's child was being killed)."""
    fields.setdefault("cron_expression", "0 0 0 1 1 *")
    return make_job(handler=handler, next_fire_at=timezone.now(), **fields)


def only_run(job) -> Run:
    (run,) = job.runs.exclude(status=Run.Status.SKIPPED)
    return run


def finished(job, count=1):
    return lambda: (
        job.runs.filter(status__in=Run.FINISHED).exclude(status=Run.Status.SKIPPED).count() >= count
    )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def logged_pid(run: Run) -> int:
    return int(run.log.split("spinning in pid ")[1].split(",")[0].split()[0])


def test_a_spinner_past_its_deadline_is_killed_and_timed_out_while_other_jobs_run(make_job, scheduler):
    spinner = fire_now(make_job, "hostile.spin", timeout_seconds=1, max_retries=0)
    # First due on its own grid, a whole second: a first fire a fraction of a
    # second before the next one is two fires due at once on a busy machine,
    # and the earlier is rightly recorded skipped as a misfire.
    second = timezone.now().replace(microsecond=0) + timedelta(seconds=1)
    ticker = make_job(handler="demo.echo", cron_expression="* * * * * *", next_fire_at=second)
    drive(scheduler, finished(spinner))
    run = only_run(spinner)
    assert run.status == "timed_out"
    assert "timed out after 1 s" in run.error
    assert run.log.split(" ", 1)[1].startswith("spinning in pid")
    drive(scheduler, lambda: not pid_alive(logged_pid(run)), timeout=5)
    # The ticker kept firing every second meanwhile, each in a child of the pool.
    drive(scheduler, finished(ticker, 2))
    # Its finished runs, that is: it fires every second, so one may be
    # running at the moment of this question (seen in CI).
    ticks = list(ticker.runs.filter(status__in=Run.FINISHED).values_list("status", "skip_reason", "error"))
    assert {status for status, _, _ in ticks} == {"succeeded"}, ticks
    drive(scheduler, lambda: scheduler.pool.free_slots == 3 and len(scheduler.pool.child_pids()) == 3)
    assert logged_pid(run) not in scheduler.pool.child_pids()


def test_a_killed_runs_slot_is_free_only_once_its_child_is_gone(make_job, make_scheduler):
    scheduler = make_scheduler(slots=2)
    stubborn = fire_now(make_job, "hostile.stubborn", timeout_seconds=600)
    drive(scheduler, lambda: scheduler.pool.flights)
    (flight,) = scheduler.pool.flights.values()
    drive(scheduler, lambda: "deaf" in flight.ctx.log_text())
    pid = int(flight.ctx.log_text().split("spinning in pid ")[1].split(",")[0])
    assert scheduler.enforce_deadlines(flight.deadline)
    assert only_run(stubborn).status == "timed_out"
    # SIGTERM is ignored: the child lives until SIGKILL after the grace, and holds its slot.
    assert pid_alive(pid)
    assert scheduler.pool.free_slots == 1 and scheduler.pool.abandoned_count == 1
    drive(scheduler, lambda: scheduler.pool.free_slots == 2, timeout=30)
    assert not pid_alive(pid)
    assert scheduler.pool.abandoned_count == 0


@pytest.mark.parametrize("executor", ["process", "thread"])
def test_a_finished_run_frees_its_slot_before_its_outcome_is_written(make_job, make_scheduler, executor):
    """The slot is the handler's, not the write's: a run that finished holds
    none while its outcome waits for the loop's next write, so a burst of
    short runs is not held up by the loop's pace (find-max ran out of eight
    slots long before it ran out of CPU)."""
    scheduler = make_scheduler(executor=executor, slots=1)
    first = fire_now(make_job, "demo.echo")
    scheduler.plan_due(timezone.now())
    ((run_id, flight),) = scheduler.pool.flights.items()
    (outcome,) = next_outcomes(scheduler.pool)  # the loop takes the outcome; its write waits
    assert outcome.run_id == run_id and flight.done.is_set()
    assert scheduler.pool.free_slots == 1
    assert run_id in scheduler.pool.flights, "still the loop's until its outcome is written"
    assert Run.objects.get(pk=run_id).status == "running"

    second = fire_now(make_job, "demo.echo")
    scheduler.plan_due(timezone.now())
    assert only_run(second).status == "running", "started in the slot the first run left"
    scheduler.collect([outcome], timezone.now())
    drive(scheduler, lambda: not scheduler.pool.flights)
    assert (only_run(first).status, only_run(second).status) == ("succeeded", "succeeded")


def test_a_finished_child_frees_its_place_before_the_loop_takes_its_outcome(make_job, make_scheduler):
    """Planning asks for free places in the middle of a pass, long after the
    loop's last wait(): a child that finished since then holds none once
    refresh() read it, and its outcome is not lost (the next wait() gives it)."""
    scheduler = make_scheduler(slots=1)
    first = fire_now(make_job, "demo.echo")
    scheduler.plan_due(timezone.now())
    end = time.monotonic() + 10
    while scheduler.pool.free_slots == 0 and time.monotonic() < end:
        scheduler.pool.refresh()  # no wait(): the outcome stays for the next one
        time.sleep(0.01)
    assert scheduler.pool.free_slots == 1
    second = fire_now(make_job, "demo.echo")
    scheduler.plan_due(timezone.now())
    assert only_run(second).status == "running", "started in the place the first run left"
    drive(scheduler, lambda: not scheduler.pool.flights)
    assert (only_run(first).status, only_run(second).status) == ("succeeded", "succeeded")


def test_asking_for_free_places_reads_no_pipe(make_job, make_scheduler):
    """free_slots is a plain property: a child's message that it finished is
    read by refresh() (or wait()), the loop's named steps, not by asking."""
    scheduler = make_scheduler(slots=1)
    fire_now(make_job, "demo.echo", properties={})  # nothing logged: its one message is "done"
    scheduler.plan_due(timezone.now())
    (child,) = scheduler.pool._children  # the test looks at the pipe itself, without reading it
    assert multiprocessing.connection.wait([child.conn], timeout=10), "the child never reported"
    assert [scheduler.pool.free_slots for _ in range(3)] == [0, 0, 0]
    scheduler.pool.refresh()
    assert scheduler.pool.free_slots == 1
    assert [outcome.status for outcome in scheduler.pool.wait(0)] == ["succeeded"]


def test_cancel_terminates_the_child_and_records_cancelled(make_job, scheduler):
    spinner = fire_now(make_job, "hostile.spin", timeout_seconds=600)
    drive(scheduler, lambda: spinner.runs.filter(status="running").exists() and scheduler.pool.flights)
    (flight,) = scheduler.pool.flights.values()
    drive(scheduler, lambda: flight.ctx.log_chars > 0)
    pid = int(flight.ctx.log_text().split("spinning in pid ")[1].split(",")[0])
    assert services.cancel_run(run=only_run(spinner))
    scheduler.run_heartbeat.cadence.again()  # the next pass's heartbeat reads cancel requests
    drive(scheduler, finished(spinner))
    run = only_run(spinner)
    assert (run.status, run.error) == ("cancelled", "cancelled by an admin")
    drive(scheduler, lambda: not pid_alive(pid), timeout=5)


def test_os_exit_records_failed_with_the_exit_code_and_the_pool_replaces_the_child(make_job, scheduler):
    before = set(scheduler.pool.child_pids())
    job = fire_now(make_job, "hostile.exit", properties={"code": "3"}, max_retries=0)
    drive(scheduler, finished(job))
    run = only_run(job)
    assert run.status == "failed"
    assert run.error == "the run's process exited with status 3 before the run finished"
    drive(scheduler, lambda: len(scheduler.pool.child_pids()) == 3)
    assert set(scheduler.pool.child_pids()) != before
    # The slot works on: a run after it succeeds, in a child process.
    after = fire_now(make_job, "hostile.pid")
    drive(scheduler, finished(after))
    assert only_run(after).status == "succeeded"
    assert int(only_run(after).result) in scheduler.pool.child_pids()


def test_a_segfault_records_failed_naming_the_signal(make_job, scheduler):
    job = fire_now(make_job, "hostile.segfault", max_retries=0)
    drive(scheduler, finished(job))
    run = only_run(job)
    assert run.status == "failed"
    assert "killed by signal SIGSEGV" in run.error
    assert "memory cap" not in run.error, "no cap is set"


@pytest.mark.parametrize("step_mb", [0, 64], ids=["at-once", "in-64-MB-steps"])
def test_allocation_past_the_memory_cap_records_failed_naming_the_cap(make_job, make_scheduler, step_mb):
    scheduler = make_scheduler(memory_mb=512)
    hog = fire_now(make_job, "hostile.hog", properties={"mb": "1536", "step_mb": str(step_mb)}, max_retries=0)
    fine = fire_now(make_job, "hostile.hog", properties={"mb": "64"})
    drive(scheduler, finished(hog))
    drive(scheduler, finished(fine))
    run = only_run(hog)
    assert run.status == "failed"
    assert "memory cap of 512 MB (JOBS_RUN_MEMORY_MB)" in run.error
    assert (only_run(fine).status, only_run(fine).result) == ("succeeded", "held 64 MB")


@pytest.mark.parametrize("executor", ["process", "thread"])
def test_a_flood_of_log_keeps_only_the_capped_head_and_tail_in_the_scheduler(
    make_job, make_scheduler, executor
):
    scheduler = make_scheduler(executor=executor, slots=1)
    job = fire_now(make_job, "hostile.flood", properties={"lines": "100000", "width": "100"})
    flights = []
    drive(scheduler, lambda: (flights.extend(scheduler.pool.flights.values()) or True) and finished(job)())
    run = only_run(job)
    assert run.status == "succeeded"
    logged = 100_000 * len("000000000 " + "x" * 100 + "  00:00:00")  # about 11 MB
    assert flights[0].ctx.log_chars >= logged - 100_000
    assert flights[0].ctx._log.peak_held <= 2 * CAP_CHARS, "never more than the head and the tail"
    assert len(run.log) <= CAP_CHARS
    assert "000000000 xxx" in run.log and "000099999 xxx" in run.log
    assert f"original length {flights[0].ctx.log_chars} characters" in run.log


@pytest.mark.parametrize("executor", ["process", "thread"])
def test_log_lines_reach_the_scheduler_and_the_database_while_the_run_goes_on(
    make_job, make_scheduler, executor
):
    scheduler = make_scheduler(executor=executor, slots=1)
    job = fire_now(make_job, "hostile.flood", properties={"lines": "3", "width": "5", "then_sleep": "30"})
    drive(scheduler, lambda: scheduler.pool.flights)
    (flight,) = scheduler.pool.flights.values()
    drive(scheduler, lambda: "000000002" in flight.ctx.log_text())
    scheduler.run_heartbeat.cadence.again()
    scheduler.heartbeat(timezone.now())
    run = only_run(job)
    assert run.status == "running"
    assert [line.split(" ", 1)[1] for line in run.log.splitlines()] == [
        f"00000000{n} xxxxx" for n in range(3)
    ]
    scheduler.pool.abandon(run.pk)


def test_the_handler_api_in_a_child(make_job, scheduler):
    job = fire_now(make_job, "hostile.pid", timeout_seconds=120)
    drive(scheduler, finished(job))
    run = only_run(job)
    assert run.status == "succeeded"
    assert int(run.result) != os.getpid() and int(run.result) > 0
    line = run.log.split(" ", 1)[1]
    assert line.startswith(f"deadline {(run.started_at + timedelta(seconds=120)).isoformat()}")
    assert f"fire {run.fire_id}" in line
    assert 100 <= int(line.split("remaining ")[1].split(" s")[0]) <= 120


def test_a_handler_the_child_cannot_find_fails_with_a_clear_error(make_job, scheduler):
    job = fire_now(make_job, "demo.echo")
    job.handler = "gone.away"
    job.save(update_fields=["handler"])
    drive(scheduler, finished(job))
    assert "'gone.away' is not registered" in only_run(job).error


def test_http_jobs_run_in_a_child(make_job, scheduler_for_http):
    scheduler, server = scheduler_for_http
    ok = fire_now(make_job, "", kind="http", properties={"url": server.url("/hello")})
    bad = fire_now(make_job, "", kind="http", properties={"url": server.url("/status/500")})
    drive(scheduler, lambda: finished(ok)() and finished(bad)())
    assert only_run(ok).status == "succeeded" and only_run(ok).result.startswith("HTTP 200 OK in ")
    assert only_run(bad).status == "failed" and only_run(bad).error.endswith("(expected 2xx): body of a 500")
    assert f"GET {server.url('/hello')}" in only_run(ok).log


@pytest.fixture
def scheduler_for_http(settings, make_scheduler):
    from tests.fixtures.http import TestServer

    server = TestServer("127.0.0.2", name="target")
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]  # the children get the scheduler's settings
    yield make_scheduler(), server
    server.stop()


def test_sql_jobs_run_in_a_child(make_job, database, make_scheduler):
    scheduler = make_scheduler()  # after the fixture set JOBS_SQL_*: children get these settings
    writer = fire_now(
        make_job, "", kind="sql", properties={"sql": "DELETE FROM t WHERE x = 1"}, sql_write=True
    )
    reader = fire_now(make_job, "", kind="sql", properties={"sql": "DELETE FROM t"})
    drive(scheduler, lambda: finished(writer)() and finished(reader)())
    assert (only_run(writer).status, only_run(writer).result) == ("succeeded", "1 row affected")
    assert only_run(reader).status == "failed"
    assert "read-only" in only_run(reader).error or "readonly" in only_run(reader).error
    assert database.count() == 2
