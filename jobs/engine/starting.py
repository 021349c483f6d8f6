"""Starting runs: claim queued runs for this node's free worker slots, and
hand each run to the pool with its context; and hold the runs of fires
planned ahead (`Starter.hold`), each with its slot, until their time: in
the pool, when it holds a run until its time itself (the process pool:
its child waits, so the loop need not wake for each fire), else here
(`start_held`, at the loop's wake-up). A fire handed to the pool goes
back to being held here if a run of its job starts before it does
(`start`), so its time decides it as for any held fire.

`Starter.claim_queued(now, known=…)` takes the due queued runs (retries,
manual runs, tasks, upstream runs, and on PostgreSQL the fires the leader
planned) in order, up to the free slots, marks them running on this node
with a compare-and-set on their status, and starts them. `known` are runs
planning just wrote and still holds in memory: those are not loaded back.
What is left of them, and whether runs wait for slots, comes back in the
`Claimed`.

On PostgreSQL, where every node claims on every pass and each round trip
to the server is part of a fire's lateness, the claim is one statement
(`ClusterClaim`): an UPDATE of the oldest due queued runs picked with
`FOR UPDATE SKIP LOCKED` (so each run is taken by one node), which returns
them with their job. On SQLite (one node, one writer) the claim asks whether any run is due
(a read: most passes find none), and if so marks the oldest running on
this node in one UPDATE … RETURNING (`_single_claim`), then loads those it
does not hold.
"""

import functools
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Min

from jobs.engine.bulk import database, fetch
from jobs.engine.clock import Cadence
from jobs.engine.execution.pool import Flight, HandlerRef, Pool
from jobs.engine.outcomes import Recorded, Recorder, back_to_queue
from jobs.engine.prepared import Prepared
from jobs.handlers.base import RunContext
from jobs.models import QUEUED_RUN, Job, Run

CLAIM_BATCH = 100


@dataclass
class Claimed:
    """What one claim_queued did."""

    did: bool = False
    known: dict[int, Run] = field(default_factory=dict)  # the in-memory runs not claimed yet
    waiting_for_slots: bool = False  # every free slot was filled and more runs may be queued
    full: bool = False  # the batch size stopped it while slots were free: more may be due at once
    recorded: Recorded = field(default_factory=Recorded)  # runs it could not start (their job is deleted)


def start_time(now: datetime, clock: Callable[[], datetime]) -> datetime:
    """When runs this pass hands to workers start: the clock's time, not when
    the pass began (the pass's own writes are part of a fire's lateness)."""
    return max(now, clock())


@dataclass(frozen=True)
class Held:
    """A fire planned ahead (planning.Planner.plan_due): its run, written
    running on this node from the fire's time, and its job's last fire time
    before it, which undoing it restores (`Starter.unplan`)."""

    run: Run
    last_fire_at: datetime | None


def take(runs: list[Run], started: datetime, *, worker_id: str) -> None:
    """Make the in-memory runs this node's, running since `started`."""
    for run in runs:
        run.status, run.worker_id, run.started_at, run.heartbeat_at = (
            Run.Status.RUNNING,
            worker_id,
            started,
            started,
        )


class Starter:
    def __init__(
        self,
        *,
        worker_id: str,
        clock: Callable[[], datetime],
        pool: Pool,
        recorder: Recorder,
        log_keep: int,
        remember_for: timedelta,
        step: Callable[[str], AbstractContextManager] = lambda name: nullcontext(),
    ):
        self.worker_id = worker_id
        self.step = step  # the loop's step timer: the hand-off is timed on its own
        # A run planning wrote queued starts from memory, with its job as
        # planning read it, only this long after it was written; after that
        # it is read again with its job as it is now (the loop's POLL: how
        # soon an edit made in the console is noticed).
        self.remember_for = remember_for
        self.clock = clock
        self.pool = pool
        self.recorder = recorder
        self.log_keep = log_keep
        # Runs planned ahead (planning.Planner.plan_due), written running on
        # this node from their fire time, in that order: each holds a slot
        # until it starts, at its time (`start_held`).
        self.held: list[Held] = []
        # Runs planned ahead that the pool holds until their time instead
        # (`Pool.ahead`), by id, until their outcome is written.
        self.ahead: dict[int, Held] = {}

    # -- runs planned ahead ------------------------------------------------------

    @property
    def free_slots(self) -> int:
        """The pool's free slots less those the held runs keep."""
        return self.pool.free_slots - len(self.held)

    @property
    def held_at(self) -> datetime | None:
        """When the first held run starts."""
        return self.held[0].run.started_at if self.held else None

    def hold(self, held: list["Held"]) -> Recorded:
        """Hold runs planned ahead until their time: in a pool that holds a
        run itself (`Pool.ahead`), handed over now; else, or while a run of
        its job executes here (`start_held` decides it at its time), here."""
        if not self.pool.ahead:
            self._hold_here(held)
            return Recorded()
        self._forget_gone_ahead()
        live = self._live_jobs()
        self._hold_here([one for one in held if one.run.job_id in live])
        ahead = [one for one in held if one.run.job_id not in live]
        recorded = self.start_all([one.run for one in ahead], ahead=True)
        self.ahead.update((one.run.pk, one) for one in ahead)
        return recorded

    def _hold_here(self, held: list["Held"]) -> None:
        if held:
            self.held = sorted([*self.held, *held], key=lambda one: (one.run.started_at, one.run.pk))

    def _live_jobs(self) -> set[int]:
        """The jobs with a run executing here, as BUSY counts them (a
        backfill's runs are not the job's own)."""
        return {
            f.job_id for f in self.pool.flights.values() if getattr(f.ctx.run, "backfill_id", None) is None
        }

    def _forget_gone_ahead(self) -> None:
        """Forget the runs handed over ahead that left the pool: their outcome
        is written, or they were given up on (once a pass, from `hold`)."""
        self.ahead = {pk: one for pk, one in self.ahead.items() if pk in self.pool.flights}

    def _take_back_fires_of(self, run: Run) -> None:
        """`run` starts: a fire of its job the pool holds until its time and
        has not started is taken back and held here, where its time decides
        it (`start_held`: it goes back to planning while this run executes)."""
        if run.job_id is None or getattr(run, "backfill_id", None) is not None:
            return
        self._forget_gone_ahead()
        for pk, one in list(self.ahead.items()):
            if one.run.job_id == run.job_id and pk != run.pk:
                del self.ahead[pk]
                if self.pool.withdraw(pk):
                    self._hold_here([one])

    def start_held(self) -> tuple[Recorded, bool]:
        """Hand the held runs whose time has come to the pool, each running
        from the clock's time: the moment it starts, which its outcome
        writes (Recorder.columns), however late. A fire whose job has a run
        executing here that started since it was planned goes back to
        planning (`unplan`); a run the pool has no slot for goes back to the
        queue, due at its fire time (`requeue`). Either way the second value
        is True: a pass is due at once."""
        now = self.clock()
        due = [one for one in self.held if one.run.started_at <= now]  # held is in time order
        live = self._live_jobs()
        # Each leaves `held` once its write is done: after a database error
        # the rest are still held, never taken for unconfirmed claims.
        back = [one for one in due if one.run.job_id in live]
        for one in back:
            self.unplan(one)
            self.held.remove(one)
        fits = [one for one in due if one.run.job_id not in live]
        room = max(0, self.pool.free_slots)
        fits, full = fits[:room], fits[room:]
        requeued = self.requeue([one.run for one in full])
        self.held = [one for one in self.held if one not in fits and one not in full]
        runs = [one.run for one in fits]
        take(runs, now, worker_id=self.worker_id)
        return self.start_all(runs), bool(back or requeued)

    def unplan(self, held: "Held") -> None:
        """Undo a fire planned ahead: its run is deleted and, if the job's next
        fire is still the one planning moved it to, the job is due again at
        the fire's time, so the next pass decides the fire by the job's
        overlap policy, as it would have at its time. A job whose next fire
        moved since (its schedule edited, paused, repaired) drops the fire,
        as that change would have before its time. A fire recorded meanwhile
        (a cancel, the sweep) stays as it is."""
        run, job = held.run, held.run.job
        with transaction.atomic():
            deleted, _ = Run.objects.filter(
                pk=run.pk, status=Run.Status.RUNNING, worker_id=self.worker_id
            ).delete()
            moved = deleted and Job.objects.filter(pk=job.pk, next_fire_at=job.next_fire_at).update(
                next_fire_at=run.scheduled_at, last_fire_at=held.last_fire_at
            )
        if moved:
            job.next_fire_at, job.last_fire_at = run.scheduled_at, held.last_fire_at

    def requeue(self, runs: list[Run]) -> int:
        """Held runs go back to the queue, each due at its fire time (its
        run_after), for a claim to start: at shutdown (`hand_back_held`), or
        when the pool has no slot at their time. Returns how many."""
        if not runs:
            return 0
        return Run.objects.filter(
            pk__in=[run.pk for run in runs], status=Run.Status.RUNNING, worker_id=self.worker_id
        ).update(**back_to_queue())

    def hand_back_held(self) -> int:
        """Shutdown: the held runs go back to the queue (`requeue`), and those
        the pool holds that have not started (`Pool.withdraw`)."""
        held, self.held = self.held, []
        ahead, self.ahead = self.ahead, {}
        back = [one.run for one in held] + [one.run for pk, one in ahead.items() if self.pool.withdraw(pk)]
        return self.requeue(back)

    # -- queued runs ----------------------------------------------------------------

    def claim_queued(self, now: datetime, *, known: dict[int, Run]) -> Claimed:
        """Start queued runs that are due, as many as there are free slots.
        `known`: runs planning wrote queued, by id, which start from memory
        while they are recent (`remember_for`)."""
        known = {pk: run for pk, run in known.items() if run.created_at >= now - self.remember_for}
        free = min(self.free_slots, CLAIM_BATCH)
        if free <= 0:
            # Runs wait for a slot if any are due (while runs planned ahead
            # hold the free ones, a read tells).
            waiting = self.pool.free_slots <= 0 or bool(_any_queued_due(now))
            return Claimed(known=known, waiting_for_slots=waiting)
        if connection.vendor == "postgresql":
            return self._claim_clustered(now, free, known)
        if not _any_queued_due(now):
            # The common pass: nothing queued. A read, not a write transaction
            # (on SQLite BEGIN IMMEDIATE takes the database's write lock).
            return Claimed(known=known)
        started = start_time(now, self.clock)
        claimed_rows = _single_claim(free, worker_id=self.worker_id, started=started, now=now)
        ids = [pk for pk, _cancel in claimed_rows]
        _note_cancels(known, {pk for pk, cancel in claimed_rows if cancel})
        if not ids:
            return Claimed(known=known)
        # Runs planning just wrote are in memory; only the others (retries,
        # manual runs, tasks, other nodes' fires) are loaded, with their job.
        missing = [pk for pk in ids if pk not in known]
        loaded = (
            {run.pk: run for run in Run.objects.filter(pk__in=missing).select_related("job")}
            if missing
            else {}
        )
        runs = [run for pk in ids if (run := known.get(pk) or loaded.get(pk)) is not None]
        runs.sort(key=lambda run: (run.run_after, run.pk))
        claimed = self._claimed(runs, known, free)
        take(runs, started, worker_id=self.worker_id)
        claimed.recorded = self.start_all(runs)
        return claimed

    def _claim_clustered(self, now: datetime, free: int, known: dict[int, Run]) -> Claimed:
        """PostgreSQL: up to `free` due queued runs, marked running on this
        node and read back with their jobs, in one statement (autocommit:
        its commit is the claim). Runs planning holds start from memory."""
        rows = _cluster_claim(free, worker_id=self.worker_id, started=start_time(now, self.clock))
        if not rows:
            return Claimed(known=known)
        _note_cancels(known, {run.pk for run in rows if run.cancel_requested})
        runs = [known.get(run.pk) or run for run in rows]
        claimed = self._claimed(runs, known, free)
        # The ones from memory, as the statement marked them: from the time
        # it wrote, never before the database's clock that found them due.
        take(runs, rows[0].started_at, worker_id=self.worker_id)
        claimed.recorded = self.start_all(runs)
        return claimed

    def _claimed(self, runs: list[Run], known: dict[int, Run], free: int) -> Claimed:
        """What a claim that took `runs` (with `free` slots) did, before they start."""
        taken = {run.pk for run in runs}
        claimed = Claimed(did=True, known={pk: run for pk, run in known.items() if pk not in taken})
        if len(runs) == free:
            # Perhaps more queued: wait for slots, or go on if the batch limited us.
            claimed.waiting_for_slots = free == self.free_slots
            claimed.full = not claimed.waiting_for_slots
        return claimed

    def start_all(self, runs: list[Run], *, ahead: bool = False) -> Recorded:
        """Start runs this node took (`take`), each from its started_at:
        `ahead`, handed over now and started by the pool at that time
        (a `Pool.ahead` pool's `at`)."""
        recorded, started = Recorded(), []
        if not runs:
            return recorded
        with self.step("hand_off"):
            clock, monotonic = self.clock(), time.monotonic()
            for run in runs:
                at = monotonic + (run.started_at - clock).total_seconds() if ahead else None
                one = self.start(run, run.started_at, at=at)
                if one.started:
                    started.append(run)
                else:
                    recorded |= one
        return replace(recorded, started=tuple(started))

    def start(self, run: Run, now: datetime, *, at: float | None = None) -> Recorded:
        """Hand a run this node took to the pool (a run whose job was deleted
        meanwhile is recorded cancelled instead); `at`: the pool starts it
        then (on time.monotonic()), not now."""
        job = run.job
        if job is not None and job.is_deleted:
            return self.recorder.record(run, Run.Status.CANCELLED, now, error="job deleted")
        if run.cancel_requested:  # a shard cancelled while queued (services.cancel_run)
            return self.recorder.record(run, Run.Status.CANCELLED, now, error="cancelled before it started")
        deadline = now + timedelta(seconds=run.timeout_seconds)
        ctx = RunContext(
            run_id=run.pk,
            fire_id=str(run.fire_id),
            attempt=run.attempt,
            scheduled_at=run.scheduled_at,
            deadline=deadline,
            # A job's run: the job's properties with the run's overrides (run
            # now with parameters, or copied by a retry) merged over them.
            properties=dict(run.properties or {})
            if run.is_task
            else {**job.properties, **(run.properties or {})},
            job_id=job.pk if job else None,
            job_name=job.name if job else "",
            task_key=run.task_key,
            sql_write=bool(job and job.sql_write),
            upstream=upstream_of(run),
            shard_index=run.shard_index,
            shard_total=run.shard_total,
            job=job,
            run=run,
            log_keep=self.log_keep,
            clock=self.clock,
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
        if self.ahead and at is None:
            self._take_back_fires_of(run)
        self.pool.start(flight, HandlerRef(str(kind), name), at=at)
        return Recorded(started=(run,))


class ClusterClaim:
    """The PostgreSQL claim, one statement: the oldest due queued runs, up
    to a number, locked with SKIP LOCKED (another node's claim skips them
    rather than waiting), not pinned to another node (a broadcast run),
    marked running on this node, and returned with
    their jobs (a task has none), oldest first.

    Due by the database's clock, read by the statement itself: a run
    another node queued as due by its estimate of that clock
    (jobs.engine.clock) is due here at once, however far this node's own
    estimate lags behind (at most a round trip, but then a run would wait
    for the next wake-up). The runs start from this node's estimate
    (`started`) but never before that clock (GREATEST): a run never starts
    before its run_after.

    The rows are read as `Run.objects.select_related("job")` reads them:
    the same columns in the same order, with Django's converters, compiled
    once per connection (tests/test_prepared.py compares the two)."""

    def __init__(self):
        self._compiled = None

    def __call__(self, limit: int, *, worker_id: str, started: datetime) -> list[Run]:
        conn = database()
        compiled = self._compiled
        if compiled is None or compiled["connection"] is not conn:
            compiled = self._compiled = self._compile(conn)
        prep = conn.ops.adapt_datetimefield_value
        rows = fetch(conn, compiled["sql"], [worker_id, prep(started), prep(started), worker_id, limit])
        if compiled["converters"]:
            rows = compiled["compiler"].apply_converters(rows, compiled["converters"])
        runs = []
        (run_start, run_end), (job_start, job_end) = compiled["run"], compiled["job"]
        cache_job = compiled["cache_job"]
        for row in rows:
            run = Run.from_db(conn.alias, compiled["run_names"], row[run_start:run_end])
            job_values = row[job_start:job_end]
            job = (
                None if job_values[0] is None else Job.from_db(conn.alias, compiled["job_names"], job_values)
            )
            cache_job(run, job)
            runs.append(run)
        runs.sort(key=lambda run: (run.run_after, run.pk))
        return runs

    @staticmethod
    def _compile(conn) -> dict:
        compiler = Run.objects.select_related("job").query.get_compiler(connection=conn)
        compiler.as_sql()  # fills in what it selects
        select = [column for column, _sql, _alias in compiler.select]
        info = compiler.klass_info
        (related,) = info["related_klass_infos"]
        qn = conn.ops.quote_name
        run_table, job_table = Run._meta.db_table, Job._meta.db_table
        columns = [
            f"claimed.{qn(column.target.column)}"
            if column.alias == run_table
            else f"{qn(job_table)}.{qn(column.target.column)}"
            for column in select
        ]
        run, job = qn(run_table), qn(job_table)
        names = ("status", "worker_id", "started_at", "heartbeat_at", "run_after", "job", "node")
        col = {name: qn(Run._meta.get_field(name).column) for name in names}
        run_pk, job_pk = qn(Run._meta.pk.column), qn(Job._meta.pk.column)
        sql = (
            f"WITH claimed AS (UPDATE {run} SET {col['status']} = '{Run.Status.RUNNING}', "
            f"{col['worker_id']} = %s, {col['started_at']} = GREATEST(%s, statement_timestamp()), "
            f"{col['heartbeat_at']} = GREATEST(%s, statement_timestamp()) "
            f"WHERE {run}.{run_pk} IN (SELECT {run_pk} FROM {run} "
            f"WHERE {QUEUED_RUN.sql} AND {col['run_after']} <= statement_timestamp() "
            f"AND {col['node']} IN ('', %s) ORDER BY {col['run_after']}, {run_pk} "
            f"LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING {run}.*) "
            f"SELECT {', '.join(columns)} FROM claimed "
            f"LEFT JOIN {job} ON {job}.{job_pk} = claimed.{col['job']}"
        )
        run_fields, job_fields = info["select_fields"], related["select_fields"]
        return {
            "connection": conn,
            "sql": sql,
            "compiler": compiler,
            "converters": compiler.get_converters(select),
            "run": (run_fields[0], run_fields[-1] + 1),
            "job": (job_fields[0], job_fields[-1] + 1),
            "run_names": [select[i].target.attname for i in run_fields],
            "job_names": [select[i].target.attname for i in job_fields],
            "cache_job": related["local_setter"],
        }


_cluster_claim = ClusterClaim()


def _note_cancels(known: dict[int, Run], cancelled: set[int]) -> None:
    """Runs planning holds in memory that were cancelled since (a queued
    shard: services.cancel_run) learn it from the claim's row."""
    for pk in cancelled:
        if pk in known:
            known[pk].cancel_requested = True


def _single_claim(limit: int, *, worker_id: str, started: datetime, now: datetime) -> list[tuple[int, bool]]:
    """SQLite (one node, one writer): up to `limit` due queued runs, oldest
    first, marked running on this node from `started`, in one statement (its
    own transaction): their ids, each with whether it was cancelled while
    queued. A database error may hide that it
    committed, as the PostgreSQL claim's may (the loop then requeues what
    it did not start: maintenance.requeue_unstarted_claims)."""
    conn = database()
    prep = conn.ops.adapt_datetimefield_value
    rows = fetch(
        conn, _single_claim_sql(), [worker_id, prep(started), prep(started), prep(now), worker_id, limit]
    )
    return [(pk, bool(cancel)) for pk, cancel in rows]


@functools.cache
def _single_claim_sql() -> str:
    qn = database().ops.quote_name
    run = qn(Run._meta.db_table)
    col = {
        name: qn(Run._meta.get_field(name).column)
        for name in ("status", "worker_id", "started_at", "heartbeat_at", "run_after", "node")
    }
    run_pk = qn(Run._meta.pk.column)
    return (
        f"UPDATE {run} SET {col['status']} = '{Run.Status.RUNNING}', {col['worker_id']} = %s, "
        f"{col['started_at']} = %s, {col['heartbeat_at']} = %s "
        f"WHERE {run_pk} IN (SELECT {run_pk} FROM {run} WHERE {QUEUED_RUN.sql} AND {col['run_after']} <= %s "
        # A broadcast run only on its node.
        f"AND {col['node']} IN ('', %s) "
        f"ORDER BY {col['run_after']}, {run_pk} LIMIT %s) AND {QUEUED_RUN.sql} "
        f"RETURNING {run_pk}, {qn(Run._meta.get_field('cancel_requested').column)}"
    )


def _queued_due(now: datetime):
    return Run.objects.filter(QUEUED_RUN, run_after__lte=now).order_by().only("id")[:1]


# Asked on every pass, so compiled once (jobs.engine.prepared).
_any_queued_due = Prepared(_queued_due)


def next_queued_after(now: datetime) -> datetime | None:
    """When the next queued run that is not due yet becomes due."""
    return Run.objects.filter(QUEUED_RUN, run_after__gt=now).aggregate(m=Min("run_after"))["m"]


class NextQueued:
    """When a queued run next becomes due, read from the database once
    `every` (the loop's POLL) and lowered at once by the runs this process
    queues (retries, downstream runs): runs due now are the claim's business
    in every pass; this is for the ones waiting for their run_after."""

    def __init__(self, *, every: timedelta):
        self.at: datetime | None = None
        self.reads = Cadence(every)

    def lower(self, at: datetime) -> None:
        if self.at is None or at < self.at:
            self.at = at

    def get(self, now: datetime) -> datetime | None:
        if self.reads.take(now):
            self.at = next_queued_after(now)
        if self.at is not None and self.at <= now:
            self.reads.again()  # due: the pass it wakes claims it; read again after
        return self.at


def upstream_of(run: Run) -> dict | None:
    """What a downstream run's handler sees as ctx.upstream: the upstream
    run's job name, id, status and result (None for other runs)."""
    if not run.caused_by_id:
        return None
    upstream = Run.objects.select_related("job").filter(pk=run.caused_by_id).first()
    if upstream is None:
        return {"job": "", "run_id": run.caused_by_id, "status": "", "result": ""}
    return {
        "job": upstream.job.name if upstream.job else "",
        "run_id": upstream.pk,
        "status": upstream.status,
        "result": upstream.result,
    }
