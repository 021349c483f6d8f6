"""Poison-proof outcomes: what a handler produces (NUL, lone
surrogates, binary, an HTTP body that is not text) is made storable before
it is written, on SQLite and PostgreSQL alike; a write that still fails for
one run's data fails that run alone, and the scheduler goes on.

Each test runs on both databases (`both_databases`, tests/fixtures/databases.py).
Regression: a NUL in an HTTP job's response body made a PostgreSQL scheduler
retry the same batch forever; a lone surrogate in a result made a SQLite
scheduler exit (`UnicodeEncodeError` in the batched outcome write) after
every restart."""

import sqlite3
import threading
import time
from datetime import timedelta
from http.server import ThreadingHTTPServer

import pytest
from django.db import IntegrityError, InterfaceError, OperationalError, connection
from django.db.utils import DataError
from django.utils import timezone

from jobs.engine.loop import Scheduler
from jobs.engine.outcomes import is_connection_error
from jobs.handlers import HandlerError, JobHandler, register
from jobs.handlers.registry import unregister
from jobs.models import Job, Run
from jobs.text import REPLACEMENT, storable
from tests.fixtures.http import BINARY_BODY, BinaryHandler

NUL_TEXT = "before\x00after"
SURROGATE_TEXT = "before\udfffafter"
BINARY_TEXT = bytes(range(256)).decode("latin-1")  # every byte value, NUL included


@pytest.fixture
def poison_handlers():
    """Handlers that produce text no database stores, as a hostile author would."""
    made = {
        "poison.nul_result": lambda ctx: (ctx.log(NUL_TEXT), NUL_TEXT)[1],
        "poison.surrogate_result": lambda ctx: (ctx.log(SURROGATE_TEXT), SURROGATE_TEXT)[1],
        "poison.binary_result": lambda ctx: (ctx.log(BINARY_TEXT), BINARY_TEXT)[1],
        "poison.bytes_result": lambda ctx: bytes(range(256)),
        "poison.nul_error": lambda ctx: _raise(HandlerError(NUL_TEXT)),
        "poison.surrogate_error": lambda ctx: _raise(ValueError(SURROGATE_TEXT)),
        "poison.surrogate_pair": lambda ctx: "smile \ud83d\ude00",
    }
    for name, body in made.items():
        register(name)(type(name, (JobHandler,), {"run": lambda self, ctx, body=body: body(ctx)}))
    yield made
    for name in made:
        unregister(name)


def _raise(exc):
    raise exc


def make_due_job(name: str, handler: str = "demo.echo", **fields) -> Job:
    now = timezone.now()
    return Job.objects.create(
        name=name,
        kind=fields.pop("kind", Job.Kind.PYTHON),
        handler=handler,
        schedule_type=Job.ScheduleType.INTERVAL,
        interval_seconds=3600,
        next_fire_at=now - timedelta(seconds=1),
        **fields,
    )


def new_scheduler() -> Scheduler:
    # The real clock: on PostgreSQL leases are judged by the database's.
    return Scheduler(worker_id="poison-node", max_workers=8)


def run_due_jobs(scheduler: Scheduler, timeout: float = 20.0) -> None:
    """One pass (lead, plan, claim, start), then every outcome written."""
    scheduler.run_pass(timezone.now())
    until = time.monotonic() + timeout
    while scheduler.pool.flights and time.monotonic() < until:
        scheduler.collect(scheduler.pool.wait(0.2), timezone.now())
    assert not scheduler.pool.flights, "runs still in flight"


def last_run(job: Job) -> Run:
    return Run.objects.filter(job=job).latest("id")


# -- output: made storable where it is recorded -------------------------------------


@pytest.mark.parametrize(
    ("handler", "status", "field", "expected"),
    [
        ("poison.nul_result", "succeeded", "result", f"before{REPLACEMENT}after"),
        ("poison.surrogate_result", "succeeded", "result", f"before{REPLACEMENT}after"),
        ("poison.nul_error", "failed", "error", f"before{REPLACEMENT}after"),
        ("poison.surrogate_pair", "succeeded", "result", "smile 😀"),
    ],
)
def test_unstorable_output_is_recorded_with_replacement_characters(
    both_databases, poison_handlers, handler, status, field, expected
):
    job = make_due_job("hostile", handler)
    run_due_jobs(new_scheduler())

    run = last_run(job)
    assert run.status == status
    assert getattr(run, field).startswith(expected)
    job.refresh_from_db()
    assert job.last_status == status
    if status == "failed":
        assert job.last_error == expected
    if handler.endswith("_result"):
        assert f"before{REPLACEMENT}after" in run.log


def test_a_lone_surrogate_in_an_exception_is_recorded_in_the_traceback(both_databases, poison_handlers):
    job = make_due_job("hostile", "poison.surrogate_error")
    run_due_jobs(new_scheduler())
    run = last_run(job)
    assert run.status == "failed"
    assert run.error.startswith(f"ValueError: before{REPLACEMENT}after")
    assert "Traceback" in run.error


def test_binary_output_is_recorded(both_databases, poison_handlers):
    text_job = make_due_job("binary-text", "poison.binary_result")
    bytes_job = make_due_job("binary-bytes", "poison.bytes_result")
    run_due_jobs(new_scheduler())

    run = last_run(text_job)
    assert run.status == "succeeded"
    assert run.result == REPLACEMENT + BINARY_TEXT[1:]
    assert BINARY_TEXT[1:] in run.log
    assert last_run(bytes_job).status == "succeeded"
    assert "\\x00" in last_run(bytes_job).result


def test_a_poisoned_job_beside_ordinary_jobs_in_one_pass(both_databases, poison_handlers, client, staff_user):
    """The hostile runs and the ordinary ones are written in the same batch;
    all land, and the job and run pages of the hostile job render."""
    ordinary = [make_due_job(f"ordinary-{i}") for i in range(5)]
    hostile = [
        make_due_job("nul", "poison.nul_result"),
        make_due_job("surrogate", "poison.surrogate_result"),
        make_due_job("binary", "poison.binary_result"),
    ]
    scheduler = new_scheduler()
    run_due_jobs(scheduler)

    for job in ordinary + hostile:
        assert last_run(job).status == "succeeded", job.name

    # The scheduler keeps going: the next fires run and are recorded too.
    Job.objects.filter(pk__in=[j.pk for j in ordinary + hostile]).update(
        next_fire_at=timezone.now() - timedelta(seconds=1)
    )
    run_due_jobs(scheduler)
    for job in ordinary + hostile:
        assert Run.objects.filter(job=job, status="succeeded").count() == 2, job.name

    client.force_login(staff_user)
    for job in hostile:
        page = client.get(f"/jobs/{job.pk}/")
        assert page.status_code == 200
        assert client.get(f"/runs/{last_run(job).pk}/").status_code == 200
        assert client.get(f"/api/runs/{last_run(job).pk}").status_code == 200


def test_a_log_flushed_while_running_is_storable(both_databases):
    """The heartbeat writes the log of a run still running."""
    gate = threading.Event()

    @register("poison.slow_logger")
    class SlowLogger(JobHandler):
        def run(self, ctx):
            ctx.log(NUL_TEXT)
            ctx.log(SURROGATE_TEXT)
            gate.wait(10)
            return "done"

    try:
        job = make_due_job("slow", "poison.slow_logger")
        scheduler = new_scheduler()
        scheduler.run_pass(timezone.now())
        (flight,) = scheduler.pool.flights.values()
        until = time.monotonic() + 5
        while SURROGATE_TEXT not in flight.ctx.log_text() and time.monotonic() < until:
            time.sleep(0.01)
        scheduler.run_heartbeat.cadence.again()
        assert scheduler.heartbeat(timezone.now())
        run = last_run(job)
        assert run.status == "running"
        assert f"before{REPLACEMENT}after" in run.log
        gate.set()
        run_due_jobs(scheduler)
        assert last_run(job).status == "succeeded"
    finally:
        gate.set()
        unregister("poison.slow_logger")


def test_a_run_timed_out_or_cancelled_keeps_its_poisoned_log_storable(both_databases):
    @register("poison.stuck")
    class Stuck(JobHandler):
        def run(self, ctx):
            ctx.log(NUL_TEXT)
            ctx.log(SURROGATE_TEXT)
            ctx.cancelled.wait(10)
            raise HandlerError("stopped")

    try:
        timed = make_due_job("timed", "poison.stuck", timeout_seconds=1)
        cancelled = make_due_job("cancelled", "poison.stuck")
        scheduler = new_scheduler()
        scheduler.run_pass(timezone.now())
        until = time.monotonic() + 5
        while time.monotonic() < until and not all(
            SURROGATE_TEXT in f.ctx.log_text() for f in scheduler.pool.flights.values()
        ):
            time.sleep(0.01)
        Run.objects.filter(job=cancelled).update(cancel_requested=True)
        later = timezone.now() + timedelta(seconds=2)
        scheduler.run_heartbeat.cadence.again()
        scheduler.heartbeat(later)
        scheduler.enforce_deadlines(later)
        assert not scheduler.pool.flights
        for job, status in ((timed, "timed_out"), (cancelled, "cancelled")):
            run = last_run(job)
            assert run.status == status
            assert f"before{REPLACEMENT}after" in run.log
            assert "\x00" not in run.log
    finally:
        unregister("poison.stuck")


# -- HTTP jobs against a real loopback server --------------------------------------


@pytest.fixture
def binary_server(settings):
    server = ThreadingHTTPServer(("127.0.0.2", 0), BinaryHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]
    yield f"http://127.0.0.2:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("path", "status", "field"),
    [
        ("/ok", "succeeded", "result"),
        ("/fail", "failed", "error"),
        # Codecs that cannot replace what they cannot decode, or are not text.
        ("/ok?charset=idna", "succeeded", "result"),
        ("/ok?charset=no-such-charset", "succeeded", "result"),
    ],
)
def test_http_job_answered_with_a_binary_body_is_recorded(both_databases, binary_server, path, status, field):
    ordinary = make_due_job("ordinary")
    job = make_due_job("binary-http", "", kind=Job.Kind.HTTP, properties={"url": binary_server + path})
    run_due_jobs(new_scheduler())

    run = last_run(job)
    assert run.status == status, run.error
    text = getattr(run, field)
    assert text.startswith("HTTP ")
    assert "tail-marker" in text
    assert REPLACEMENT in text
    assert "\x00" not in text
    assert f"{len(BINARY_BODY)} bytes" in run.log
    assert last_run(ordinary).status == "succeeded"


# -- SQL jobs whose rows are not text ---------------------------------------------------


def test_sql_job_returning_a_nul_and_binary_is_recorded(both_databases, tmp_path, settings):
    target = tmp_path / "target.sqlite3"
    sqlite3.connect(target).close()
    settings.JOBS_SQL_ENABLED = True
    settings.JOBS_SQL_DATABASE = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(target)}
    sql = "SELECT 'a' || char(0) || 'b' AS nul, x'00ff00' AS blob, 'tail-marker' AS marker"
    job = make_due_job("sql-binary", "", kind=Job.Kind.SQL, properties={"sql": sql})
    ordinary = make_due_job("ordinary")
    run_due_jobs(new_scheduler())

    run = last_run(job)
    assert run.status == "succeeded", run.error
    assert "tail-marker" in run.log
    assert "\x00" not in run.log
    assert last_run(ordinary).status == "succeeded"


# -- isolation: a write that fails for one run's data ----------------------------------


def test_a_run_whose_outcome_cannot_be_written_fails_alone(both_databases, poison_handlers):
    """A failed run whose retry collides with a row already there (a real
    IntegrityError on the unique fire-attempt constraint) is in the same
    batch as ordinary successes. The batch is written again run by run: the
    others land; this run is recorded failed with what went wrong, once."""
    ordinary = [make_due_job(f"ordinary-{i}") for i in range(3)]
    job = make_due_job("colliding", "poison.nul_error", max_retries=1)
    scheduler = new_scheduler()
    scheduler.run_pass(timezone.now())
    first = last_run(job)
    Run.objects.create(
        job=job,
        scheduled_at=first.scheduled_at,
        attempt=2,
        trigger=first.trigger,
        status=Run.Status.SKIPPED,
        run_after=first.run_after,
    )
    until = time.monotonic() + 20
    while scheduler.pool.flights and time.monotonic() < until:
        scheduler.collect(scheduler.pool.wait(0.2), timezone.now())
    assert not scheduler.pool.flights

    for other in ordinary:
        assert last_run(other).status == "succeeded"
    first.refresh_from_db()
    assert first.status == "failed"
    assert "could not be written to the database" in first.error
    assert "IntegrityError" in first.error
    assert not Run.objects.filter(job=job, status="queued").exists()
    job.refresh_from_db()
    assert (job.last_status, job.consecutive_failures) == ("failed", 1)

    # ...and the loop goes on.
    Job.objects.filter(pk__in=[j.pk for j in ordinary]).update(
        next_fire_at=timezone.now() - timedelta(seconds=1)
    )
    run_due_jobs(scheduler)
    for other in ordinary:
        assert Run.objects.filter(job=other, status="succeeded").count() == 2


def test_errors_of_the_data_are_not_connection_errors(both_databases):
    """Errors raised by the database in use for what was written: retrying
    the same write cannot help, so they never keep the loop's back-off."""
    errors = []
    insert = "INSERT INTO jobs_lease (name, holder, epoch, info) VALUES (%s, '', 0, '{}')"
    for statement, params in [(insert, ["twice"]), (insert, ["twice"]), ("SELECT %s", [SURROGATE_TEXT])]:
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement, params)
        except Exception as exc:
            errors.append(exc)
    assert [type(e) for e in errors] == [IntegrityError, UnicodeEncodeError]
    assert not any(is_connection_error(e) for e in errors)
    assert not is_connection_error(DataError("value too long for type character varying(12)"))


@pytest.mark.postgres
@pytest.mark.parametrize("both_databases", ["postgres"], indirect=True)
def test_a_lost_postgresql_connection_keeps_the_back_off(both_databases, postgres_server):
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    with postgres_server.connect() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises((OperationalError, InterfaceError)) as lost, connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert is_connection_error(lost.value)
    connection.close()


def test_unstorable_text_is_found_at_any_depth_and_named():
    from jobs.text import find_unstorable

    deep = "\x00"
    for _ in range(5000):
        deep = [deep]
    assert find_unstorable({"a": deep}) == "a NUL character in “a”"
    assert find_unstorable({"ok": "fine", "k\udfff": "v"}) == "an unpaired surrogate (U+DFFF) in a name"
    assert find_unstorable({"url": {"x": ["fine", "b\udfff"]}}) == "an unpaired surrogate (U+DFFF) in “x”"
    assert find_unstorable({"plain": ["text", 1, None, True]}) is None


def test_storable_leaves_ordinary_text_alone_and_repairs_the_rest():
    assert storable("plain text, ünïcödé, 😀") == "plain text, ünïcödé, 😀"
    assert storable("a\x00b\udfffc\ud83d") == f"a{REPLACEMENT}b{REPLACEMENT}c{REPLACEMENT}"
    assert storable("\ud83d\ude00") == "😀"
