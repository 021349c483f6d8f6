"""Outcomes: writing how runs ended, and what follows from it.

`Recorder` writes a run's outcome only while the run is still `running` (one
already timed out, cancelled or swept stays as it is), and in the same
transaction queues its retry, updates its job (last status, consecutive
failed fires, the crash at the threshold with its alert, the "recovered"
notice) and starts the jobs that run after it. Finished runs are written in
batches (`write_finished`: the common success in two statements for the
whole batch); a batch that fails for its data is written again run by run,
and a run whose own write fails again is recorded `failed` with the reason
(`record_alone`), so one run's data never stops the others. Only a
connection-level error (`is_connection_error`) goes up to the loop, which
backs off and writes the same outcomes again.

Runs the scheduler gives up on are recorded here too: past their deadline
(`enforce_deadlines`), cancelled, or left at shutdown (`stop_waiting`).

Every write returns a `Recorded`: what the loop passes on to whoever paces
on it (an alert was written: the outbox; a run was queued: the wake-up).
"""

import logging
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction

from jobs import admission, alerts
from jobs.core.logcontext import about
from jobs.engine import shards
from jobs.engine.bulk import (
    CHUNK,
    database,
    update_from_values,
    update_from_values_returning,
    update_then_update,
)
from jobs.engine.execution.pool import Flight, Outcome, Pool
from jobs.models import LIVE_RUN, Job, JobDependency, Run, cap_message

log = logging.getLogger("cronboard.scheduler")

LAST_ERROR_CHARS = 4000  # a job keeps this much of its last run's error

# Whether the job being updated is upstream of another (for a RETURNING clause).
_DEPENDENCIES = JobDependency._meta.db_table
HAS_DOWNSTREAM = (
    f'EXISTS (SELECT 1 FROM "{_DEPENDENCIES}" WHERE "{_DEPENDENCIES}".'
    f'"{JobDependency._meta.get_field("upstream").column}" = "{Job._meta.db_table}"."{Job._meta.pk.column}")'
)


@dataclass
class Recorded:
    """What recording did."""

    runs: int = 0  # runs it dealt with (finished, timed out, cancelled, stale)
    written: int = 0  # of those, runs whose outcome it wrote (the others had ended already)
    alerts: bool = False  # it wrote an alert or notice: the outbox has something new
    queued_at: datetime | None = None  # the earliest run_after of the runs it queued (retries, downstream)
    finished: tuple[
        int, ...
    ] = ()  # runs whose outcome is dealt with: the pool lets go of them (`Pool.release`)
    # For the metrics (jobs.engine.metrics): runs handed to the pool, and runs
    # whose end was written, as (run, status, duration in ms). Not part of
    # what a write did for pacing, so equal Recorded compare equal without them.
    started: tuple[Run, ...] = field(default=(), compare=False)
    ended: tuple[tuple[Run, str, int], ...] = field(default=(), compare=False)

    def __or__(self, other: "Recorded") -> "Recorded":
        queued = [at for at in (self.queued_at, other.queued_at) if at is not None]
        return Recorded(
            runs=self.runs + other.runs,
            written=self.written + other.written,
            alerts=self.alerts or other.alerts,
            queued_at=min(queued) if queued else None,
            finished=self.finished + other.finished,
            started=self.started + other.started,
            ended=self.ended + other.ended,
        )


def _as_written(outcome: Outcome, now: datetime) -> dict:
    """A run's outcome as Recorder.record and .columns take it: how it
    ended, when (when the loop took it; else `now`), and what it said."""
    return {
        "status": outcome.status,
        "now": outcome.ended_at or now,
        "result": outcome.result,
        "error": outcome.error,
        "log_text": outcome.log,
    }


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


def back_to_queue(now: datetime | None = None) -> dict:
    """The columns that put a run marked running back in the queue: due
    `now`, or, without it, at the run_after it has (a fire planned ahead
    goes back due at its fire time: Starter.requeue)."""
    columns = dict(status=Run.Status.QUEUED, worker_id="", started_at=None, heartbeat_at=None)
    return columns if now is None else {**columns, "run_after": now}


class Recorder:
    def __init__(self, *, worker_id: str, cap: int, max_chain_depth: int | None = None):
        self.worker_id = worker_id  # written on the skipped runs it makes
        self.cap = cap  # JOBS_MAX_MESSAGE_CHARS: result, error and log are capped at this
        # JOBS_MAX_CHAIN_DEPTH: a downstream run deeper in its chain is not started.
        self.max_chain_depth = settings.JOBS_MAX_CHAIN_DEPTH if max_chain_depth is None else max_chain_depth

    # -- finished runs -----------------------------------------------------------

    def write_finished(
        self, outcomes: list[Outcome], flights: Mapping[int, Flight], now: datetime
    ) -> Recorded:
        """Write the outcomes of finished runs (of `flights`, the pool's), all
        in one transaction (one commit for the batch, not one per run); their
        ids come back in `finished`, for the pool to let go of. A connection
        error is raised: the caller writes the same outcomes again later."""
        batch = [(o, flights[o.run_id]) for o in outcomes if o.run_id in flights]
        if not batch:
            return Recorded()
        items = [(flight.ctx.run, outcome) for outcome, flight in batch]
        for run, outcome in items:
            if outcome.started_at is not None and run.started_at is not None:
                # Held by its child until its time (Starter.hold): it started
                # when the child says, never before the time it was written from.
                run.started_at = max(run.started_at, outcome.started_at)
        try:
            with transaction.atomic():
                recorded = self.record_batch(items, now)
        except Exception as exc:
            if is_connection_error(exc):
                raise  # the loop backs off; the outcomes stay pending
            log.warning(
                "writing %d outcome(s) in one batch failed (%s: %s); writing each alone",
                len(items),
                type(exc).__name__,
                exc,
            )
            recorded = Recorded()
            for run, outcome in items:
                recorded |= self.record_alone(
                    run,
                    outcome.status,
                    now,
                    lambda item=(run, outcome): self.record_batch([item], now),
                )
        return replace(recorded, finished=tuple(outcome.run_id for outcome, _ in batch))

    def record_batch(self, items: list[tuple[Run, Outcome]], now: datetime) -> Recorded:
        """Write a batch of finished runs. The common outcome (a success with
        nothing more to do than reset its job's failure count) is written for
        the whole batch with two statements, one for the runs and one for
        their jobs. The others (a failure to count or retry, a crash, a
        recovered notice, a job with two runs in the batch, whose order then
        matters) go through `record` one at a time."""
        runs_of_job = Counter(run.job_id for run, _ in items if run.job_id is not None)
        common, others = [], []
        for run, outcome in items:
            plain = (
                outcome.status == Run.Status.SUCCEEDED
                and not shards.is_split(run)
                and (run.job_id is None or (runs_of_job[run.job_id] == 1 and not _wants_recovery_notice(run)))
            )
            (common if plain else others).append((run, outcome))
        recorded = Recorded(runs=len(common))
        # Each run ended when the loop took its outcome, which may be a little
        # before this write (jobs.engine.pending.COLLECT_WITHIN). Every run of
        # the batch has ended, written yet or not: none holds up a downstream
        # job as its live run.
        ended = frozenset(run.pk for run, _ in items)
        for run, outcome in others:
            recorded |= self.record(run, ended=ended, **_as_written(outcome, now))
        if not common:
            return recorded
        written = {run.pk: self.columns(run, **_as_written(outcome, now)) for run, outcome in common}
        columns = list(next(iter(written.values())))
        # Only runs still running: one already timed out or swept stays as it is.
        run_rows = [(pk, Run.Status.RUNNING, *values.values()) for pk, values in written.items()]

        def job_rows(touched) -> list:
            return [
                (
                    run.job_id,
                    outcome.status,
                    written[run.pk]["error"][:LAST_ERROR_CHARS],
                    written[run.pk]["duration_ms"],
                    0,
                )
                for run, outcome in common
                if (touched is None or run.pk in touched) and run.job_id is not None
            ]

        # The jobs' update also says which of them others run after, so a
        # batch of jobs without dependents reads no dependency rows at all.
        job_terms = dict(
            assign=["last_status", "last_error", "last_duration_ms", "consecutive_failures"],
            returning=[HAS_DOWNSTREAM],
        )
        if database().vendor == "postgresql" and len(run_rows) <= CHUNK:
            # One statement: the jobs of the runs it moved, by the run's job.
            touched, jobs = update_then_update(
                Run,
                run_rows,
                Job,
                job_rows(None),
                key="job",
                match=["status"],
                assign=columns,
                then_assign=job_terms["assign"],
                then_returning=job_terms["returning"],
            )
        else:
            touched = update_from_values(Run, run_rows, match=["status"], assign=columns)
            jobs = update_from_values_returning(Job, job_rows(touched), **job_terms)
        finished = []
        for run, outcome in common:
            if run.pk in touched and run.job_id is not None:
                run.status, run.result = outcome.status, written[run.pk]["result"]
                if jobs.get(run.job_id, (False,))[0]:
                    finished.append(run)
        downstream = self.start_downstream(finished, now)
        ended = tuple(
            (run, outcome.status, written[run.pk]["duration_ms"])
            for run, outcome in common
            if run.pk in touched
        )
        return recorded | Recorded(written=len(touched), queued_at=_queued_at(downstream, now), ended=ended)

    def record_alone(self, run: Run, status: str, now: datetime, write: Callable[[], Recorded]) -> Recorded:
        """`write` one run's outcome (`status`) in a transaction of its own. If
        that fails for its data (not its connection), the run is recorded
        `failed` with what went wrong, so the batch and the loop go on; if
        even that cannot be written, the run is left to the sweep."""
        try:
            with transaction.atomic():
                return write()
        except Exception as exc:
            if is_connection_error(exc):
                raise
            problem = f"{type(exc).__name__}: {exc}"
        log.error(
            "the outcome of run %s could not be written (%s); recording it failed",
            run.pk,
            problem,
            extra=about(run=run),
        )
        explanation = (
            f"The run ended ({status}), but its outcome could not be written to the database: "
            f"{problem}. It is recorded as failed instead, without its result and log."
        )
        try:
            with transaction.atomic():
                return self.record(run, Run.Status.FAILED, now, error=explanation, retry=False)
        except Exception as exc:
            if is_connection_error(exc):
                raise
            log.exception(
                "run %s could not be recorded failed either; the sweep will interrupt it",
                run.pk,
                extra=about(run=run),
            )
        return Recorded(runs=1)

    # -- runs the scheduler gives up on ----------------------------------------------

    def enforce_deadlines(self, pool: Pool, now: datetime) -> Recorded:
        """Runs past their deadline are recorded timed_out and let go of (the
        pool stops their handler)."""
        expired = [f for f in pool.flights.values() if f.deadline <= now]
        recorded = Recorded()
        for flight in expired:
            recorded |= self.stop_waiting(
                flight,
                pool,
                Run.Status.TIMED_OUT,
                now,
                f"timed out after {flight.timeout_seconds} s; the handler was asked to stop",
            )
        return recorded

    def stop_waiting(self, flight: Flight, pool: Pool, status: str, now: datetime, error: str) -> Recorded:
        """Record a run this process gives up on (timeout, cancel, shutdown)
        with the log it has so far, then free its slot; the handler is told
        to stop and its late outcome is ignored."""
        run, log_text = flight.ctx.run, flight.ctx.log_text()
        recorded = self.record_alone(
            run, status, now, lambda: self.record(run, status, now, error=error, log_text=log_text)
        )
        pool.abandon(flight.run_id)
        return recorded

    def hand_back_task(self, flight: Flight, pool: Pool, now: datetime) -> None:
        """Shutdown: a one-off task still running goes back to the queue, with
        the log it has so far, for the next scheduler to run again."""
        Run.objects.filter(pk=flight.run_id, status=Run.Status.RUNNING).update(
            **back_to_queue(now),
            error="scheduler stopped, task requeued",
            log=cap_message(flight.ctx.log_text(), self.cap),
        )
        pool.abandon(flight.run_id)

    # -- one run -------------------------------------------------------------------

    def columns(self, run: Run, status: str, now: datetime, *, result="", error="", log_text="") -> dict:
        """The columns a run's outcome writes on its row."""
        cap = self.cap
        return {
            "status": status,
            # As the run is: a run planned ahead starts later than the time
            # planning wrote on its row (Starter.start_held).
            "started_at": run.started_at,
            "finished_at": now,
            "heartbeat_at": now,
            "duration_ms": max(0, int((now - (run.started_at or now)).total_seconds() * 1000)),
            "result": cap_message(result, cap),
            "error": cap_message(error, cap),
            "log": cap_message(log_text or run.log, cap),
        }

    def record(
        self,
        run: Run,
        status: str,
        now: datetime,
        *,
        result="",
        error="",
        log_text="",
        retry=True,
        was=Run.Status.RUNNING,
        ended: Collection[int] = (),
    ) -> Recorded:
        """Write a run's outcome (only if it is still `was`, running: a run
        already timed out or swept is left as it is), queue its retry (unless
        told not to), and update its job, all in one transaction. `ended`:
        runs of the same batch, ended though not all written yet."""
        outcome = self.columns(run, status, now, result=result, error=error, log_text=log_text)
        duration_ms = outcome["duration_ms"]
        # No savepoint: inside write_finished's batch a failure rolls the whole
        # batch back, and the batch is written again on the next pass.
        with transaction.atomic(savepoint=False):
            touched = Run.objects.filter(pk=run.pk, status=was).update(**outcome)
            if not touched:
                return Recorded(runs=1)
            recorded = Recorded(runs=1, written=1, ended=((run, status, duration_ms),))
            retry = retry and status in Run.AUTO_RETRIED and run.attempt <= run.max_retries
            # A broadcast run belongs to its node: interrupted, it is not run elsewhere.
            retry = retry and not (run.node and status == Run.Status.INTERRUPTED)
            if retry:
                recorded.queued_at = self.queue_retry(run, now).run_after
            if run.job_id is not None:
                run.status, run.error, run.finished_at, run.duration_ms = (
                    status,
                    outcome["error"],
                    now,
                    duration_ms,
                )
                run.result = outcome["result"]
                # A shard's end is its fire's only once every shard has ended.
                fire = shards.fire_ended(run) if not retry and shards.is_split(run) else run
                recorded.alerts = self.record_on_job(
                    fire or run, final=not retry and fire is not None, now=now
                )
                if not retry and fire is not None:
                    downstream = self.start_downstream([fire], now, ended=ended)
                    recorded |= Recorded(queued_at=_queued_at(downstream, now))
        return recorded

    def queue_retry(self, run: Run, now: datetime) -> Run:
        # A backfill's or a pool's retry waits for admission as its first attempt did.
        status = Run.Status.WAITING if run.backfill_id is not None else admission.first_status(run.job)
        return Run.objects.create(
            job_id=run.job_id,
            fire_id=run.fire_id,
            scheduled_at=run.scheduled_at,
            attempt=run.attempt + 1,
            trigger=run.trigger,
            status=status,
            backfill_id=run.backfill_id,
            run_after=now + timedelta(seconds=run.retry_interval_seconds),
            max_retries=run.max_retries,
            retry_interval_seconds=run.retry_interval_seconds,
            timeout_seconds=run.timeout_seconds,
            handler=run.handler,
            task_key=run.task_key,
            properties=run.properties,
            shard_index=run.shard_index,
            shard_total=run.shard_total,
            node=run.node,
            caused_by_id=run.caused_by_id,
            chain_id=run.chain_id,
            chain_depth=run.chain_depth,
            created_by_id=run.created_by_id,
            created_at=now,
        )

    def record_on_job(self, run: Run, *, final: bool, now: datetime) -> bool:
        """The job's last status, its consecutive failed fires, and the crash
        at the threshold. A fire counts once, after its last attempt. True
        when it wrote an alert or notice."""
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
            return False
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
        elif final and run.status in Run.COUNTED_FAILURES:
            job.consecutive_failures += 1
            fields.append("consecutive_failures")
            if job.state == Job.State.ENABLED and 0 < job.alert_threshold <= job.consecutive_failures:
                job.state = Job.State.CRASHED
                job.next_fire_at = None
                # A new version: an edit made against the job before its crash
                # is stale, and cannot re-enable it (services.save_job_if_changed).
                job.version += 1
                fields += ["state", "next_fire_at", "version"]
                crashed = True
        job.save(update_fields=fields)
        if crashed:
            alerts.on_crash(job=job, run=run, now=now)
            return True
        if succeeded:
            return alerts.on_success(job=job, run=run, now=now) is not None
        return alerts.on_failed(job=job, run=run, now=now) is not None

    def start_downstream(self, runs: list[Run], now: datetime, *, ended: Collection[int] = ()) -> list[Run]:
        """Each finished run (its final attempt) starts each job that runs
        after its job on this outcome, in the transaction that records the
        outcome: a queued run with trigger `upstream`, caused_by the run, and
        the run's chain (chain_id: the chain's first run; chain_depth: one
        more). Not started, and recorded as a skipped run saying why: a
        downstream job that already ran earlier in the same chain of runs
        (`loop`, whatever the stored graph says now), one that would be
        deeper than JOBS_MAX_CHAIN_DEPTH (`depth`), a paused or crashed one,
        one still running from before (the overlap rule); a deleted one gets
        nothing. The unique (job, caused_by) index makes a second write of
        the same pair impossible (ignored, not an error). `ended`: runs known
        to have ended whose outcome is not written yet (not live). Returns the
        runs it wrote."""
        runs = [run for run in runs if run.job_id is not None and not run.is_task]
        if not runs:
            return []
        edges = list(
            JobDependency.objects.filter(upstream_id__in={run.job_id for run in runs}).select_related(
                "downstream"
            )
        )
        if not edges:
            return []
        live = Run.objects.filter(LIVE_RUN, job_id__in={edge.downstream_id for edge in edges})
        if ended:
            live = live.exclude(pk__in=ended)
        busy = set(live.values_list("job_id", flat=True))
        upstream_jobs = {edge.upstream_id for edge in edges}
        chains = self.chain_jobs([run for run in runs if run.job_id in upstream_jobs])
        rows = []
        for run in runs:
            chain_id, depth = run.chain_id or run.pk, (run.chain_depth or 0) + 1
            for edge in edges:
                job = edge.downstream
                if edge.upstream_id != run.job_id or run.status not in JobDependency.MATCHES[edge.on]:
                    continue
                if job.is_deleted:
                    continue
                fields = dict(
                    job=job,
                    caused_by_id=run.pk,
                    chain_id=chain_id,
                    chain_depth=depth,
                    scheduled_at=now,
                    run_after=now,
                    trigger=Run.Trigger.UPSTREAM,
                    created_at=now,
                    **job.run_policy(),
                )
                skipped = dict(**fields, status=Run.Status.SKIPPED, finished_at=now, worker_id=self.worker_id)
                upstream = f"run {run.pk} of “{run.job.name if run.job else run.job_id}” ({run.status})"
                if job.pk in chains.get(run.pk, ()):
                    rows.append(
                        Run(
                            **skipped,
                            skip_reason=Run.SkipReason.LOOP,
                            error=f"not started after {upstream}: “{job.name}” already ran earlier in "
                            f"this chain of runs (the chain of run {chain_id}); starting it again would loop",
                        )
                    )
                elif depth > self.max_chain_depth:
                    rows.append(
                        Run(
                            **skipped,
                            skip_reason=Run.SkipReason.DEPTH,
                            error=f"not started after {upstream}: it would be {depth} runs deep in the "
                            f"chain of run {chain_id}, deeper than JOBS_MAX_CHAIN_DEPTH ({self.max_chain_depth})",
                        )
                    )
                elif job.state != Job.State.ENABLED:
                    reason = (
                        Run.SkipReason.PAUSED if job.state == Job.State.PAUSED else Run.SkipReason.CRASHED
                    )
                    rows.append(
                        Run(
                            **skipped,
                            skip_reason=reason,
                            error=f"not started after {upstream}: the job is {job.state}",
                        )
                    )
                elif job.pk in busy:
                    rows.append(
                        Run(
                            **skipped,
                            skip_reason=Run.SkipReason.OVERLAP,
                            error=f"not started after {upstream}: the previous run was still running",
                        )
                    )
                else:
                    busy.add(job.pk)
                    rows.append(Run(**fields, status=admission.first_status(job)))
        Run.objects.bulk_create(rows, ignore_conflicts=True)
        return rows

    def chain_jobs(self, runs: list[Run]) -> dict[int, set[int]]:
        """Run id → the ids of the jobs of the runs that led to it through
        caused_by, its own job included: one recursive query for the runs
        that are downstream runs themselves (the others are their chain's
        first run). The walk stops past JOBS_MAX_CHAIN_DEPTH runs, where a
        chain stops anyway, and where a run was deleted (retention): the
        depth still bounds such a chain."""
        chains = {run.pk: {run.job_id} for run in runs}
        walked = [run.pk for run in runs if run.caused_by_id is not None]
        if not walked:
            return chains
        qn = connection.ops.quote_name
        table, pk = qn(Run._meta.db_table), qn(Run._meta.pk.column)
        job, caused_by = (qn(Run._meta.get_field(name).column) for name in ("job", "caused_by"))
        sql = (
            f"WITH RECURSIVE chain (start, id, job, up, steps) AS ("
            f"SELECT {pk}, {pk}, {job}, {caused_by}, 0 FROM {table} "
            f"WHERE {pk} IN ({', '.join(['%s'] * len(walked))}) "
            f"UNION ALL SELECT chain.start, r.{pk}, r.{job}, r.{caused_by}, chain.steps + 1 "
            f"FROM {table} r JOIN chain ON r.{pk} = chain.up WHERE chain.steps <= %s"
            f") SELECT start, job FROM chain WHERE job IS NOT NULL"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [*walked, self.max_chain_depth])
            for start, job_id in cursor.fetchall():
                chains[start].add(job_id)
        return chains


def _queued_at(rows: list[Run], now: datetime) -> datetime | None:
    """`now` if any of the runs written is queued (a downstream run is due at once)."""
    return now if any(row.status == Run.Status.QUEUED for row in rows) else None


def _wants_recovery_notice(run: Run) -> bool:
    """A success of this run's job may owe a "recovered" notice, which depends
    on the job's state and latest alert: its outcome is written the long way."""
    return run.job is not None and alerts.wants_recovered(run.job)
