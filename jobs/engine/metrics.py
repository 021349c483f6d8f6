"""A scheduler's Prometheus metrics, served by the process itself on
JOBS_METRICS_BIND (docs/operations.md, "Metrics", lists them with their
meanings).

The loop hands over what each pass did (`Planned` runs, `Recorded` starts
and ends, a step's time, the pool's slots) and the counters move once per
label set and pass, not once per row. What only the database knows (the
queue of due runs, the outbox's backlog) is read when Prometheus scrapes,
in the server's thread on its own connection, never in the loop.

Labels: `namespace` on everything about runs; with JOBS_METRICS_PER_JOB the
counters carry `job` too, and per-job summaries (count and sum) sit beside
the histograms, which stay by namespace: a cardinality the operator chooses.
With JOBS_METRICS_BIND empty the loop gets `OFF`, whose methods do nothing:
no metric is touched and no thread started.
"""

import bisect
import logging
import socket
import threading
import time
from collections import Counter as Tally
from collections import defaultdict
from contextlib import nullcontext
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.db.models import Min
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    Summary,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from jobs.core.metricsaccess import refusal
from jobs.models import Alert, AlertDelivery, Job, Run

log = logging.getLogger("cronboard.scheduler")

# From 1 ms to 1 h: a fire's lateness is milliseconds on a healthy node and
# minutes on a stalled one; a run lasts from a ping to an hour's batch.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
# A step of a pass: milliseconds, seconds when the database is slow.
STEP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class Off:
    """Metrics off (no JOBS_METRICS_BIND): every method does nothing."""

    def step(self, name: str):
        return nullcontext()

    def count_statements(self, conn) -> None:
        pass

    def planned(self, runs) -> None:
        pass

    def took(self, recorded) -> None:
        pass

    def passed(self, *, live: int, free: int, leader: bool, waiting_for_slots: bool) -> None:
        pass

    def node_lease(self, renewed: bool) -> None:
        pass

    def delivered(self, channel_type: str, outcome: str) -> None:
        pass


OFF = Off()


class EngineMetrics(Off):
    def __init__(self, *, per_job: bool, step_cpu: bool = False, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        self.per_job = per_job
        self.step_cpu = step_cpu
        self._jobs: dict[int, tuple[str, str, str]] = {}  # job id -> (namespace, name, kind)
        self._leader: bool | None = None
        self._timers: dict[str, _StepTimer] = {}  # by step, in the order first run
        self._statements = StatementCount()  # statements this thread sent, for the step timers
        self._current: list[_StepTimer | None] = [None]  # the step running now (steps may nest)
        self._last = _Reading()  # the loop thread's CPU time when a step last read it
        self._children: dict = {}  # (metric, label values) -> the metric's child, looked up once
        r = self.registry
        run = ("namespace", "job") if per_job else ("namespace",)
        self.fires_planned = Counter(
            "cronboard_scheduler_fires_planned", "Fires planned: runs written for a due fire", run, registry=r
        )
        self.fires_started = Counter(
            "cronboard_scheduler_fires_started", "Runs handed to a worker slot", run, registry=r
        )
        self.fires_skipped = Counter(
            "cronboard_scheduler_fires_skipped", "Fires skipped, by reason", (*run, "reason"), registry=r
        )
        self.runs_finished = Counter(
            "cronboard_scheduler_runs_finished",
            "Runs whose outcome this scheduler wrote, by status and kind",
            (*run, "status", "kind"),
            registry=r,
        )
        # The histograms stay by namespace: with a job label their buckets
        # would be 20 series per job and kind, and writing a scrape holds
        # the loop's thread for as long as there are series. Per job, a
        # count and a sum (an average over any range) instead.
        self.lateness = Histogram(
            "cronboard_scheduler_run_lateness_seconds",
            "From a fire's scheduled time to its run's start (scheduled fires, first attempt)",
            ("namespace",),
            buckets=BUCKETS,
            registry=r,
        )
        self.duration = Histogram(
            "cronboard_scheduler_run_duration_seconds",
            "From a run's start to its end",
            ("namespace", "kind"),
            buckets=BUCKETS,
            registry=r,
        )
        if per_job:
            self.job_lateness = Summary(
                "cronboard_scheduler_job_run_lateness_seconds",
                "Per job: from a fire's scheduled time to its run's start (count and sum)",
                run,
                registry=r,
            )
            self.job_duration = Summary(
                "cronboard_scheduler_job_run_duration_seconds",
                "Per job: from a run's start to its end (count and sum)",
                (*run, "kind"),
                registry=r,
            )
        self.live_runs = Gauge("cronboard_scheduler_live_runs", "Runs executing on this node", registry=r)
        self.free_slots = Gauge(
            "cronboard_scheduler_free_slots", "Worker slots free on this node", registry=r
        )
        self.slot_waits = Counter(
            "cronboard_scheduler_slot_waits",
            "Passes whose claim found every worker slot taken with runs still queued",
            registry=r,
        )
        self.leader = Gauge(
            "cronboard_scheduler_leader", "1 while this node plans fires (the leader)", registry=r
        )
        self.leader_changes = Counter(
            "cronboard_scheduler_leader_changes",
            "Times this node became or stopped being the leader",
            registry=r,
        )
        self.lease_renewals = Counter(
            "cronboard_scheduler_node_lease_renewals", "Node lease renewals that held", registry=r
        )
        self.lease_failures = Counter(
            "cronboard_scheduler_node_lease_failures",
            "Node lease renewals that failed (a database error, or the worker id taken over)",
            registry=r,
        )
        self.deliveries = Counter(
            "cronboard_scheduler_alert_deliveries",
            "Alert sends, by channel type and result",
            ("channel_type", "result"),
            registry=r,
        )
        self.database_errors = Counter(
            "cronboard_scheduler_database_errors",
            "Database errors, by the engine step they stopped",
            ("step",),
            registry=r,
        )
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        r.register(DatabaseGauges())
        r.register(StepCollector(self._timers, cpu=step_cpu))

    # -- what the loop hands over ---------------------------------------------------

    def step(self, name: str) -> "_StepTimer":
        timer = self._timers.get(name)
        if timer is None:
            timer = self._timers[name] = _StepTimer(
                name,
                self.database_errors,
                count=self._statements,
                current=self._current,
                last=self._last,
                cpu=self.step_cpu,
            )
        return timer

    def count_statements(self, conn) -> None:
        """Count the statements the loop's thread sends on `conn` (its own
        connection object) in the step timers."""
        if self._statements not in conn.execute_wrappers:
            conn.execute_wrappers.append(self._statements)

    def planned(self, runs) -> None:
        """The runs one pass's planning wrote: fires planned, and skipped by reason."""
        if not runs:
            return
        planned, skipped = Tally(), Tally()
        for run in runs:
            labels = self._labels(run)
            if run.status == Run.Status.SKIPPED:
                skipped[(*labels, run.skip_reason)] += 1
            else:
                planned[labels] += 1
        self._add(self.fires_planned, planned)
        self._add(self.fires_skipped, skipped)

    def took(self, recorded) -> None:
        """The runs a write started and ended (a `Recorded`): each label set's
        counter moved once, each histogram's child looked up once."""
        if recorded.started:
            started, late = Tally(), defaultdict(list)
            for run in recorded.started:
                namespace, name, _kind = self._job(run)
                started[(namespace, name) if self.per_job else (namespace,)] += 1
                if run.trigger in Run.SCHEDULED_TRIGGERS and run.attempt == 1 and run.started_at:
                    late[(namespace, name)].append((run.started_at - run.scheduled_at).total_seconds())
            self._add(self.fires_started, started)
            self._observe(self.lateness, getattr(self, "job_lateness", None), late)
        if recorded.ended:
            self._know([run for run, _status, _ms in recorded.ended])
            ended, durations = Tally(), defaultdict(list)
            for run, status, duration_ms in recorded.ended:
                namespace, name, kind = self._job(run)
                ended[((namespace, name) if self.per_job else (namespace,)) + (status, kind)] += 1
                durations[(namespace, name, kind)].append(duration_ms / 1000)
            self._add(self.runs_finished, ended)
            self._observe(self.duration, getattr(self, "job_duration", None), durations)

    def _observe(self, histogram: Histogram, per_job: Summary | None, values: dict) -> None:
        """`values` by (namespace, job, *rest): into the histogram by
        (namespace, *rest), and per job into `per_job` when there is one."""
        by_namespace = defaultdict(list)
        for (namespace, name, *rest), seconds in values.items():
            by_namespace[(namespace, *rest)].extend(seconds)
            if per_job is not None:
                child = self._child(per_job, (namespace, name, *rest))
                for value in seconds:
                    child.observe(max(0.0, value))
        for labels, seconds in by_namespace.items():
            child = self._child(histogram, labels)
            for value in seconds:
                child.observe(max(0.0, value))

    def passed(self, *, live: int, free: int, leader: bool, waiting_for_slots: bool) -> None:
        """The end of a pass: the slots, the leadership."""
        self.live_runs.set(live)
        self.free_slots.set(free)
        if waiting_for_slots:
            self.slot_waits.inc()
        if leader != self._leader:
            if self._leader is not None:
                self.leader_changes.inc()
            self._leader = leader
            self.leader.set(1 if leader else 0)

    def node_lease(self, renewed: bool) -> None:
        (self.lease_renewals if renewed else self.lease_failures).inc()

    def delivered(self, channel_type: str, outcome: str) -> None:
        self.deliveries.labels(channel_type, outcome).inc()

    # -- labels ---------------------------------------------------------------------------

    def _child(self, metric, labels: tuple):
        """`metric.labels(*labels)`, looked up once: the client checks and
        converts the values and takes a lock on every call."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _add(self, counter: Counter, tally: Tally) -> None:
        for labels, n in tally.items():
            self._child(counter, labels).inc(n)

    def _know(self, runs) -> None:
        """Jobs of runs whose job is not loaded (a swept run of another node):
        one read for all of them."""
        missing = {
            run.job_id
            for run in runs
            if run.job_id is not None and run.job_id not in self._jobs and not Run.job.is_cached(run)
        }
        if missing:
            for pk, namespace, name, kind in Job.objects.filter(pk__in=missing).values_list(
                "pk", "namespace", "name", "kind"
            ):
                self._jobs[pk] = (namespace, name, kind)

    def _job(self, run) -> tuple[str, str, str]:
        if run.job_id is None:
            return ("", "", "task")
        found = self._jobs.get(run.job_id)
        if found is None and Run.job.is_cached(run) and run.job is not None:
            found = self._jobs[run.job_id] = (run.job.namespace, run.job.name, str(run.job.kind))
        return found or ("", "", "")

    def _labels(self, run) -> tuple[str, ...]:
        namespace, name, _kind = self._job(run)
        return (namespace, name) if self.per_job else (namespace,)


class StatementCount:
    """An execute wrapper that counts the statements a connection sends.
    It only counts: `jobs.engine.bulk.fetch` keeps its fast path with it
    installed and counts the statements it sends itself."""

    counts_only = True

    def __init__(self):
        self.n = 0

    def count(self) -> None:
        self.n += 1

    def __call__(self, execute, sql, params, many, context):
        self.n += 1
        return execute(sql, params, many, context)


class _Reading:
    """The loop thread's CPU time as a step last read it, and the wall clock
    then."""

    __slots__ = ("cpu", "wall")

    def __init__(self):
        self.cpu = self.wall = -1.0


# Reading the thread's CPU time is a system call (about 1 us here, two a
# step, fifteen steps a pass). A step that starts this soon (wall time)
# after the last reading takes that reading as its start: the steps of a
# pass follow each other, and the few microseconds between two count in
# the second. A step that lasts no longer, with no step inside it, counts
# its wall time as its CPU time: a thread descheduled in those microseconds
# has them counted as CPU (no more than this much a step), and the next
# reading gives the step it ends no less than nothing.
NEAR_SECONDS = 0.00005


class _StepTimer:
    """Times one step of the loop (used from the loop's thread only, never
    nested in itself) and counts the database errors that stop it. Its CPU
    time and statements are its own: a step run inside it (the hand-off
    inside planning) counts them in its own name, not twice.

    What it measures is kept in plain numbers (a bucket's count is one
    list item), which `StepCollector` hands to Prometheus when it scrapes:
    the client's histogram and counters take a lock and check their values
    on every call, and a pass runs fifteen steps."""

    __slots__ = (
        "buckets",
        "clock",
        "count",
        "cpu_mark",
        "cpu_spent",
        "cpu_total",
        "current",
        "errors",
        "last",
        "name",
        "nested",
        "outer",
        "seconds_total",
        "sent",
        "sent_mark",
        "started",
        "statements_total",
    )

    def __init__(self, name: str, errors: Counter, *, count, current, last: _Reading, cpu: bool):
        self.name, self.errors = name, errors
        self.count, self.current, self.last = count, current, last
        self.clock = time.thread_time if cpu else None  # None: CPU time not counted
        self.buckets = [0] * (len(STEP_BUCKETS) + 1)  # by bucket, not cumulative; the last is +Inf
        self.seconds_total = self.cpu_total = 0.0
        self.statements_total = 0
        self.started = self.cpu_mark = self.cpu_spent = 0.0
        self.sent = self.sent_mark = 0
        self.outer: _StepTimer | None = None
        self.nested = False  # a step ran inside this one

    def __enter__(self):
        sent, last = self.count.n, self.last
        started = time.perf_counter()
        outer = self.outer = self.current[0]
        clock = self.clock
        if clock is None:
            cpu = 0.0
        elif outer is None and started - last.wall <= NEAR_SECONDS:
            cpu = last.cpu
        else:
            cpu = clock()
        if outer is not None:
            outer.cpu_spent += max(0.0, cpu - outer.cpu_mark)
            outer.sent += sent - outer.sent_mark
            outer.nested = True
        self.current[0] = self
        self.cpu_mark, self.cpu_spent, self.sent_mark, self.sent = cpu, 0.0, sent, 0
        self.started, self.nested = started, False

    def __exit__(self, kind, exc, tb) -> bool:
        sent, ended = self.count.n, time.perf_counter()
        seconds = ended - self.started
        if self.clock is None:
            cpu = 0.0
        elif seconds <= NEAR_SECONDS and not self.nested:
            cpu = self.cpu_mark + seconds
        else:
            cpu = self.clock()
        self.buckets[bisect.bisect_left(STEP_BUCKETS, seconds)] += 1
        self.seconds_total += seconds
        self.cpu_total += self.cpu_spent + max(0.0, cpu - self.cpu_mark)
        self.statements_total += self.sent + sent - self.sent_mark
        outer = self.current[0] = self.outer
        if outer is not None:
            outer.cpu_mark, outer.sent_mark = cpu, sent
        self.last.cpu, self.last.wall = cpu, ended
        if kind is not None and issubclass(kind, DatabaseError):
            self.errors.labels(self.name).inc()
        return False


class StepCollector:
    """The step timers' figures, read when Prometheus scrapes (from the
    server's thread; the loop's thread writes them: a scrape may see a
    step's count one observation ahead of its sum)."""

    def __init__(self, timers: dict[str, _StepTimer], *, cpu: bool):
        self.timers = timers
        self.cpu = cpu  # the timers count CPU time (JOBS_METRICS_STEP_CPU)

    def collect(self):
        seconds = HistogramMetricFamily(
            "cronboard_scheduler_step_duration_seconds",
            "Time of one engine step in one pass",
            labels=["step"],
        )
        cpu = CounterMetricFamily(
            "cronboard_scheduler_step_cpu_seconds",
            "CPU time of the loop's thread in each engine step (a step inside another counts in its own)",
            labels=["step"],
        )
        statements = CounterMetricFamily(
            "cronboard_scheduler_step_statements",
            "SQL statements the loop's thread sent in each engine step (a step inside another counts in its own)",
            labels=["step"],
        )
        for name, timer in list(self.timers.items()):
            counts, cumulative, buckets = list(timer.buckets), 0, []
            for bound, n in zip([*STEP_BUCKETS, float("inf")], counts, strict=True):
                cumulative += n
                buckets.append((floatToGoString(bound), cumulative))
            seconds.add_metric([name], buckets, timer.seconds_total)
            cpu.add_metric([name], timer.cpu_total)
            statements.add_metric([name], timer.statements_total)
        yield from (seconds, cpu, statements) if self.cpu else (seconds, statements)


class DatabaseGauges:
    """What only the database knows, read at scrape time (in the server's
    thread, on its own connection, closed after)."""

    def collect(self):
        queue = GaugeMetricFamily(
            "cronboard_scheduler_queue_depth", "Queued runs that are due and not started (all nodes)"
        )
        backlog = GaugeMetricFamily(
            "cronboard_scheduler_outbox_backlog",
            "Alert emails and channel messages not sent yet",
            labels=["type"],
        )
        oldest = GaugeMetricFamily(
            "cronboard_scheduler_queue_oldest_seconds", "Age of the oldest queued run that is due"
        )
        try:
            now = timezone.now()
            due = Run.objects.filter(status=Run.Status.QUEUED, run_after__lte=now)
            queue.add_metric([], due.count())
            first = due.aggregate(m=Min("run_after"))["m"]
            oldest.add_metric([], max(0.0, (now - first).total_seconds()) if first else 0.0)
            backlog.add_metric(["email"], Alert.objects.filter(status=Alert.Status.PENDING).count())
            backlog.add_metric(["channel"], AlertDelivery.objects.filter(status=Alert.Status.PENDING).count())
        except DatabaseError as exc:
            log.warning("metrics: could not read the queue and the outbox: %s", exc)
            return
        finally:
            # This thread's connection is kept for the next scrape, as a
            # request's is (CONN_MAX_AGE), unless it broke or aged out.
            close_old_connections()
        yield from (queue, oldest, backlog)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):  # every scrape would be a line
        pass


def serve(metrics: EngineMetrics, bind: str) -> WSGIServer:
    """Serve `metrics` at /metrics on `bind` (host:port) from a daemon
    thread, to the clients JOBS_METRICS_TOKEN or JOBS_METRICS_ALLOW let in."""
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")

    def app(environ, start_response):
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found\n"]
        refused = refusal(authorization=environ.get("HTTP_AUTHORIZATION"), client=environ.get("REMOTE_ADDR"))
        if refused is not None:
            headers = [("Content-Type", "text/plain; charset=utf-8")]
            if refused.status == 401:
                headers.append(("WWW-Authenticate", 'Bearer realm="cronboard metrics"'))
            start_response(
                f"{refused.status} {'Unauthorized' if refused.status == 401 else 'Forbidden'}", headers
            )
            return [f"{refused.reason}\n".encode()]
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST)])
        return [generate_latest(metrics.registry)]

    server_class = _Server6 if ":" in host else _Server
    server = make_server(host, int(port), app, server_class=server_class, handler_class=_Quiet)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics served on http://%s/metrics", bind)
    return server


def for_settings() -> Off:
    """EngineMetrics when JOBS_METRICS_BIND is set, else OFF."""
    if not settings.JOBS_METRICS_BIND:
        return OFF
    return EngineMetrics(per_job=settings.JOBS_METRICS_PER_JOB, step_cpu=settings.JOBS_METRICS_STEP_CPU)
