"""The console: server-rendered pages with htmx. Views are thin — read the
request, call a form or a service, render. htmx requests get the partial
(`page.html#dom-id`) they target; everything else gets the whole page.

Access is decided by jobs.access only: every view needs a signed-in user;
mutations need `can_edit` and POST (a GET never changes anything)."""

from datetime import UTC, datetime, timedelta
from functools import wraps
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import IntegrityError
from django.db.models import BooleanField, F, Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Substr
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from jobs import access, cron, services, tokens
from jobs.charts import duration_chart
from jobs.forms import HTTP_FIELDS, JobForm, SettingsForm
from jobs.handlers.http import METHODS as HTTP_METHODS
from jobs.handlers.sql import sql_enabled
from jobs.leases import cluster_status
from jobs.models import AuditEvent, Job, Message, Run

JOBS_PER_PAGE = 50
RUNS_PER_PAGE = 25
CHART_RUNS = 60
AUDIT_EVENTS = 30

# ?sort= value → model field; "-" in front sorts descending.
JOB_SORTS = {
    "name": "name",
    "kind": "kind",
    "state": "state",
    "next": "next_fire_at",
    "last": "last_fire_at",
    "timezone": "timezone",
}


# -- access --------------------------------------------------------------------


def login_required(view):
    """Django's login_required, except that an htmx request (a fragment whose
    session expired) is told to load the login page as a whole page instead
    of having the login form swapped into the fragment."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if access.can_view(request.user):
            return view(request, *args, **kwargs)
        if request.htmx:
            back = request.htmx.current_url_abs_path or request.get_full_path()
            login_url = f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': back})}"
            return HttpResponseClientRedirect(login_url)
        return redirect_to_login(request.get_full_path())

    return wrapper


def staff_required(view):
    """Staff create, edit, run and pause; other signed-in users only view."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not access.can_edit(request.user):
            raise PermissionDenied("Only staff can change jobs.")
        return view(request, *args, **kwargs)

    return wrapper


def _partial_or_page(request, template: str, partial: str, context: dict, *, status: int = 200):
    """The `#partial` when htmx targets that element, the whole page otherwise."""
    if request.htmx and request.htmx.target == partial:
        template = f"{template}#{partial}"
    return render(request, template, context, status=status)


def _done(request, url: str):
    """After a successful POST: a redirect, which htmx must perform as a page load."""
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


# -- job list ------------------------------------------------------------------


def _job_list_context(request) -> dict:
    params = request.GET
    jobs = access.visible_jobs(request.user)
    query = params.get("q", "").strip()[:200]
    if query:
        jobs = jobs.filter(Q(name__icontains=query) | Q(description__icontains=query))
    state = params.get("state", "")
    if state in Job.State.values:
        jobs = jobs.filter(state=state)
    kind = params.get("kind", "")
    if kind in Job.Kind.values:
        jobs = jobs.filter(kind=kind)
    namespace = params.get("namespace", "")
    if namespace:
        jobs = jobs.filter(namespace=namespace)

    sort = params.get("sort", "name")
    field = JOB_SORTS.get(sort.lstrip("-"))
    if field is None:
        sort, field = "name", "name"
    order = F(field).desc(nulls_last=True) if sort.startswith("-") else F(field).asc(nulls_last=True)
    jobs = jobs.order_by(order, "id")

    page = Paginator(jobs, JOBS_PER_PAGE).get_page(params.get("page"))
    rows = [{"job": job, "schedule": _describe_schedule(job)} for job in page.object_list]
    filters = {
        k: v for k, v in (("q", query), ("state", state), ("kind", kind), ("namespace", namespace)) if v
    }
    return {
        "page": page,
        "rows": rows,
        "query": query,
        "state": state,
        "kind": kind,
        "namespace": namespace,
        "sort": sort,
        "filter_query": urlencode(filters),
        "sort_links": {
            key: urlencode({**filters, "sort": key if sort != key else f"-{key}"}) for key in JOB_SORTS
        },
        "states": Job.State.choices,
        "kinds": Job.Kind.choices,
        "namespaces": list(
            access.visible_jobs(request.user)
            .exclude(namespace="")
            .order_by("namespace")
            .values_list("namespace", flat=True)
            .distinct()
        ),
    }


# SQLite uses a partial index only when the query states the index's
# condition as literals, never as bound parameters; written out like this the
# live-run checks use run_live_idx / run_one_live_manual_per_job instead of
# walking all of a job's runs.
_LIVE = RawSQL("\"jobs_run\".\"status\" IN ('queued', 'running')", (), output_field=BooleanField())
_MANUAL = RawSQL("\"jobs_run\".\"trigger\" IN ('manual', 'api')", (), output_field=BooleanField())
assert set(Run.LIVE) == {"queued", "running"} and set(Run.MANUAL_TRIGGERS) == {"manual", "api"}


def _live_runs(job: Job):
    return Run.objects.filter(_LIVE, job=job)


def _describe_schedule(job: Job) -> str:
    if job.schedule_type == Job.ScheduleType.INTERVAL:
        seconds = job.interval_seconds or 0
        for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
            if seconds % size == 0 and seconds >= size:
                count = seconds // size
                return f"Every {count} {unit}{'s' if count != 1 else ''}"
        return f"Every {seconds} seconds"
    try:
        return cron.describe(job.cron_expression)
    except cron.CronError as exc:
        return f"Invalid expression ({exc.code})"


@login_required
def job_list(request):
    return _partial_or_page(request, "jobs/job_list.html", "job-table", _job_list_context(request))


@login_required
@require_POST
@staff_required
def job_bulk(request):
    """Pause or resume the ticked jobs, then show the list as it was filtered."""
    action = request.POST.get("action")
    if action not in ("pause", "resume"):
        messages.error(request, "Choose pause or resume.")
    else:
        ids = [i for i in request.POST.getlist("ids") if i.isdigit()]
        jobs = list(access.visible_jobs(request.user).filter(pk__in=ids))
        changed, refused = 0, []
        for job in jobs:
            try:
                if action == "pause" and job.state != Job.State.PAUSED:
                    services.pause_job(job=job, user=request.user)
                    changed += 1
                elif action == "resume" and job.state != Job.State.ENABLED:
                    services.resume_job(job=job, user=request.user)
                    changed += 1
            except services.ServiceError as exc:
                # Demo mode or an SQL job this user may not change: the rest go ahead.
                refused.append(f"“{job.name}”: {exc}")
        verb = "Paused" if action == "pause" else "Resumed"
        messages.success(request, f"{verb} {changed} job{'s' if changed != 1 else ''}.")
        for problem in refused:
            messages.error(request, f"Not changed: {problem}")
    if request.htmx:
        return render(request, "jobs/job_list.html#job-table", _job_list_context(request))
    return redirect("jobs:job_list")


# -- job form --------------------------------------------------------------------


FORM_LABELS = {
    "kind": "Kind",
    "handler": "Handler",
    "url": "URL",
    "sql": "SQL statement",
    "sql_write": "Allow the statement to write",
    "properties": "Properties",
    "schedule_type": "Schedule",
    "interval_seconds": "Every (seconds)",
    "misfire_policy": "When a fire was missed",
    "run_once": "Run once, then disable",
    "max_retries": "Retries",
    "retry_interval_seconds": "Retry after (seconds)",
    "timeout_seconds": "Timeout (seconds)",
    "alert_threshold": "Alert after this many failed fires in a row",
    "alert_emails": "Alert emails",
}


PLACED_FIELDS = {
    "version",
    "name",
    "namespace",
    "description",
    "kind",
    "handler",
    "url",
    "method",
    "headers",
    "body",
    "sql",
    "sql_write",
    "properties",
    "schedule_type",
    "timezone",
    "cron_expression",
    "interval_seconds",
    "misfire_policy",
    "state",
    "run_once",
    "max_retries",
    "retry_interval_seconds",
    "timeout_seconds",
    "alert_threshold",
    "alert_emails",
}


def _form_context(form: JobForm, job: Job | None) -> dict:
    for name, label in FORM_LABELS.items():
        form.fields[name].label = label
    kinds = Job.Kind.choices
    if not sql_enabled() and not (job and job.kind == Job.Kind.SQL):
        kinds = [choice for choice in kinds if choice[0] != Job.Kind.SQL]
        form.fields["kind"].choices = kinds
    form.fields["properties"].widget.attrs.update({"data-property-bag": "", "rows": 4})
    form.fields["timezone"].widget.attrs.update({"list": "timezone-names", "autocomplete": "off"})
    form.fields["description"].widget.attrs.update({"rows": 2})
    form.fields["headers"].widget.attrs.update({"rows": 3, "placeholder": "Header-Name: value"})
    form.fields["body"].widget.attrs.update({"rows": 3})
    form.fields["sql"].widget.attrs.update({"rows": 4})
    form.fields["alert_emails"].help_text = "Comma separated. Empty: the global alert emails (Settings)."
    return {
        "form": form,
        "job": job,
        "http_methods": HTTP_METHODS,
        "timezones": cron.known_zones(),
        "sql_enabled": sql_enabled(),
        # Fields the template does not place by name (added by another area
        # of the app later) still show up, at the end.
        "other_fields": [form[name] for name in form.fields if name not in PLACED_FIELDS],
    }


def _handler_properties(job: Job) -> dict:
    """The property bag without the keys the HTTP/SQL fields edit, so a key is
    never shown (and edited) twice."""
    own = HTTP_FIELDS if job.kind == Job.Kind.HTTP else ("sql",) if job.kind == Job.Kind.SQL else ()
    return {k: v for k, v in (job.properties or {}).items() if k not in own}


def _save_job_form(request, job: Job | None):
    form = JobForm(request.POST, instance=job, user=request.user)
    if form.is_valid():
        try:
            saved = services.save_job(
                job=form.save(commit=False),
                user=request.user,
                expected_version=form.cleaned_data.get("version"),
            )
        except services.StaleJobError as exc:
            form.add_error(None, ValidationError(str(exc), code="stale"))
        except IntegrityError:
            # Two people created the same name at the same moment.
            form.add_error("name", ValidationError("A job with this name already exists.", code="unique"))
        else:
            messages.success(request, f"Saved “{saved.name}”.")
            return _done(request, reverse("jobs:job_detail", args=[saved.pk]))
    # Invalid: 200 so htmx swaps the form with its errors in.
    return _partial_or_page(request, "jobs/job_form.html", "job-form", _form_context(form, job))


@login_required
@staff_required
def job_create(request):
    if request.method == "POST":
        return _save_job_form(request, None)
    form = JobForm(user=request.user, initial={"cron_expression": "0 0 * * * *", "timezone": "UTC"})
    return render(request, "jobs/job_form.html", _form_context(form, None))


@login_required
@staff_required
def job_edit(request, job_id):
    job = access.get_job_for_user(request.user, job_id)
    if request.method == "POST":
        return _save_job_form(request, job)
    form = JobForm(instance=job, user=request.user, initial={"properties": _handler_properties(job)})
    return render(request, "jobs/job_form.html", _form_context(form, job))


@login_required
def cron_preview(request):
    """The cron editor's live preview; any signed-in user may use it."""
    # Over-long text is refused by cron itself (the one limit), not cut short.
    expression = request.GET.get("cron_expression", "").strip()
    zone_name = request.GET.get("timezone", "").strip()
    context = {
        "expression": expression[: cron.MAX_EXPRESSION_CHARS],
        "zone_name": zone_name[: cron.MAX_ZONE_CHARS] or "UTC",
    }
    if expression:
        try:
            zone_name = context["zone_name"] = cron.zone_name(zone_name)
            preview = cron.preview(expression, zone_name, after=timezone.now(), count=5)
        except cron.CronError as exc:
            context["error"] = {"code": exc.code, "message": exc.message}
        else:
            zone = cron.get_zone(zone_name)
            context["preview"] = preview
            context["times"] = [
                {"utc": utc, "local": utc.astimezone(zone), "dst": item.get("dst")}
                for item in preview["times"]
                for utc in [datetime.fromisoformat(item["utc"].replace("Z", "+00:00"))]
            ]
    return render(request, "jobs/job_form.html#cron-preview", context)


# -- job detail ---------------------------------------------------------------------


def _parse_cursor(value: str | None) -> tuple[datetime, int] | None:
    """A history cursor "<epoch microseconds>.<run id>" → (scheduled_at, id)."""
    try:
        micros, run_id = (int(part) for part in (value or "").split("."))
        return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros), run_id
    except (ValueError, OverflowError):
        return None


def _cursor(run: Run) -> str:
    delta = run.scheduled_at - datetime(1970, 1, 1, tzinfo=UTC)
    micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return f"{micros}.{run.pk}"


def _history_context(job: Job, params) -> dict:
    """One page of a job's runs, newest first, keyset-paginated on
    (scheduled_at, id) so a deep page costs what the first one does
    (run_history_idx serves both directions)."""
    runs = (
        Run.objects.filter(job=job)
        .only(
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
        )
        .annotate(error_head=Substr("error", 1, 200))
    )
    status = params.get("status", "")
    if status in Run.Status.values:
        runs = runs.filter(status=status)
    trigger = params.get("trigger", "")
    if trigger in Run.Trigger.values:
        runs = runs.filter(trigger=trigger)

    before, after = _parse_cursor(params.get("before")), _parse_cursor(params.get("after"))
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
    return {
        "runs": page,
        "status": status,
        "trigger": trigger,
        "statuses": Run.Status.choices,
        "triggers": Run.Trigger.choices,
        "older_query": urlencode({**filters, "before": _cursor(page[-1])}) if older and page else "",
        "newer_query": urlencode({**filters, "after": _cursor(page[0])}) if newer and page else "",
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


def _job_panels(job: Job) -> dict:
    """What the job page shows around its history: summary, actions, chart."""
    return {
        "job": job,
        "schedule": _describe_schedule(job),
        "chart": _chart(job),
        "live_manual_run": next(
            iter(_live_runs(job).filter(_MANUAL).only("id", "status").order_by()[:1]), None
        ),
    }


@login_required
def job_detail(request, job_id):
    job = access.get_job_for_user(request.user, job_id)
    context = {
        **_job_panels(job),
        "history": _history_context(job, request.GET),
        "audit_events": AuditEvent.objects.filter(job=job).order_by("-created_at", "-id")[:AUDIT_EVENTS],
    }
    return _partial_or_page(request, "jobs/job_detail.html", "run-history", context)


@login_required
def job_runs(request, job_id):
    """The run history alone (its filters, pages and live polling), with the
    job's state, actions, summary and chart swapped out of band: a run that
    finishes changes them too."""
    job = access.get_job_for_user(request.user, job_id)
    context = {**_job_panels(job), "history": _history_context(job, request.GET), "oob": True}
    return render(request, "jobs/job_detail.html#run-history", context)


def _job_action(request, job_id, action):
    job = access.get_job_for_user(request.user, job_id)
    try:
        action(job)
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    return _done(request, reverse("jobs:job_detail", args=[job.pk]))


@login_required
@require_POST
@staff_required
def job_pause(request, job_id):
    def pause(job):
        services.pause_job(job=job, user=request.user)
        messages.success(request, f"Paused “{job.name}”.")

    return _job_action(request, job_id, pause)


@login_required
@require_POST
@staff_required
def job_resume(request, job_id):
    """Resume a paused job, or re-enable a crashed one (its failure count starts over)."""

    def resume(job):
        was_crashed = job.state == Job.State.CRASHED
        services.resume_job(job=job, user=request.user)
        messages.success(request, f"{'Re-enabled' if was_crashed else 'Resumed'} “{job.name}”.")

    return _job_action(request, job_id, resume)


@login_required
@require_POST
@staff_required
def job_run_now(request, job_id):
    # Demo mode refuses in services.run_now; _job_action shows its message.
    def run(job):
        run, created = services.run_now(job=job, user=request.user)
        if created:
            messages.success(request, f"Queued a manual run of “{job.name}”.")
        else:
            messages.info(request, f"A manual run of “{job.name}” is already {run.status}.")

    return _job_action(request, job_id, run)


@login_required
@staff_required
def job_delete(request, job_id):
    """GET asks for confirmation; POST deletes (softly)."""
    job = access.get_job_for_user(request.user, job_id)
    if request.method != "POST":
        return render(request, "jobs/job_delete.html", {"job": job})
    try:
        services.delete_job(job=job, user=request.user)
    except services.ServiceError as exc:
        messages.error(request, str(exc))
        return _done(request, reverse("jobs:job_detail", args=[job.pk]))
    messages.success(request, f"Deleted “{job.name}”.")
    return _done(request, reverse("jobs:job_list"))


# -- runs ------------------------------------------------------------------------------


def _get_run_for_user(user, run_id) -> Run:
    run = get_object_or_404(Run.objects.select_related("job"), pk=run_id)
    if run.job_id is None:
        if not access.can_view(user):
            raise Http404("No such run.")
    else:
        access.get_job_for_user(user, run.job_id)
    return run


@login_required
def run_detail(request, run_id):
    run = _get_run_for_user(request.user, run_id)
    return _partial_or_page(request, "jobs/run_detail.html", "run-viewer", {"run": run, "job": run.job})


@login_required
@require_POST
@staff_required
def run_cancel(request, run_id):
    run = _get_run_for_user(request.user, run_id)
    if services.cancel_run(run=run, user=request.user):
        messages.success(request, f"Cancelling run {run.pk}.")
    else:
        messages.info(request, f"Run {run.pk} had already finished.")
    return _done(
        request,
        reverse("jobs:job_detail", args=[run.job_id])
        if run.job_id
        else reverse("jobs:run_detail", args=[run.pk]),
    )


# -- settings and messages ---------------------------------------------------------------


@login_required
def settings_page(request):
    """The config centre: everyone reads, staff change."""
    if request.method == "POST":
        if not access.can_edit(request.user):
            raise PermissionDenied("Only staff can change settings.")
        form = SettingsForm(request.POST)
        if form.is_valid():
            form.save(user=request.user)
            messages.success(request, "Settings saved.")
            return _done(request, reverse("jobs:settings"))
    else:
        form = SettingsForm()
    if not access.can_edit(request.user):
        for field in form.fields.values():
            field.disabled = True
    from jobs.handlers.sql import role_warnings

    context = {"form": form, "sql_role_warnings": role_warnings()}
    return _partial_or_page(request, "jobs/settings.html", "settings-form", context)


def _message_context(request) -> dict:
    mine = Message.objects.filter(user=request.user).select_related("job")
    page = Paginator(mine, 50).get_page(request.GET.get("page"))
    return {"page": page, "unread": mine.filter(read_at__isnull=True).count()}


@login_required
def message_list(request):
    return _partial_or_page(request, "jobs/messages.html", "message-list", _message_context(request))


@login_required
@require_POST
def message_read(request, message_id=None):
    """Mark one of your own messages read, or all of them."""
    mine = Message.objects.filter(user=request.user, read_at__isnull=True)
    if message_id is not None:
        get_object_or_404(Message, pk=message_id, user=request.user)
        mine = mine.filter(pk=message_id)
    mine.update(read_at=timezone.now())
    if request.htmx:
        return render(
            request, "jobs/messages.html#message-list", {**_message_context(request), "oob_count": True}
        )
    return redirect("jobs:messages")


@login_required
@require_http_methods(["GET", "POST"])
def profile(request):
    """The user's API tokens: create one (its secret is shown on this answer
    only, never again) or revoke one."""
    new_secret = None
    if request.method == "POST":
        if "revoke" in request.POST:
            if tokens.revoke_token(user=request.user, token_id=request.POST["revoke"]):
                messages.success(request, "Token revoked: programs using it are now refused.")
            return redirect("jobs:profile")
        _token, new_secret = tokens.create_token(user=request.user, name=request.POST.get("name", ""))
    return render(
        request,
        "jobs/profile.html",
        {"api_tokens": request.user.api_tokens.all(), "new_secret": new_secret},
    )


@login_required
def cluster(request):
    """Scheduler nodes, the leader lease, recent leadership changes. Any
    signed-in user may look; the status section refreshes itself."""
    context = {"status": cluster_status(now=timezone.now())}
    template = "jobs/cluster.html#cluster-status" if request.htmx else "jobs/cluster.html"
    return render(request, template, context)
