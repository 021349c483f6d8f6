"""The loop: one scheduler process's sequence of steps, its sleep, its
shutdown.

`Scheduler` builds the steps for one node and sequences them (the order of
a pass and what each step does: docs/architecture.md, "The engine"). It is
what runscheduler runs and what the tests drive, one step at a time on a
fixed clock. The steps share nothing but their arguments and return values;
the little that one pass leaves for the next is the loop's, in the open:

- `carry` (a `Carry`): the runs planning wrote queued, which the claim
  starts from memory while younger than POLL (`Starter.remember_for`), and
  whether the last claim left runs waiting for slots (then fires are not
  written already running, and a finished run wakes the loop at once);
- `pending` (a `Pending`): outcomes taken from the pool and not written yet
  (kept across a database error), written in batches, at most
  COLLECT_WITHIN after they were taken, sooner when a step needs their runs
  ended in the database (`settle`, jobs.engine.pending);
- `next_queued` (a `NextQueued`): when a queued run next becomes due;
- the starter's held runs: fires planned ahead (`plan_ahead`), each
  waiting, with its slot, for its time (`hand_off_held`; in a child, on the process pool);
- `claims_uncertain`, a local of `run_forever`: a database error may have
  hidden a committed claim (`maintenance.requeue_unstarted_claims`).

What a write did (an alert written, a run queued, runs finished) comes
back as a `Recorded`: `_took` hands it to whoever paces on it, and the runs
it finished go back to the pool (`Pool.release`); the outbox paces itself
(`AlertSender.step_if_due`, `next_due`). The pool reads what its workers
sent only when the loop asks (`wait`, `refresh`).

Time: every step judges by `clock` (jobs.engine.clock), measured before
start and at every node lease renewal (`check_clock`); a node whose clock
is too far off plans and claims nothing until it comes back (`skew`).

No database transaction is open while a handler runs: handlers never write
run bookkeeping; the loop does.
"""

import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from jobs.core.wakeup import wake_schedulers
from jobs.engine import admission, maintenance, planning, schedulecheck
from jobs.engine import metrics as engine_metrics
from jobs.engine.alertwatch import AlertWatch
from jobs.engine.bulk import database
from jobs.engine.clock import Clock, Skew
from jobs.engine.execution.executors import make_pool
from jobs.engine.execution.pool import Flight, Outcome
from jobs.engine.heartbeat_ping import HeartbeatPinger
from jobs.engine.leadership import Leadership
from jobs.engine.listener import WakeListener
from jobs.engine.metrics import Off
from jobs.engine.outbox import AlertSender
from jobs.engine.outcomes import Recorded, Recorder
from jobs.engine.pending import Pending
from jobs.engine.rollup import Rollup
from jobs.engine.starting import Claimed, NextQueued, Starter
from jobs.models import Run

log = logging.getLogger("cronboard.scheduler")

POLL = timedelta(seconds=1)  # edits by the web process are noticed within this


@dataclass(frozen=True)
class Carry:
    """What one pass's planning and claim leave for the next."""

    known: dict[int, Run] = field(default_factory=dict)  # runs planning wrote, not claimed yet
    waiting_for_slots: bool = False  # the last claim filled every free slot, with runs still queued


@dataclass(frozen=True)
class Pass:
    """What one pass did."""

    did: bool
    backlog: bool = False  # a step stopped at its batch size: more is due right away
    next_fire: planning.NextFire | None = None  # what planning read of the next fire, if it did

    def __bool__(self) -> bool:
        return self.did


class Scheduler:
    def __init__(
        self,
        *,
        worker_id: str | None = None,
        max_workers: int | None = None,
        clock: Callable[[], datetime] = timezone.now,
        misfire_threshold: int | None = None,
        max_message_chars: int | None = None,
        clustered: bool | None = None,
        executor: str | None = None,
        metrics: Off | None = None,
    ):
        self.worker_id = worker_id or settings.JOBS_WORKER_ID
        # Prometheus (JOBS_METRICS_BIND): what each pass did; `OFF` does nothing.
        self.metrics = engine_metrics.for_settings() if metrics is None else metrics
        self.metrics.count_statements(database())
        # Several nodes may share a PostgreSQL database; SQLite is single-node.
        self.clustered = connection.vendor == "postgresql" if clustered is None else clustered
        # The one clock every step judges by: the database's on PostgreSQL,
        # this process's (`clock`) corrected by the offset measured at every
        # node lease renewal (`check_clock`); `clock` itself on SQLite.
        self.clock = Clock.for_connection(clock)
        self.skew = Skew()  # how far `clock` is from the database's, and whether we refuse to work
        cap = settings.JOBS_MAX_MESSAGE_CHARS if max_message_chars is None else max_message_chars
        # Threads or child processes (JOBS_EXECUTOR), see jobs.engine.execution.
        self.executor = executor or settings.JOBS_EXECUTOR
        self.pool = make_pool(
            max_workers or settings.JOBS_MAX_CONCURRENT_RUNS, executor=self.executor, log_keep=cap
        )
        # The steps.
        self.leadership = Leadership(self.worker_id, clustered=self.clustered)
        self.planner = planning.Planner(
            worker_id=self.worker_id,
            clustered=self.clustered,
            misfire_threshold=timedelta(
                seconds=settings.JOBS_MISFIRE_THRESHOLD if misfire_threshold is None else misfire_threshold
            ),
            clock=self.clock,
        )
        self.schedule_check = schedulecheck.ScheduleCheck(planner=self.planner)
        self.recorder = Recorder(worker_id=self.worker_id, cap=cap)
        self.starter = Starter(
            worker_id=self.worker_id,
            clock=self.clock,
            pool=self.pool,
            recorder=self.recorder,
            log_keep=cap,
            remember_for=POLL,
            step=self.metrics.step,
        )
        self.admission = admission.Admission(every=POLL)
        self.run_heartbeat = maintenance.RunHeartbeat(recorder=self.recorder)
        self.sweeper = maintenance.Sweep(
            worker_id=self.worker_id, recorder=self.recorder, misfire_threshold=self.planner.misfire_threshold
        )
        self.rollup = Rollup()
        self.alert_watch = AlertWatch()  # late and long-running alerts
        self.alert_sender = AlertSender(wake=self.pool.wake, read_every=POLL, metrics=self.metrics)
        self.heartbeat_pinger = HeartbeatPinger()  # CRONBOARD_HEARTBEAT_URL, if set
        self.listener: WakeListener | None = None
        # What crosses passes (see the module's docstring).
        self.carry = Carry()
        self.pending = Pending()
        self.next_queued = NextQueued(every=POLL)
        # How long before its time the running loop plans a fire (one node: Planner.plan_due).
        self.plan_ahead = timedelta(milliseconds=0 if self.clustered else settings.JOBS_PLAN_AHEAD_MS)
        self.stopping = False
        self.draining = False

    # -- start-up ------------------------------------------------------------------

    def start(self, now: datetime) -> None:
        self.pool.warm()  # the run processes, before the first fire needs one
        self.leadership.started(now)
        self.leadership.tune_session()
        self.renew_node_lease(now)
        self.recover(now)
        self.schedule_unplanned(now)

    def recover(self, now: datetime) -> int:
        """Runs this worker left `running` are interrupted; how many."""
        recorded = maintenance.recover(
            now, worker_id=self.worker_id, executing=self.pool.flights, recorder=self.recorder
        )
        return self._took(recorded).runs

    def schedule_unplanned(self, now: datetime) -> bool:
        return schedulecheck.schedule_unplanned(now)

    # -- the steps -----------------------------------------------------------------

    def collect(self, outcomes: list[Outcome], now: datetime) -> bool:
        """Write finished runs back (`outcomes` and those waiting). If the
        write fails for the connection, the outcomes are kept and written
        again on the next pass."""
        self.pending.take(outcomes, now)
        if not self.pending:
            return False
        recorded = self._took(self.recorder.write_finished(self.pending.outcomes, self.pool.flights, now))
        self.pool.release(recorded.finished)
        self.pending.written()
        return True

    def outcomes_due(self, now: datetime) -> bool:
        """Whether the running loop writes the waiting outcomes now: the first
        has waited COLLECT_WITHIN; one is of a job that fires again within
        that; a queued run waits for a slot; or waiting runs are left that a
        run's end may let through (admission, this pass)."""
        return bool(self.pending) and (
            self.pending.due(now)
            or self.carry.waiting_for_slots
            or self.admission.left
            or self.pending.firing(self.pool.flights, now)
        )

    def settle(self, ended: Callable[[Flight], bool], now: datetime) -> bool:
        """Before a step that reads whether a run is live: write the waiting
        outcomes now if one is of a run `ended` picks. Whether it wrote them."""
        return self.pending.of(self.pool.flights, ended) and self.collect([], now)

    def enforce_deadlines(self, now: datetime) -> bool:
        # A run that ended before its deadline is not timed out for its
        # outcome's write waiting.
        self.settle(lambda flight: flight.deadline <= now, now)
        return self._took(self.recorder.enforce_deadlines(self.pool, now)).runs > 0

    def heartbeat(self, now: datetime) -> bool:
        """Every few seconds: touch running runs, flush their logs, act on
        cancel requests; every lease-renew period measure this node's clock
        and renew its lease."""
        now = self.renew_node_if_due(now)
        if self.pending and self.run_heartbeat.cadence.due(now):
            # A run that ended is not cancelled for its outcome's write waiting.
            self.collect([], now)
        beat = self.run_heartbeat.step(now, self.pool)
        if beat is None:
            return False
        self._took(beat)
        return True

    def renew_node_if_due(self, now: datetime) -> datetime:
        """Every lease-renew period: measure this node's clock and renew its
        lease. Returns the time to judge by from here on: the clock read
        again once a measurement may have moved it."""
        if not self.leadership.node_renew_due(now):
            return now
        self.check_clock()
        now = self.clock()
        self.renew_node_lease(now)
        return now

    def renew_node_lease(self, now: datetime) -> None:
        try:
            renewed = self.leadership.renew_node(now, running=len(self.pool.flights), clock=self.skew.info())
        except DatabaseError:
            self.metrics.node_lease(False)
            raise
        self.metrics.node_lease(renewed)
        if not renewed:
            self.request_stop()  # another process owns our worker id now

    def check_clock(self) -> None:
        """Measure this node's clock against the database's (before start and at
        every node lease renewal; not on SQLite) and judge it (clock.Skew: past
        JOBS_MAX_CLOCK_SKEW warn; past REFUSE_FACTOR times it hand back the leader
        lease and plan and claim nothing, runs in flight going on, until back)."""
        judged = self.skew.judge(self.clock.measure())
        self.skew.tell(judged)
        if judged.started_refusing:
            self.leadership.step_down()

    def sweep(self, now: datetime) -> bool:
        return self._took(self.sweeper.step(now, executing=self.pool.flights)).written > 0

    def send_alerts(self, now: datetime) -> bool:
        """Write back finished sends; hand the next due alert to the sender
        thread (when there is one: the outbox paces itself)."""
        return self.alert_sender.step_if_due(now)

    def lead(self, now: datetime) -> bool:
        return False if self.draining or self.skew.refusing else self.leadership.lead(now)

    def plan_due(self, now: datetime) -> bool:
        return self._plan(now).did

    def check_schedules(self, now: datetime) -> schedulecheck.Checked | None:
        """Every CHECK_EVERY, on the node that plans: set jobs that are off
        their schedule back on it (schedulecheck.ScheduleCheck). run_pass skips it
        while planning has a backlog: fires it has not reached are not stuck."""
        if not self.leadership.is_leader():
            return None
        checked = self.schedule_check.step(now)
        if checked is not None:
            self.metrics.planned(checked.skipped)
        return checked

    def roll_up(self, now: datetime) -> bool:
        """On the node that plans: finished runs into the trends' rollup
        (jobs.engine.rollup); skipped, like the schedule check, while
        planning has a backlog."""
        if not self.leadership.is_leader():
            return False
        return self.rollup.step(now)

    def claim_queued(self, now: datetime) -> bool:
        return self._claim(now).did

    def admit_waiting(self, now: datetime, *, wrote_waiting: bool = True) -> bool:
        """Let waiting runs through whose job, pool and backfill have room
        (jobs.engine.admission); the claim that follows starts them.
        `wrote_waiting`: planning wrote waiting runs this pass (a test's
        direct call asks at once)."""
        if self.draining or self.stopping or self.skew.refusing:
            return False
        return bool(self.admission.step(now, wrote_waiting=wrote_waiting))

    def _plan(self, now: datetime, *, ahead: timedelta = timedelta(0)) -> planning.Planned:
        if not self.leadership.is_leader() or self.skew.refusing:
            return planning.Planned()
        # One node (SQLite): no other process claims runs, so fires can be
        # written already running while slots are free, and start at once.
        # Not while an older queued run waits for a slot: then every run goes
        # through the claim, which serves them in order. Several nodes
        # (PostgreSQL) share fires through the queue instead.
        stay_queued = self.clustered or self.carry.waiting_for_slots or self.draining or self.stopping
        if not stay_queued:
            self.pool.refresh()  # a run that ended since the pass's wait frees its slot
        planned = self.planner.plan_due(
            now,
            epoch=self.leadership.leader_epoch,
            free_slots=0 if stay_queued else self.starter.free_slots,
            settle=lambda jobs: self._settle_jobs(jobs, now),
            ahead=ahead,
        )
        self.metrics.planned(planned.written)
        if planned.lease_lost:
            self.leadership.lost_leader()
        if planned.queued is not None:
            # Added to those not claimed yet; the claim forgets them after POLL.
            self.carry = replace(self.carry, known={**self.carry.known, **planned.queued})
        self._took(self.starter.start_all(planned.starting))
        self._took(self.starter.hold(planned.held))
        return planned

    def hand_off_held(self) -> bool:
        """Start the held runs whose time has come (Starter.start_held): True when one went back to planning."""
        if self.starter.held_at is None or self.clock() < self.starter.held_at:
            return False
        recorded, unplanned = self.starter.start_held()
        self._took(recorded)
        return unplanned

    def _settle_jobs(self, jobs: set[int], now: datetime) -> bool:
        """Planning found due jobs (`jobs`) with a live run: if one of those
        runs has ended (its outcome taken or still in the pool) and waits to
        be written, write it first, so the fire is decided by the run as it
        is (planning.Planner.plan_due)."""
        self.pending.take(self.pool.wait(0), now)
        return self.settle(lambda flight: flight.job_id in jobs, now)

    def _claim(self, now: datetime) -> Claimed:
        if self.draining or self.stopping or self.skew.refusing:
            return Claimed()
        self.pool.refresh()
        claimed = self.starter.claim_queued(now, known=self.carry.known)
        self.carry = Carry(known=claimed.known, waiting_for_slots=claimed.waiting_for_slots)
        self._took(claimed.recorded)
        return claimed

    def share(self, planned: planning.Planned) -> bool:
        """After this node's own claim in the pass that planned: wake the
        other nodes (NOTIFY) when runs it wrote are left for them: queued
        ones its claim did not take (all, when it did not claim), waiting
        ones admission may let through, or any after a replan. When its claim
        took them all nobody is woken: a NOTIFY would cost this node a round
        trip and every other node an empty claim. Returns whether it woke them."""
        if not self.clustered or not planned.did or planned.lease_lost:
            return False
        queued = planned.queued
        if queued is None or planned.waiting or any(r.status == Run.Status.QUEUED for r in queued.values()):
            wake_schedulers(sender=self.worker_id)
            return True
        return False

    def _took(self, recorded: Recorded) -> Recorded:
        """Pass on what a write did to whoever paces on it (and to the metrics)."""
        self.metrics.took(recorded)
        if recorded.alerts:
            self.alert_sender.alert_written()
        if recorded.queued_at is not None:
            self.next_queued.lower(recorded.queued_at)
        return recorded

    # -- the loop ----------------------------------------------------------------------

    def run_pass(self, now: datetime, *, claims_uncertain: bool = False, running: bool = False) -> Pass:
        """One pass of every step. `claims_uncertain`: a database error may
        have hidden a claim that committed (see requeue_unstarted_claims).
        `running` (the running loop's pass): outcomes are written only once
        due (`outcomes_due`), else every finished run is written first; and
        fires are planned `plan_ahead` before their time."""
        # First: a new measurement moves the clock the rest of the pass
        # judges by.
        step = self.metrics.step
        with step("node_lease"):
            now = self.renew_node_if_due(now)
        with step("collect"):
            if running:
                self.pending.take(self.pool.wait(0), now)
                did = self.outcomes_due(now) and self.collect([], now)
            else:
                did = self.collect(self.pool.wait(0), now)
        with step("enforce_deadlines"):
            did |= self.enforce_deadlines(now)
        with step("heartbeat"):
            self.heartbeat(now)
        with step("sweep"):
            did |= self.sweep(now)
        with step("alert_watch"):
            if self.pending and self.alert_watch.cadence.due(now):
                self.collect([], now)  # a run that ended is not running long
            if self.alert_watch.step(now):
                self.alert_sender.alert_written()
        with step("send_alerts"):
            did |= self.send_alerts(now)
        self.heartbeat_pinger.step(now)
        if self.draining:
            return Pass(did)
        with step("lead"):
            did |= self.lead(now)
        with step("plan_due"):
            self.hand_off_held()  # first: a fire it sends back is planned now
            planned = self._plan(now, ahead=self.plan_ahead if running else timedelta(0))
        if not planned.full:
            with step("check_schedules"):
                self.check_schedules(now)
            with step("rollup"):
                self.roll_up(now)
        if claims_uncertain:
            with step("requeue"):
                did |= bool(
                    maintenance.requeue_unstarted_claims(
                        now,
                        worker_id=self.worker_id,
                        executing=[*self.pool.flights, *(one.run.pk for one in self.starter.held)],
                    )
                )
        with step("admit_waiting"):
            did |= self.admit_waiting(now, wrote_waiting=planned.waiting)
        with step("claim_queued"):
            claimed = self._claim(now)
        with step("share"):
            self.share(planned)
        self.metrics.passed(
            live=len(self.pool.flights),
            free=self.starter.free_slots,
            leader=self.leadership.is_leader(),
            waiting_for_slots=claimed.waiting_for_slots,
        )
        return Pass(
            did or planned.did or claimed.did,
            backlog=planned.full or claimed.full,
            next_fire=planned.next_fire,
        )

    def next_wakeup(self, now: datetime, *, next_fire: planning.NextFire | None = None) -> datetime:
        """The earliest of: the next fire (`next_fire`, if the pass's planning
        read it, else from the database), the next queued run, a deadline,
        the next heartbeat, the next alert, and the edit poll."""
        candidates = [now + POLL]
        self.pool.refresh()
        if self.leadership.is_leader():
            fire_at = planning.next_fire() if next_fire is None else next_fire.at
            if fire_at is not None:
                candidates.append(planning.plan_at(fire_at, now, self.plan_ahead))
        if (
            self.starter.free_slots > 0
            and not self.skew.refusing
            and (next_queued := self.next_queued.get(now)) is not None
        ):
            candidates.append(next_queued)
        candidates.extend(f.deadline for f in self.pool.flights.values())
        if self.pool.flights and (next_beat := self.run_heartbeat.next_at) is not None:
            candidates.append(next_beat)
        if (next_alert := self.alert_sender.next_due(now)) is not None:
            candidates.append(next_alert)
        return min(candidates)

    def run_forever(self, *, once: bool = False) -> None:
        """Pass, sleep until the next thing is due, repeat. Outcomes are read as a sleep ends
        (Pending.quiet) and written in batches (Pending), unless a queued run waits for a slot."""
        self.check_clock()  # first: every time from here on is the database's
        self.start(self.clock())
        if self.clustered and not once:
            self.listener = WakeListener.for_django_connection(
                connection, self.pool.wake, ignore_sender=self.worker_id
            )
            self.listener.start()
        backoff = 0.5
        wake_at: datetime | None = None  # None: pass now
        # Set by a database error: a claim may have committed on the server
        # while this process saw only the error.
        claims_uncertain = False
        while not self.stopping:
            try:
                if wake_at is None or self.clock() >= wake_at:
                    done = self.run_pass(self.clock(), claims_uncertain=claims_uncertain, running=not once)
                    claims_uncertain = False
                    if once:
                        break
                    if done.did and done.backlog:
                        wake_at = None
                        continue  # more is due right away
                    with self.metrics.step("next_wakeup"):
                        wake_at = self.next_wakeup(self.clock(), next_fire=done.next_fire)
                until = min(wake_at, self.pending.write_by or wake_at, self.starter.held_at or wake_at)
                quiet = self.pending.quiet(
                    self.clustered or self.carry.waiting_for_slots or self.admission.left
                )
                outcomes = self.pool.wait((until - self.clock()).total_seconds(), quiet=quiet)
                now = self.clock()
                if outcomes:
                    self.pending.take(outcomes, now)
                    if self.carry.waiting_for_slots:
                        wake_at = None  # a queued run waits for the slot: pass now
                elif now < until:
                    wake_at = None  # woken early: a signal or a notification
                wake_at = None if self.hand_off_held() else wake_at  # a fire went back to planning
                if wake_at is not None and now < wake_at and self.outcomes_due(now):
                    queued_at = self.next_queued.at
                    with self.metrics.step("collect"):
                        self.collect([], now)
                    if self.next_queued.at not in (None, queued_at):  # it queued a retry or downstream run
                        wake_at = min(wake_at, self.next_queued.at)
                backoff = 0.5
            except DatabaseError as exc:
                log.error("database error, retrying in %.1f s: %s", backoff, exc)
                claims_uncertain = True
                close_old_connections()
                connection.close()
                time.sleep(backoff)
                backoff = min(backoff * 2, 5)
                wake_at = None
        if once:
            self.wait_for_flights()
        self.drain()

    def wait_for_flights(self) -> None:
        """--once: let the runs started in this pass finish (or time out)."""
        while self.pool.flights:
            now = self.clock()
            self.collect([], now)
            self.enforce_deadlines(now)
            deadline = min(f.deadline for f in self.pool.flights.values()) if self.pool.flights else now
            self.collect(self.pool.wait(max(0.05, min(1.0, (deadline - now).total_seconds()))), self.clock())

    # -- signals and shutdown -------------------------------------------------------------

    def request_stop(self, *_args) -> None:
        self.stopping = True
        self.pool.wake()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    def drain(self, grace: float | None = None) -> None:
        """Stop claiming; wait for in-flight runs up to the grace period (held runs
        start at their time within it, else go back to the queue); then record
        what is left as interrupted (one-off tasks go back to queued)."""
        self.draining = True
        grace = settings.JOBS_SHUTDOWN_GRACE if grace is None else grace
        # Runs that ended are written as they ended, whatever the grace.
        self.collect(self.pool.wait(0), self.clock())
        try:
            self.leadership.step_down()
        except DatabaseError as exc:
            log.warning("could not release the leader lease (it lapses by itself): %s", exc)
        if self.pool.flights:
            log.info("draining %d run(s) for up to %s s", len(self.pool.flights), grace)
        until = time.monotonic() + grace
        while (self.pool.flights or self.starter.held) and (left := until - time.monotonic()) > 0:
            held_in = (self.starter.held_at - self.clock()).total_seconds() if self.starter.held else left
            self.collect(self.pool.wait(max(0.0, min(0.2, left, held_in))), self.clock())
            self.enforce_deadlines(self.clock())
            self.hand_off_held()
        if handed_back := self.starter.hand_back_held():
            log.info("%d run(s) planned ahead went back to the queue, each due at its fire time", handed_back)
        now = self.clock()
        for flight in list(self.pool.flights.values()):
            flight.ctx.cancelled.set()
            if flight.is_task:
                self.recorder.hand_back_task(flight, self.pool, now)
            else:
                self.recorder.stop_waiting(
                    flight,
                    self.pool,
                    Run.Status.INTERRUPTED,
                    now,
                    f"the scheduler stopped (shutdown grace of {grace:g} s ran out) before the run finished",
                )
        self.pool.close()
        self.alert_sender.stop(self.clock, wait=min(grace, settings.EMAIL_TIMEOUT))
        if self.listener is not None:
            self.listener.stop()
        self.leadership.untune_session()
        self.leadership.release_node()
