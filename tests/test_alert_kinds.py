"""Kinds of alert beyond the crash: failed, late, long_running (and the
config centre's default), one alert per event. In-process with a fixed clock,
then `late` and `long_running` from real scheduler processes on SQLite."""

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest

from jobs.config import set_setting
from jobs.models import Alert, AlertDelivery, Job, Run
from tests.fixtures.core import T0, drain
from tests.fixtures.processes import copy_sqlite

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def scheduler(make_scheduler, clock):
    return make_scheduler(
        worker_id="node-a", max_workers=1, clock=clock, misfire_threshold=60, clustered=False
    )


def fire(scheduler, clock, job):
    Job.objects.filter(pk=job.pk).update(next_fire_at=clock())
    scheduler.plan_due(clock())
    scheduler.claim_queued(clock())
    drain(scheduler, clock())


def kinds():
    return list(Alert.objects.order_by("id").values_list("kind", flat=True))


# -- failed --------------------------------------------------------------------------------


def test_failed_alerts_every_failed_fire_and_the_crash_once(make_job, scheduler, clock):
    job = make_job(
        handler="demo.fail",
        alert_threshold=3,
        alert_on=["crashed", "failed"],
        cron_expression="*/10 * * * * *",
    )
    for _ in range(3):
        fire(scheduler, clock, job)
        clock.advance(seconds=10)
    assert kinds() == ["failed", "failed", "crash"], "the crashing fire is one alert, the crash"
    first = Alert.objects.filter(kind="failed").order_by("id").first()
    assert first.event == f"failed:{first.run_id}"
    assert "failed" in first.subject and job.name in first.body_text


def test_a_failed_fire_retried_alerts_once_after_its_last_attempt(make_job, scheduler, clock):
    job = make_job(
        handler="demo.fail", alert_threshold=0, max_retries=1, retry_interval_seconds=1, alert_on=["failed"]
    )
    fire(scheduler, clock, job)
    assert kinds() == [], "a retry is queued: the fire has not failed yet"
    scheduler.claim_queued(clock.advance(seconds=2))
    drain(scheduler, clock())
    assert kinds() == ["failed"]


def test_the_kinds_default_from_the_config_centre(make_job, scheduler, clock):
    set_setting("sys.job.alertOn", "failed, crashed")
    job = make_job(handler="demo.fail", alert_threshold=0)
    fire(scheduler, clock, job)
    assert kinds() == ["failed"]


def test_a_job_that_leaves_out_crashed_gets_no_crash_alert(make_job, scheduler, clock):
    job = make_job(handler="demo.fail", alert_threshold=1, alert_on=["failed"])
    fire(scheduler, clock, job)
    job.refresh_from_db()
    assert job.state == Job.State.CRASHED
    assert kinds() == []


def test_recovered_from_the_kinds_list(make_job, scheduler, clock):
    job = make_job(handler="demo.fail", alert_threshold=1, alert_on=["crashed", "recovered"])
    fire(scheduler, clock, job)
    Job.objects.filter(pk=job.pk).update(state=Job.State.ENABLED, handler="demo.echo")
    clock.advance(seconds=60)
    fire(scheduler, clock, job)
    assert kinds() == ["crash", "recovered"]


# -- late ----------------------------------------------------------------------------------


def test_a_fire_missed_while_the_scheduler_was_down_is_one_late_alert_at_start_up(
    make_scheduler, make_job, clock
):
    job = make_job(next_fire_at=T0, alert_on=["late"], late_after_seconds=60)
    clock.now = T0 + timedelta(minutes=10)  # the scheduler comes back ten minutes later
    scheduler = make_scheduler(worker_id="node-a", clock=clock, misfire_threshold=60, clustered=False)
    scheduler.start(clock())
    scheduler.run_pass(clock())
    (alert,) = Alert.objects.all()
    assert (alert.kind, alert.event) == ("late", f"late:{job.pk}:{T0.isoformat()}")
    assert "12:00:00" in alert.body_text and "10 min 0 s late" in alert.body_text
    for _ in range(3):
        scheduler.run_pass(clock.advance(seconds=10))
    assert Alert.objects.count() == 1, "one alert per late fire"
    assert Run.objects.filter(job=job, skip_reason="misfire").exists(), "the fire was still handled"


def test_not_late_before_its_threshold(make_scheduler, make_job, clock):
    make_job(next_fire_at=T0, alert_on=["late"], late_after_seconds=120)
    scheduler = make_scheduler(worker_id="node-a", clock=clock, misfire_threshold=600, clustered=False)
    scheduler.alert_watch.step(T0 + timedelta(seconds=119))
    assert Alert.objects.count() == 0
    scheduler.alert_watch.step(T0 + timedelta(seconds=125))  # the watch looks every 5 s
    assert kinds() == ["late"]


def test_a_fire_queued_without_a_free_slot_is_late(make_job, scheduler, clock, gate_handler):
    make_job(next_fire_at=T0, handler="test.gate", timeout_seconds=3600)
    waiting = make_job(next_fire_at=T0, alert_on=["late"], late_after_seconds=30)
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    (queued,) = Run.objects.filter(job=waiting, status="queued")
    assert not scheduler.alert_watch.step(clock.advance(seconds=20))
    assert scheduler.alert_watch.step(clock.advance(seconds=20))
    (alert,) = Alert.objects.all()
    assert alert.run_id == queued.pk and alert.kind == "late"
    assert not scheduler.alert_watch.step(clock.advance(seconds=20))


def test_a_job_that_did_not_ask_for_late_gets_none(make_scheduler, make_job, clock):
    make_job(next_fire_at=T0)
    make_scheduler(worker_id="node-a", clock=clock, clustered=False).alert_watch.step(T0 + timedelta(hours=1))
    assert Alert.objects.count() == 0


# -- long running --------------------------------------------------------------------------


def test_a_long_run_is_one_alert_before_its_timeout(make_job, scheduler, clock, gate_handler):
    job = make_job(
        next_fire_at=T0,
        handler="test.gate",
        timeout_seconds=60,
        long_running_seconds=20,
        alert_on=["long_running"],
    )
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    (run,) = Run.objects.filter(job=job, status="running")
    assert not scheduler.alert_watch.step(T0 + timedelta(seconds=19))
    assert scheduler.alert_watch.step(T0 + timedelta(seconds=25))
    assert not scheduler.alert_watch.step(T0 + timedelta(seconds=40))
    (alert,) = Alert.objects.all()
    assert (alert.kind, alert.run_id, alert.event) == ("long_running", run.pk, f"long_running:{run.pk}")
    assert "running for 25 s" in alert.subject


def test_long_running_defaults_to_half_the_timeout(make_job, scheduler, clock, gate_handler):
    make_job(next_fire_at=T0, handler="test.gate", timeout_seconds=100, alert_on=["long_running"])
    scheduler.plan_due(T0)
    scheduler.claim_queued(T0)
    assert not scheduler.alert_watch.step(T0 + timedelta(seconds=49))
    assert scheduler.alert_watch.step(T0 + timedelta(seconds=55))


def test_late_alerts_go_to_the_channels_too(
    make_scheduler, make_job, clock, webhook_server, loopback_fence_open
):
    from jobs import channels
    from jobs.models import AlertChannel

    AlertChannel.objects.create(name="hook", url=channels.encrypt(webhook_server.url()))
    make_job(next_fire_at=T0, alert_on=["late"], late_after_seconds=60, alert_channels=["hook"])
    make_scheduler(worker_id="node-a", clock=clock, clustered=False).alert_watch.step(
        T0 + timedelta(minutes=5)
    )
    (delivery,) = AlertDelivery.objects.all()
    assert delivery.alert.kind == "late"


# -- validation ----------------------------------------------------------------------------

JOB = {"name": "k", "handler": "demo.echo", "cron_expression": "0 * * * * *"}


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"alert_on": ["nope"]}, "alert_on"),
        ({"alert_on": "late"}, "alert_on"),
        ({"alert_on": [1]}, "alert_on"),
        ({"late_after_seconds": 5}, "late_after_seconds"),
        ({"late_after_seconds": -1}, "late_after_seconds"),
        ({"late_after_seconds": "x"}, "late_after_seconds"),
        ({"long_running_seconds": 600}, "long_running_seconds"),  # not before the 600 s timeout
        ({"long_running_seconds": 10**9}, "long_running_seconds"),
    ],
)
def test_bad_kinds_and_thresholds_are_refused(db, staff_api, extra, field):
    response = staff_api.post("/api/jobs", {**JOB, **extra})
    assert response.status_code == 400, response.content
    assert any(e["field"] == field for e in response.json()["errors"]), response.json()
    assert not Job.objects.filter(name="k").exists()


def test_kinds_and_thresholds_round_trip_through_the_api(db, staff_api):
    response = staff_api.post(
        "/api/jobs",
        {**JOB, "alert_on": ["late", "failed"], "late_after_seconds": 90, "long_running_seconds": 300},
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["alert_on"] == ["failed", "late"]
    assert (body["late_after_seconds"], body["long_running_seconds"]) == (90, 300)


# -- real scheduler processes --------------------------------------------------------------


def _site(tmp_path, database_url: str) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("JOBS_", "DATABASE_URL"))}
    env = {
        **base,
        "DATABASE_URL": database_url,
        "JOBS_WORKER_ID": "kinds",
        "JOBS_SHUTDOWN_GRACE": "2",
        "PYTHONUNBUFFERED": "1",
    }
    return env


def _shell(env, code: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-v", "0", "-c", textwrap.dedent(code)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_late_and_long_running_alerts_from_a_real_scheduler_process(tmp_path, request, database):
    if database == "postgresql":
        template = request.getfixturevalue("migrated_postgres")
        url = request.getfixturevalue("postgres_server").create_database("alert_kinds", template=template)
    else:
        url = copy_sqlite(request.getfixturevalue("migrated_sqlite"), tmp_path / "kinds.sqlite3")
    env = _site(tmp_path, url)
    # A fire due five minutes ago (as if the scheduler had been down), and a run that takes 60 s.
    _shell(
        env,
        """
        from datetime import timedelta
        from django.utils import timezone
        from jobs.models import Job
        Job.objects.create(name="missed", handler="demo.echo", cron_expression="0 0 * * * *",
                           alert_on=["late"], late_after_seconds=60,
                           next_fire_at=timezone.now() - timedelta(minutes=5))
        Job.objects.create(name="slow", handler="demo.sleep", properties={"seconds": "60"},
                           schedule_type="interval", interval_seconds=3600, timeout_seconds=120,
                           alert_on=["long_running"], long_running_seconds=10,
                           next_fire_at=timezone.now())
    """,
    )
    with open(tmp_path / "scheduler.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runscheduler"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        found = {}
        until = time.monotonic() + 60
        while time.monotonic() < until:
            found = json.loads(
                _shell(
                    env,
                    """
                import json
                from jobs.models import Alert
                print(json.dumps(sorted([a.job.name, a.kind] for a in Alert.objects.all())))
            """,
                )
            )
            if len(found) >= 2:
                break
            time.sleep(2)
    finally:
        proc.terminate()
        proc.wait(30)
    assert found == [["missed", "late"], ["slow", "long_running"]], (tmp_path / "scheduler.log").read_text()[
        -3000:
    ]
