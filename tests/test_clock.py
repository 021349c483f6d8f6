"""A scheduler node judges by the database's clock, whatever its own says
(jobs.engine.clock), and reports, warns and stops working when its clock is
far off.

The nodes here are told they are `clustered` on the SQLite test database and
given a database clock the test sets apart from their own fixed one; the
real thing (scheduler processes whose clocks are offset, on PostgreSQL) is in
test_cluster_clock.py."""

import logging
from datetime import timedelta
from io import StringIO
from types import SimpleNamespace

import pytest
import time_machine
from django.core.management import call_command

from jobs import alerts, cluster, tasks
from jobs.cluster import cluster_status
from jobs.engine import clock as clock_module
from jobs.engine import leases, maintenance
from jobs.engine.alertwatch import AlertWatch
from jobs.engine.clock import Clock, Reading
from jobs.engine.execution.child import context_from, payload_of
from jobs.engine.execution.pool import Flight
from jobs.engine.heartbeat_ping import HeartbeatPinger
from jobs.engine.loop import POLL
from jobs.engine.outbox import AlertSender
from jobs.engine.outcomes import Recorder
from jobs.engine.planning import Planner
from jobs.engine.schedulecheck import CHECK_EVERY, ScheduleCheck
from jobs.engine.starting import NextQueued
from jobs.handlers.base import JobContext, RunContext
from jobs.models import Job, Run
from tests.fixtures.core import T0, drain

AHEAD = timedelta(seconds=25)  # the node's clock is this far ahead of the database's


@pytest.fixture
def skewed(db, make_scheduler, clock, settings):
    """skewed(worker_id, ahead): a clustered node whose clock (the test's
    `clock`) is `ahead` of the database's (negative: behind). The limit is
    5 s, so 25 s off is a warning, not yet a refusal to work."""
    settings.JOBS_MAX_CLOCK_SKEW = 5

    def make(worker_id="node-a", ahead=AHEAD, **options):
        node = make_scheduler(worker_id=worker_id, clustered=True, clock=clock, max_workers=2, **options)
        node.clock.read_database = lambda: clock() - ahead
        return node

    return make


def test_a_node_whose_clock_is_ahead_fires_by_the_databases_clock_never_early(skewed, make_job, clock):
    """By its own clock the fire at T0 is 24 s old; by the database's it is
    due in a second: nothing runs. A second after, by the database's clock,
    it runs, and the run's times are the database's."""
    job = make_job(schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=5, next_fire_at=T0)
    clock.now = T0 + AHEAD - timedelta(seconds=1)
    skewed().run_forever(once=True)
    assert not Run.objects.exists()

    clock.now = T0 + AHEAD + timedelta(milliseconds=500)
    skewed().run_forever(once=True)
    run = Run.objects.get()
    due = T0 + timedelta(milliseconds=500)  # the database's clock when it fired
    assert (run.scheduled_at, run.status) == (T0, Run.Status.SUCCEEDED)
    assert run.created_at == run.run_after == run.started_at == run.finished_at == due
    job.refresh_from_db()
    assert job.next_fire_at == T0 + timedelta(seconds=5)


def test_a_node_whose_clock_is_behind_is_not_late_either(skewed, make_job, clock):
    make_job(schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=5, next_fire_at=T0)
    clock.now = T0 - AHEAD  # the database's clock stands at T0: due now
    skewed(ahead=-AHEAD).run_forever(once=True)
    assert Run.objects.get().started_at == T0


def test_the_offset_is_measured_again_at_every_node_lease_renewal(skewed, clock):
    node = skewed()
    assert node.clock() == clock.now, "nothing measured yet"
    node.check_clock()  # what run_forever does first
    assert node.clock() == clock.now - AHEAD
    node.start(node.clock())

    node.clock.read_database = lambda: clock() + timedelta(seconds=3)  # its clock was stepped back
    clock.advance(seconds=1)
    node.heartbeat(node.clock())
    assert node.clock() == clock.now - AHEAD, "not before the renew period is up"
    clock.advance(seconds=leases.renew_period().total_seconds())
    node.heartbeat(node.clock())
    assert node.clock() == clock.now + timedelta(seconds=3)
    info = cluster.current(cluster.node_lease_name("node-a"), now=node.clock())[0].info
    assert (info["clock_skew_seconds"], info["clock_refused"]) == (-3.0, False)


def test_a_pass_judges_by_the_measurement_it_makes_at_its_start(skewed, make_job, clock):
    """The node lease renewal at the start of a pass measures the clock
    again: the pass plans by the new measurement, not by the time read
    before it. Here the node's clock was stepped 3 s ahead: a fire due in
    2 s by the database's clock is not planned, though by the time the
    pass was given it is 1 s old."""
    node = skewed(ahead=timedelta(0))
    node.check_clock()
    node.start(node.clock())
    node.run_pass(node.clock())
    assert node.leadership.is_leader()

    node.clock.read_database = lambda: clock() - timedelta(seconds=3)
    clock.advance(seconds=leases.renew_period().total_seconds())
    job = make_job(
        schedule_type=Job.ScheduleType.INTERVAL,
        interval_seconds=5,
        next_fire_at=clock.now - timedelta(seconds=1),
    )
    node.run_pass(node.clock())  # the time before the measurement: clock.now
    assert node.clock() == clock.now - timedelta(seconds=3)
    assert not job.runs.exists(), "planned 2 s early by the database's clock"
    clock.advance(seconds=2)
    node.run_pass(node.clock())
    assert job.runs.get().scheduled_at == clock.now - timedelta(seconds=3)


@pytest.mark.parametrize(
    ("elapsed", "is_due"),
    [(None, True), (0, False), (29.9, False), (30, True), (-0.001, False), (-1, False), (-1.001, True)],
)
def test_a_step_done_every_so_often_is_due_again_early_only_after_a_clock_step(elapsed, is_due):
    """A new measurement moving the clock back by a few milliseconds is no
    reason to renew, sweep or beat again; a clock stepped back by more than
    a second is (waiting for it to catch up could let a lease lapse)."""
    last = None if elapsed is None else T0 - timedelta(seconds=elapsed)
    assert clock_module.due(last, T0, timedelta(seconds=30)) is is_due


def test_a_measurement_moving_the_clock_back_a_little_does_not_renew_the_node_lease_again(skewed, clock):
    node = skewed(ahead=timedelta(0))
    node.check_clock()
    node.start(node.clock())
    renewed = cluster.current(cluster.node_lease_name("node-a"), now=node.clock())[0].renewed_at
    node.clock.read_database = lambda: clock() - timedelta(milliseconds=5)
    node.check_clock()
    node.heartbeat(node.clock())
    assert cluster.current(cluster.node_lease_name("node-a"), now=node.clock())[0].renewed_at == renewed
    node.clock.read_database = lambda: clock() - timedelta(seconds=5)
    node.check_clock()
    node.heartbeat(node.clock())
    assert cluster.current(cluster.node_lease_name("node-a"), now=node.clock())[0].renewed_at == node.clock()


def test_of_several_readings_the_one_with_the_shortest_round_trip_counts():
    """A reading held up on its way (a descheduled process, a busy server)
    would put the clock ahead by its delay: the fastest one is kept."""
    readings = iter([(0.05, T0 + timedelta(seconds=10)), (0.001, T0 + timedelta(seconds=7)), (0.05, T0)])
    counter = [100.0]  # the round trips' timer, moved by each reading's delay

    def read_database():
        delay, value = next(readings)
        counter[0] += delay
        return value

    clock = Clock(lambda: T0, read_database=read_database, counter=lambda: counter[0])
    reading = clock.measure()
    assert reading.offset == timedelta(seconds=7) and clock() == T0 + timedelta(seconds=7)
    assert reading.round_trip.total_seconds() == pytest.approx(0.001)


@pytest.mark.parametrize(
    ("skew", "round_trip", "least"),
    [(3, 2, 1), (1.5, 2, 0), (-3, 2, -3), (0, 0.5, 0)],
)
def test_the_skew_is_judged_by_the_least_the_round_trip_allows(skew, round_trip, least):
    """The database read its clock somewhere within the round trip, before
    this node read its own: a slow round trip can only make the node look
    ahead, never behind."""
    reading = Reading(offset=timedelta(seconds=-skew), round_trip=timedelta(seconds=round_trip))
    assert reading.least_skew_seconds == pytest.approx(least)


def test_a_slow_round_trip_on_a_loaded_machine_is_not_skew(skewed, clock, caplog, settings):
    """3 s "ahead" with a 2.5 s round trip: at most 0.5 s off, under the 2 s
    limit; 25 s with a 2.5 s round trip is at least 22.5 s, over 10 x 2 s."""
    settings.JOBS_MAX_CLOCK_SKEW = 2
    node = skewed(ahead=timedelta(seconds=3))
    counter = [0.0]
    node.clock.counter = lambda: counter[0]
    ahead = [timedelta(seconds=3)]

    def slow_read():
        counter[0] += 2.5
        return clock() - ahead[0]

    node.clock.read_database = slow_read
    with caplog.at_level(logging.WARNING, logger="cronboard.scheduler"):
        node.check_clock()
    assert node.skew.reading.skew_seconds == 3.0
    assert not node.skew.refusing and "clock skew" not in caplog.text
    ahead[0] = timedelta(seconds=25)
    node.check_clock()
    assert node.skew.refusing


def test_a_skew_over_the_limit_is_logged_and_shown_by_status_and_health(
    skewed, clock, caplog, settings, staff_client
):
    settings.JOBS_MAX_CLOCK_SKEW = 5
    node = skewed()
    with caplog.at_level(logging.WARNING, logger="cronboard.scheduler"):
        node.check_clock()
    node.start(node.clock())
    assert (
        "this node's clock is 25 s ahead of the database's, more than JOBS_MAX_CLOCK_SKEW (5 s)"
        in caplog.text
    )
    assert not node.skew.refusing

    (status,) = cluster_status(now=node.clock()).nodes
    assert (status.clock_skew, status.clock_refused, status.clock_over_limit) == (25.0, False, True)
    settings.JOBS_WORKER_ID = "node-a"
    with time_machine.travel(node.clock(), tick=False):  # the commands and the page read the time
        text, as_json, health = StringIO(), StringIO(), StringIO()
        call_command("cluster", "status", stdout=text)
        call_command("cluster", "status", "--json", stdout=as_json)
        call_command("health", stdout=health)
        page = staff_client.get("/cluster/").content.decode()
        healthz = staff_client.get("/healthz/scheduler").json()
    assert healthz["scheduler_clock_skew_seconds"] == 25.0
    assert "clock=+25.000s" in text.getvalue()
    assert "its clock is 25 s ahead of the database's, more than JOBS_MAX_CLOCK_SKEW (5 s)" in text.getvalue()
    assert '"clock_skew_seconds": 25.0' in as_json.getvalue()
    assert (
        health.getvalue().strip() == "ok: scheduler node-a is alive, its clock +25.000 s from the database's"
    )
    assert "+25.000 s" in page and "clock off" in page and "not working" not in page


def test_a_node_off_by_ten_times_the_limit_stops_planning_and_claiming_until_its_clock_comes_back(
    skewed, make_job, clock, caplog, settings, gate_handler, staff_client
):
    settings.JOBS_MAX_CLOCK_SKEW = 2
    settings.JOBS_WORKER_ID = "node-a"
    node = skewed(ahead=timedelta(0))
    node.check_clock()
    node.start(node.clock())
    busy = make_job(handler="test.gate", schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=3600)
    Job.objects.filter(pk=busy.pk).update(next_fire_at=clock.now)
    node.run_pass(clock.now)
    assert node.leadership.is_leader() and len(node.pool.flights) == 1

    # Its clock jumps 30 s ahead (more than 10 x 2 s): at the next renewal
    # it hands back the leader lease and plans and claims nothing.
    offset = [timedelta(seconds=30)]
    node.clock.read_database = lambda: clock() - offset[0]
    clock.advance(seconds=leases.renew_period().total_seconds())
    due = make_job(
        schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=5, next_fire_at=clock.now - offset[0]
    )
    queued = Run.objects.create(
        job=make_job(),
        scheduled_at=clock.now - offset[0],
        run_after=clock.now - offset[0],
        trigger=Run.Trigger.MANUAL,
        status=Run.Status.QUEUED,
    )
    with caplog.at_level(logging.WARNING, logger="cronboard.scheduler"):
        node.run_pass(node.clock())
    assert (
        "clock skew: its clock is 30 s ahead of the database's: it went more than 10 x JOBS_MAX_CLOCK_SKEW "
        "(20 s) off and plans and claims nothing until it is back within JOBS_MAX_CLOCK_SKEW (2 s)"
        in caplog.text
    )
    assert node.skew.refusing and not node.leadership.is_leader()
    assert cluster.current(cluster.LEADER, now=node.clock())[0].holder == ""
    assert not due.runs.exists()
    assert Run.objects.get(pk=queued.pk).status == Run.Status.QUEUED

    # It says so: status, the page, the health check.
    (status,) = cluster_status(now=node.clock()).nodes
    assert (status.clock_skew, status.clock_refused) == (30.0, True)
    out, err = StringIO(), StringIO()
    with time_machine.travel(node.clock(), tick=False):
        call_command("cluster", "status", stdout=out)
        page = staff_client.get("/cluster/").content.decode()
        with pytest.raises(SystemExit) as exit_code:
            call_command("health", stdout=StringIO(), stderr=err)
    assert (
        "its clock is 30 s ahead of the database's: it went more than 10 x JOBS_MAX_CLOCK_SKEW (20 s) off and "
        "plans and claims nothing until it is back within JOBS_MAX_CLOCK_SKEW (2 s)" in out.getvalue()
    )
    assert "clock off: not working" in page
    assert (
        "It went more than 20 s off: it plans and claims nothing until its clock is back within 2 s" in page
    )
    assert exit_code.value.code == 1
    assert err.getvalue().strip() == (
        "unhealthy: the scheduler node-a plans and claims nothing: its clock is 30 s ahead of the "
        "database's: it went more than 10 x JOBS_MAX_CLOCK_SKEW (20 s) off and plans and claims nothing "
        "until it is back within JOBS_MAX_CLOCK_SKEW (2 s); fix its time (NTP)"
    )

    # The run it has goes on and is written.
    gate_handler.set()
    drain(node, node.clock())
    assert busy.runs.get().status == Run.Status.SUCCEEDED
    node.run_pass(node.clock())
    assert not due.runs.exists()

    # Back under 10 x the limit but still over it: it goes on refusing, so
    # a skew about the threshold does not start and stop it at every
    # renewal.
    offset[0] = timedelta(seconds=15)
    clock.advance(seconds=leases.renew_period().total_seconds())
    node.run_pass(node.clock())
    assert node.skew.refusing and not node.leadership.is_leader()
    assert not due.runs.exists()

    # Its clock comes back within the limit: it leads, plans and claims again.
    offset[0] = timedelta(seconds=1)
    clock.advance(seconds=leases.renew_period().total_seconds())
    with caplog.at_level(logging.WARNING, logger="cronboard.scheduler"):
        node.run_pass(node.clock())
    assert "back within JOBS_MAX_CLOCK_SKEW (2 s): planning and claiming again" in caplog.text
    assert node.leadership.is_leader()
    assert due.runs.exists()
    drain(node, node.clock())
    assert Run.objects.get(pk=queued.pk).status == Run.Status.SUCCEEDED


def test_a_run_process_keeps_the_schedulers_clock():
    """A handler in a child process reads its deadline (ctx.remaining_seconds)
    on the scheduler's clock, the database's: the child's own clock, this
    host's, is shifted by the scheduler's offset."""
    offset = timedelta(seconds=-40)
    from django.utils import timezone

    now = timezone.now() + offset
    ctx = RunContext(
        run_id=1,
        fire_id="f",
        attempt=1,
        scheduled_at=now,
        deadline=now + timedelta(seconds=60),
        properties={},
        clock=Clock(offset=offset),
    )
    child = JobContext(**context_from(payload_of(ctx)))
    assert 55 < child.remaining_seconds <= 60


@pytest.mark.postgres
def test_a_run_another_node_queued_is_claimed_at_once_however_far_this_nodes_estimate_lags(
    postgres_database, make_job, make_scheduler
):
    """Each node's estimate of the database's clock lags it by up to a round
    trip, by its own amount: the claim judges a queued run due by the
    database's clock itself, so a run the leader queued as due now is not
    left waiting for a node whose estimate lags more than the leader's."""
    from django.utils import timezone

    from jobs.core.dbclock import database_now

    run = Run.objects.create(
        job=make_job(),
        scheduled_at=T0,
        run_after=database_now(),
        trigger=Run.Trigger.SCHEDULE,
        status=Run.Status.QUEUED,
    )
    lagging = make_scheduler(
        worker_id="node-b", clustered=True, clock=lambda: timezone.now() - timedelta(seconds=1)
    )
    assert lagging.claim_queued(lagging.clock()) is True
    claimed = Run.objects.get(pk=run.pk)
    assert claimed.worker_id == "node-b"
    # It starts by the clock that found it due, not before its run_after by
    # the node's lagging estimate.
    assert claimed.started_at == claimed.heartbeat_at >= claimed.run_after
    assert lagging.pool.flights[run.pk].started_at == claimed.started_at


@pytest.mark.postgres
def test_runs_queued_from_the_web_process_go_by_the_databases_clock(postgres_database, make_job, staff_api):
    """A web host's clock an hour ahead (the database's untouched): a run
    now, a task and a saved job's next fire still go by the database's
    clock, or the scheduler nodes would hold them an hour."""
    from jobs import services
    from jobs.core.dbclock import database_now

    job = make_job(schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=60)
    before = database_now()
    with time_machine.travel(before + timedelta(hours=1), tick=False):
        run, _created = services.run_now(job=job)
        task = tasks.enqueue("demo.echo", key="k")
        job.interval_seconds = 120
        saved, _changed = services.save_job_if_changed(job=job)
        api_task = staff_api.post("/api/tasks", {"handler": "demo.echo", "key": "api"})
    after = database_now()
    assert before <= run.run_after == run.scheduled_at <= after
    assert before <= task.run_after <= after
    assert before + timedelta(seconds=120) <= saved.next_fire_at <= after + timedelta(seconds=120)
    assert api_task.status_code == 201, api_task.content
    assert before <= Run.objects.get(task_key="api").run_after <= after


# -- a wall clock stepped back stalls no step done every so often ----------------------------

BACK = timedelta(hours=1)  # a host's clock set back (NTP stepping it, a VM restored)


def test_a_clock_stepped_back_an_hour_does_not_stall_the_sweep(make_job):
    recorder = Recorder(worker_id="node-a", cap=1000)
    sweep = maintenance.Sweep(worker_id="node-a", recorder=recorder, misfire_threshold=timedelta(seconds=60))
    sweep.step(T0, executing=())
    stale = Run.objects.create(
        job=make_job(),
        scheduled_at=T0 - 3 * BACK,
        trigger="schedule",
        status="running",
        worker_id="gone",
        started_at=T0 - 3 * BACK,
        heartbeat_at=T0 - 2 * BACK,
    )
    sweep.step(T0 - BACK, executing=())
    assert Run.objects.get(pk=stale.pk).status == Run.Status.INTERRUPTED


def test_a_clock_stepped_back_an_hour_does_not_stall_the_run_heartbeat(make_job):
    run = Run.objects.create(
        job=make_job(), scheduled_at=T0, trigger="schedule", status="running", started_at=T0, heartbeat_at=T0
    )
    ctx = RunContext(
        run_id=run.pk, fire_id="f", attempt=1, scheduled_at=T0, deadline=T0 + BACK, properties={}
    )
    flight = Flight(
        run_id=run.pk, job_id=run.job_id, is_task=False, attempt=1, started_at=T0,
        deadline=T0 + BACK, timeout_seconds=3600, ctx=ctx,
    )  # fmt: skip
    pool = SimpleNamespace(flights={run.pk: flight})  # what the heartbeat reads of a pool
    beat = maintenance.RunHeartbeat(recorder=Recorder(worker_id="node-a", cap=1000))
    assert beat.step(T0, pool) is not None
    assert beat.step(T0 - BACK, pool) is not None
    assert Run.objects.get(pk=run.pk).heartbeat_at == T0 - BACK


def test_a_clock_stepped_back_an_hour_does_not_stall_the_node_lease_renewal(db, make_scheduler, clock):
    node = make_scheduler(clock=clock, executor="thread")
    node.start(clock())
    clock.now = T0 - BACK
    node.heartbeat(clock())
    assert cluster.current(cluster.node_lease_name("node-a"), now=clock())[0].renewed_at == T0 - BACK


def test_a_clock_stepped_back_an_hour_does_not_stall_the_leader_lease_renewal(db, make_scheduler, clock):
    node = make_scheduler(clock=clock, executor="thread", clustered=True)
    assert node.lead(T0) is True
    node.lead(T0 - BACK)
    assert cluster.current(cluster.LEADER, now=T0 - BACK)[0].renewed_at == T0 - BACK


def test_a_clock_stepped_back_an_hour_does_not_stall_the_outgoing_heartbeat():
    pings = []

    def request(*args, **kwargs):
        pings.append(args)
        return SimpleNamespace(status=200)

    pinger = HeartbeatPinger("http://127.0.0.1:9/ping", request=request)
    assert pinger.step(T0) is True
    assert pinger.wait(5)
    assert pinger.step(T0 - BACK) is True
    assert pinger.wait(5) and len(pings) == 2


def test_a_clock_stepped_back_an_hour_does_not_stall_the_schedule_check(db, clock):
    planner = Planner(
        worker_id="node-a", clustered=False, misfire_threshold=timedelta(seconds=60), clock=clock
    )
    check = ScheduleCheck(planner=planner)
    assert check.step(T0) is None, "the first step starts the count"
    assert check.step(T0 + CHECK_EVERY) is not None
    assert check.step(T0 + CHECK_EVERY - BACK) is not None


def test_a_clock_stepped_back_an_hour_does_not_stall_the_read_of_the_next_queued_run(make_job):
    pacing = NextQueued(every=POLL)
    assert pacing.get(T0) is None
    Run.objects.create(job=make_job(), scheduled_at=T0, trigger="retry", status="queued", run_after=T0)
    assert pacing.get(T0 - BACK) == T0


def test_a_clock_stepped_back_an_hour_does_not_stall_the_outbox_read(db, monkeypatch):
    sender = AlertSender(read_every=timedelta(seconds=1))
    reads = []
    monkeypatch.setattr(sender, "next_wakeup", lambda now: reads.append(now))
    sender.next_due(T0)
    sender.next_due(T0 - BACK)
    assert reads == [T0, T0 - BACK]


def test_a_clock_stepped_back_an_hour_does_not_stall_the_alert_watch(db, monkeypatch):
    looked = []
    monkeypatch.setattr(alerts, "check_late", lambda now: looked.append(now) or 0)
    monkeypatch.setattr(alerts, "check_long_running", lambda now: 0)
    watch = AlertWatch()
    watch.step(T0)
    watch.step(T0 - BACK)
    assert looked == [T0, T0 - BACK]
