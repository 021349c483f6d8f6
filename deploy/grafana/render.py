"""A picture of the Grafana dashboard (cronboard.json) drawn from real
figures, where no Grafana is at hand: not Grafana's rendering.

It starts a throw-away Cronboard on SQLite (a scheduler and gunicorn with two
workers, both serving /metrics), gives it jobs that succeed, take their time,
fail and crash, sends the web side requests, and lets Debian's Prometheus
scrape both every second. Then it runs every panel's PromQL from the
dashboard file over that span through Prometheus' query_range API (with
$namespace as every namespace and $__rate_interval as RATE_INTERVAL), draws
each panel as an SVG chart where the dashboard places it, and screenshots
the page with Debian's Chromium through Playwright.

    .venv/bin/python deploy/grafana/render.py --seconds 240 --out docs/grafana-dashboard.png

Needs the development requirements (it borrows the test suite's process and
Prometheus helpers), Debian's prometheus and chromium packages.
"""

import argparse
import html
import json
import re
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.fixtures import processes  # noqa: E402
from tests.fixtures.prometheus import Prometheus  # noqa: E402

DASHBOARD = REPO / "deploy" / "grafana" / "cronboard.json"
TOKEN = "render-metrics-token-0123456789"
RATE_INTERVAL = "30s"
STEP = 5  # seconds between the points of a chart
COLORS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#fade2a"]
COLUMN, ROW = 40, 34  # pixels per unit of the dashboard's 24-column grid


def jobs() -> list[dict]:
    """A load: quick jobs in three namespaces, slower ones, failing ones (one
    of which crashes after three failed fires)."""
    specs = []
    for n in range(120):
        namespace = ("ops", "billing", "reports")[n % 3]
        specs.append(
            {
                "name": f"echo-{n:03d}",
                "namespace": namespace,
                "handler": "demo.echo",
                "schedule_type": "interval",
                "interval_seconds": 5 + n % 10,
            }
        )
    for n, seconds in enumerate([0.2, 0.5, 1, 2, 3]):
        specs.append(
            {
                "name": f"sleep-{n}",
                "namespace": "reports",
                "handler": "demo.sleep",
                "properties": {"seconds": str(seconds)},
                "schedule_type": "interval",
                "interval_seconds": 10,
            }
        )
    for n in range(4):
        specs.append(
            {
                "name": f"broken-{n}",
                "namespace": "billing",
                "handler": "demo.fail",
                "schedule_type": "interval",
                "interval_seconds": 15,
                "alert_threshold": 3 if n == 0 else 0,
            }
        )
    return specs


def web_load(base: str, api_token: str, stop: threading.Event) -> None:
    paths = ["/healthz", "/api/jobs", "/api/runs", "/api/jobs?limit=10"]
    n = 0
    while not stop.is_set():
        request = urllib.request.Request(base + paths[n % len(paths)])
        if not paths[n % len(paths)].startswith("/healthz"):
            request.add_header("Authorization", f"Bearer {api_token}")
        try:
            urllib.request.urlopen(request, timeout=10).read()
        except OSError:
            pass
        n += 1
        stop.wait(0.1)


def collect(seconds: int, workdir: Path) -> tuple[dict, dict]:
    """Run the load for `seconds`; every panel's series over that span."""
    database = f"sqlite:///{workdir / 'cronboard.sqlite3'}"
    processes.migrate(database)
    metrics_port = processes.free_port()
    site = processes.Site(
        workdir,
        database,
        JOBS_METRICS_BIND=f"127.0.0.1:{metrics_port}",
        JOBS_METRICS_TOKEN=TOKEN,
        JOBS_WORKER_ID="scheduler-1",
    )
    site.manage("jobs", "import", "-", input=json.dumps(jobs()))
    api_token = site.create_token("render", staff=True)
    stop = threading.Event()
    server = None
    try:
        site.start_scheduler()
        web = site.start_web(workers=2)
        server = Prometheus(
            workdir,
            {
                "cronboard-scheduler": (f"127.0.0.1:{metrics_port}", TOKEN),
                "cronboard-web": (web.removeprefix("http://"), TOKEN),
            },
        )
        load = threading.Thread(target=web_load, args=(web, api_token, stop), daemon=True)
        load.start()
        start = time.time()
        time.sleep(seconds)
        end = time.time()
        stop.set()
        dashboard = json.loads(DASHBOARD.read_text())
        series = {}
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                expr = target["expr"].replace("$namespace", ".*").replace("$__rate_interval", RATE_INTERVAL)
                data = server.api(
                    "query_range", query=expr, start=f"{start:.0f}", end=f"{end:.0f}", step=STEP
                )
                series[(panel["id"], target["refId"])] = data["result"]
        return dashboard, {"series": series, "start": start, "end": end}
    finally:
        stop.set()
        if server is not None:
            server.stop()
        site.stop_all(timeout=15)


def legend(fmt: str, labels: dict) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt or "") or json.dumps(
        labels
    )


def scaled(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s"
    if unit in ("ops", "reqps"):
        return f"{value:.3g} {'req/s' if unit == 'reqps' else 'ops/s'}"
    return f"{value:.3g}"


def chart(panel: dict, lines: list[tuple[str, list]], span: tuple[float, float]) -> str:
    grid = panel["gridPos"]
    width, height = grid["w"] * COLUMN - 8, grid["h"] * ROW - 8
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
    left, top, right, bottom = 64, 30, 10, 26 + 16 * ((len(lines) + 2) // 3)
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for _name, points in lines for _t, v in points]
    high = max(values, default=1) or 1
    high *= 1.1
    t0, t1 = span

    def x(t):
        return left + plot_w * (t - t0) / (t1 - t0)

    def y(v):
        return top + plot_h * (1 - v / high)

    parts = [
        f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="8" y="18" class="title">{html.escape(panel["title"])}</text>',
    ]
    for i in range(5):
        v = high * i / 4
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" class="grid"/>')
        parts.append(
            f'<text x="{left - 4}" y="{y(v) + 4:.1f}" class="axis" text-anchor="end">{scaled(v, unit)}</text>'
        )
    for i in range(5):
        t = t0 + (t1 - t0) * i / 4
        label = time.strftime("%H:%M:%S", time.gmtime(t))
        parts.append(
            f'<text x="{x(t):.1f}" y="{top + plot_h + 14}" class="axis" text-anchor="middle">{label}</text>'
        )
    if not lines:
        parts.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" class="empty">No data</text>')
    for n, (name, points) in enumerate(lines):
        color = COLORS[n % len(COLORS)]
        path = " ".join(f"{'M' if i == 0 else 'L'}{x(t):.1f},{y(v):.1f}" for i, (t, v) in enumerate(points))
        parts.append(f'<path d="{path}" stroke="{color}" fill="none" stroke-width="1.6"/>')
        lx, ly = 8 + (n % 3) * (width // 3), top + plot_h + 32 + 16 * (n // 3)
        parts.append(f'<rect x="{lx}" y="{ly - 8}" width="12" height="4" fill="{color}"/>')
        parts.append(f'<text x="{lx + 16}" y="{ly - 3}" class="legend">{html.escape(name[:40])}</text>')
    parts.append("</svg>")
    return f'<div class="panel" style="left:{grid["x"] * COLUMN}px;top:{grid["y"] * ROW}px">{"".join(parts)}</div>'


def page(dashboard: dict, figures: dict) -> str:
    span = (figures["start"], figures["end"])
    blocks, bottom = [], 0
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        bottom = max(bottom, (grid["y"] + grid["h"]) * ROW)
        if panel["type"] == "row":
            blocks.append(
                f'<div class="row" style="top:{grid["y"] * ROW}px">{html.escape(panel["title"])}</div>'
            )
            continue
        lines = []
        for target in panel["targets"]:
            for result in figures["series"][(panel["id"], target["refId"])]:
                points = [
                    (float(t), float(v)) for t, v in result["values"] if v not in ("NaN", "+Inf", "-Inf")
                ]
                if points:
                    lines.append((legend(target.get("legendFormat", ""), result["metric"]), points))
        blocks.append(chart(panel, lines, span))
    took = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(figures["end"]))
    note = (
        f"{html.escape(dashboard['title'])}: a rendering of the dashboard's queries against a real Prometheus "
        f"scraping a real scheduler and gunicorn (deploy/grafana/render.py), {took}; not Grafana"
    )
    style = (
        "body{margin:0;background:#111217;font-family:sans-serif;color:#ccccdc}"
        ".note{padding:8px 12px;font-size:13px;color:#9fa7b3}"
        ".board{position:relative;width:960px;margin:0 8px}"
        ".panel{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:2px}"
        ".row{position:absolute;left:0;font-weight:bold;font-size:14px;padding-top:8px}"
        ".title{fill:#ccccdc;font-size:13px;font-weight:bold}.axis{fill:#8e8e8e;font-size:10px}"
        ".legend{fill:#ccccdc;font-size:10px}.grid{stroke:#2c3235;stroke-width:1}"
        ".empty{fill:#8e8e8e;font-size:13px;text-anchor:middle}"
    )
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><style>{style}</style></head><body>'
        f'<div class="note">{note}</div><div class="board" style="height:{bottom}px">{"".join(blocks)}</div>'
        "</body></html>"
    )


def screenshot(markup: str, out: Path, workdir: Path) -> None:
    from playwright.sync_api import sync_playwright

    source = workdir / "dashboard.html"
    source.write_text(markup)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            tab = browser.new_page(viewport={"width": 980, "height": 800})
            tab.goto(source.as_uri())
            tab.screenshot(path=str(out), full_page=True)
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=240, help="how long the load runs")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "grafana-dashboard.png")
    parser.add_argument("--html", type=Path, help="also keep the page drawn")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cronboard-render-") as folder:
        workdir = Path(folder)
        dashboard, figures = collect(options.seconds, workdir)
        markup = page(dashboard, figures)
        if options.html:
            options.html.write_text(markup)
        screenshot(markup, options.out, workdir)
    print(f"wrote {options.out}")


if __name__ == "__main__":
    main()
