"""Which waiting run may start: the one rule the scheduler's admission step
(jobs.engine.admission) applies and the console explains ("waiting for pool
heavy (2/2)").

A run is written `waiting` instead of `queued` when something beyond a free
worker slot must let it through (`first_status`): its job's earlier run
(overlap policies `queue_one` and `replace`), its job's concurrency pool, or
its backfill's `parallel`. Every run of a pool's job waits for the pool:
fires, manual runs, downstream runs and retries alike. Admission turns it
`queued` once every limit it is under has room, counting the runs already
admitted (queued or running) cluster-wide:

- its job, for a fire of its schedule (the overlap policy governs fires; a
  manual or downstream run starts beside a live fire as it always has): a
  job's own runs (a backfill's runs are not its own) up to `max_parallel`
  under the `allow` policy, else one;
- its pool (`Job.pool`, by name): fewer admitted runs of the pool's jobs
  than the pool's size; a pool deleted since limits nothing;
- its backfill: fewer admitted runs of it than its `parallel`.

Waiting runs are let through in fire order (scheduled time, then id)."""

from collections import Counter
from dataclasses import dataclass, field

from django.db.models import Count
from django.utils.translation import gettext as _

from jobs.models import LIVE_RUN, Backfill, Job, Pool, Run


@dataclass
class Load:
    """The admitted runs (queued or running) that count against each limit."""

    jobs: Counter = field(default_factory=Counter)  # job id → its own admitted runs
    pools: Counter = field(default_factory=Counter)  # pool name → admitted runs of its jobs
    backfills: Counter = field(default_factory=Counter)  # backfill id → its admitted runs
    sizes: dict[str, int] = field(default_factory=dict)  # pool name → size
    parallel: dict[int, int] = field(default_factory=dict)  # backfill id → parallel

    def admit(self, run: Run) -> None:
        """Count `run` as admitted."""
        if run.backfill_id is not None:
            self.backfills[run.backfill_id] += 1
        else:
            self.jobs[run.job_id] += 1
        if run.job is not None and run.job.pool:
            self.pools[run.job.pool] += 1

    def full_pools(self) -> list[str]:
        return [name for name, size in self.sizes.items() if self.pools[name] >= size]

    def full_backfills(self) -> list[int]:
        return [pk for pk, parallel in self.parallel.items() if self.backfills[pk] >= parallel]


@dataclass(frozen=True)
class Wait:
    """What a waiting run waits for."""

    kind: str  # "job", "pool" or "backfill"
    name: str = ""
    live: int = 0
    limit: int = 0

    def describe(self) -> str:
        if self.kind == "pool":
            return _("waiting for pool {name} ({live}/{limit})").format(
                name=self.name, live=self.live, limit=self.limit
            )
        if self.kind == "backfill":
            return _("waiting for its backfill ({live}/{limit} running)").format(
                live=self.live, limit=self.limit
            )
        return _("waiting for the job's live run to end ({live}/{limit})").format(
            live=self.live, limit=self.limit
        )


def first_status(job: Job | None, *, wait: bool = False) -> str:
    """The status a new run of `job` is written with: waiting when something
    must let it through first (`wait`: its job's live run; the job's pool),
    else queued for the claim."""
    return Run.Status.WAITING if wait or (job is not None and job.pool) else Run.Status.QUEUED


def job_limit(job: Job) -> int:
    """How many of a job's own runs may be admitted at once."""
    return job.max_parallel if job.overlap_policy == Job.OverlapPolicy.ALLOW else 1


def load(*, pools: list[str] | None = None, jobs=(), backfills=()) -> Load:
    """The admitted runs of these jobs, pools (None: every pool) and
    backfills, and the pools' sizes and backfills' parallels. A few grouped
    counts over the live runs' partial index."""
    counts = Load()
    pool_rows = Pool.objects.all() if pools is None else Pool.objects.filter(name__in=pools)
    counts.sizes = dict(pool_rows.values_list("name", "size"))
    admitted = Run.objects.filter(LIVE_RUN, status__in=Run.ADMITTED)
    if counts.sizes:
        rows = (
            admitted.filter(job__pool__in=list(counts.sizes))
            .values("job__pool")
            .annotate(n=Count("id"))
            .order_by()
        )
        counts.pools.update({row["job__pool"]: row["n"] for row in rows})
    if jobs:
        rows = (
            admitted.filter(job_id__in=list(jobs), backfill__isnull=True)
            .values("job_id")
            .annotate(n=Count("id"))
            .order_by()
        )
        counts.jobs.update({row["job_id"]: row["n"] for row in rows})
    if backfills:
        counts.parallel = dict(Backfill.objects.filter(pk__in=list(backfills)).values_list("pk", "parallel"))
        rows = (
            Run.objects.filter(backfill_id__in=list(backfills), status__in=Run.ADMITTED)
            .values("backfill_id")
            .annotate(n=Count("id"))
            .order_by()
        )
        counts.backfills.update({row["backfill_id"]: row["n"] for row in rows})
    return counts


def blocker(run: Run, counts: Load) -> Wait | None:
    """What keeps a waiting run from being admitted now; None: nothing."""
    job = run.job
    if run.backfill_id is not None:
        parallel = counts.parallel.get(run.backfill_id, 1)
        if counts.backfills[run.backfill_id] >= parallel:
            return Wait("backfill", live=counts.backfills[run.backfill_id], limit=parallel)
    elif job is not None and run.trigger in Run.SCHEDULED_TRIGGERS:
        limit = job_limit(job)
        if counts.jobs[job.pk] >= limit:
            return Wait("job", name=job.name, live=counts.jobs[job.pk], limit=limit)
    if job is not None and job.pool and job.pool in counts.sizes:
        size = counts.sizes[job.pool]
        if counts.pools[job.pool] >= size:
            return Wait("pool", name=job.pool, live=counts.pools[job.pool], limit=size)
    return None


def waiting_reasons(runs) -> dict[int, str]:
    """Run id → what each waiting run among `runs` waits for, as the console
    says it (a run that waits for nothing is let through at the next pass)."""
    waiting = [run for run in runs if run.status == Run.Status.WAITING]
    if not waiting:
        return {}
    # Their jobs in one query (a page's runs may have been read without them).
    jobs = Job.objects.only("pk", "name", "pool", "overlap_policy", "max_parallel").in_bulk(
        {run.job_id for run in waiting if run.job_id}
    )
    for run in waiting:
        if run.job_id in jobs:
            run.job = jobs[run.job_id]
    counts = load(
        pools=sorted({run.job.pool for run in waiting if run.job is not None and run.job.pool}),
        jobs={run.job_id for run in waiting if run.job_id},
        backfills={run.backfill_id for run in waiting if run.backfill_id},
    )
    reasons = {}
    for run in waiting:
        wait = blocker(run, counts)
        reasons[run.pk] = wait.describe() if wait else _("waiting to be let through")
    return reasons
