"""The scheduler engine.

Built from steps that take `now` and return whether they did work:

- `plan_due(now)`        claim due fires with a compare-and-set on the job row
                         and write their runs (queued, or skipped with a reason;
                         on one node, running at once while slots are free);
- `claim_queued(now)`    start queued runs (fires, retries, manual runs, tasks)
                         in worker threads, up to JOBS_MAX_CONCURRENT_RUNS;
- `collect(outcomes, now)` write finished runs back, queue retries, count
                         failures, crash jobs at their threshold;
- `enforce_deadlines(now)` time out runs past their deadline;
- `heartbeat(now)`       touch running runs, flush their logs, pick up cancel
                         requests, renew this node's lease;
- `sweep(now)`           mark runs whose worker vanished `interrupted`;
- `send_alerts(now)`     deliver crash alerts from the outbox through a sender
                         thread (jobs.outbox), never waiting on the mail server;
- `lead(now)`            PostgreSQL: hold (or try to take) the leader lease.

Several nodes (PostgreSQL): only the leader plans, and its claims carry its
lease epoch; every node claims queued runs. A LISTEN thread (jobs.listener)
wakes the loop when the web process changes something.

`run_forever()` only sequences them, sleeps until the next thing is due, and
handles signals. No database transaction is open while a handler runs: the
handler threads (jobs.workers) never write run bookkeeping.
"""

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    transaction,
)
from django.db.backends.signals import connection_created
from django.db.models import Min
from django.utils import timezone

from jobs import alerts, leases
from jobs.bulk import update_from_values
from jobs.handlers.base import JobContext
from jobs.heartbeat import HeartbeatPinger
from jobs.listener import WakeListener
from jobs.models import LIVE_RUN, Job, Run, cap_message
from jobs.outbox import AlertSender
from jobs.workers import Flight, HandlerRef, Outcome, make_pool

log = logging.getLogger("cronboard.scheduler")

POLL = timedelta(seconds=1)  # edits by the web process are noticed within this
HEARTBEAT_EVERY = timedelta(seconds=2)
SWEEP_EVERY = timedelta(minutes=2)
STALE_AFTER = timedelta(minutes=5)
PLAN_BATCH = 500
CLAIM_BATCH = 100
# A finished run whose write can wait for a pass due within this long waits
# for it, and is written in that pass's batch.
COLLECT_WITHIN = timedelta(milliseconds=50)
LAST_ERROR_CHARS = 4000  # a job keeps this much of its last run's error


class WorkerIdInUse(Exception):
    """Another live scheduler process runs under this JOBS_WORKER_ID."""


@dataclass
class FirePlan:
    """What plan_due decided for one due job; applied atomically by claim_fire()."""

    job: Job
    expected_next: datetime
    new_next: datetime | None
    last_fire: datetime | None
    runs: list[Run] = field(default_factory=list)
    disable: bool = False  # a run-once job that fired


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
    ):
        self.worker_id = worker_id or settings.JOBS_WORKER_ID
        # Several nodes may share a PostgreSQL database; SQLite is single-node.
        self.clustered = connection.vendor == "postgresql" if clustered is None else clustered
        self.lease_ttl = leases.lease_ttl()
        self.lease_renew = leases.renew_period()
        self.leader_epoch: int | None = None
        self.node_epoch: int | None = None
        self._last_lead: datetime | None = None
        self.listener: WakeListener | None = None
        self.clock = clock
        self.misfire_threshold = timedelta(
            seconds=settings.JOBS_MISFIRE_THRESHOLD if misfire_threshold is None else misfire_threshold
        )
        self.max_message_chars = (
            settings.JOBS_MAX_MESSAGE_CHARS if max_message_chars is None else max_message_chars
        )
        # Threads or child processes (JOBS_EXECUTOR), see jobs.workers.
        self.executor = executor or settings.JOBS_EXECUTOR
        self.pool = make_pool(
            max_workers or settings.JOBS_MAX_CONCURRENT_RUNS,
            executor=self.executor,
            log_keep=self.max_message_chars,
        )
        self.alert_sender = AlertSender(wake=self.pool.wake)
        self.heartbeat_pinger = HeartbeatPinger()  # CRONBOARD_HEARTBEAT_URL, if set
        self.alert_watch = alerts.AlertWatch()  # late and long-running alerts
        self.stopping = False
        self.draining = False
        self._pending: list[Outcome] = []
        # Set by a database error: a claim may have committed on the server
        # while this process saw only the error (see requeue_unstarted_claims).
        self._claims_uncertain = False
        self._backlog = False  # a step stopped at its batch size
        self._waiting_for_slots = False  # claim_queued filled every free slot
        self._alerts_written = False  # this process wrote an alert since the outbox was read
        self._alert_next: datetime | None = None  # see _next_alert()
        self._alert_read_at: datetime | None = None
        self._queued_next: datetime | None = None  # see _next_queued()
        self._just_queued: dict[int, Run] = {}  # the runs the last plan_due queued
        self._queued_read_at: datetime | None = None
        self._last_heartbeat: datetime | None = None
        self._last_node_renew: datetime | None = None
        self._last_sweep: datetime | None = None
        self._node_info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": getattr(settings, "CRONBOARD_VERSION", ""),
            "started_at": None,
        }

    # -- leadership --------------------------------------------------------

    def is_leader(self, now: datetime) -> bool:
        """SQLite is single-node (the process lock in runscheduler makes sure),
        so this process plans. On PostgreSQL: whether we held the leader lease
        at the last renewal. That belief may be stale by the time we claim (a
        stall); the claims themselves check the lease (see `_claimable`)."""
        return not self.clustered or self.leader_epoch is not None

    def lead(self, now: datetime) -> bool:
        """PostgreSQL, every lease-renew interval: renew the leader lease if we
        hold it, else try to take it. True when we just became leader."""
        if not self.clustered or self.draining:
            return False
        if self._last_lead is not None and timedelta(0) <= now - self._last_lead < self.lease_renew:
            return False
        self._last_lead = now
        with transaction.atomic():
            grant = leases.acquire(
                leases.LEADER, self.worker_id, epoch=self.leader_epoch, now=now, ttl=self.lease_ttl
            )
            if grant is not None and grant.taken:
                leases.record_leadership(grant, self.worker_id)
        if grant is None:
            if self.leader_epoch is not None:
                log.warning(
                    "lost the leader lease (epoch %d); planning stops on this node", self.leader_epoch
                )
            self.leader_epoch = None
            return False
        if grant.taken:
            log.info(
                "leader now (epoch %d, lease until %s by the database clock)",
                grant.epoch,
                grant.expires_at.isoformat(),
            )
        self.leader_epoch = grant.epoch
        return grant.taken

    def step_down(self) -> None:
        """Hand the leader lease back (shutdown) so a standby takes it at its
        next try instead of waiting for it to expire."""
        if self.clustered and self.leader_epoch is not None:
            leases.release(leases.LEADER, self.worker_id, epoch=self.leader_epoch)
            log.info("released the leader lease (epoch %d)", self.leader_epoch)
            self.leader_epoch = None

    # -- start-up ------------------------------------------------------------

    def start(self, now: datetime) -> None:
        self.pool.warm()  # the run processes, before the first fire needs one
        self._node_info["started_at"] = now.isoformat()
        if self.clustered:
            self._limit_idle_transactions()
        self._analyze_unanalyzed_tables()
        self.renew_node_lease(now)
        self.recover(now)
        self.schedule_unplanned(now)

    def check_identity(self, now: datetime) -> None:
        """Before start (runscheduler, PostgreSQL): refuse (WorkerIdInUse) when
        another live process holds this worker id's node lease. A process on
        this host that is gone (killed with -9, so it never released the
        lease) does not hold us up."""
        lease, clock = leases.current(leases.node_lease_name(self.worker_id), now=now)
        if lease is None or not lease.is_live(clock):
            return
        host, pid = lease.info.get("host"), lease.info.get("pid")
        if host == self._node_info["host"] and isinstance(pid, int) and not _scheduler_process_alive(pid):
            log.warning(
                "worker id %s was held by pid %s on this host, which is gone; taking over",
                self.worker_id,
                pid,
            )
            return
        raise WorkerIdInUse(
            f"Another scheduler is running as JOBS_WORKER_ID={self.worker_id} (host {host or '?'}, pid {pid or '?'}, "
            f"last heartbeat {lease.renewed_at.isoformat() if lease.renewed_at else '?'}). Every scheduler node needs its "
            f"own worker id. If that process is gone, its lease lapses by {lease.expires_at.isoformat()}; start again then."
        )

    def _limit_idle_transactions(self) -> None:
        """A scheduler stalled inside one of its (short) transactions would hold
        row locks, and could commit a claim after waking. PostgreSQL ends such a
        session after a lease TTL of idleness, so the claim rolls back and the
        locks go. Only this thread's connections: handler threads are free to
        hold their own transactions."""
        seconds = int(self.lease_ttl.total_seconds())
        thread = threading.get_ident()

        def apply(sender=None, connection=connection, **kwargs):
            if connection.vendor == "postgresql" and threading.get_ident() == thread:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT set_config('idle_in_transaction_session_timeout', %s, false)", [f"{seconds}s"]
                    )

        connection_created.connect(apply, weak=False, dispatch_uid=self._idle_limit_uid)
        if connection.connection is not None:
            apply(connection=connection)

    def _analyze_unanalyzed_tables(self) -> None:
        """PostgreSQL plans from table statistics, and a table that was never
        analyzed (a new database, jobs just imported) looks nearly empty to
        it: the batched fire claim then walked every enabled job once per
        row of the batch (bench: 15 ms a statement at 2,000 jobs, fires
        ~30 ms late at the median) instead of looking each up by its key
        (0.2 ms). Autovacuum analyzes such a table, but only a minute or so
        later; the scheduler's own tables are analyzed here, once, if they
        never were (reltuples < 0, PostgreSQL 14+)."""
        if connection.vendor != "postgresql":
            return
        tables = [Job._meta.db_table, Run._meta.db_table]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT relname FROM pg_class WHERE oid = ANY(%s::regclass[]) AND reltuples < 0",
                [tables],
            )
            never = [name for (name,) in cursor.fetchall()]
            for table in never:
                cursor.execute(f"ANALYZE {connection.ops.quote_name(table)}")
        if never:
            log.info("analyzed %s: the planner had no statistics for them yet", ", ".join(never))

    @property
    def _idle_limit_uid(self) -> str:
        return f"cronboard-idle-transactions-{id(self)}"

    def recover(self, now: datetime) -> int:
        """Runs this worker left `running` (it died or was killed) are interrupted."""
        stale = list(
            Run.objects.filter(LIVE_RUN, status=Run.Status.RUNNING, worker_id=self.worker_id).select_related(
                "job"
            )
        )
        for run in stale:
            if run.pk in self.pool.flights:
                continue
            self._record(
                run,
                Run.Status.INTERRUPTED,
                now,
                error="the scheduler stopped while this run was running (found at restart)",
            )
        if stale:
            log.warning("recovered %d run(s) left running by %s", len(stale), self.worker_id)
        return len(stale)

    def schedule_unplanned(self, now: datetime) -> bool:
        """Enabled jobs without a next fire time (seeded by a migration, written
        by hand) get one."""
        did = False
        for job in Job.objects.live().filter(
            state=Job.State.ENABLED, next_fire_at__isnull=True, run_once=False
        ):
            next_fire = job.next_fire_after(now)
            if next_fire is not None:
                Job.objects.filter(pk=job.pk, next_fire_at__isnull=True, state=Job.State.ENABLED).update(
                    next_fire_at=next_fire
                )
                did = True
        return did

    # -- planning --------------------------------------------------------------

    def plan_due(self, now: datetime) -> bool:
        """Claim every due fire (up to a batch) and write its run."""
        if not self.is_leader(now):
            return False
        due = list(Job.objects.due(now)[:PLAN_BATCH])
        if not due:
            return False
        busy = set(
            Run.objects.filter(LIVE_RUN, job_id__in=[job.pk for job in due]).values_list("job_id", flat=True)
        )
        for job in due:
            job.busy = job.pk in busy
        self._backlog |= len(due) == PLAN_BATCH
        plans = [self.plan_fire(job, now) for job in due]
        starting: list[Run] = []
        try:
            with transaction.atomic():
                won = self._claim_batch(plans, now)
                claimed = [plan for plan in plans if plan.job.pk in won]
                if len(claimed) < len(plans):
                    self._still_leader(now)  # was it the lease? then say so, and stop leading
                runs = [run for plan in claimed for run in self._stamped(plan.runs)]
                starting = self._take_free_slots(runs, now)
                # One INSERT for the batch's runs, inside the claims' transaction.
                created = Run.objects.bulk_create(runs)
            # claim_queued() starts these from memory: their rows and jobs
            # were just read and written, no need to load them back.
            self._just_queued = {run.pk: run for run in created if run.status == Run.Status.QUEUED and run.pk}
        except IntegrityError:
            # The unique (job, scheduled time, attempt) row stopped a duplicate:
            # redo one by one so the others still go through, all queued.
            log.error("duplicate fire refused by the database; replanning one job at a time")
            for run in starting:
                run.status, run.worker_id, run.started_at, run.heartbeat_at = (
                    Run.Status.QUEUED,
                    "",
                    None,
                    None,
                )
            starting = []
            for plan in plans:
                try:
                    with transaction.atomic():
                        self.claim_fire(plan=plan, now=now)
                except IntegrityError:
                    log.error(
                        "fire of job %s at %s already exists; not planned twice",
                        plan.job.pk,
                        plan.expected_next,
                    )
        for run in starting:
            self._start(run, run.started_at)
        if self.clustered and self.leader_epoch is not None:
            from jobs.services import wake_schedulers

            wake_schedulers(sender=self.worker_id)  # the other nodes share the runs just queued
        return True

    def _take_free_slots(self, runs: list[Run], now: datetime) -> list[Run]:
        """One node (SQLite): no other process claims runs, so fires about to
        be written can be written already running, as many as there are free
        slots, and started once they commit, without a claim of their own.
        Only while no older queued run waits for a slot: then every run goes
        through claim_queued, which serves them in order. Several nodes
        (PostgreSQL) share fires through the queue instead."""
        if self.clustered or self._waiting_for_slots or self.draining or self.stopping:
            return []
        taken = [run for run in runs if run.status == Run.Status.QUEUED][: max(0, self.pool.free_slots)]
        self._mark_running(taken, now)
        return taken

    def _mark_running(self, runs: list[Run], now: datetime) -> datetime:
        """Make the in-memory runs this node's, running from now. started_at
        is when the run is handed to a worker, not when this pass began: the
        pass's own writes are part of a fire's lateness."""
        started = max(now, self.clock())
        for run in runs:
            run.status, run.worker_id, run.started_at, run.heartbeat_at = (
                Run.Status.RUNNING,
                self.worker_id,
                started,
                started,
            )
        return started

    def _still_leader(self, now: datetime) -> bool:
        """After a refused claim: was it the lease? Then stop planning."""
        if not self.clustered or leases.holds(leases.LEADER, self.worker_id, self.leader_epoch, now=now):
            return True
        log.warning(
            "fire claims refused: the leader lease (epoch %d) lapsed or passed to another node; planning stops here",
            self.leader_epoch,
        )
        self.leader_epoch = None
        return False

    def plan_fire(self, job: Job, now: datetime) -> FirePlan:
        """Decide, without writing, what the due fire of `job` becomes."""
        due_at = job.next_fire_at
        latest, missed_before = self._latest_fire_in_window(job, due_at, now)
        runs: list[Run] = []
        fire_id = uuid.uuid4()
        if latest is not None:
            if missed_before:
                runs.append(
                    self._skipped(
                        job,
                        due_at,
                        Run.SkipReason.MISFIRE,
                        now,
                        f"missed: fire times from {due_at.isoformat()} until {latest.isoformat()} passed "
                        f"while no scheduler was running",
                    )
                )
            fire_at, trigger = latest, Run.Trigger.SCHEDULE
        elif job.misfire_policy == Job.MisfirePolicy.FIRE_ONCE_NOW:
            fire_at, trigger = due_at, Run.Trigger.CATCH_UP
        else:
            fire_at, trigger = None, None
            runs.append(
                self._skipped(
                    job,
                    due_at,
                    Run.SkipReason.MISFIRE,
                    now,
                    f"misfired: {_seconds(now - due_at)} late, more than the {_seconds(self.misfire_threshold)} "
                    f"misfire threshold; policy is skip",
                )
            )

        fired = False
        if fire_at is not None:
            if getattr(job, "busy", False):
                runs.append(
                    self._skipped(
                        job, fire_at, Run.SkipReason.OVERLAP, now, "the previous run was still running"
                    )
                )
            else:
                runs.append(
                    Run(
                        job=job,
                        fire_id=fire_id,
                        scheduled_at=fire_at,
                        run_after=now,
                        trigger=trigger,
                        status=Run.Status.QUEUED,
                        created_at=now,
                        **job.run_policy(),
                    )
                )
                fired = True

        last_fire = fire_at or job.last_fire_at
        if job.schedule_type == Job.ScheduleType.INTERVAL:
            new_next = job.next_fire_after(now, last_fire=latest)
        else:
            new_next = job.next_fire_after(max(now, fire_at or now))
        disable = job.run_once and fired
        return FirePlan(
            job=job,
            expected_next=due_at,
            new_next=None if disable else new_next,
            last_fire=last_fire,
            runs=runs,
            disable=disable,
        )

    def claim_fire(self, *, plan: FirePlan, now: datetime) -> bool:
        """The compare-and-set: only the process whose update moves the job's
        next fire time from the value it read writes the runs."""
        if not self._move_next_fire(plan, now):
            return False
        Run.objects.bulk_create(self._stamped(plan.runs))
        return True

    def _stamped(self, runs: list[Run]) -> list[Run]:
        """Runs carry the leader epoch that planned them."""
        for run in runs:
            run.planned_epoch = self.leader_epoch
        return runs

    def _move_next_fire(self, plan: FirePlan, now: datetime) -> bool:
        updates = {"next_fire_at": plan.new_next, "last_fire_at": plan.last_fire}
        if plan.disable:
            updates["state"] = Job.State.PAUSED
        return bool(self._claimable(plan.job, plan.expected_next, now).update(**updates))

    def _claim_batch(self, plans: list[FirePlan], now: datetime) -> set[int]:
        """The compare-and-set of `_move_next_fire` for a whole batch, in ONE
        statement: each job's row moves only if its next fire time is still the
        one its plan read (and, clustered, only while we hold the leader lease
        at our epoch, judged by the statement itself). Returns the ids of the
        jobs whose row moved; a stale row claims nothing for its job and does
        not hold up the others."""
        if not plans:
            return set()
        qn = connection.ops.quote_name

        def column(name: str) -> str:
            return f"{qn(Job._meta.db_table)}.{qn(Job._meta.get_field(name).column)}"

        where = f"{column('state')} = %s AND {column('deleted_at')} IS NULL"
        where_params: list = [str(Job.State.ENABLED)]
        if self.clustered:
            # The epoch fence, in the claim's own statement (see `_claimable`).
            holding = leases.holding(leases.LEADER, self.worker_id, self.leader_epoch, now=now)
            sql, fence_params = holding.values("pk").query.sql_with_params()
            where += f" AND EXISTS ({sql})"
            where_params += fence_params
        rows = [
            (
                plan.job.pk,
                plan.expected_next,
                plan.new_next,
                plan.last_fire,
                str(Job.State.PAUSED if plan.disable else Job.State.ENABLED),
            )
            for plan in plans
        ]
        return update_from_values(
            Job,
            rows,
            match=["next_fire_at"],
            assign=["next_fire_at", "last_fire_at", "state"],
            where=where,
            where_params=where_params,
        )

    def _claimable(self, job: Job, expected_next: datetime, now: datetime):
        claimable = Job.objects.filter(
            pk=job.pk, next_fire_at=expected_next, state=Job.State.ENABLED, deleted_at__isnull=True
        )
        if self.clustered:
            # The fence, in the claim's own statement: we still hold the leader
            # lease at our epoch by the database clock, however long we stalled
            # since is_leader() said yes.
            claimable = claimable.filter(
                leases.held(leases.LEADER, self.worker_id, self.leader_epoch, now=now)
            )
        return claimable

    def _latest_fire_in_window(
        self, job: Job, due_at: datetime, now: datetime
    ) -> tuple[datetime | None, bool]:
        """The latest fire time in [max(due, now - threshold), now], and whether
        earlier due fire times were passed over. None when every due fire is
        older than the misfire threshold."""
        window_start = max(due_at, now - self.misfire_threshold)
        if job.schedule_type == Job.ScheduleType.INTERVAL:
            step = timedelta(seconds=job.interval_seconds)
            behind = (now - due_at) // step
            latest = due_at + behind * step
            return (latest, latest > due_at) if latest >= window_start else (None, False)
        latest = due_at if due_at >= window_start else None
        probe = job.next_fire_after(window_start - timedelta(seconds=1)) if latest is None else due_at
        while probe is not None and probe <= now:
            latest = probe
            probe = job.next_fire_after(probe)
        return latest, latest is not None and latest > due_at

    def _skipped(self, job: Job, scheduled_at: datetime, reason: str, now: datetime, message: str) -> Run:
        return Run(
            job=job,
            scheduled_at=scheduled_at,
            trigger=Run.Trigger.SCHEDULE,
            status=Run.Status.SKIPPED,
            skip_reason=reason,
            finished_at=now,
            run_after=now,
            error=message,
            worker_id=self.worker_id,
            created_at=now,
            **job.run_policy(),
        )

    # -- execution -------------------------------------------------------------

    def claim_queued(self, now: datetime) -> bool:
        """Start queued runs that are due, as many as there are free slots."""
        if self.draining or self.stopping:
            return False
        free = min(self.pool.free_slots, CLAIM_BATCH)
        self._waiting_for_slots = free <= 0
        if free <= 0:
            return False
        queued = Run.objects.filter(status=Run.Status.QUEUED, run_after__lte=now).order_by("run_after", "id")
        if connection.vendor == "postgresql":
            queued = queued.select_for_update(skip_locked=True, of=("self",))
        with transaction.atomic():
            ids = list(queued.values_list("id", flat=True)[:free])
            if not ids:
                return False
            # Runs plan_due just wrote are in memory; only the others (retries,
            # manual runs, tasks, other nodes' fires) are loaded, with their job.
            known = self._just_queued
            missing = [pk for pk in ids if pk not in known]
            loaded = (
                {run.pk: run for run in Run.objects.filter(pk__in=missing).select_related("job")}
                if missing
                else {}
            )
            runs = [run for pk in ids if (run := known.get(pk) or loaded.get(pk)) is not None]
            self._just_queued = {pk: run for pk, run in known.items() if pk not in loaded and pk not in ids}
            if len(runs) == free:
                # Perhaps more queued: wait for slots, or go on if the batch limited us.
                self._waiting_for_slots = free == self.pool.free_slots
                self._backlog |= not self._waiting_for_slots
            started = self._mark_running(runs, now)
            Run.objects.filter(pk__in=[r.pk for r in runs], status=Run.Status.QUEUED).update(
                status=Run.Status.RUNNING, worker_id=self.worker_id, started_at=started, heartbeat_at=started
            )
        for run in runs:
            self._start(run, started)
        return True

    def _start(self, run: Run, now: datetime) -> None:
        job = run.job
        if job is not None and job.is_deleted:
            self._record(run, Run.Status.CANCELLED, now, error="job deleted")
            return
        deadline = now + timedelta(seconds=run.timeout_seconds)
        ctx = JobContext(
            run_id=run.pk,
            fire_id=str(run.fire_id),
            attempt=run.attempt,
            scheduled_at=run.scheduled_at,
            deadline=deadline,
            properties=dict((run.properties if run.is_task else job.properties) or {}),
            job_id=job.pk if job else None,
            job_name=job.name if job else "",
            task_key=run.task_key,
            sql_write=bool(job and job.sql_write),
            job=job,
            run=run,
            log_keep=self.max_message_chars,
            _clock=self.clock,
        )
        flight = Flight(
            run_id=run.pk,
            job_id=job.pk if job else None,
            is_task=run.is_task,
            attempt=run.attempt,
            started_at=now,
            deadline=deadline,
            timeout_seconds=run.timeout_seconds,
            ctx=ctx,
        )
        kind, name = (Job.Kind.PYTHON, run.handler) if run.is_task else (job.kind, job.handler)
        self.pool.start(flight, HandlerRef(str(kind), name))

    def collect(self, outcomes: list[Outcome], now: datetime) -> bool:
        """Write finished runs back, all in one transaction (one commit for the
        batch, not one per run). If the write fails (the database went away)
        the outcomes are kept and written on the next pass."""
        self._pending.extend(outcomes)
        if not self._pending:
            return False
        batch = [(o, self.pool.flights[o.run_id]) for o in self._pending if o.run_id in self.pool.flights]
        if batch:
            items = [(flight.ctx.run, outcome) for outcome, flight in batch]
            try:
                with transaction.atomic():
                    self._record_outcomes(items, now)
            except Exception as exc:
                if is_connection_error(exc):
                    raise  # the loop backs off; the outcomes stay pending
                log.warning(
                    "writing %d outcome(s) in one batch failed (%s: %s); writing each alone",
                    len(items),
                    type(exc).__name__,
                    exc,
                )
                for run, outcome in items:
                    self._record_alone(
                        run,
                        outcome.status,
                        now,
                        lambda item=(run, outcome): self._record_outcomes([item], now),
                    )
            for outcome, _ in batch:
                self.pool.flights.pop(outcome.run_id, None)
        self._pending.clear()
        return True

    def _record_alone(self, run: Run, status: str, now: datetime, write: Callable[[], object]) -> None:
        """`write` one run's outcome (`status`) in a transaction of its own. If
        that fails for its data (not its connection), the run is recorded
        `failed` with what went wrong, so the batch and the loop go on; if
        even that cannot be written, the run is left to the sweep."""
        try:
            with transaction.atomic():
                write()
            return
        except Exception as exc:
            if is_connection_error(exc):
                raise
            problem = f"{type(exc).__name__}: {exc}"
        log.error("the outcome of run %s could not be written (%s); recording it failed", run.pk, problem)
        explanation = (
            f"The run ended ({status}), but its outcome could not be written to the database: "
            f"{problem}. It is recorded as failed instead, without its result and log."
        )
        try:
            with transaction.atomic():
                self._record(run, Run.Status.FAILED, now, error=explanation, retry=False)
        except Exception as exc:
            if is_connection_error(exc):
                raise
            log.exception("run %s could not be recorded failed either; the sweep will interrupt it", run.pk)

    def enforce_deadlines(self, now: datetime) -> bool:
        expired = [f for f in self.pool.flights.values() if f.deadline <= now]
        for flight in expired:
            self._stop_waiting(
                flight,
                Run.Status.TIMED_OUT,
                now,
                f"timed out after {flight.timeout_seconds} s; the handler was asked to stop",
            )
        return bool(expired)

    def _stop_waiting(self, flight: Flight, status: str, now: datetime, error: str) -> None:
        """Record a run this process gives up on (timeout, cancel, shutdown)
        with the log it has so far, then free its slot; the handler is told
        to stop and its late outcome is ignored."""
        run, log_text = flight.ctx.run, flight.ctx.log_text()
        self._record_alone(
            run, status, now, lambda: self._record(run, status, now, error=error, log_text=log_text)
        )
        self.pool.abandon(flight.run_id)

    # -- recording outcomes ----------------------------------------------------

    def _outcome(self, run: Run, status: str, now: datetime, *, result="", error="", log_text="") -> dict:
        """The columns a run's outcome writes on its row."""
        cap = self.max_message_chars
        return {
            "status": status,
            "finished_at": now,
            "heartbeat_at": now,
            "duration_ms": max(0, int((now - (run.started_at or now)).total_seconds() * 1000)),
            "result": cap_message(result, cap),
            "error": cap_message(error, cap),
            "log": cap_message(log_text or run.log, cap),
        }

    def _record_outcomes(self, items: list[tuple[Run, Outcome]], now: datetime) -> None:
        """Write a batch of finished runs. The common outcome (a success with
        nothing more to do than reset its job's failure count) is written for
        the whole batch with two statements, one for the runs and one for
        their jobs. The others (a failure to count or retry, a crash, a
        recovered notice, a job with two runs in the batch, whose order then
        matters) go through `_record` one at a time."""
        runs_of_job = Counter(run.job_id for run, _ in items if run.job_id is not None)
        common, others = [], []
        for run, outcome in items:
            plain = outcome.status == Run.Status.SUCCEEDED and (
                run.job_id is None or (runs_of_job[run.job_id] == 1 and not _wants_recovery_notice(run))
            )
            (common if plain else others).append((run, outcome))
        for run, outcome in others:
            self._record(
                run, outcome.status, now, result=outcome.result, error=outcome.error, log_text=outcome.log
            )
        if not common:
            return
        written = {
            run.pk: self._outcome(
                run, outcome.status, now, result=outcome.result, error=outcome.error, log_text=outcome.log
            )
            for run, outcome in common
        }
        columns = list(next(iter(written.values())))
        # Only runs still running: one already timed out or swept stays as it is.
        touched = update_from_values(
            Run,
            [(pk, Run.Status.RUNNING, *values.values()) for pk, values in written.items()],
            match=["status"],
            assign=columns,
        )
        update_from_values(
            Job,
            [
                (
                    run.job_id,
                    outcome.status,
                    written[run.pk]["error"][:LAST_ERROR_CHARS],
                    written[run.pk]["duration_ms"],
                    0,
                )
                for run, outcome in common
                if run.pk in touched and run.job_id is not None
            ],
            assign=["last_status", "last_error", "last_duration_ms", "consecutive_failures"],
        )

    def _record(
        self, run: Run, status: str, now: datetime, *, result="", error="", log_text="", retry=True
    ) -> bool:
        """Write a run's outcome (only if it is still running: a run already
        timed out or swept is left as it is), queue its retry (unless told
        not to), and update its job, all in one transaction."""
        outcome = self._outcome(run, status, now, result=result, error=error, log_text=log_text)
        duration_ms = outcome["duration_ms"]
        # No savepoint: inside collect()'s batch a failure rolls the whole
        # batch back, and the batch is written again on the next pass.
        with transaction.atomic(savepoint=False):
            touched = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(**outcome)
            if not touched:
                return False
            retry = (
                retry
                and status in (Run.Status.FAILED, Run.Status.INTERRUPTED)
                and run.attempt <= run.max_retries
            )
            if retry:
                self._queue_retry(run, now)
            if run.job_id is not None:
                run.status, run.error, run.finished_at, run.duration_ms = (
                    status,
                    outcome["error"],
                    now,
                    duration_ms,
                )
                self._record_on_job(run, final=not retry, now=now)
        return True

    def _queue_retry(self, run: Run, now: datetime) -> Run:
        run_after = now + timedelta(seconds=run.retry_interval_seconds)
        if self._queued_next is None or run_after < self._queued_next:
            self._queued_next = run_after
        return Run.objects.create(
            job_id=run.job_id,
            fire_id=run.fire_id,
            scheduled_at=run.scheduled_at,
            attempt=run.attempt + 1,
            trigger=run.trigger,
            status=Run.Status.QUEUED,
            run_after=run_after,
            max_retries=run.max_retries,
            retry_interval_seconds=run.retry_interval_seconds,
            timeout_seconds=run.timeout_seconds,
            handler=run.handler,
            task_key=run.task_key,
            properties=run.properties,
            created_by_id=run.created_by_id,
            created_at=now,
        )

    def _record_on_job(self, run: Run, *, final: bool, now: datetime) -> None:
        """The job's last status, its consecutive failed fires, and the crash
        at the threshold. A fire counts once, after its last attempt."""
        last = dict(
            last_status=run.status, last_error=run.error[:LAST_ERROR_CHARS], last_duration_ms=run.duration_ms
        )
        if not final or (run.status == Run.Status.SUCCEEDED and not _wants_recovery_notice(run)):
            # The common case needs no read: one UPDATE, no row lock held. (A
            # job that asked for recovery notices takes the long way: the
            # notice depends on its state and its latest alert.)
            if final:
                last["consecutive_failures"] = 0
            Job.objects.filter(pk=run.job_id).update(**last)
            return
        job = Job.objects.select_for_update().get(pk=run.job_id)
        job.last_status = run.status
        job.last_error = run.error[:LAST_ERROR_CHARS]
        job.last_duration_ms = run.duration_ms
        fields = ["last_status", "last_error", "last_duration_ms"]
        crashed = succeeded = False
        if final and run.status == Run.Status.SUCCEEDED:
            job.consecutive_failures = 0
            fields.append("consecutive_failures")
            succeeded = True
        elif final and run.status in (Run.Status.FAILED, Run.Status.TIMED_OUT):
            job.consecutive_failures += 1
            fields.append("consecutive_failures")
            if job.state == Job.State.ENABLED and 0 < job.alert_threshold <= job.consecutive_failures:
                job.state = Job.State.CRASHED
                job.next_fire_at = None
                fields += ["state", "next_fire_at"]
                crashed = True
        job.save(update_fields=fields)
        if crashed:
            alerts.on_crash(job=job, run=run, now=now)
            self._alerts_written = True
        elif succeeded:
            self._alerts_written |= alerts.on_success(job=job, run=run, now=now) is not None
        elif final:
            self._alerts_written |= alerts.on_failed(job=job, run=run, now=now) is not None

    # -- liveness ----------------------------------------------------------------

    def heartbeat(self, now: datetime) -> bool:
        """Every few seconds: touch running runs, flush their logs, act on
        cancel requests; every 10 s renew this node's lease."""
        if self._last_node_renew is None or now - self._last_node_renew >= self.lease_renew:
            self.renew_node_lease(now)
        if self._last_heartbeat is not None and now - self._last_heartbeat < HEARTBEAT_EVERY:
            return False
        self._last_heartbeat = now
        if not self.pool.flights:
            return False
        ids = list(self.pool.flights)
        Run.objects.filter(pk__in=ids, status=Run.Status.RUNNING).update(heartbeat_at=now)
        for flight in list(self.pool.flights.values()):
            written = flight.ctx.log_chars
            if written != flight.log_flushed:
                Run.objects.filter(pk=flight.run_id, status=Run.Status.RUNNING).update(
                    log=cap_message(flight.ctx.log_text(), self.max_message_chars)
                )
                flight.log_flushed = written
        for run_id in Run.objects.filter(pk__in=ids, cancel_requested=True).values_list("pk", flat=True):
            flight = self.pool.flights.get(run_id)
            if flight is None:
                continue
            if flight.is_task:
                self._stop_waiting(flight, Run.Status.FAILED, now, "task cancelled")
            else:
                self._stop_waiting(flight, Run.Status.CANCELLED, now, "cancelled by an admin")
        return True

    def renew_node_lease(self, now: datetime) -> None:
        info = {**self._node_info, "running": len(self.pool.flights)}
        name = leases.node_lease_name(self.worker_id)
        grant = leases.acquire(
            name, self.worker_id, epoch=self.node_epoch, now=now, ttl=self.lease_ttl, info=info
        )
        self._last_node_renew = now
        if grant is not None:
            self.node_epoch = grant.epoch
        elif self.clustered:
            # We stalled past our node lease and another process started under
            # our worker id: it owns the id (and our runs) now.
            log.error("another process took over worker id %s; stopping this one", self.worker_id)
            self.step_down()
            self.request_stop()

    def sweep(self, now: datetime) -> bool:
        """Every 2 minutes: runs whose heartbeat is older than 5 minutes and
        whose worker holds no lease are interrupted."""
        if self._last_sweep is not None and now - self._last_sweep < SWEEP_EVERY:
            return False
        self._last_sweep = now
        # This node's own runs are stale only if it is not executing them (a
        # claim whose commit was lost with the connection): its real flights
        # heartbeat every few seconds.
        alive_elsewhere = leases.live_node_holders(now=now) - {self.worker_id}
        stale = (
            # LIVE_RUN: read the small partial index, not the whole history.
            Run.objects.filter(LIVE_RUN, status=Run.Status.RUNNING, heartbeat_at__lt=now - STALE_AFTER)
            .exclude(worker_id__in=alive_elsewhere)
            .exclude(pk__in=list(self.pool.flights))
            .select_related("job")
        )
        count = 0
        for run in stale:
            count += self._record(
                run,
                Run.Status.INTERRUPTED,
                now,
                error=f"worker {run.worker_id or '?'} stopped sending heartbeats (last {run.heartbeat_at.isoformat()})",
            )
        if count:
            log.warning("sweep interrupted %d stale run(s)", count)
        return bool(count)

    def send_alerts(self, now: datetime) -> bool:
        """Write back finished sends; hand the next due alert to the sender
        thread. The outbox is read when an alert is due (by the time read
        from it at most a POLL ago), when this process just wrote one, or
        while a send is in flight: not in every pass, which at hundreds of
        passes a second cost more than a fire."""
        sender = self.alert_sender
        if sender.in_flight is None and not self._alerts_written and not self._alert_due(now):
            return False
        did = sender.step(now)
        self._alert_read_at = None  # what is due next changed
        return did

    def _alert_due(self, now: datetime) -> bool:
        next_alert = self._next_alert(now)
        return next_alert is not None and next_alert <= now

    def _next_alert(self, now: datetime) -> datetime | None:
        """When the next pending alert is due, read at most once per POLL."""
        if (
            self._alerts_written
            or self._alert_read_at is None
            or not timedelta(0) <= now - self._alert_read_at < POLL
        ):
            self._alert_next = self.alert_sender.next_wakeup(now)
            self._alert_read_at = now
            self._alerts_written = False
        return self._alert_next

    # -- the loop ---------------------------------------------------------------

    def run_pass(self, now: datetime) -> bool:
        """One pass of every step; True if any did work."""
        did = self.collect(self.pool.wait(0), now)
        did |= self.enforce_deadlines(now)
        self.heartbeat(now)
        did |= self.sweep(now)
        self._alerts_written |= self.alert_watch.step(now)
        did |= self.send_alerts(now)
        self.heartbeat_pinger.step(now)
        if not self.draining:
            did |= self.lead(now)
            did |= self.plan_due(now)
            did |= self.requeue_unstarted_claims(now)
            did |= self.claim_queued(now)
        return did

    def requeue_unstarted_claims(self, now: datetime) -> bool:
        """After a database error: runs marked running by this worker that it
        is not executing were claimed by a commit whose answer was lost with
        the connection. Their handlers never started (a flight starts only
        after the claim's commit returns), so they go back to the queue
        instead of blocking their job as an overlap until the sweep."""
        if not self._claims_uncertain:
            return False
        unstarted = Run.objects.filter(status=Run.Status.RUNNING, worker_id=self.worker_id).exclude(
            pk__in=list(self.pool.flights)
        )
        count = unstarted.update(
            status=Run.Status.QUEUED, worker_id="", started_at=None, heartbeat_at=None, run_after=now
        )
        self._claims_uncertain = False
        if count:
            log.warning(
                "requeued %d run(s) whose claim was committed but never confirmed to this node", count
            )
        return bool(count)

    def next_wakeup(self, now: datetime) -> datetime:
        """The earliest of: the next fire, the next queued run, a deadline, the
        next heartbeat, and the edit poll."""
        candidates = [now + POLL]
        next_fire = None
        if self.is_leader(now):
            next_fire = Job.objects.filter(state=Job.State.ENABLED, deleted_at__isnull=True).aggregate(
                m=Min("next_fire_at")
            )["m"]
        if next_fire is not None:
            candidates.append(next_fire)
        if self.pool.free_slots > 0 and (next_queued := self._next_queued(now)) is not None:
            candidates.append(next_queued)
        candidates.extend(f.deadline for f in self.pool.flights.values())
        if self.pool.flights and self._last_heartbeat is not None:
            candidates.append(self._last_heartbeat + HEARTBEAT_EVERY)
        if self.alert_sender.in_flight is not None:
            candidates.append(self.alert_sender.next_wakeup(now))
        elif (next_alert := self._next_alert(now)) is not None:
            candidates.append(next_alert)
        return min(candidates)

    def _next_queued(self, now: datetime) -> datetime | None:
        """When a queued run next becomes due, read from the database once
        per POLL (and lowered at once by the retries this process queues):
        runs due now are claim_queued's business in every pass; this is for
        the ones waiting for their run_after."""
        if self._queued_read_at is None or not timedelta(0) <= now - self._queued_read_at < POLL:
            self._queued_next = Run.objects.filter(status=Run.Status.QUEUED, run_after__gt=now).aggregate(
                m=Min("run_after")
            )["m"]
            self._queued_read_at = now
        if self._queued_next is not None and self._queued_next <= now:
            self._queued_read_at = None  # due: the pass it wakes claims it; read again after
        return self._queued_next

    def run_forever(self, *, once: bool = False) -> None:
        """Pass, sleep until the next thing is due, repeat. An outcome arriving
        in between only queues its write for the next pass, unless that pass
        is more than COLLECT_WITHIN away or a queued run is waiting for the
        slot it frees: a finished run is not worth a pass of its own."""
        self.start(self.clock())
        if self.clustered and not once:
            self.listener = WakeListener.for_django_connection(
                connection, self.pool.wake, ignore_sender=self.worker_id
            )
            self.listener.start()
        backoff = 0.5
        wake_at: datetime | None = None  # None: pass now
        while not self.stopping:
            try:
                if wake_at is None or self.clock() >= wake_at:
                    self._backlog = False
                    did = self.run_pass(self.clock())
                    if once:
                        break
                    if did and self._backlog:
                        wake_at = None
                        continue  # a step stopped at its batch size: more is due right away
                    wake_at = self.next_wakeup(self.clock())
                outcomes = self.pool.wait((wake_at - self.clock()).total_seconds())
                if outcomes:
                    self._pending.extend(outcomes)
                    if self._waiting_for_slots:
                        wake_at = None
                    elif wake_at - self.clock() > COLLECT_WITHIN:
                        self.collect([], self.clock())
                elif self.clock() < wake_at:
                    wake_at = None  # woken early: a signal or a notification
                backoff = 0.5
            except DatabaseError as exc:
                log.error("database error, retrying in %.1f s: %s", backoff, exc)
                self._claims_uncertain = True
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

    def request_stop(self, *_args) -> None:
        self.stopping = True
        self.pool.wake()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    def drain(self, grace: float | None = None) -> None:
        """Stop claiming; wait for in-flight runs up to the grace period; then
        record what is left as interrupted (one-off tasks go back to queued)."""
        self.draining = True
        grace = settings.JOBS_SHUTDOWN_GRACE if grace is None else grace
        try:
            self.step_down()
        except DatabaseError as exc:
            log.warning("could not release the leader lease (it lapses by itself): %s", exc)
        if self.pool.flights:
            log.info("draining %d run(s) for up to %s s", len(self.pool.flights), grace)
        until = time.monotonic() + grace
        while self.pool.flights and time.monotonic() < until:
            self.collect(self.pool.wait(min(0.2, max(0.0, until - time.monotonic()))), self.clock())
            self.enforce_deadlines(self.clock())
        now = self.clock()
        for flight in list(self.pool.flights.values()):
            flight.ctx.cancelled.set()
            if flight.is_task:
                Run.objects.filter(pk=flight.run_id, status=Run.Status.RUNNING).update(
                    status=Run.Status.QUEUED,
                    worker_id="",
                    started_at=None,
                    heartbeat_at=None,
                    run_after=now,
                    error="scheduler stopped, task requeued",
                    log=cap_message(flight.ctx.log_text(), self.max_message_chars),
                )
                self.pool.abandon(flight.run_id)
            else:
                self._stop_waiting(
                    flight,
                    Run.Status.INTERRUPTED,
                    now,
                    f"the scheduler stopped (shutdown grace of {grace:g} s ran out) before the run finished",
                )
        self.pool.close()
        self.alert_sender.stop(self.clock, wait=min(grace, settings.EMAIL_TIMEOUT))
        if self.listener is not None:
            self.listener.stop()
        connection_created.disconnect(dispatch_uid=self._idle_limit_uid)
        leases.release(leases.node_lease_name(self.worker_id), self.worker_id, epoch=self.node_epoch)


def is_connection_error(exc: BaseException) -> bool:
    """Whether a failed write failed for the connection or the server's state
    (lost connection, restart, lock, deadlock, timeout), so the same write
    may succeed later, rather than for the values it wrote (a constraint, a
    NUL or a lone surrogate, a value too long), which fail again however
    often they are written. Only the first keeps the loop's back-off."""
    if not isinstance(exc, (OperationalError, InterfaceError)):
        return False
    # PostgreSQL's class 54 (program limit exceeded: a row or index entry too
    # large) arrives as an OperationalError but is the data's.
    sqlstate = getattr(exc.__cause__, "sqlstate", None) or ""
    return not sqlstate.startswith("54")


def _scheduler_process_alive(pid: int) -> bool:
    """Whether `pid` on this host is a live scheduler process. Our own pid is an
    earlier life of this container (pid numbers restart with it); a pid reused
    by some other program, or a zombie, does not count."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"runscheduler" in f.read()
    except OSError:
        return True


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():g} s"


def _wants_recovery_notice(run: Run) -> bool:
    """A success of this run's job may owe a "recovered" notice, which depends
    on the job's state and latest alert: its outcome is written the long way."""
    return run.job is not None and alerts.wants_recovered(run.job)
