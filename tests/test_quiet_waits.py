"""Quiet waits (ProcessPool.wait's `quiet`, Pending.quiet): while the loop
sleeps towards its next step, a run that ends does not wake it; its outcome
is read as the sleep ends, and the run is written as ending when its child
process says it did, not when the loop read it. A wake() still ends a quiet
wait, and the loop never sleeps quietly when something waits for a run's
end (a queued run waiting for a slot) or on a cluster."""

import multiprocessing.connection
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.engine.pending import COLLECT_WITHIN, Pending
from jobs.models import Run

pytestmark = pytest.mark.django_db


def process_scheduler(make_scheduler, *, slots=1):
    """A scheduler on the process executor (tests/fixtures/core.py's
    make_scheduler), its children started."""
    scheduler = make_scheduler(max_workers=slots, misfire_threshold=60, executor="process")
    scheduler.pool.warm()
    return scheduler


def ended_unread(scheduler, make_job):
    """A run handed to a child that has ended and said so, its outcome still
    in the pipe: (the run's id, the monotonic time by which it had ended)."""
    make_job(handler="demo.echo", properties={}, next_fire_at=timezone.now(), cron_expression="0 0 0 1 1 *")
    scheduler.plan_due(timezone.now())
    ((run_id, _flight),) = scheduler.pool.flights.items()
    (child,) = scheduler.pool._children  # looked at, not read
    assert multiprocessing.connection.wait([child.conn], timeout=10), "the child never reported"
    return run_id, time.monotonic()


def test_an_ended_run_does_not_end_a_quiet_wait_and_keeps_its_own_end(make_scheduler, make_job):
    scheduler = process_scheduler(make_scheduler)
    run_id, reported_by = ended_unread(scheduler, make_job)
    started = time.monotonic()
    outcomes = scheduler.pool.wait(5, quiet=0.3)
    waited = time.monotonic() - started
    assert waited >= 0.3, "the outcome waiting in the pipe ended the quiet part of the wait"
    assert waited < 4, "read as the quiet part ended, not at the timeout"
    (outcome,) = outcomes
    assert outcome.run_id == run_id and outcome.status == "succeeded"
    assert outcome.ended_monotonic is not None and outcome.ended_monotonic <= reported_by

    now = timezone.now()
    pending = Pending()
    pending.take(outcomes, now)
    assert outcome.ended_at <= now - timedelta(seconds=0.3), "the run's end is the child's, not the read"


def test_a_run_read_late_is_recorded_with_the_end_its_child_gave(make_scheduler, make_job):
    scheduler = process_scheduler(make_scheduler)
    run_id, reported_by = ended_unread(scheduler, make_job)
    time.sleep(0.5)
    read_at = timezone.now()
    assert scheduler.collect(scheduler.pool.wait(0), read_at)
    run = Run.objects.get(pk=run_id)
    assert run.status == Run.Status.SUCCEEDED
    assert run.finished_at <= read_at - timedelta(seconds=0.4)
    assert run.finished_at >= run.started_at
    assert run.duration_ms < 400


def test_a_wake_ends_a_quiet_wait(make_scheduler):
    scheduler = process_scheduler(make_scheduler)
    threading.Timer(0.1, scheduler.pool.wake).start()
    started = time.monotonic()
    assert scheduler.pool.wait(10, quiet=10) == []
    assert time.monotonic() - started < 5

    scheduler.pool.wake()
    scheduler.pool.refresh()  # reads the wake pipe: the next wait still returns at once
    started = time.monotonic()
    scheduler.pool.wait(10, quiet=10)
    assert time.monotonic() - started < 5


def test_without_quiet_an_ended_run_ends_the_wait(make_scheduler, make_job):
    scheduler = process_scheduler(make_scheduler)
    ended_unread(scheduler, make_job)
    started = time.monotonic()
    (outcome,) = scheduler.pool.wait(5)
    assert time.monotonic() - started < 4
    assert outcome.status == "succeeded"


def quiets_of_the_running_loop(scheduler, sleeps=3):
    """The `quiet` of the running loop's first `sleeps` sleeps (its steps'
    own reads, `wait(0)`, are not sleeps)."""
    seen = []
    wait = scheduler.pool.wait

    def spy(timeout, *, quiet=0.0):
        if sys._getframe(1).f_code.co_name == "run_forever":
            seen.append(quiet)
            scheduler.stopping = len(seen) >= sleeps
        return wait(min(timeout, 0.05), quiet=min(quiet, 0.05))

    scheduler.pool.wait = spy
    scheduler.run_forever()
    return seen


def test_the_running_loop_sleeps_quietly_on_one_node(make_scheduler):
    assert (
        quiets_of_the_running_loop(process_scheduler(make_scheduler)) == [COLLECT_WITHIN.total_seconds()] * 3
    )


def test_the_loop_reads_at_once_while_a_queued_run_waits_for_a_slot(make_scheduler, make_job):
    scheduler = process_scheduler(make_scheduler)
    for _ in range(2):
        make_job(handler="demo.sleep", properties={"seconds": 5}, next_fire_at=timezone.now())
    assert quiets_of_the_running_loop(scheduler, sleeps=2) == [0.0, 0.0]
    assert scheduler.carry.waiting_for_slots


def test_a_clustered_loop_never_sleeps_quietly():
    assert Pending().quiet(True) == 0.0
    assert Pending().quiet(False) == COLLECT_WITHIN.total_seconds()
