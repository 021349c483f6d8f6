"""deploy/grafana/render.py, the picture of the Grafana dashboard drawn from
Prometheus' answers to the dashboard's own queries: every panel of the
dashboard file is drawn where the dashboard places it, its series named by
the target's legend format, and the page says it is not Grafana. (The
script's run against real processes is how docs/grafana-dashboard.png is
made, not a test: it takes minutes.)"""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_render():
    spec = importlib.util.spec_from_file_location("render", REPO / "deploy" / "grafana" / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_panel_of_the_dashboard_is_drawn_with_its_series_named():
    render = load_render()
    dashboard = json.loads(render.DASHBOARD.read_text())
    series = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            series[(panel["id"], target["refId"])] = [
                {
                    "metric": {"reason": "overlap", "status": "failed", "instance": "n1"},
                    "values": [[100, "1"], [105, "NaN"], [110, "3"]],
                }
            ]
    markup = render.page(dashboard, {"series": series, "start": 100, "end": 110})
    charts = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert markup.count("<svg") == len(charts) == 16
    for panel in dashboard["panels"]:
        assert json.dumps(panel["title"])[1:-1] in markup
    assert "skipped: overlap" in markup  # "skipped: {{reason}}"
    assert "not Grafana" in markup
    # NaN points are left out: two points, one segment.
    first = markup.split('<path d="', 1)[1].split('"', 1)[0]
    assert first.count("L") == 1


def test_a_panel_without_series_says_so():
    render = load_render()
    panel = {"title": "Leader", "gridPos": {"x": 0, "y": 0, "w": 12, "h": 8}, "targets": []}
    assert "No data" in render.chart(panel, [], (0, 10))
    assert render.legend("{{view}} p95", {"view": "api:jobs"}) == "api:jobs p95"
