"""The charts, drawn as SVG on the server (bar heights are computed here,
the templates only place them): the run-duration chart on the job page and
the dashboard's runs per hour or day."""

from dataclasses import asdict, dataclass
from datetime import datetime

from django.utils.html import format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

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


# The trend chart's stacks, bottom up: what the runs of an hour or a day came to.
TREND_PARTS = (
    ("succeeded", "status-succeeded", gettext_lazy("Succeeded")),
    ("failures", "status-failed", gettext_lazy("Failed")),
    ("other", "status-skipped", gettext_lazy("Other (skipped, cancelled)")),
)


def trend_chart(points: list, *, hourly: bool) -> dict | None:
    """The dashboard's runs per hour or day (jobs.trends.window_trends'
    points) as stacked bars: succeeded, failed (every failed outcome), the
    rest (skipped, cancelled). None when no run finished in the window."""
    stacks = []
    for point in points:
        counts = point.figures.counts
        succeeded, failures = counts["succeeded"], point.figures.failures
        stacks.append(
            (
                point.at,
                {
                    "succeeded": succeeded,
                    "failures": failures,
                    "other": sum(counts.values()) - succeeded - failures,
                },
            )
        )
    tallest = max((sum(parts.values()) for _, parts in stacks), default=0)
    if not tallest:
        return None
    slot = WIDTH / len(stacks)
    bar_width = max(slot * 0.7, 1.0)
    plot_height = PLOT_BOTTOM - PLOT_TOP
    rects = []
    for index, (at, parts) in enumerate(stacks):
        x = round(index * slot + (slot - bar_width) / 2, 1)
        base = PLOT_BOTTOM
        when = f"{at:%Y-%m-%d %H:00}" if hourly else f"{at:%Y-%m-%d}"
        for part, css, label in TREND_PARTS:
            if not parts[part]:
                continue
            height = plot_height * parts[part] / tallest
            base -= height
            rects.append(
                {
                    "css": css,
                    "x": str(x),
                    "y": str(round(base, 1)),
                    "width": str(round(bar_width, 1)),
                    "height": str(round(max(height, 0.5), 1)),
                    "title": f"{when} UTC · {label}: {parts[part]}",
                }
            )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "plot_bottom": PLOT_BOTTOM,
        "tallest": tallest,
        "svg": format_html_join(
            "",
            '<rect class="bar {css}" x="{x}" y="{y}" width="{width}" height="{height}"><title>{title}</title></rect>',
            rects,
        ),
        "first": stacks[0][0],
        "last": stacks[-1][0],
        "legend": [(css, label) for _part, css, label in TREND_PARTS],
    }


def job_days_chart(days: list) -> dict | None:
    """A job's last days (jobs.trends.job_trends' days): a bar per day up to
    its duration p95, with a tick at its p50; days without a timed run are
    gaps. None when no run of the job was timed in those days."""
    values = [(day.day, day.p50, day.p95, day.figures) for day in days]
    tallest = max((p95 for _day, _p50, p95, _f in values if p95 is not None), default=None)
    if not tallest:
        return None
    slot = WIDTH / len(values)
    bar_width = max(slot * 0.7, 1.0)
    plot_height = PLOT_BOTTOM - PLOT_TOP
    parts = []
    for index, (day, p50, p95, figures) in enumerate(values):
        if p95 is None:
            continue
        x = round(index * slot + (slot - bar_width) / 2, 1)
        top = PLOT_BOTTOM - max(plot_height * p95 / tallest, MIN_BAR)
        tick = PLOT_BOTTOM - plot_height * p50 / tallest
        rate = figures.success_rate
        title = gettext_lazy("{day}: p50 {p50} ms, p95 {p95} ms, {rate} succeeded, {runs} timed runs").format(
            day=f"{day:%Y-%m-%d}",
            p50=round(p50),
            p95=round(p95),
            rate="—" if rate is None else f"{rate} %",
            runs=figures.duration_count,
        )
        parts.append(
            {
                "x": str(x),
                "y": str(round(top, 1)),
                "width": str(round(bar_width, 1)),
                "height": str(round(PLOT_BOTTOM - top, 1)),
                "tick": str(round(tick, 1)),
                "x2": str(round(x + bar_width, 1)),
                "css": "status-succeeded" if rate is None or rate >= 99 else "status-failed",
                "title": title,
            }
        )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "plot_bottom": PLOT_BOTTOM,
        "tallest": tallest,
        "svg": format_html_join(
            "",
            '<g><title>{title}</title><rect class="bar {css}" x="{x}" y="{y}" width="{width}" height="{height}"/>'
            '<line class="tick" x1="{x}" y1="{tick}" x2="{x2}" y2="{tick}"/></g>',
            parts,
        ),
        "first": values[0][0],
        "last": values[-1][0],
    }
