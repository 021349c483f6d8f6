"""Planning: which fires are due, what each becomes, and the claim that makes
sure each is written once.

`Planner.plan_due(now, …)` reads the due jobs (`next_fire_at <= now`, an
indexed column; on one node also those due within `ahead`, planned ahead
and held until their time: Starter.hold), decides each fire without writing (`plan_fire`: run it,
skip it as a misfire, or skip it as an overlap), then in one transaction
claims them all with a compare-and-set on `next_fire_at` and the job's
`version` (`claim_batch`, one statement: a fire is claimed only from the row
its plan was made from, so an edit made in between, which may have changed
the schedule, is planned again from the row as it is) and inserts their
runs. On PostgreSQL the claim also requires that the leader lease is still
held at the planner's epoch, judged by the database in the claim's own
statement. On one node, fires may be written already running (as many as
the caller says slots are free) and started at once. What it wrote comes
back as a `Planned`; nothing is kept here between passes.

The schedule check, which sets jobs that are off their schedule back on it,
is jobs.engine.schedulecheck's.
"""

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import BooleanField, Min, Subquery
from django.db.models.expressions import RawSQL

from jobs import admission, cluster, services
from jobs.core.logcontext import about
from jobs.engine import leases, newrows, shards
from jobs.engine.bulk import CHUNK, database, insert_rows, update_from_values
from jobs.engine.claims import ClaimStatement
from jobs.engine.prepared import Prepared
from jobs.engine.starting import Held, start_time, take
from jobs.models import LIVE_RUN, AuditEvent, Job, Run

log = logging.getLogger("cronboard.scheduler")

PLAN_BATCH = 500

# A job has a live run of its own (a backfill's runs are not the job's own:
# they do not hold its schedule up). Raw SQL: SQLite uses the partial index
# run_live_idx only when the condition is stated as literals (see LIVE_RUN).
BUSY = RawSQL(
    f'EXISTS (SELECT 1 FROM "{Run._meta.db_table}" WHERE "{Run._meta.db_table}"."job_id" = '
    f'"{Job._meta.db_table}"."id" AND {LIVE_RUN.sql} AND "{Run._meta.db_table}"."backfill_id" IS NULL)',
    (),
    output_field=BooleanField(),
)


@dataclass
class FirePlan:
    """What plan_due decided for one due job; applied atomically by claim_fire()."""

    job: Job
    expected_next: datetime
    new_next: datetime | None
    last_fire: datetime | None
    runs: list[Run] = field(default_factory=list)
    disable: bool = False  # a run-once job that fired
    cancel: tuple[int, ...] = ()  # live runs the fire replaces (overlap policy replace)


@dataclass(frozen=True)
class Overlap:
    """What a due fire of a job with a live run becomes, by the job's overlap
    policy (`overlap_of`)."""

    skip: str = ""  # why it is skipped as an overlap; "" when it runs
    wait: bool = False  # it is written waiting, let through when the live run ends
    cancel: tuple[int, ...] = ()  # live runs cancelled first, as a cancel from the console is


def overlap_of(job: Job) -> Overlap:
    """The overlap policy applied to a fire of `job`, which has a live run of
    its own. Only a job whose policy is not `skip` reads its live runs."""
    policy = job.overlap_policy
    if policy == Job.OverlapPolicy.SKIP:
        return Overlap(skip="the previous run was still running")
    live = list(
        Run.objects.filter(LIVE_RUN, job_id=job.pk, backfill__isnull=True)
        .order_by("pk")
        .values_list("pk", "status", "trigger")
    )
    if not live:
        return Overlap()  # it ended since the due query
    if policy == Job.OverlapPolicy.QUEUE_ONE:
        # The one run kept behind the live one is a fire, not a manual or downstream run in the job's pool.
        waiting = {trigger for _pk, status, trigger in live if status == Run.Status.WAITING}
        if waiting & set(Run.SCHEDULED_TRIGGERS):
            return Overlap(skip="a fire was already queued behind the live run")
        return Overlap(wait=True)
    if policy == Job.OverlapPolicy.REPLACE:
        return Overlap(wait=True, cancel=tuple(pk for pk, _status, _trigger in live))
    if len(live) >= job.max_parallel:
        return Overlap(skip=f"{job.max_parallel} runs of the job were live (its max_parallel)")
    return Overlap()


@dataclass
class Planned:
    """What one plan_due did."""

    did: bool = False
    full: bool = False  # it read a whole batch: more fires may be due at once
    # The runs it wrote queued, by id, for the claim to start from memory; None
    # when it wrote no batch in one go (nothing due, or one job at a time).
    queued: dict[int, Run] | None = None
    starting: list[Run] = field(default_factory=list)  # written running on this node: start them now
    # Written running on this node from their fire time, planned ahead: each
    # starts at its time (Starter.hold).
    held: list[Held] = field(default_factory=list)
    lease_lost: bool = False  # claims were refused because the leader lease is gone
    waiting: bool = False  # it wrote waiting runs: admission asks at once
    # The earliest next fire time once this pass's claims moved their jobs,
    # when the pass could tell; None when it could not (nothing due, a claim
    # refused, a full batch, a replan): then `next_fire()` asks.
    next_fire: "NextFire | None" = None
    written: list[Run] = field(default_factory=list)  # every run it wrote, skipped ones too (the metrics')


@dataclass(frozen=True)
class NextFire:
    at: datetime | None  # None: no job has a next fire time


class Planner:
    def __init__(self, *, worker_id: str, clustered: bool, misfire_threshold: timedelta, clock):
        self.worker_id = worker_id
        self.clustered = clustered
        self.misfire_threshold = misfire_threshold
        self.clock = clock
        self.claims = ClaimStatement(worker_id=worker_id, clustered=clustered)

    def plan_due(
        self,
        now: datetime,
        *,
        epoch: int | None,
        free_slots: int,
        settle: Callable[[set[int]], bool] | None = None,
        ahead: timedelta = timedelta(0),
    ) -> Planned:
        """Claim every due fire (up to a batch) and write its run. `epoch`: the
        leader lease's, which the claims carry (None on one node). Up to
        `free_slots` queued fires are written already running on this node
        (0: every fire goes through the queue). `settle(job ids)`: given the
        due jobs that have a live run, writes the outcomes of their runs that
        ended but are not written yet, if there are any, and says whether it
        did; then the due jobs are read again, so an ended run is no overlap.
        `ahead`: fires due within it after `now` are planned too, in the
        slots the fires due now leave free, each written running on this
        node from its fire time and held until then (`held`, `_plans`)."""
        horizon = now + ahead if free_slots > 0 else now
        due = due_jobs(horizon)
        if not due:
            return Planned()
        busy = {job.pk for job in due if job.busy and job.next_fire_at <= now}
        if busy and settle is not None and settle(busy):
            due = due_jobs(horizon)
            if not due:
                return Planned()
        plans, later = self._plans(due, now, free_slots)
        truncated = len(due) == PLAN_BATCH
        if truncated and due[-1].next_fire_at > now:
            later.append(due[-1].next_fire_at)  # fires past the batch may be in the window too
        if not plans:  # every fire read is ahead and left for a later pass
            return Planned(next_fire=NextFire(min(later)))
        planned = Planned(did=True, full=truncated and due[-1].next_fire_at <= now)
        held: list[Run] = []
        try:
            one_statement = _one_statement(plans, free_slots)
            with transaction.atomic():
                if one_statement:
                    # The claims and the runs of the fires they won, one round trip.
                    every_run = [run for plan in plans for run in _stamped(plan.runs, epoch)]
                    won, created = self.claims.write(plans, every_run, now, epoch)
                else:
                    won = self.claim_batch(plans, now, epoch=epoch)
                claimed = [plan for plan in plans if plan.job.pk in won]
                if len(claimed) < len(plans) and not self._still_leader(now, epoch):
                    planned.lease_lost, epoch = True, None
                runs = [run for plan in claimed for run in _stamped(plan.runs, epoch)]
                replace_live(claimed, now)
                queued = [run for run in runs if run.status == Run.Status.QUEUED]
                # A broadcast run pinned to another node is that node's to claim.
                mine = [run for run in queued if run.node in ("", self.worker_id)]
                planned.waiting = any(run.status == Run.Status.WAITING for run in runs)
                planned.starting = [run for run in mine if run.scheduled_at <= now][: max(0, free_slots)]
                take(planned.starting, start_time(now, self.clock), worker_id=self.worker_id)
                # Planned ahead (`_plans` left them room): running from their time.
                held = [run for run in mine if run.scheduled_at > now]
                for run in held:
                    take([run], run.scheduled_at, worker_id=self.worker_id)
                if not one_statement:
                    # One INSERT for the batch's runs, inside the claims' transaction.
                    created = insert_rows(runs)
            planned.written = runs
            last_fire = {plan.job.pk: plan.job.last_fire_at for plan in claimed}
            planned.held = [Held(run, last_fire[run.job_id]) for run in held]
            for plan in claimed:
                # The job as its row now is, committed: its runs carry it, and
                # the loop asks when it fires next (jobs.engine.pending).
                plan.job.next_fire_at, plan.job.last_fire_at = plan.new_next, plan.last_fire
            planned.queued = {run.pk: run for run in created if run.status == Run.Status.QUEUED and run.pk}
            if len(claimed) == len(plans) and not planned.full:
                moved = [plan.new_next for plan in plans if plan.new_next is not None]
                after = [due[0].following] if due[0].following is not None else []
                planned.next_fire = NextFire(min([*moved, *after, *later], default=None))
        except IntegrityError:
            # The unique (job, scheduled time, attempt) row stopped a duplicate:
            # redo one by one so the others still go through, all queued.
            log.error("duplicate fire refused by the database; replanning one job at a time")
            planned.waiting = True  # whatever the replanning writes, admission asks
            for run in planned.starting + held:
                run.status, run.worker_id, run.started_at, run.heartbeat_at = (
                    Run.Status.QUEUED,
                    "",
                    None,
                    None,
                )
            planned.starting, planned.held = [], []
            for plan in plans:
                try:
                    with transaction.atomic():
                        if self.claim_fire(plan, now, epoch=epoch):
                            planned.written.extend(plan.runs)
                except IntegrityError:
                    # The fire's row is there already: it was run or recorded.
                    # The job still moves on to its next fire, or it would
                    # stay due, refused on every pass, and never fire again.
                    log.error(
                        "fire of job %s at %s already exists; not planned twice, the job moves on",
                        plan.job.pk,
                        plan.expected_next,
                        extra={**about(job=plan.job), "fire_time": plan.expected_next.isoformat()},
                    )
                    with transaction.atomic():
                        self.claim_fire(plan, now, epoch=epoch, existing_ok=True)
        return planned

    def _plans(self, due: list[Job], now: datetime, free_slots: int) -> tuple[list[FirePlan], list[datetime]]:
        """The plans of `due` (in fire order): every fire due by `now`; and
        of the fires due later (planned ahead) each that fits in the slots
        the fires due now leave, of a job without a live run, that is one
        run starting on this node: not sharded, not waiting for admission,
        not broadcast (its nodes are a read), not run once (Starter.unplan
        could not undo the pause). With the fire times of those left for a
        later pass."""
        plans = [self.plan_fire(job, now, busy=job.busy) for job in due if job.next_fire_at <= now]
        room = free_slots - sum(self._starts_here(run) for plan in plans for run in plan.runs)
        later = []
        for job in due[len(plans) :]:
            plan = None
            if room > 0 and not job.busy and not job.broadcast and not job.run_once:
                # Planned as it will be at its time; written now.
                plan = self.plan_fire(job, job.next_fire_at, busy=False)
            if plan is None or len(plan.runs) != 1 or not self._starts_here(plan.runs[0]):
                later.append(job.next_fire_at)
                continue
            plan.runs[0].created_at = now
            plans.append(plan)
            room -= 1
        return plans, later

    def _starts_here(self, run: Run) -> bool:
        return run.status == Run.Status.QUEUED and run.node in ("", self.worker_id)

    def _still_leader(self, now: datetime, epoch: int | None) -> bool:
        """After a refused claim: was it the lease? Then say so."""
        if not self.clustered or leases.holds(cluster.LEADER, self.worker_id, epoch, now=now):
            return True
        log.warning(
            "fire claims refused: the leader lease (epoch %d) lapsed or passed to another node; planning stops here",
            epoch,
        )
        return False

    def plan_fire(self, job: Job, now: datetime, *, busy: bool) -> FirePlan:
        """Decide, without writing, what the due fire of `job` becomes;
        `busy`: a run of it is live, so the fire is skipped as an overlap."""
        due_at = job.next_fire_at
        latest, missed_before = self.latest_fire_in_window(job, due_at, now)
        fire_id = uuid.uuid4()
        missed = ""  # why the due fire time is skipped as a misfire, if it is
        if latest is not None:
            if missed_before:
                missed = (
                    f"missed: the fire times from {due_at.isoformat()} to {latest.isoformat()} passed "
                    f"before the scheduler reached them (it was stopped or held up); only the last one runs"
                )
            fire_at, trigger = latest, Run.Trigger.SCHEDULE
        elif job.misfire_policy == Job.MisfirePolicy.FIRE_ONCE_NOW:
            fire_at, trigger = due_at, Run.Trigger.CATCH_UP
        else:
            fire_at, trigger = None, None
            missed = (
                f"misfired: {_seconds(now - due_at)} late, more than the {_seconds(self.misfire_threshold)} "
                f"misfire threshold; policy is skip"
            )
        runs = [self.skipped(job, due_at, Run.SkipReason.MISFIRE, now, missed)] if missed else []

        fired = False
        overlap = overlap_of(job) if busy and fire_at is not None else NO_OVERLAP
        if fire_at is not None:
            if overlap.skip:
                runs.append(self.skipped(job, fire_at, Run.SkipReason.OVERLAP, now, overlap.skip))
            else:
                fire = newrows.new(
                    Run,
                    job=job,
                    fire_id=fire_id,
                    scheduled_at=fire_at,
                    run_after=now,
                    trigger=trigger,
                    # Waiting: admission lets it through (jobs.admission).
                    status=admission.first_status(job, wait=overlap.wait),
                    created_at=now,
                    **job.run_policy(),
                )
                # A sharded or broadcast fire is several runs (jobs.engine.shards).
                nodes = (
                    shards.live_nodes(self.worker_id, clustered=self.clustered, now=now)
                    if job.broadcast
                    else ()
                )
                runs += shards.split(fire, job, nodes=nodes)
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
            cancel=overlap.cancel if fired else (),
        )

    def claim_fire(
        self, plan: FirePlan, now: datetime, *, epoch: int | None, existing_ok: bool = False
    ) -> bool:
        """The compare-and-set: only the process whose update moves the job's
        next fire time from the value it read writes the runs. `existing_ok`:
        a run already written for the same fire stays, and this one is not
        written."""
        updates = {"next_fire_at": plan.new_next, "last_fire_at": plan.last_fire}
        if plan.disable:
            # A change of state is a change of the job: an edit made against
            # the version before it is stale (services.save_job_if_changed).
            updates["state"] = Job.State.PAUSED
            updates["version"] = plan.job.version + 1
        if not self._claimable(plan.job, plan.expected_next, now, epoch).update(**updates):
            return False
        replace_live([plan], now)
        Run.objects.bulk_create(_stamped(plan.runs, epoch), ignore_conflicts=existing_ok)
        return True

    def claim_batch(self, plans: list[FirePlan], now: datetime, *, epoch: int | None) -> set[int]:
        """The compare-and-set of `claim_fire` for a whole batch, in ONE
        statement: each job's row moves only if its next fire time and its
        version are still the ones its plan read (and, clustered, only while
        we hold the leader lease at `epoch`, judged by the statement itself). Returns the ids of the
        jobs whose row moved; a stale row claims nothing for its job and does
        not hold up the others."""
        if not plans:
            return set()
        rows, terms = self.claims.terms(plans, now, epoch)
        return update_from_values(Job, rows, **terms)

    def _claimable(self, job: Job, expected_next: datetime, now: datetime, epoch: int | None):
        claimable = Job.objects.scheduled().filter(pk=job.pk, next_fire_at=expected_next, version=job.version)
        if self.clustered:
            # The fence, in the claim's own statement: we still hold the leader
            # lease at our epoch by the database clock, however long we stalled
            # since the loop decided we lead.
            claimable = claimable.filter(leases.held(cluster.LEADER, self.worker_id, epoch, now=now))
        return claimable

    def latest_fire_in_window(
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

    def skipped(self, job: Job, scheduled_at: datetime, reason: str, now: datetime, message: str) -> Run:
        return newrows.new(
            Run,
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


NO_OVERLAP = Overlap()


def plan_at(fire_at: datetime, now: datetime, ahead: timedelta) -> datetime:
    """When the running loop plans a fire at `fire_at`: at its time, or
    planning `ahead` (Scheduler.plan_ahead) that long before it, though not
    before the window after `now` has passed, so that one pass plans a
    window's fires rather than each pass the next one."""
    if not ahead or fire_at <= now + ahead:
        return fire_at
    return max(fire_at - ahead, now + ahead)


def replace_live(plans: list[FirePlan], now: datetime) -> None:
    """Cancel the live runs that claimed fires replace, as a cancel from the
    console does (services.cancel_run: a waiting or queued run at once, a
    running one asked to stop), in the claim's transaction."""
    for plan in plans:
        if not plan.cancel:
            continue
        for run in Run.objects.filter(pk__in=plan.cancel).select_related("job"):
            services.cancel_run(run=run, via=AuditEvent.Via.SYSTEM, now=now)


def _one_statement(plans: list[FirePlan], free_slots: int) -> bool:
    """Whether the claims and their runs' INSERT go as one statement
    (jobs.engine.claims): on PostgreSQL, when no run starts from planning
    and none is replaced, the two things done between them."""
    return (
        database().vendor == "postgresql"
        and free_slots <= 0
        and not any(plan.cancel for plan in plans)
        and len(plans) <= CHUNK
        and sum(len(plan.runs) for plan in plans) <= CHUNK
    )


def due_query(now: datetime):
    """The due query of a pass: up to PLAN_BATCH due jobs in fire order, each
    with `busy` (a run of it is live: the overlap rule) and `following` (the
    first fire time after `now` of any job, which is the next fire unless a
    claim moves a job sooner). One statement, where two more would ask for
    the live runs and for the loop's sleep; both parts are ranges of
    job_state_due_idx."""
    following = (
        Job.objects.scheduled()
        .filter(next_fire_at__gt=now)
        .order_by("next_fire_at")
        .values("next_fire_at")[:1]
    )
    return Job.objects.due(now).annotate(busy=BUSY, following=Subquery(following))[:PLAN_BATCH]


# Compiled once: Django's compilation was most of the due query's cost
# (jobs.engine.prepared).
due_jobs = Prepared(due_query)


def next_fire() -> datetime | None:
    """The earliest next fire time of the enabled jobs."""
    return Job.objects.scheduled().aggregate(m=Min("next_fire_at"))["m"]


def _stamped(runs: list[Run], epoch: int | None) -> list[Run]:
    """Runs carry the leader epoch that planned them."""
    for run in runs:
        run.planned_epoch = epoch
    return runs


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():g} s"
