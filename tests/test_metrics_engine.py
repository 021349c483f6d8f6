"""The scheduler's Prometheus metrics, driven with a fixed clock: what a pass
plans, starts and ends is counted with the job's namespace (and the job,
with JOBS_METRICS_PER_JOB), and the scrape-time gauges read the database.
The real process, scraped by a real Prometheus, is test_metrics_process.py."""

import urllib.error
import urllib.request
from datetime import timedelta

import pytest
from django.db import DatabaseError

from jobs.engine import schedulecheck
from jobs.engine.metrics import OFF, EngineMetrics, serve
from jobs.models import Run
from tests.fixtures.core import T0, drain
from tests.fixtures.processes import free_port

pytestmark = pytest.mark.django_db


def value(metrics, name, **labels):
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_fires_planned_started_skipped_and_ended_are_counted_by_namespace(make_scheduler, make_job, clock):
    metrics = EngineMetrics(per_job=False)
    scheduler = make_scheduler(max_workers=4, clock=clock, misfire_threshold=60, metrics=metrics)
    make_job(next_fire_at=T0, namespace="billing")
    make_job(next_fire_at=T0, namespace="billing")
    make_job(next_fire_at=T0 - timedelta(hours=1), namespace="ops")  # a misfire, policy skip
    clock.now = T0 + timedelta(milliseconds=30)
    scheduler.run_pass(T0)
    drain(scheduler, clock())

    assert value(metrics, "cronboard_scheduler_fires_planned_total", namespace="billing") == 2
    assert value(metrics, "cronboard_scheduler_fires_started_total", namespace="billing") == 2
    assert value(metrics, "cronboard_scheduler_fires_skipped_total", namespace="ops", reason="misfire") == 1
    finished = value(
        metrics,
        "cronboard_scheduler_runs_finished_total",
        namespace="billing",
        status="succeeded",
        kind="python",
    )
    assert finished == Run.objects.filter(status="succeeded", job__namespace="billing").count() == 2
    assert value(metrics, "cronboard_scheduler_run_lateness_seconds_count", namespace="billing") == 2
    # Started on the clock's time, 30 ms after the fire's: in the 50 ms bucket, not the 25 ms one.
    assert (
        value(metrics, "cronboard_scheduler_run_lateness_seconds_bucket", namespace="billing", le="0.025")
        == 0
    )
    assert (
        value(metrics, "cronboard_scheduler_run_lateness_seconds_bucket", namespace="billing", le="0.05") == 2
    )
    assert (
        value(metrics, "cronboard_scheduler_run_duration_seconds_count", namespace="billing", kind="python")
        == 2
    )
    assert value(metrics, "cronboard_scheduler_step_duration_seconds_count", step="plan_due") == 1
    assert value(metrics, "cronboard_scheduler_leader") == 1
    assert value(metrics, "cronboard_scheduler_live_runs") == 3, "the pass started three runs"


def test_the_job_label_is_there_only_when_asked_for_and_never_on_buckets(make_scheduler, make_job, clock):
    for per_job in (False, True):
        metrics = EngineMetrics(per_job=per_job)
        scheduler = make_scheduler(max_workers=2, clock=clock, misfire_threshold=60, metrics=metrics)
        namespace = f"ops-{per_job}"  # the other pass's job fires again, in its own
        job = make_job(next_fire_at=clock(), namespace=namespace)
        scheduler.run_pass(clock())
        drain(scheduler, clock())
        labels = {"namespace": namespace, **({"job": job.name} if per_job else {})}
        assert value(metrics, "cronboard_scheduler_fires_planned_total", **labels) == 1
        sample_labels = {
            tuple(sorted(s.labels))
            for family in metrics.registry.collect()
            if family.name == "cronboard_scheduler_fires_planned"
            for s in family.samples
        }
        assert sample_labels == {("job", "namespace") if per_job else ("namespace",)}
        # The histograms' buckets stay by namespace; per job, a count and a sum.
        assert value(metrics, "cronboard_scheduler_run_lateness_seconds_count", namespace=namespace) == 1
        per_job_count = metrics.registry.get_sample_value(
            "cronboard_scheduler_job_run_lateness_seconds_count", {"namespace": namespace, "job": job.name}
        )
        assert per_job_count == (1 if per_job else None)
        clock.advance(seconds=60)


def test_a_database_error_is_counted_by_the_step_it_stopped(make_scheduler, clock, monkeypatch):
    metrics = EngineMetrics(per_job=False)
    scheduler = make_scheduler(max_workers=1, clock=clock, metrics=metrics)

    def broken(now):
        raise DatabaseError("the disk is full")

    monkeypatch.setattr(scheduler, "sweep", broken)
    with pytest.raises(DatabaseError):
        scheduler.run_pass(T0)
    assert value(metrics, "cronboard_scheduler_database_errors_total", step="sweep") == 1
    assert value(metrics, "cronboard_scheduler_database_errors_total", step="collect") == 0


def test_queue_depth_and_outbox_backlog_are_read_at_scrape_time(make_job, settings):
    metrics = EngineMetrics(per_job=False)
    for _ in range(2):
        Run.objects.create(job=make_job(), scheduled_at=T0, trigger="manual", status="queued", run_after=T0)
    Run.objects.create(
        job=make_job(),
        scheduled_at=T0,
        trigger="manual",
        status="queued",
        run_after=T0 + timedelta(days=3650),
    )
    assert value(metrics, "cronboard_scheduler_queue_depth") == 2
    assert value(metrics, "cronboard_scheduler_outbox_backlog", type="email") == 0


def test_off_touches_nothing(make_scheduler, make_job, clock):
    scheduler = make_scheduler(max_workers=1, clock=clock, metrics=OFF)
    make_job(next_fire_at=T0)
    scheduler.run_pass(T0)
    drain(scheduler, clock())
    assert scheduler.metrics is OFF


@pytest.mark.parametrize(
    ("token", "allow", "header", "status"),
    [
        ("", [], None, 403),  # nothing set: nobody
        ("a-token-of-16-chars", [], None, 401),
        ("a-token-of-16-chars", [], "Bearer wrong-token-000000", 401),
        ("a-token-of-16-chars", [], "Bearer a-token-of-16-chars", 200),
        ("", ["10.0.0.0/8"], None, 403),
        ("", ["127.0.0.0/8"], None, 200),
    ],
)
def test_the_scheduler_serves_metrics_only_to_a_token_or_an_allowed_address(
    settings, token, allow, header, status
):
    unused_port = free_port()
    settings.JOBS_METRICS_TOKEN, settings.JOBS_METRICS_ALLOW = token, allow
    metrics = EngineMetrics(per_job=False)
    server = serve(metrics, f"127.0.0.1:{unused_port}")
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{unused_port}/metrics")
        if header:
            request.add_header("Authorization", header)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                got, body = response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            got, body = exc.code, exc.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert got == status
    assert ("process_cpu_seconds_total" in body) == (status == 200), "refused: no figures"


def test_a_fire_the_schedule_check_finds_stuck_is_counted_as_a_skipped_misfire(
    make_scheduler, make_job, clock
):
    """The schedule check records a fire nobody claimed as a skipped misfire:
    the metric counts it like a skip the planner wrote."""
    metrics = EngineMetrics(per_job=False)
    scheduler = make_scheduler(clock=clock, metrics=metrics)
    make_job(
        next_fire_at=T0, namespace="ops", schedule_type="interval", interval_seconds=60, cron_expression=""
    )
    scheduler.check_schedules(T0)  # the first step starts the count
    checked = scheduler.check_schedules(T0 + schedulecheck.CHECK_EVERY)

    assert checked.counts()["stuck"] == 1
    assert value(metrics, "cronboard_scheduler_fires_skipped_total", namespace="ops", reason="misfire") == 1


def test_a_step_counts_its_own_cpu_time_and_statements_and_a_step_inside_it_its_own(db):
    import time as _time

    from django.db import connections

    from jobs.models import Job

    metrics = EngineMetrics(per_job=False, step_cpu=True)
    metrics.count_statements(connections["default"])

    def burn(seconds):
        until = _time.thread_time() + seconds
        while _time.thread_time() < until:
            pass

    with metrics.step("outer"):
        Job.objects.count()
        with metrics.step("inner"):
            Job.objects.count()
            Job.objects.exists()
            burn(0.05)
        Job.objects.count()

    assert value(metrics, "cronboard_scheduler_step_statements_total", step="outer") == 2
    assert value(metrics, "cronboard_scheduler_step_statements_total", step="inner") == 2
    inner = value(metrics, "cronboard_scheduler_step_cpu_seconds_total", step="inner")
    outer = value(metrics, "cronboard_scheduler_step_cpu_seconds_total", step="outer")
    assert inner >= 0.05
    assert 0 < outer < 0.05, "the inner step's CPU is not counted twice"


def test_steps_run_back_to_back_count_the_threads_cpu_once(db):
    """A step that starts right after another takes the other's last CPU
    reading as its start (NEAR_SECONDS): nothing is counted twice, and each
    step keeps what it spent."""
    import time as _time

    metrics = EngineMetrics(per_job=False, step_cpu=True)

    def burn(seconds):
        until = _time.thread_time() + seconds
        while _time.thread_time() < until:
            pass

    before = _time.thread_time()
    for _ in range(3):
        for name, seconds in (("a", 0.01), ("b", 0.0), ("c", 0.02)):
            with metrics.step(name):
                burn(seconds)
    spent = _time.thread_time() - before

    steps = {name: value(metrics, "cronboard_scheduler_step_cpu_seconds_total", step=name) for name in "abc"}
    assert steps["a"] >= 0.03 and steps["c"] >= 0.06
    assert sum(steps.values()) <= spent
    # Its three timings are there; how long each took is the machine's (a
    # step that did nothing may still be preempted), so no bucket is asserted.
    assert value(metrics, "cronboard_scheduler_step_duration_seconds_count", step="b") == 3


def test_step_cpu_is_counted_only_when_asked_for(db, monkeypatch):
    """Reading the thread's CPU time is a system call: without
    JOBS_METRICS_STEP_CPU no step asks for it, and the counter is not served."""
    import time as _time

    metrics = EngineMetrics(per_job=False)
    monkeypatch.setattr(_time, "thread_time", lambda: pytest.fail("the CPU time was read"))
    with metrics.step("outer"), metrics.step("inner"):
        pass
    monkeypatch.undo()
    assert value(metrics, "cronboard_scheduler_step_duration_seconds_count", step="inner") == 1
    assert (
        metrics.registry.get_sample_value("cronboard_scheduler_step_cpu_seconds_total", {"step": "inner"})
        is None
    )
    assert (
        metrics.registry.get_sample_value("cronboard_scheduler_step_statements_total", {"step": "inner"}) == 0
    )


def test_a_pass_times_the_hand_off_apart_from_planning(make_scheduler, make_job, clock):
    metrics = EngineMetrics(per_job=False, step_cpu=True)
    scheduler = make_scheduler(max_workers=2, clock=clock, metrics=metrics)
    make_job(next_fire_at=T0)
    scheduler.run_pass(T0)
    drain(scheduler, clock())

    assert value(metrics, "cronboard_scheduler_step_duration_seconds_count", step="hand_off") == 1
    assert value(metrics, "cronboard_scheduler_step_statements_total", step="hand_off") == 0
    assert value(metrics, "cronboard_scheduler_step_statements_total", step="plan_due") >= 3, (
        "the due query, the claim of the fire, the insert of its run"
    )
    assert value(metrics, "cronboard_scheduler_step_cpu_seconds_total", step="plan_due") > 0
