"""What several console pages share: the role gate, the partial-or-page
answer for htmx, the redirect after a POST, the poll fingerprint and the
cheap cell formatters the tables use."""

import hashlib
import unicodedata
from datetime import UTC, datetime, timedelta
from functools import wraps
from urllib.parse import urlencode

from django.contrib import messages
from django.db.models import Count
from django.db.models.functions import Substr
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import Truncator
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django_htmx.http import HttpResponseClientRedirect

from jobs import access, admission, cron
from jobs.i18n import describe_cron
from jobs.models import Job, Run
from jobs.web.templatetags.console import duration

RUNS_PER_PAGE = 25


def role_required(action):
    """The page's refusal (403) unless the user holds the role `action`
    needs somewhere (jobs.access); the view checks the job's namespace."""

    def decorator(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            access.require(request.user, action)
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


def partial_or_page(request, template: str, partial: str, context: dict, *, status: int = 200):
    """The `#partial` when htmx targets that element, the whole page otherwise."""
    if request.htmx and request.htmx.target == partial:
        template = f"{template}#{partial}"
    return render(request, template, context, status=status)


def fingerprint(*parts) -> str:
    """A short digest of what a live region shows, put on it as
    data-poll-version: console.js polls less often while it stays the same."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def done(request, url: str):
    """After a successful POST: a redirect, which htmx must perform as a page load."""
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


def delete_then_list(request, delete, *, refused: tuple, missing: str, deleted: str, list_url: str):
    """An admin list page's delete button: `delete()` refused (one of
    `refused`, its sentence shown), nothing of that name (404 `missing`), or
    done (`deleted` shown); back to the list at `list_url`."""
    try:
        found = delete()
    except refused as exc:
        messages.error(request, str(exc))
    else:
        if not found:
            raise Http404(missing)
        messages.success(request, deleted)
    return done(request, list_url)


def url_maker(name: str):
    """`pk → reverse(name, args=[pk])` for a table's rows: one reverse() for
    the table instead of one per row (the URL tag is a row's dearest cell)."""
    marker = 987654321987654321
    template = reverse(name, args=[marker])
    head, tail = template.split(str(marker))
    return lambda pk: f"{head}{int(pk)}{tail}"


def short(text: str, limit: int) -> str:
    """`text|truncatechars:limit`, without its walk over every character when
    the text is short anyway (the filter keeps such text as it is, NFC)."""
    if len(text) <= limit and unicodedata.is_normalized("NFC", text):
        return text
    return Truncator(text).chars(limit)


def stamp(when: datetime, zone=UTC, *, day: bool = True, zone_name: bool = False) -> str:
    """`when` in `zone` as the tables show it, the text of the `date` filter's
    "Y-m-d H:i:s" ("H:i:s" without `day`, " T" after it with `zone_name`),
    for much less than the filter costs (it is called for every cell)."""
    at = when.astimezone(zone)
    text = f"{at.hour:02d}:{at.minute:02d}:{at.second:02d}"
    if day:
        text = f"{at.year:04d}-{at.month:02d}-{at.day:02d} {text}"
    if zone_name:
        text = f"{text} {at.tzname()}"
    return text


def interval_text(every: timedelta) -> str:
    """A short gap between fires: "20 s", "2 min", "1 min 30 s" (the
    msgids of the `relative` filter's parts)."""
    minutes, seconds = divmod(round(every.total_seconds()), 60)
    parts = ([_("%s min") % minutes] if minutes else []) + (
        [_("%s s") % seconds] if seconds or not minutes else []
    )
    return " ".join(parts)


def describe_schedule(job: Job) -> str:
    if job.schedule_type == Job.ScheduleType.NONE:
        return _("No schedule: by hand or after upstream jobs")
    if job.schedule_type == Job.ScheduleType.INTERVAL:
        seconds = job.interval_seconds or 0
        for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
            if seconds % size == 0 and seconds >= size:
                count = seconds // size
                if unit == "day":
                    wording = ngettext("Every {count} day", "Every {count} days", count)
                elif unit == "hour":
                    wording = ngettext("Every {count} hour", "Every {count} hours", count)
                else:
                    wording = ngettext("Every {count} minute", "Every {count} minutes", count)
                return wording.format(count=count)
        return _("Every {seconds} seconds").format(seconds=seconds)
    try:
        return describe_cron(job.cron_expression, job.name)
    except cron.CronError as exc:
        return _("Invalid expression ({code})").format(code=exc.code)


# The columns a table of runs reads (a job's history, the all-runs page);
# the error only as far as a cell shows it, never a whole error or log.
RUN_ROW_FIELDS = (
    "id",
    "job_id",
    "scheduled_at",
    "started_at",
    "finished_at",
    "duration_ms",
    "attempt",
    "trigger",
    "status",
    "skip_reason",
    "worker_id",
    "fire_id",
    "shard_index",
    "shard_total",
)


def one_row_per_fire(runs):
    """A table's runs with each split fire (sharded or broadcast,
    jobs.engine.shards) shown as its shard 0, the row that opens to its
    pieces (`fire_pieces`); any other run has shard 0 only."""
    return runs.filter(shard_index=0)


def fire_pieces(runs) -> dict:
    """Split fire id → (its pieces' statuses counted, the address of the
    runs page that lists them), for the split runs of a page: one query,
    on the job and scheduled time (run_history_idx)."""
    split = [run for run in runs if run.shard_total > 1 and run.job_id is not None]
    if not split:
        return {}
    counts: dict = {}
    for fire_id, status, n in (
        Run.objects.filter(
            job_id__in={run.job_id for run in split},
            scheduled_at__in={run.scheduled_at for run in split},
            fire_id__in={run.fire_id for run in split},
        )
        .values_list("fire_id", "status")
        .annotate(n=Count("id"))
        .order_by()
    ):
        counts.setdefault(fire_id, []).append((status, n))
    url = reverse("jobs:run_list")
    return {
        run.fire_id: {
            "total": run.shard_total,
            "counts": " · ".join(
                f"{n} {Run.Status(status).label}" for status, n in sorted(counts.get(run.fire_id, []))
            ),
            "url": f"{url}?{urlencode({'job': run.job_id, 'fire': str(run.fire_id)})}",
        }
        for run in split
    }


def run_table(runs, *extra: str):
    """`runs` narrowed to the columns a table of runs shows (and `extra`),
    with `error_head`, the start of each run's error."""
    return runs.only(*RUN_ROW_FIELDS, *extra).annotate(error_head=Substr("error", 1, 200))


def run_rows(runs) -> list[dict]:
    """A table of runs' cells, worked out once per run: the same text the
    template filters give (truncatechars, date, duration, when), the times
    in the viewer's zone (the page's current one) and in UTC."""
    run_url = url_maker("jobs:run_detail")
    zone = timezone.get_current_timezone()
    waiting = admission.waiting_reasons(runs)
    fires = fire_pieces(runs)
    return [
        {
            "run": run,
            "url": run_url(run.pk),
            "error_short": short(run.error_head, 60) if run.error_head else "",
            "scheduled_utc": stamp(run.scheduled_at),
            "scheduled": stamp(run.scheduled_at, zone),
            "started": stamp(run.started_at, zone, day=False) if run.started_at else "",
            "finished": stamp(run.finished_at, zone, day=False) if run.finished_at else "",
            "duration": duration(run.duration_ms),
            "waiting": waiting.get(run.pk, ""),
            "fire": fires.get(run.fire_id) if run.shard_total > 1 else None,
        }
        for run in runs
    ]
