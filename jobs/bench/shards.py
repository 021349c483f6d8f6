"""`bench shards`: one fire of a job with `--shards` shards (a no-op handler).

Two figures. Planning: the planner's pass that writes the fire's runs, timed
in this process (`--repeat` times, each on a fresh fire; one node's
planner, without the leader's epoch fence). Finishing: the same fire
planned and run by `--schedulers` real `runscheduler` processes, from its
fire time to its last shard's end, with how the shards spread over the
nodes.
"""

import time
from datetime import timedelta
from pathlib import Path

from django.db.models import Count, Max, Min
from django.utils import timezone

from jobs.bench import scheduler as fires
from jobs.bench.report import fmt, summary, table
from jobs.engine.planning import Planner
from jobs.models import Job, Run

NAME = "bench-shards"


def plan_once(job: Job, shards: int) -> float:
    """Seconds one planning pass takes to write a fire of `job`."""
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(state=Job.State.ENABLED, next_fire_at=now)
    planner = Planner(
        worker_id="bench-planner", clustered=False, misfire_threshold=timedelta(60), clock=timezone.now
    )
    started = time.perf_counter()
    planned = planner.plan_due(now, epoch=None, free_slots=0)
    seconds = time.perf_counter() - started
    written = sum(1 for run in planned.written if run.job_id == job.pk)
    if written != shards:
        raise RuntimeError(f"the planner wrote {written} runs for a fire of {shards} shards")
    Run.objects.filter(job=job).delete()
    Job.objects.filter(pk=job.pk).update(state=Job.State.PAUSED, next_fire_at=None)
    return seconds


def run(options: dict, workdir: Path) -> dict:
    shards, count = options["shards"], options["schedulers"]
    fires.park_other_jobs()
    job = Job.objects.create(
        name=NAME,
        handler=fires.NOOP,
        schedule_type=Job.ScheduleType.INTERVAL,
        interval_seconds=3600,
        shards=shards,
        timeout_seconds=60,
        alert_threshold=0,
        state=Job.State.PAUSED,
    )
    planning = [plan_once(job, shards) * 1000 for _ in range(options["repeat"])]

    schedulers = fires.Schedulers(count, workdir)
    schedulers.start()
    try:
        fire_at = timezone.now() + fires.LEAD
        Job.objects.filter(pk=job.pk).update(state=Job.State.ENABLED, next_fire_at=fire_at)
        deadline = time.monotonic() + options["timeout"]
        while (
            Run.objects.filter(job=job).count() < shards
            or Run.objects.filter(job=job, status__in=Run.LIVE).exists()
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fire's {shards} shards did not end in {options['timeout']:g} s")
            time.sleep(0.1)
        cpu = schedulers.cpu_seconds()
    finally:
        schedulers.stop()
    runs = Run.objects.filter(job=job)
    ended = runs.aggregate(last=Max("finished_at"), first=Min("started_at"))
    per_node = dict(runs.values_list("worker_id").annotate(n=Count("id")).order_by("worker_id"))
    return {
        "shards": shards,
        "schedulers": count,
        "planning_ms": summary(planning),
        "first_started_after_s": round((ended["first"] - fire_at).total_seconds(), 3),
        "finished_after_s": round((ended["last"] - fire_at).total_seconds(), 3),
        "runs": runs.count(),
        "statuses": dict(runs.values_list("status").annotate(n=Count("id")).order_by("status")),
        "per_node": per_node,
        "scheduler_cpu_s": cpu,
    }


def render(options: dict, figures: dict) -> str:
    planning = figures["planning_ms"]
    rows = [
        (
            "planning the fire (one pass)",
            f"p50 {fmt(planning['p50'], 'ms')}, max {fmt(planning['max'], 'ms')}",
        ),
        ("fire time → first shard started", fmt(figures["first_started_after_s"], "s")),
        ("fire time → last shard finished", fmt(figures["finished_after_s"], "s")),
        (
            "runs",
            f"{fmt(figures['runs'])} ({', '.join(f'{n:,} {s}' for s, n in figures['statuses'].items())})",
        ),
        ("runs per node", ", ".join(f"{node} {n:,}" for node, n in figures["per_node"].items())),
        ("schedulers' CPU", ", ".join(fmt(s, "s") for s in figures["scheduler_cpu_s"])),
    ]
    return (
        f"bench shards: one fire of {figures['shards']:,} shards, {figures['schedulers']} scheduler(s)\n"
        + table(rows, ["", ""])
    )
