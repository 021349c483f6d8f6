"""The web process's Prometheus metrics: GET /metrics.

Two sources, each the one that gives correct figures:

- requests by view (count and latency) happen in whichever gunicorn worker
  served them, so each worker counts its own and the scrape adds them up
  through prometheus-client's multiprocess mode (PROMETHEUS_MULTIPROC_DIR,
  which gunicorn.conf.py sets up for every start): a scrape answered by one
  worker reports them all, and a worker's counts outlive it. Without that
  variable (runserver, the tests) the process's own counters are reported;
- the database-wide gauges (`jobs.figures`) are read from the database at
  each scrape by a collector: the database is the truth every worker
  shares, so any worker answers the same, and a gauge kept per worker
  would be as many stale copies as there are workers.

Served by a middleware placed right after /healthz's, before the host check
and the HTTPS redirect, because Prometheus scrapes by address; access is
jobs.core.metricsaccess's (a bearer token or an allowed address, nobody by
default), the client address read as the login throttle reads it.
"""

import os
import time

from django.db import DatabaseError
from django.http import HttpResponse, HttpResponseNotAllowed
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from jobs import figures
from jobs.core.metricsaccess import refusal

PATH = "/metrics"

# 1 ms to 10 s: a page or an API call; past that the worker timeout is near.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

REQUESTS = CollectorRegistry()  # this process's, when not in multiprocess mode
requests_total = Counter(
    "cronboard_http_requests",
    "Requests served, by view (URL name), method and status code",
    ("view", "method", "status"),
    registry=REQUESTS,
)
request_seconds = Histogram(
    "cronboard_http_request_duration_seconds",
    "Time to answer a request, by view (URL name)",
    ("view",),
    buckets=REQUEST_BUCKETS,
    registry=REQUESTS,
)


def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


class DatabaseGauges:
    """The database-wide figures, read at scrape time."""

    def collect(self):
        try:
            read = figures.read(timezone.now())
        except DatabaseError:
            up = GaugeMetricFamily(
                "cronboard_database_up", "1 when the figures could be read from the database"
            )
            up.add_metric([], 0)
            yield up
            return
        up = GaugeMetricFamily("cronboard_database_up", "1 when the figures could be read from the database")
        up.add_metric([], 1)
        jobs = GaugeMetricFamily("cronboard_jobs", "Jobs by state", labels=["namespace", "state"])
        for (namespace, state), n in sorted(read.jobs.items()):
            jobs.add_metric([namespace, state], n)
        crashed = GaugeMetricFamily("cronboard_jobs_crashed", "Crashed jobs", labels=["namespace"])
        for (namespace, state), n in sorted(read.jobs.items()):
            if state == "crashed":
                crashed.add_metric([namespace], n)
        runs = GaugeMetricFamily(
            "cronboard_runs_recent",
            f"Runs scheduled in the last {int(figures.RECENT.total_seconds())} seconds, by status",
            labels=["namespace", "status"],
        )
        for (namespace, status), n in sorted(read.runs.items()):
            runs.add_metric([namespace, status], n)
        oldest = GaugeMetricFamily(
            "cronboard_oldest_due_fire_seconds",
            "How long the oldest due fire (job or queued run) has waited to start",
        )
        oldest.add_metric([], read.oldest_due_seconds)
        undelivered = GaugeMetricFamily(
            "cronboard_alerts_undelivered", "Alert emails and channel messages not sent yet", labels=["type"]
        )
        for kind, n in sorted(read.undelivered.items()):
            undelivered.add_metric([kind], n)
        yield from (up, jobs, crashed, runs, oldest, undelivered)


def exposition() -> bytes:
    registry = CollectorRegistry()
    if multiprocess():
        from prometheus_client import multiprocess as mp

        mp.MultiProcessCollector(registry)
    else:
        registry.register(requests_total)
        registry.register(request_seconds)
    registry.register(DatabaseGauges())
    return generate_latest(registry)


def metrics_view(request):
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    # The connecting address, never X-Forwarded-For: a scraper comes by
    # address, and a header anyone reaching the port can send must not open it.
    refused = refusal(
        authorization=request.headers.get("Authorization"), client=request.META.get("REMOTE_ADDR", "")
    )
    if refused is not None:
        response = HttpResponse(
            f"{refused.reason}\n", status=refused.status, content_type="text/plain; charset=utf-8"
        )
        if refused.status == 401:
            response["WWW-Authenticate"] = 'Bearer realm="cronboard metrics"'
        return response
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


class MetricsMiddleware:
    """Answers /metrics; counts and times every other request by the view
    that served it (its URL name; `other` for what no URL matched: static
    files, 404s)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path == PATH:
            return metrics_view(request)
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = match.view_name if match is not None and match.view_name else "other"
        request_seconds.labels(view).observe(time.perf_counter() - started)
        requests_total.labels(view, request.method or "", str(response.status_code)).inc()
        return response
