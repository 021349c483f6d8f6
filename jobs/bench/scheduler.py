"""`bench scheduler`: N interval jobs with a no-op handler, fired by real
`runscheduler` processes; the figures come from the runs table. With
`--cron` (or `--calendar CODE`) they are cron jobs `H/INTERVAL * * * * *`
(H spreads them over the interval's seconds), on that calendar with
`--rule`: the same load, so the two runs side by side show what the
calendar costs the planner. A calendar whose rule fires nothing on the
days the run spans (`working_days` on a weekend) would measure nothing:
the jobs are then put on a custom calendar based on it that declares
those days working days (`fire_on_the_run_s_days`), so every fire still
asks the calendar on any day of the week.

Runs in the child, on the throw-away database. The jobs are written with
their first fires an hour ahead; once every scheduler is up, one UPDATE moves
them to start `LEAD` seconds later, spread evenly over the first interval, so
start-up time never counts as lateness.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, F
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.bench.counters import ServerCounters, server_figures, step_figures
from jobs.bench.report import fmt, summary, table
from jobs.models import AuditEvent, Job, Lease, Run

NOOP = "bench.noop"
HANDLER_MODULE = "jobs.handlers.bench"
LEAD = timedelta(seconds=2)
PARKED = timedelta(hours=1)


@dataclass
class Window:
    start: datetime
    end: datetime


class Schedulers:
    """K `manage.py runscheduler` processes on the throw-away database."""

    def __init__(
        self, count: int, workdir: Path, *, env: dict | None = None, metrics: "Scraper | None" = None
    ):
        self.count = count
        self.workdir = workdir
        self.env = env or {}
        self.metrics = metrics
        self.procs: list[subprocess.Popen] = []
        self.worker_ids = [f"bench-{n + 1}" for n in range(count)]

    def start(self, timeout: float = 60) -> None:
        for n, worker_id in enumerate(self.worker_ids):
            env = {
                **os.environ,
                "JOBS_WORKER_ID": worker_id,
                "JOBS_HANDLER_MODULES": HANDLER_MODULE,
                "JOBS_SHUTDOWN_GRACE": "5",
                "PYTHONUNBUFFERED": "1",
                **(self.metrics.env(n) if self.metrics is not None else {}),
                **self.env,
            }
            log = open(self.workdir / f"{worker_id}.log", "w")  # noqa: SIM115 (the child writes to it until stop())
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, str(settings.BASE_DIR / "manage.py"), "runscheduler"],
                    cwd=settings.BASE_DIR,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        names = [f"node:{w}" for w in self.worker_ids]
        deadline = time.monotonic() + timeout
        while Lease.objects.filter(name__in=names, expires_at__isnull=False).count() < self.count:
            for proc, worker_id in zip(self.procs, self.worker_ids, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(f"scheduler {worker_id} exited at start:\n{self.log(worker_id)}")
            if time.monotonic() > deadline:
                raise RuntimeError("the schedulers did not start in time")
            time.sleep(0.1)

    def peak_rss_mb(self) -> list[float]:
        """VmHWM (peak resident set) of each scheduler, in MB."""
        peaks = []
        for proc in self.procs:
            try:
                status = Path(f"/proc/{proc.pid}/status").read_text()
            except OSError:
                peaks.append(None)
                continue
            kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
            peaks.append(round(kb / 1024, 1))
        return peaks

    def cpu_seconds(self) -> list[float]:
        """User + system CPU time each scheduler has used so far: a figure the
        other load on a shared machine disturbs far less than lateness."""
        ticks = os.sysconf("SC_CLK_TCK")
        out = []
        for proc in self.procs:
            try:
                fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                out.append(None)
                continue
            out.append((int(fields[11]) + int(fields[12])) / ticks)
        return out

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def log(self, worker_id: str) -> str:
        return (self.workdir / f"{worker_id}.log").read_text()[-4000:]


def seed_jobs(
    count: int,
    interval: int,
    *,
    first_at: datetime,
    prefix: str = "bench",
    cron: bool = False,
    calendar: str = "",
    rule: str = "",
) -> None:
    """`count` interval jobs whose first fires are spread evenly over one
    interval; or cron jobs with H spreading them, on `calendar` if given."""
    step = timedelta(seconds=interval) / max(count, 1)
    if cron or calendar:
        schedule = dict(schedule_type=Job.ScheduleType.CRON, cron_expression=f"H/{interval} * * * * *")
        schedule.update(calendar=calendar, calendar_rule=rule or Job.CalendarRule.WORKING_DAYS)
    else:
        schedule = dict(schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=interval)
    batch = 5000
    with transaction.atomic():
        for start in range(0, count, batch):
            Job.objects.bulk_create(
                [
                    Job(
                        name=f"{prefix}-{n:06d}",
                        handler=NOOP,
                        timeout_seconds=60,
                        alert_threshold=0,
                        next_fire_at=first_at + n * step,
                        **schedule,
                    )
                    for n in range(start, min(count, start + batch))
                ]
            )


def fire_on_the_run_s_days(code: str, rule: str, days: list) -> tuple[str, list]:
    """The calendar the jobs are put on: `code` itself if `rule` fires on
    every one of `days` (the jobs' local dates, UTC), else a custom calendar
    `bench-<code>` based on it declaring the refused ones working days (for
    `non_working_days`, non-working days). Returns its name and those days."""
    from jobs import calendars, workdays

    days_rule = workdays.DayRule(workdays.builtin(code), rule)
    refused = [day for day in days if not days_rule.verdict(day)[0]]
    if not refused:
        return code, []
    dates = [{"date": day.isoformat(), "name": "bench: a measured day"} for day in refused]
    name = f"bench-{code}"
    if rule == workdays.NON_WORKING_DAYS:
        calendars.save_calendar(name=name, base=code, non_working=dates, via=AuditEvent.Via.SYSTEM)
    else:
        calendars.save_calendar(name=name, base=code, working=dates, via=AuditEvent.Via.SYSTEM)
    return name, refused


def release_cron_jobs(start: datetime) -> None:
    """Cron jobs' first fires: their schedule's (and calendar's) first after
    `start`, which the window starts at (fires at `start` itself, a fraction
    of a second before it is whole, are left out of both)."""
    jobs = list(Job.objects.filter(handler=NOOP))
    for job in jobs:
        job.next_fire_at = job.next_fire_after(start)
    Job.objects.bulk_update(jobs, ["next_fire_at"], batch_size=1000)


def park_other_jobs() -> None:
    """The built-in jobs (retention) stay out of the way."""
    Job.objects.exclude(handler=NOOP).update(state=Job.State.PAUSED, next_fire_at=None)


def release_jobs(parked_at: datetime, *, lead: timedelta = LEAD) -> datetime:
    """Move the parked first fires to start `lead` from now; returns that start."""
    start = timezone.now() + lead
    Job.objects.filter(handler=NOOP).update(next_fire_at=F("next_fire_at") - (parked_at - start))
    return start


def wait_settled(end: datetime, timeout: float) -> None:
    """Until every fire due before `end` has been planned and has finished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        due = Job.objects.filter(handler=NOOP, state=Job.State.ENABLED, next_fire_at__lt=end).exists()
        live = Run.objects.filter(job__handler=NOOP, scheduled_at__lt=end, status__in=Run.LIVE).exists()
        if not due and not live:
            return
        time.sleep(0.2)


def expected_fires(window: Window) -> set[tuple[int, datetime]]:
    """Each job's grid of fire times inside the window (a cron job's: its schedule's)."""
    fires = set()
    for job in Job.objects.filter(handler=NOOP):
        if job.schedule_type == Job.ScheduleType.INTERVAL:
            fires.update(_grid(job.pk, job.interval_seconds, window))
            continue
        at = job.next_fire_after(window.start)
        while at is not None and at < window.end:
            fires.add((job.pk, at))
            at = job.next_fire_after(at)
    return fires


_first_fires: dict[int, datetime] = {}


def _grid(job_id: int, interval: int, window: Window):
    at = _first_fires[job_id]
    step = timedelta(seconds=interval)
    while at < window.end:
        if at >= window.start:
            yield job_id, at
        at += step


def measure(window: Window) -> dict:
    """The figures for fires scheduled inside the window, from the runs table."""
    runs = Run.objects.filter(
        job__handler=NOOP,
        trigger__in=Run.SCHEDULED_TRIGGERS,
        scheduled_at__gte=window.start,
        scheduled_at__lt=window.end,
    )
    started = list(
        runs.filter(started_at__isnull=False).values_list("job_id", "scheduled_at", "started_at", "result")
    )
    ran = {(job_id, at) for job_id, at, _, _ in started}
    expected = expected_fires(window)
    duplicates = sum(
        n - 1
        for n in Run.objects.filter(job__handler=NOOP, trigger__in=Run.SCHEDULED_TRIGGERS)
        .values("job_id", "scheduled_at", "attempt")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .values_list("n", flat=True)
    )
    seconds = (window.end - window.start).total_seconds()
    handler_lateness = [int(r) / 1000 for *_, r in started if r.lstrip("-").isdigit()]
    return {
        "fires_expected": len(expected),
        "fires_run": len(ran),
        "duplicates": duplicates,
        "missed": len(expected - ran),
        "lateness_ms": summary((s - at).total_seconds() * 1000 for _, at, s, _ in started),
        "fires_per_s": round(len(ran) / seconds, 1),
        # Not in --json: a cross-check of started_at, and fires off the grid.
        "_handler_lateness_ms": summary(handler_lateness),
        "_unexpected": len(ran - expected),
        "_skipped": runs.filter(status=Run.Status.SKIPPED).count(),
    }


class Scraper:
    """--metrics: each scheduler serves /metrics on a port of its own, and
    this thread scrapes them every `every` seconds while the window lasts,
    as Prometheus would."""

    TOKEN = "bench-metrics-token-0000"

    def __init__(self, count: int, *, per_job: bool, every: float, step_cpu: bool = False):
        self.ports = [_free_port() for _ in range(count)]
        self.per_job = per_job
        self.step_cpu = step_cpu
        self.every = every
        self.scrapes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def env(self, n: int) -> dict:
        return {
            "JOBS_METRICS_BIND": f"127.0.0.1:{self.ports[n]}",
            "JOBS_METRICS_TOKEN": self.TOKEN,
            "JOBS_METRICS_PER_JOB": "true" if self.per_job else "false",
            "JOBS_METRICS_STEP_CPU": "true" if self.step_cpu else "false",
        }

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            for port in self.ports:
                self.scrape(port)

    def scrape(self, port: int) -> str:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics", headers={"Authorization": f"Bearer {self.TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            text = response.read().decode()
        self.scrapes += 1
        return text

    def steps(self) -> dict:
        """The engine's step counters, summed over the schedulers: by step,
        [CPU seconds, statements, times run]."""
        totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        wanted = {
            "cronboard_scheduler_step_cpu_seconds_total": 0,
            "cronboard_scheduler_step_statements_total": 1,
            "cronboard_scheduler_step_duration_seconds_count": 2,
        }
        for port in self.ports:
            for family in text_string_to_metric_families(self.scrape(port)):
                for sample in family.samples:
                    if sample.name in wanted:
                        totals[sample.labels["step"]][wanted[sample.name]] += sample.value
        return dict(totals)


def _free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(options: dict, workdir: Path) -> dict:
    jobs, interval, duration = options["jobs"], options["interval"], options["duration"]
    metrics = options.get("metrics", "off")
    scraper = (
        Scraper(
            options["schedulers"],
            per_job=metrics == "per-job",
            every=options.get("scrape_every", 15),
            step_cpu=bool(options.get("step_cpu")),
        )
        if metrics != "off"
        else None
    )
    schedulers = Schedulers(options["schedulers"], workdir, metrics=scraper)
    park_other_jobs()
    parked_at = timezone.now() + PARKED
    cron = bool(options.get("cron") or options.get("calendar"))
    calendar, rule = options.get("calendar") or "", options.get("rule") or Job.CalendarRule.WORKING_DAYS
    if calendar:
        today = timezone.now().date()
        calendar, options["_declared"] = fire_on_the_run_s_days(
            calendar, rule, [today, today + timedelta(days=1)]
        )
    seed_jobs(jobs, interval, first_at=parked_at, cron=cron, calendar=calendar, rule=rule)
    schedulers.start()
    try:
        # Releasing 100,000 jobs takes a moment: give the scheduler time to see them.
        lead = LEAD + timedelta(seconds=jobs / 50_000)
        if cron:
            # Each first fire is computed (the schedule's and the calendar's), not shifted.
            start = timezone.now() + lead + timedelta(seconds=jobs / 1_000)
            release_cron_jobs(start)
        else:
            start = release_jobs(parked_at, lead=lead)
        _first_fires.clear()
        _first_fires.update(Job.objects.filter(handler=NOOP).values_list("id", "next_fire_at"))
        window = Window(start, start + timedelta(seconds=duration))
        time.sleep(max(0.0, (window.start - timezone.now()).total_seconds()))
        steps_before = scraper.steps() if scraper is not None else {}
        server = ServerCounters()
        server_before = server.read()
        if scraper is not None:
            scraper.start()
        cpu_before = schedulers.cpu_seconds()
        time.sleep(max(0.0, (window.end - timezone.now()).total_seconds()))
        cpu = [b - a for a, b in zip(cpu_before, schedulers.cpu_seconds(), strict=True)]
        steps_after = scraper.steps() if scraper is not None else {}
        server_after = server.read()
        if scraper is not None:
            scraper.stop()
        wait_settled(window.end, timeout=options.get("settle", 10))
        rss = schedulers.peak_rss_mb()
    finally:
        schedulers.stop()
    figures = measure(window)
    figures["rss_mb"] = rss
    figures["_cpu_ms_per_fire"] = round(sum(cpu) * 1000 / max(1, figures["fires_run"]), 2)
    figures["_cpu_share"] = [round(c / duration, 3) for c in cpu]
    figures["_scrapes"] = scraper.scrapes if scraper is not None else 0
    figures["_steps"] = step_figures(
        steps_before, steps_after, sum(cpu), figures["fires_run"], cpu_counted=bool(options.get("step_cpu"))
    )
    figures["_server"] = server_figures(
        server_before,
        server_after,
        passes=figures["_steps"]["passes"] if figures["_steps"] else None,
        fires=figures["fires_run"],
    )
    return figures


def public(figures: dict) -> dict:
    """Exactly the keys the --json output promises."""
    keys = ["fires_expected", "fires_run", "duplicates", "missed", "lateness_ms", "fires_per_s", "rss_mb"]
    return {
        **{k: figures[k] for k in keys},
        "cpu_ms_per_fire": figures["_cpu_ms_per_fire"],
        "cpu_share": figures["_cpu_share"],
        "server": figures["_server"],
    }


def render(options: dict, figures: dict) -> str:
    lat, hl = figures["lateness_ms"], figures["_handler_lateness_ms"]
    rows = [
        ("fires expected", fmt(figures["fires_expected"])),
        ("fires run", fmt(figures["fires_run"])),
        ("duplicates", fmt(figures["duplicates"])),
        ("missed", fmt(figures["missed"])),
        ("skipped (misfire / overlap)", fmt(figures["_skipped"])),
        ("fires off the expected grid", fmt(figures["_unexpected"])),
        ("lateness p50 (started_at − scheduled_at)", fmt(lat["p50"], "ms")),
        ("lateness p95", fmt(lat["p95"], "ms")),
        ("lateness p99", fmt(lat["p99"], "ms")),
        ("lateness max", fmt(lat["max"], "ms")),
        ("handler start lateness p99 / max", f"{fmt(hl['p99'])} / {fmt(hl['max'], 'ms')}"),
        ("fires per second", fmt(figures["fires_per_s"])),
        ("scheduler CPU per fire", fmt(figures["_cpu_ms_per_fire"], "ms")),
        ("scheduler CPU use (1.0 = one core)", " / ".join(fmt(c) for c in figures["_cpu_share"])),
        ("metrics scrapes", fmt(figures["_scrapes"])),
    ]
    for n, mb in enumerate(figures["rss_mb"], 1):
        rows.append((f"peak RSS, scheduler {n}", fmt(mb, "MB")))
    if (server := figures.get("_server")) is not None:
        rows.append(("PostgreSQL: server CPU per fire", fmt(server["server_cpu_ms_per_fire"], "ms")))
        if server["round_trips"] is not None:
            rows.append(
                (
                    "PostgreSQL: round trips per pass / per fire",
                    f"{fmt(server['round_trips_per_pass'])} / {fmt(server['round_trips_per_fire'])}",
                )
            )
    if (steps := figures.get("_steps")) is not None:
        rows.append(("passes (all schedulers)", fmt(steps["passes"])))
        rows.append(
            (
                "SQL statements per pass / per fire",
                f"{steps['statements_per_pass']} / {steps['statements_per_fire']}",
            )
        )
        for group, g in steps["groups"].items():
            share = "-" if g["cpu_share"] is None else f"{100 * g['cpu_share']:.0f} %"
            per_pass = (
                "" if g["statements_per_pass"] is None else f", {g['statements_per_pass']} statements/pass"
            )
            rows.append(
                (f"  {group}: CPU share, per fire", f"{share}, {fmt(g['cpu_ms_per_fire'], 'ms')}{per_pass}")
            )
    kind = "interval"
    if options.get("calendar"):
        kind = f"cron, calendar {options['calendar']} {options.get('rule') or 'working_days'}"
        if options.get("_declared"):
            days = ", ".join(day.isoformat() for day in options["_declared"])
            kind += f" (through bench-{options['calendar']}, which declares {days} to fire)"
    elif options.get("cron"):
        kind = "cron"
    head = (
        f"bench scheduler: {options['jobs']:,} {kind} jobs × {options['interval']} s for {options['duration']:g} s, "
        f"{options['schedulers']} scheduler(s), {connection.vendor}, {settings.JOBS_EXECUTOR} executor, "
        f"metrics {options.get('metrics', 'off')}"
        + (
            f" (scraped every {options.get('scrape_every', 15):g} s)"
            if options.get("metrics", "off") != "off"
            else ""
        )
    )
    return head + "\n" + table(rows)
