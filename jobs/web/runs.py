"""Runs across jobs: the all-runs page, a run's page and its log, retry
and cancel."""

import csv
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models.functions import Substr
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs import access, admission, overview, refusals, runsearch, secrets, services
from jobs.access import login_required
from jobs.models import Run, parse_run_cursor, run_cursor
from jobs.web.common import (
    RUNS_PER_PAGE,
    done,
    fingerprint,
    one_row_per_fire,
    partial_or_page,
    role_required,
    run_rows,
    run_table,
)

# ?since= on the all-runs page → how far back; "today" is since midnight UTC.
RUN_WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7), "today": None}


def _filtered(request, runs, now: datetime, *, search: bool = True) -> tuple:
    """`runs` (the user's) narrowed by the page's filters: ?status=live is
    "running now", ?status=failures every run that counts as failed
    (Run.FAILED_OUTCOMES, as the dashboard counts them), ?trigger, ?job,
    ?since, ?q (words in the error or log, jobs.runsearch; checked, but
    left to the caller when not `search`). Returns the runs and what was
    picked (for the page, its links and the export)."""
    params = request.GET
    status = params.get("status", "")
    if status == "live":
        # The few live runs come from their partial index (run_live_idx);
        # filtered inside the big ordered walk, SQLite would scan every run.
        runs = runs.filter(pk__in=overview.live_run_ids())
    elif status == "failures":
        runs = runs.filter(status__in=Run.FAILED_OUTCOMES)
    elif status in Run.Status.values:
        runs = runs.filter(status=status)
    else:
        status = ""
    trigger = params.get("trigger", "")
    if trigger in Run.Trigger.values:
        runs = runs.filter(trigger=trigger)
    else:
        trigger = ""
    job = None
    if params.get("job", "").isdigit():
        job = access.visible_jobs(request.user).filter(pk=int(params["job"])).only("id", "name").first()
        runs = runs.filter(job_id=job.pk if job else -1)
    # A split fire's pieces, every one: of one job (its runs' index; no index
    # has fire_id alone).
    fire = _fire_id(params.get("fire", "")) if job is not None else None
    if fire is not None:
        runs = runs.filter(fire_id=fire)
    elif not status:
        runs = one_row_per_fire(runs)
    since = params.get("since", "")
    if since in RUN_WINDOWS:
        start = RUN_WINDOWS[since]
        runs = runs.filter(
            scheduled_at__gte=now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
            if start is None
            else now - start
        )
    else:
        since = ""
    query, search_error = params.get("q", "").strip(), ""
    try:
        runsearch.words(query)
        if search:
            runs = runsearch.matching(runs, query)
    except runsearch.SearchError as exc:
        search_error, query = str(exc), ""
    filters = {
        k: v
        for k, v in (
            ("status", status),
            ("trigger", trigger),
            ("job", str(job.pk) if job else ""),
            ("fire", str(fire) if fire else ""),
            ("since", since),
            ("q", query),
        )
        if v
    }
    picked = {
        "status": status,
        "trigger": trigger,
        "since": since,
        "filter_job": job,
        "query": query,
        "search_error": search_error,
        "filters": filters,
    }
    return runs, picked


def _fire_id(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text) if text else None
    except ValueError:
        return None


def _all_runs_context(request, *, now: datetime | None = None) -> dict:
    """One page of runs across every job the user may see, newest first,
    keyset-paginated like a job's history (filters: _filtered)."""
    now = now or timezone.now()
    params = request.GET
    runs, picked = _filtered(
        request,
        run_table(
            access.visible_runs(request.user).select_related("job"),
            "job__name",
            "job__timezone",
            "handler",
            "task_key",
        ),
        now,
        search=False,
    )
    filters = picked.pop("filters")
    before = parse_run_cursor(params.get("before"))
    if before:
        runs = runs.older_than(*before)
    page = runsearch.newest(runs, picked["query"], RUNS_PER_PAGE + 1)
    older = len(page) > RUNS_PER_PAGE
    page = page[:RUNS_PER_PAGE]
    return {
        "runs": page,
        "rows": run_rows(page),
        **picked,
        "statuses": Run.Status.choices,
        "triggers": Run.Trigger.choices,
        "windows": [
            ("1h", _("Last hour")),
            ("today", _("Today (UTC)")),
            ("24h", _("Last 24 hours")),
            ("7d", _("Last 7 days")),
        ],
        "filter_query": urlencode(filters),
        "this_query": params.urlencode(),
        "older_query": urlencode({**filters, "before": run_cursor(page[-1].scheduled_at, page[-1].pk)})
        if older and page
        else "",
        "deeper": before is not None,
        "poll_version": fingerprint([(run.pk, run.status, run.finished_at) for run in page]),
    }


@login_required
def run_list(request):
    """All runs across jobs: "running now", "failed today", by job, trigger, time."""
    return partial_or_page(request, "jobs/run_list.html", "run-list", _all_runs_context(request))


@login_required
def run_detail(request, run_id):
    run = access.get_run_for_user(request.user, run_id)
    context = {
        "run": run,
        "job": run.job,
        # Credentials typed in clear are for those who may edit the job.
        "shown_properties": run.properties
        if access.sees_credentials(request.user, run.job)
        else secrets.mask_credentials(run.properties or {}),
        "retryable": Run.RETRYABLE,
        "caused_by": run.caused_by if run.caused_by_id else None,
        "caused_runs": list(run.caused_runs.select_related("job").order_by("id")[:50]),
        "waiting": admission.waiting_reasons([run]).get(run.pk, ""),
    }
    return partial_or_page(request, "jobs/run_detail.html", "run-viewer", context)


@login_required
@require_POST
@role_required(access.OPERATE)
def run_retry(request, run_id):
    """Run a failed (or timed out, interrupted, cancelled) run's job again,
    now, as a manual run; the audit trail names the run it retries."""
    run = access.get_run_for_user(request.user, run_id)
    if not access.can_act_on_run(request.user, run):
        raise PermissionDenied(_("Your role may not run, pause or cancel jobs here."))
    try:
        new, created = services.retry_run(run=run, user=request.user)
    except refusals.NotRetryable as exc:
        messages.error(request, str(exc))
        return done(request, reverse("jobs:run_detail", args=[run.pk]))
    except refusals.ServiceError as exc:
        messages.error(request, str(exc))
    except ValidationError as exc:
        messages.error(
            request,
            _("Not retried: the run's property overrides are no longer valid: {join}").format(
                join=" ".join(exc.messages)
            ),
        )
    else:
        if created:
            messages.success(
                request,
                _("Queued run {pk} of “{name}”, a retry of run {pk2}.").format(
                    pk=new.pk, name=run.job.name, pk2=run.pk
                ),
            )
        else:
            messages.info(
                request,
                _("A manual run of “{name}” is already {status} (run {pk}).").format(
                    name=run.job.name, status=new.get_status_display().lower(), pk=new.pk
                ),
            )
    return done(request, reverse("jobs:job_detail", args=[run.job_id]))


@login_required
def run_log(request, run_id):
    """A run's whole log as a text file (the page shows it too, but a file
    is what a person greps or attaches to a ticket)."""
    run = access.get_run_for_user(request.user, run_id)
    response = HttpResponse(run.log or "", content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}.log"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
@require_POST
@role_required(access.OPERATE)
def run_cancel(request, run_id):
    run = access.get_run_for_user(request.user, run_id)
    if not access.can_act_on_run(request.user, run):
        raise PermissionDenied(_("Your role may not run, pause or cancel jobs here."))
    if services.cancel_run(run=run, user=request.user):
        messages.success(request, _("Cancelling run {pk}.").format(pk=run.pk))
    else:
        messages.info(request, _("Run {pk} had already finished.").format(pk=run.pk))
    return done(
        request,
        reverse("jobs:job_detail", args=[run.job_id])
        if run.job_id
        else reverse("jobs:run_detail", args=[run.pk]),
    )


# The CSV export's columns, and how many runs one export holds at most.
CSV_COLUMNS = (
    "id",
    "job",
    "namespace",
    "status",
    "trigger",
    "attempt",
    "scheduled_at",
    "started_at",
    "finished_at",
    "duration_ms",
    "worker_id",
    "error",
)
CSV_MAX_RUNS = 100_000
CSV_ERROR_CHARS = 1000


def _csv_cell(value) -> str:
    """A cell as text, safe to open in a spreadsheet: text starting with
    = + - @ (or a tab or carriage return) would be read as a formula there
    (CSV injection), so it gets a leading apostrophe, as OWASP advises."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


class _Echo:
    def write(self, value):
        return value


@login_required
def run_export(request):
    """The runs the page's filters pick (its ?status, ?trigger, ?job, ?since,
    ?q), newest first, as CSV: at most CSV_MAX_RUNS, the error cut to
    CSV_ERROR_CHARS, times in UTC; streamed, read in chunks."""
    runs, picked = _filtered(request, access.visible_runs(request.user), timezone.now())
    if picked["search_error"]:
        return HttpResponse(picked["search_error"], status=400, content_type="text/plain; charset=utf-8")
    rows = (
        runs.order_by("-scheduled_at", "-id")
        .annotate(error_head=Substr("error", 1, CSV_ERROR_CHARS))
        .values_list(
            "id",
            "job__name",
            "job__namespace",
            "status",
            "trigger",
            "attempt",
            "scheduled_at",
            "started_at",
            "finished_at",
            "duration_ms",
            "worker_id",
            "error_head",
        )[:CSV_MAX_RUNS]
    )
    writer = csv.writer(_Echo())

    def lines():
        yield writer.writerow(CSV_COLUMNS)
        for row in rows.iterator(chunk_size=2000):
            yield writer.writerow([_csv_cell(value) for value in row])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().astimezone(UTC).strftime("%Y%m%d-%H%M")
    response["Content-Disposition"] = f'attachment; filename="runs-{stamp}.csv"'
    return response
