"""Metrics and JSON logs from real processes: `manage.py runscheduler` and
gunicorn (two workers) on a real SQLite file, scraped every second by a real
Prometheus; the figures read back through Prometheus' HTTP API are compared
with the database. promtool checks the exposition text and the rules file
in deploy/prometheus; every line the processes log parses as JSON."""

import json
import re
import signal
import socket
import urllib.error
import urllib.request
from contextlib import closing
from pathlib import Path

import pytest

from tests.fixtures import processes
from tests.fixtures.prometheus import promtool

pytestmark = [pytest.mark.slow, pytest.mark.prometheus]

TOKEN = "metrics-test-token-0123456789"
RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "cronboard-rules.yml"

JOBS = [
    {
        "name": "pinger",
        "namespace": "ops",
        "handler": "demo.echo",
        "schedule_type": "interval",
        "interval_seconds": 5,
    },
    {
        "name": "broken",
        "namespace": "billing",
        "handler": "demo.fail",
        "schedule_type": "interval",
        "interval_seconds": 5,
        "alert_threshold": 3,  # crashed after its third failed fire
    },
]


def fetch(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def site(tmp_path, migrated_sqlite):
    metrics_port = processes.free_port()
    s = processes.SqliteSite(
        tmp_path,
        migrated_sqlite,
        JOBS_METRICS_BIND=f"127.0.0.1:{metrics_port}",
        JOBS_METRICS_TOKEN=TOKEN,
        CRONBOARD_LOG_FORMAT="json",
    )
    s.metrics_address = f"127.0.0.1:{metrics_port}"
    yield s
    s.stop_all(sig=signal.SIGKILL, timeout=10)


def test_prometheus_reads_the_figures_the_database_holds(site, prometheus):
    site.import_jobs(*JOBS)
    site.start_scheduler()
    web = site.start_web(workers=2)
    web_address = web.removeprefix("http://")
    server = prometheus(scheduler=(site.metrics_address, TOKEN), web=(web_address, TOKEN))

    # Unauthenticated scrapes are refused, with no figures.
    for url in (f"http://{site.metrics_address}/metrics", f"{web}/metrics"):
        status, body = fetch(url)
        assert status == 401 and "cronboard_" not in body, (url, status, body)
        assert fetch(url, "not-the-token-0000000000")[0] == 401

    # Requests through both workers, counted by view across them.
    for _ in range(12):
        assert fetch(f"{web}/login/")[0] == 200

    site.wait_for_rows(
        "SELECT state FROM jobs_job WHERE name = 'broken'", lambda rows: rows == [("crashed",)], 90
    )
    # No more fires: what is written stays, and the counters catch up with it.
    site.sql("UPDATE jobs_job SET state = 'paused' WHERE state = 'enabled'")
    site.wait_for_rows(
        "SELECT COUNT(*) FROM jobs_run WHERE status IN ('queued', 'running')", lambda r: r[0][0] == 0
    )

    def db(sql):
        return site.sql(sql)[0][0]

    planned = db(
        "SELECT COUNT(*) FROM jobs_run WHERE trigger IN ('schedule', 'catch_up') AND status != 'skipped'"
    )
    server.wait_for("sum(cronboard_scheduler_fires_planned_total)", lambda v: v == planned)
    started = db("SELECT COUNT(*) FROM jobs_run WHERE started_at IS NOT NULL")
    server.wait_for("sum(cronboard_scheduler_fires_started_total)", lambda v: v == started)
    for namespace, status in (("ops", "succeeded"), ("billing", "failed")):
        written = db(
            "SELECT COUNT(*) FROM jobs_run r JOIN jobs_job j ON j.id = r.job_id "
            f"WHERE j.namespace = '{namespace}' AND r.status = '{status}'"
        )
        assert written >= 2 if status == "succeeded" else written == 3
        server.wait_for(
            f'cronboard_scheduler_runs_finished_total{{namespace="{namespace}",status="{status}",kind="python"}}',
            lambda v, written=written: v == written,
        )
        server.wait_for(
            f'cronboard_scheduler_run_duration_seconds_count{{namespace="{namespace}"}}',
            lambda v, written=written: v == written,
        )
    assert server.value("sum(cronboard_scheduler_runs_finished_total)") == db(
        "SELECT COUNT(*) FROM jobs_run WHERE status IN ('succeeded', 'failed')"
    )
    first_fires = db(
        "SELECT COUNT(*) FROM jobs_run WHERE trigger IN ('schedule', 'catch_up') AND attempt = 1 "
        "AND started_at IS NOT NULL"
    )
    assert server.value("sum(cronboard_scheduler_run_lateness_seconds_count)") == first_fires
    assert server.value("cronboard_scheduler_leader") == 1
    assert server.value("cronboard_scheduler_node_lease_renewals_total") >= 1
    assert server.value("process_resident_memory_bytes") > 0

    # The web side: the database-wide gauges, and requests added up across workers.
    server.wait_for('cronboard_jobs{state="paused",namespace="ops"}', lambda v: v == 1)
    server.wait_for('cronboard_jobs_crashed{namespace="billing"}', lambda v: v == 1)
    server.wait_for('sum(cronboard_runs_recent{status="failed"})', lambda v: v == 3)
    server.wait_for('sum(cronboard_http_requests_total{view="login",status="200"})', lambda v: v == 12)

    # The exposition text of both passes promtool's lint.
    for url in (f"http://{site.metrics_address}/metrics", f"{web}/metrics"):
        status, text = fetch(url, TOKEN)
        assert status == 200
        checked = promtool("check", "metrics", input=text)
        assert checked.returncode == 0, (url, checked.stdout, checked.stderr)

    # Every query of the Grafana dashboard parses, and names only metrics the processes export.
    exported = set(server.api("metadata"))
    for expr in dashboard_queries():
        server.api("query", query=expr)
        for name in re.findall(r"\b((?:cronboard|process)_[a-z_]+)", expr):
            assert name in exported or re.sub(r"_(bucket|sum|count)$", "", name) in exported, (name, expr)

    site.stop_all()
    # Every line each process wrote is one JSON object, with the fields named.
    for name in ("scheduler", "web"):
        lines = [line for line in site.log(name).splitlines() if line.strip()]
        assert lines, name
        for line in lines:
            record = json.loads(line)
            assert {"time", "level", "logger", "message"} <= record.keys(), line
    scheduler_lines = [json.loads(line) for line in site.log("scheduler").splitlines() if line.strip()]
    assert all(r.get("worker_id") == "proc-test" for r in scheduler_lines)


def dashboard_queries() -> list[str]:
    """The expressions of deploy/grafana/cronboard.json, with Grafana's variables filled in."""
    dashboard = json.loads((RULES.parents[1] / "grafana" / "cronboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    assert len(exprs) > 20
    return [e.replace("$namespace", ".*").replace("$__rate_interval", "1m") for e in exprs]


def test_the_rules_file_passes_promtool_and_its_unit_tests():
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout
    # The alerts fire on the series they are written for (cronboard-rules.test.yml).
    tested = promtool("test", "rules", str(RULES.with_name("cronboard-rules.test.yml")))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_a_metrics_address_in_use_stops_the_scheduler_with_one_line(tmp_path, migrated_sqlite):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    bind = f"127.0.0.1:{taken.getsockname()[1]}"
    with closing(taken):
        site = processes.SqliteSite(tmp_path, migrated_sqlite, JOBS_METRICS_BIND=bind)
        done = site.manage("runscheduler", check=False, timeout=60)
    assert done.returncode == 1
    assert f"JOBS_METRICS_BIND ({bind}): cannot serve metrics there" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.postgres
def test_two_nodes_on_postgresql_one_leader_and_the_fires_counted_once(postgres_site, prometheus):
    site = postgres_site(
        "metrics_pg", JOBS_METRICS_TOKEN=TOKEN, JOBS_LEASE_TTL_SECONDS="4", JOBS_LEASE_RENEW_SECONDS="1"
    )
    site.manage(
        "jobs", "import", "-", input=json.dumps([{**JOBS[0], "name": f"pinger-{n}"} for n in range(3)])
    )
    nodes = {}
    for name in ("node-a", "node-b"):
        address = f"127.0.0.1:{processes.free_port()}"
        site.start_scheduler(name, JOBS_WORKER_ID=name, JOBS_METRICS_BIND=address)
        nodes[name] = (address, TOKEN)
    server = prometheus(**nodes)
    site.wait_for(
        lambda: site.sql("SELECT COUNT(*) FROM jobs_run WHERE status = 'succeeded'")[0][0] >= 6, 90, "6 runs"
    )
    server.wait_for("sum(cronboard_scheduler_leader)", lambda v: v == 1)
    site.sql("UPDATE jobs_job SET state = 'paused' WHERE state = 'enabled'")
    site.wait_for(
        lambda: site.sql("SELECT COUNT(*) FROM jobs_run WHERE status IN ('queued', 'running')")[0][0] == 0,
        30,
        "no live run",
    )
    fires = "SELECT COUNT(*) FROM jobs_run WHERE trigger IN ('schedule', 'catch_up') AND status {} 'skipped'"
    planned = site.sql(fires.format("<>"))[0][0]
    skipped = site.sql(fires.format("="))[0][0]
    finished = site.sql("SELECT COUNT(*) FROM jobs_run WHERE status = 'succeeded'")[0][0]
    # Each fire is counted by the one node that planned it, and by the one that ran it. A fire
    # that came while the job's run was still live (a busy machine) is a skip, counted apart.
    server.wait_for("sum(cronboard_scheduler_fires_planned_total)", lambda v: v == planned)
    server.wait_for("sum(cronboard_scheduler_fires_skipped_total) or vector(0)", lambda v: v == skipped)
    server.wait_for("sum(cronboard_scheduler_runs_finished_total)", lambda v: v == finished)
    assert server.value("count(cronboard_scheduler_node_lease_renewals_total > 0)") == 2
