"""A job's page: its summary, charts (the last runs, the last 30 days),
run history and audit trail, and the
actions on one job (pause, resume, run now, delete)."""

from datetime import datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs import access, alerts, kinds, overview, refusals, secrets, services, trends, workflows
from jobs.access import login_required
from jobs.models import LIVE_RUN, AuditEvent, Job, Run, parse_run_cursor, run_cursor
from jobs.web.charts import duration_chart, job_days_chart
from jobs.web.common import (
    RUNS_PER_PAGE,
    describe_schedule,
    done,
    fingerprint,
    one_row_per_fire,
    role_required,
    run_rows,
    run_table,
)

CHART_RUNS = 60
AUDIT_EVENTS = 30


def _live_runs(job: Job):
    return Run.objects.filter(LIVE_RUN, job=job)


def _job_trends(job: Job) -> dict:
    """The job's last 30 days from the rollup (jobs.trends.job_trends),
    kept a few minutes: the history's polls read it to mark slow runs."""
    key = f"cronboard:trends:job:{job.pk}"
    found = cache.get(key)
    if found is None:
        found = trends.job_trends(job, now=timezone.now())
        cache.set(key, found, trends.TOP_LISTS_FOR)
    return found


def _history_context(job: Job, params) -> dict:
    """One page of a job's runs, newest first, keyset-paginated on
    (scheduled_at, id) so a deep page costs what the first one does
    (run_history_idx serves both directions)."""
    runs = run_table(Run.objects.filter(job=job))
    status = params.get("status", "")
    if status in Run.Status.values:
        runs = runs.filter(status=status)
    else:
        runs = one_row_per_fire(runs)  # filtered by status, every matching piece shows
    trigger = params.get("trigger", "")
    if trigger in Run.Trigger.values:
        runs = runs.filter(trigger=trigger)

    before, after = parse_run_cursor(params.get("before")), parse_run_cursor(params.get("after"))
    if after and not before:
        page = list(runs.newer_than(*after).order_by("scheduled_at", "id")[: RUNS_PER_PAGE + 1])
        newer = len(page) > RUNS_PER_PAGE
        page = page[:RUNS_PER_PAGE][::-1]
        older = bool(page)
    else:
        if before:
            runs = runs.older_than(*before)
        page = list(runs.order_by("-scheduled_at", "-id")[: RUNS_PER_PAGE + 1])
        older = len(page) > RUNS_PER_PAGE
        page = page[:RUNS_PER_PAGE]
        newer = before is not None and bool(page)

    filters = {k: v for k, v in (("status", status), ("trigger", trigger)) if v}
    live = _live_runs(job).exists()
    rows = run_rows(page)
    slow_ms = _job_trends(job)["slow_ms"]
    for row in rows:
        taken = row["run"].duration_ms
        row["slow"] = slow_ms is not None and taken is not None and taken > slow_ms
    return {
        "poll_version": fingerprint(
            live,
            [(run.pk, run.status, run.finished_at) for run in page],
            (job.version, job.state, job.next_fire_at, job.last_fire_at, job.consecutive_failures),
        ),
        "runs": page,
        "rows": rows,
        "slow_ms": slow_ms,
        "status": status,
        "trigger": trigger,
        "statuses": Run.Status.choices,
        "triggers": Run.Trigger.choices,
        "older_query": urlencode({**filters, "before": run_cursor(page[-1].scheduled_at, page[-1].pk)})
        if older and page
        else "",
        "newer_query": urlencode({**filters, "after": run_cursor(page[0].scheduled_at, page[0].pk)})
        if newer and page
        else "",
        "filter_query": urlencode(filters),
        "this_query": params.urlencode() if hasattr(params, "urlencode") else urlencode(params),
        "any_live": live,
    }


def _chart(job: Job) -> dict | None:
    recent = list(
        Run.objects.filter(job=job, status__in=Run.FINISHED)
        .order_by("-scheduled_at", "-id")
        .values("id", "scheduled_at", "duration_ms", "status")[:CHART_RUNS]
    )
    return duration_chart(recent[::-1])


def _job_panels(job: Job, user) -> dict:
    """What the job page shows around its history: summary, actions, chart.
    Credentials typed in clear in the properties are for those who may edit."""
    return {
        "job": job,
        "shown_properties": job.properties
        if access.sees_credentials(user, job)
        else secrets.mask_credentials(job.properties),
        "schedule": describe_schedule(job),
        "never_starts": kinds.never_starts(job),
        "chart": _chart(job),
        "job_trends": (recent := _job_trends(job)),
        "days_chart": job_days_chart(recent["days"]),
        "live_manual_run": next(
            iter(overview.live_manual_runs(job).only("id", "status").order_by()[:1]), None
        ),
    }


@login_required
def job_detail(request, job_id):
    job = access.get_job_for_user(request.user, job_id)
    if request.htmx and request.htmx.target == "run-history":
        # The history's filters and pages (their URL is this page's, pushed
        # into the address bar): the same answer as job_runs.
        return job_runs(request, job_id)
    audit_events = list(AuditEvent.objects.filter(job=job).order_by("-created_at", "-id")[:AUDIT_EVENTS])
    # Credentials typed in clear are for those who may edit the job.
    masked = not access.sees_credentials(request.user, job)
    if masked:
        for event in audit_events:
            change = event.changes.get("properties") if isinstance(event.changes, dict) else None
            if isinstance(change, list) and len(change) == 2:
                event.changes["properties"] = [
                    secrets.mask_credentials(side) if isinstance(side, dict) else side for side in change
                ]
    context = {
        **_job_panels(job, request.user),
        "history": _history_context(job, request.GET),
        "audit_events": audit_events,
        # The first date its calendar has no data for, when that is near.
        "calendar_missing": job.calendar_missing(timezone.now()) if job.calendar else None,
        "calendar_unknown": job.day_rule() is False,
    }
    # The workflow around the job, as far as the viewer may see it.
    context["upstreams"], context["downstreams"] = workflows.chain_around(job, user=request.user)
    context["chain_levels"] = workflows.CHAIN_LEVELS
    return render(request, "jobs/job_detail.html", context)


@login_required
def job_runs(request, job_id):
    """The run history alone (its live polling; its filters and pages come
    through job_detail), with the job's state, crash banner, actions, summary
    and chart swapped out of band: a run that finishes changes them too."""
    job = access.get_job_for_user(request.user, job_id)
    context = {**_job_panels(job, request.user), "history": _history_context(job, request.GET), "oob": True}
    return render(request, "jobs/job_detail.html#run-history", context)


def _job_action(request, job_id, action):
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.OPERATE, job=job)
    try:
        action(job)
    except refusals.ServiceError as exc:
        messages.error(request, str(exc))
    return done(request, reverse("jobs:job_detail", args=[job.pk]))


@login_required
@require_POST
@role_required(access.OPERATE)
def job_pause(request, job_id):
    def pause(job):
        services.pause_job(job=job, user=request.user)
        messages.success(request, _("Paused “{name}”.").format(name=job.name))

    return _job_action(request, job_id, pause)


@login_required
@require_POST
@role_required(access.OPERATE)
def job_mute(request, job_id):
    """Mute the job's alerts until a time read in the job's zone, or unmute
    them (an empty time); the job keeps running."""

    def mute(job):
        text = request.POST.get("until", "").strip()
        until = None
        if text:
            try:
                until = datetime.fromisoformat(text)
            except ValueError:
                messages.error(request, _("“{text}” is not a date and time.").format(text=text[:40]))
                return
            until = until.replace(tzinfo=job.zone) if until.tzinfo is None else until
        try:
            alerts.mute_alerts(job=job, until=until, now=timezone.now(), user=request.user)
        except (ValueError, OverflowError) as exc:
            messages.error(request, str(exc) if isinstance(exc, ValueError) else _("Choose a nearer time."))
            return
        if until is None:
            messages.success(request, _("Alerts of “{name}” are sent again.").format(name=job.name))
        else:
            messages.success(
                request, _("Alerts of “{name}” are muted; the job keeps running.").format(name=job.name)
            )

    return _job_action(request, job_id, mute)


@login_required
@require_POST
@role_required(access.OPERATE)
def job_resume(request, job_id):
    """Resume a paused job, or re-enable a crashed one (its failure count starts over)."""

    def resume(job):
        was_crashed = job.state == Job.State.CRASHED
        services.resume_job(job=job, user=request.user)
        messages.success(
            request,
            (_("Re-enabled “{name}”.") if was_crashed else _("Resumed “{name}”.")).format(name=job.name),
        )

    return _job_action(request, job_id, resume)


@login_required
@require_POST
@role_required(access.OPERATE)
def job_run_now(request, job_id):
    # Demo mode refuses in services.run_now; _job_action shows its message.
    def run(job):
        try:
            run, created = services.run_now(
                job=job, user=request.user, properties=request.POST.get("properties", "").strip() or None
            )
        except ValidationError as exc:
            messages.error(
                request,
                _("Not run: the property overrides are not valid: {join}").format(
                    join=" ".join(exc.messages)
                ),
            )
            return
        if created:
            overrides = (
                _(" with {count} property override(s)").format(count=len(run.properties))
                if run.properties
                else ""
            )
            messages.success(
                request,
                _("Queued a manual run of “{name}”{overrides}.").format(name=job.name, overrides=overrides),
            )
        else:
            messages.info(
                request,
                _("A manual run of “{name}” is already {status}.").format(
                    name=job.name, status=run.get_status_display().lower()
                ),
            )

    return _job_action(request, job_id, run)


@login_required
@role_required(access.EDIT)
def job_delete(request, job_id):
    """GET asks for confirmation; POST deletes (softly)."""
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.EDIT, job=job)
    if request.method != "POST":
        return render(request, "jobs/job_delete.html", {"job": job})
    try:
        services.delete_job(job=job, user=request.user)
    except refusals.ServiceError as exc:
        messages.error(request, str(exc))
        return done(request, reverse("jobs:job_detail", args=[job.pk]))
    messages.success(request, _("Deleted “{name}”.").format(name=job.name))
    return done(request, reverse("jobs:job_list"))
