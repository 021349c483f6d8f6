"""The dashboard (the home page) with its trends, and the upcoming fires."""

from datetime import timedelta
from urllib.parse import urlencode

from django.shortcuts import render
from django.template.defaultfilters import pluralize
from django.utils import dateformat, timezone
from django.utils.dates import WEEKDAYS_ABBR
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _

from jobs import access, overview, trends
from jobs import upcoming as fires
from jobs.access import login_required
from jobs.models import Job, Run, job_name
from jobs.web.charts import trend_chart
from jobs.web.common import fingerprint, interval_text, partial_or_page, short, url_maker
from jobs.web.templatetags.console import relative_element, relative_time, time_element


def _status_bars(counts: dict) -> list[dict]:
    """The 24 hours' runs by status as horizontal bars (percent of the largest)."""
    top = max(counts.values(), default=0) or 1
    return [
        {
            "status": status,
            "label": label,
            "count": counts[status],
            "width": round(100 * counts[status] / top, 1),
        }
        for status, label in Run.Status.choices
        if counts[status]
    ]


def _attention_rows(jobs: list[Job]) -> list[dict]:
    """The "needs attention" list's cells, worked out once per job (as the
    job list's are, see jobs.web.jobs._job_rows)."""
    detail_url = url_maker("jobs:job_detail")
    rows = []
    for job in jobs:
        n = job.consecutive_failures
        # The msgids of a {% blocktranslate %}, filled in here.
        failures = _("%(consecutive_failures)s failed fire%(consecutive_failures2)s in a row") % {
            "consecutive_failures": n,
            "consecutive_failures2": pluralize(n),
        }
        if job.last_fire_at:
            failures = format_html(
                "{} {}", failures, _html_message(_("· last %(last_fire_at)s"), last_fire_at=job.last_fire_at)
            )
        rows.append(
            {
                "job": job,
                "url": detail_url(job.pk),
                "failures": failures,
                "error_short": short(job.last_error, 120) if job.last_error else "",
            }
        )
    return rows


def _html_message(message: str, **times) -> str:
    """A translated message whose %(name)s placeholders are times shown as
    relative_time (HTML): the message escaped, the times inserted."""
    return mark_safe(conditional_escape(message) % {k: relative_time(v) for k, v in times.items()})


@login_required
def dashboard(request):
    now = timezone.now()
    figures = overview.dashboard_figures(request.user, now=now)
    context = {
        **_trends_context(request, now),
        **figures,
        "attention_rows": _attention_rows(figures["attention"]),
        "state_tiles": [(v, label, figures["jobs_by_state"][v]) for v, label in Job.State.choices],
        "bars": _status_bars(figures["runs_24h_by_status"]),
        "poll_version": fingerprint(
            figures["jobs_by_state"],
            figures["runs_24h_by_status"],
            [(j.pk, j.state, j.consecutive_failures) for j in figures["attention"]],
            [(r.pk, r.status) for r in figures["running"]],
        ),
    }
    return partial_or_page(request, "jobs/dashboard.html", "dashboard-body", context)


def _trends_context(request, now) -> dict:
    window = request.GET.get("window", trends.DEFAULT_WINDOW)
    figures = trends.window_trends(request.user, window, now=now)
    return {
        "trends": figures,
        "trend_chart": trend_chart(figures["points"], hourly=figures["hourly"]),
        "trend_windows": [("24h", _("24 hours")), ("7d", _("7 days")), ("30d", _("30 days"))],
    }


@login_required
def dashboard_trends(request):
    """The dashboard's trends section alone, for another window (htmx)."""
    return render(request, "jobs/dashboard.html#trends", _trends_context(request, timezone.now()))


# How the timeline groups its rows, by window: ten minutes, an hour, a day
# (in the viewer's zone), and the heading each group gets.
_GROUPS = {"1h": (600, "H:i"), "24h": (3600, "D H:00"), "7d": (86400, "l, Y-m-d")}


def _group_start(local, window: str):
    """The start of the group `local` (a time in the page's zone) falls in."""
    size = _GROUPS[window][0]
    seconds = local.hour * 3600 + local.minute * 60 + local.second
    return local.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(
        seconds=seconds - seconds % size
    )


def _timeline_rows(page: list, window: str) -> list[dict]:
    """The timeline's cells, worked out once per row in Python (as the job
    list's are): a page is 100 rows, and each template lookup and filter
    per cell was most of its time."""
    job_url = url_maker("jobs:job_detail")
    # What every row would look up again: the page's zone and time, the
    # translated day names and wording, each gap's text.
    zone, now = timezone.get_current_timezone(), timezone.now()
    weekdays = {number: str(name) for number, name in WEEKDAYS_ABBR.items()}
    series_text, gaps = _("every {every}, {count} fires"), {}
    rows, group = [], None
    for item in page:
        job = item.job
        shown = item.at.astimezone(zone)
        start = _group_start(shown, window)
        # By its text: the two 01:00 of a night the clocks fall back are two
        # groups, which equal datetimes in one zone are not.
        key = start.isoformat()
        row = {
            "opens": key != group,
            "heading": dateformat.format(start, _GROUPS[window][1]) if key != group else "",
            "job": job.pk,
            "url": job_url(job.pk),
            "name": job.name,
            "namespace": job.namespace,
            "zone": job.timezone,
            "at": time_element(item.at, shown, "H:i:s"),
            "relative": relative_element(item.at, now),
        }
        group = key
        if isinstance(item, fires.Series):
            row["last"] = time_element(item.last, item.last.astimezone(zone), "H:i:s")
            if item.every not in gaps:
                gaps[item.every] = interval_text(item.every)
            row["series"] = series_text.format(
                every=gaps[item.every], count=item.count if item.counted_all else f"{item.count}+"
            )
        else:
            local = item.local
            # The `date` filter's "D H:i:s" in the job's zone; nothing for a
            # zone the system no longer knows, as the `timezone` filter gives.
            row["local"] = (
                ""
                if job.zone_is_unknown
                else f"{weekdays[local.weekday()]} {local.hour:02d}:{local.minute:02d}:{local.second:02d}"
            )
            row["local_zone"] = local.tzname()
            row["dst"] = item.dst
        rows.append(row)
    return rows


@login_required
def upcoming(request):
    """The fires of the next hour, day or week across the jobs the viewer
    sees, as a timeline grouped by time, a job that fires every few seconds
    or minutes on one row (jobs.upcoming.timeline); filtered by job name
    and namespace."""
    now = timezone.now()
    params = request.GET
    window = params.get("window", "24h")
    if window not in fires.WINDOWS:
        window = "24h"
    jobs = access.visible_jobs(request.user)
    query = job_name(params.get("q", ""))[:200]
    if query:
        jobs = jobs.filter(name__icontains=query)
    namespace = params.get("namespace", "")
    if namespace:
        jobs = jobs.filter(namespace=namespace)
    after = fires.parse_cursor(params.get("after"))
    page, more = fires.timeline(jobs, start=now, end=now + fires.WINDOWS[window], after=after)
    rows = _timeline_rows(page, window)
    filters = {k: v for k, v in (("window", window), ("q", query), ("namespace", namespace)) if v}
    context = {
        "rows": rows,
        "window": window,
        "query": query,
        "namespace": namespace,
        "namespaces": list(
            access.visible_jobs(request.user)
            .exclude(namespace="")
            .order_by("namespace")
            .values_list("namespace", flat=True)
            .distinct()
        ),
        "windows": [("1h", _("Next hour")), ("24h", _("Next 24 hours")), ("7d", _("Next 7 days"))],
        "filter_query": urlencode(filters),
        "later_query": urlencode({**filters, "after": fires.cursor_of(page[-1])}) if more else "",
        "deeper": after is not None,
        "poll_version": fingerprint([(item.at, item.job.pk, getattr(item, "count", 1)) for item in page]),
    }
    return partial_or_page(request, "jobs/upcoming.html", "upcoming-list", context)
