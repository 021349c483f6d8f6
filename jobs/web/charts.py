"""The run-duration chart on the job page, drawn as SVG on the server: bar
heights are computed here, the template only places them."""

from dataclasses import asdict, dataclass
from datetime import datetime

from django.utils.html import format_html_join
from django.utils.translation import gettext as _

from jobs.models import Run

WIDTH = 640
HEIGHT = 140
PLOT_TOP = 10
PLOT_BOTTOM = 120  # room under the bars for the time labels
MIN_BAR = 2  # a run without a duration (skipped, cancelled early) still shows


@dataclass(frozen=True)
class Bar:
    # SVG coordinates as text: a float in a template goes through the
    # language's number format (slow over 60 bars × 4, and a decimal comma
    # in a language that has one would break the SVG).
    x: str
    y: str
    width: str
    height: str
    status: str
    title: str


def duration_chart(runs: list[dict]) -> dict | None:
    """`runs`: dicts with scheduled_at, duration_ms, status, id; oldest first."""
    if not runs:
        return None
    longest = max((r["duration_ms"] or 0) for r in runs) or 1
    slot = WIDTH / len(runs)
    bar_width = max(slot * 0.7, 1.0)
    plot_height = PLOT_BOTTOM - PLOT_TOP
    bars = []
    # Each bar's tooltip, in the page's language: the phrases looked up once.
    title = _("Run %(id)s · %(when)s UTC · %(status)s · %(duration)s")
    in_ms, no_duration = _("%(ms)s ms"), _("no duration")
    statuses = {value: str(label) for value, label in Run.Status.choices}
    for index, run in enumerate(runs):
        ms = run["duration_ms"] or 0
        height = max(plot_height * ms / longest, MIN_BAR)
        scheduled: datetime = run["scheduled_at"]
        duration = in_ms % {"ms": ms} if run["duration_ms"] is not None else no_duration
        bars.append(
            Bar(
                x=str(round(index * slot + (slot - bar_width) / 2, 1)),
                y=str(round(PLOT_BOTTOM - height, 1)),
                width=str(round(bar_width, 1)),
                height=str(round(height, 1)),
                status=run["status"],
                title=title
                % {
                    "id": run["id"],
                    "when": f"{scheduled:%Y-%m-%d %H:%M:%S}",
                    "status": statuses.get(run["status"], run["status"]),
                    "duration": duration,
                },
            )
        )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "plot_bottom": PLOT_BOTTOM,
        "bars": bars,
        # The bars' SVG, escaped here in one pass rather than 60 template loops.
        "bars_svg": format_html_join(
            "",
            '<rect class="bar status-{status}" x="{x}" y="{y}" width="{width}" height="{height}">'
            "<title>{title}</title></rect>",
            (asdict(bar) for bar in bars),
        ),
        "longest_ms": longest,
        "first": runs[0]["scheduled_at"],
        "last": runs[-1]["scheduled_at"],
        "statuses": sorted({r["status"] for r in runs}),
    }
