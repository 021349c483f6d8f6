"""The console: server-rendered pages with htmx. Views are thin — read the
request, call a form or a service, render. htmx requests get the partial
(`page.html#dom-id`) they target; everything else gets the whole page.

Access is decided by jobs.access only: every view needs a signed-in user;
mutations need `can_edit` and POST (a GET never changes anything)."""

import hashlib
import unicodedata
from datetime import UTC, datetime, timedelta
from functools import wraps
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.staticfiles import finders
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db import IntegrityError
from django.db.models import F, Q
from django.db.models.functions import Substr
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe
from django.utils.text import Truncator
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from jobs import access, cron, links, overview, services, tokens
from jobs.access import login_required
from jobs.alert_views import channel_rows
from jobs.charts import duration_chart
from jobs.cluster import cluster_status
from jobs.forms import KIND_FIELDS, PROPERTY_FIELDS, JobForm, SettingsForm, TokenForm
from jobs.handlers import registry
from jobs.handlers.command import command_enabled
from jobs.handlers.http import METHODS as HTTP_METHODS
from jobs.handlers.sql import sql_enabled
from jobs.i18n import cron_error_message, describe_cron, localized_preview
from jobs.models import (
    LIVE_RUN,
    MANUAL_RUN,
    AuditEvent,
    Job,
    Message,
    Run,
    job_name,
    parse_run_cursor,
    run_cursor,
)
from jobs.serializers import JOB_PAGE_MAX
from jobs.templatetags.console import duration, relative_time, status_label

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


def staff_required(view):
    """Staff create, edit, run and pause; other signed-in users only view."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not access.can_edit(request.user):
            raise PermissionDenied(_("Only staff can change jobs."))
        return view(request, *args, **kwargs)

    return wrapper


def _partial_or_page(request, template: str, partial: str, context: dict, *, status: int = 200):
    """The `#partial` when htmx targets that element, the whole page otherwise."""
    if request.htmx and request.htmx.target == partial:
        template = f"{template}#{partial}"
    return render(request, template, context, status=status)


def _fingerprint(*parts) -> str:
    """A short digest of what a live region shows, put on it as
    data-poll-version: console.js polls less often while it stays the same."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=8).hexdigest()


def _done(request, url: str):
    """After a successful POST: a redirect, which htmx must perform as a page load."""
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


# -- job list ------------------------------------------------------------------


def _filtered_jobs(request):
    """The visible jobs the list's filters (?q, state, kind, namespace) leave."""
    params = request.GET
    jobs = access.visible_jobs(request.user)
    # Names are stored in NFC (job_name): so is what is searched for.
    query = job_name(params.get("q", ""))[:200]
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
    return jobs, query, state, kind, namespace


def _job_list_context(request) -> dict:
    params = request.GET
    jobs, query, state, kind, namespace = _filtered_jobs(request)

    sort = params.get("sort", "name")
    field = JOB_SORTS.get(sort.lstrip("-"))
    if field is None:
        sort, field = "name", "name"
    order = F(field).desc(nulls_last=True) if sort.startswith("-") else F(field).asc(nulls_last=True)
    jobs = jobs.order_by(order, "id")

    page = Paginator(jobs, JOBS_PER_PAGE).get_page(params.get("page"))
    rows = _job_rows(page.object_list)
    poll_version = _fingerprint(
        page.paginator.count,
        [
            (job.pk, job.version, job.state, job.next_fire_at, job.last_fire_at, job.last_status)
            for job in page.object_list
        ],
    )
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
        # The export's largest page; `manage.py jobs export` writes every job.
        "export_query": urlencode({**filters, "limit": JOB_PAGE_MAX}),
        "export_limit": JOB_PAGE_MAX,
        "poll_version": poll_version,
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


def _url_maker(name: str):
    """`pk → reverse(name, args=[pk])` for a table's rows: one reverse() for
    the table instead of one per row (the URL tag is a row's dearest cell)."""
    marker = 987654321987654321
    template = reverse(name, args=[marker])
    head, tail = template.split(str(marker))
    return lambda pk: f"{head}{int(pk)}{tail}"


def _short(text: str, limit: int) -> str:
    """`text|truncatechars:limit`, without its walk over every character when
    the text is short anyway (the filter keeps such text as it is, NFC)."""
    if len(text) <= limit and unicodedata.is_normalized("NFC", text):
        return text
    return Truncator(text).chars(limit)


def _stamp(when: datetime, zone=UTC, *, day: bool = True, zone_name: bool = False) -> str:
    """`when` in `zone` as the tables show it, the text of the `date` filter's
    "Y-m-d H:i:s" ("H:i:s" without `day`, " T" after it with `zone_name`),
    at a fifth of the filter's cost (it is called for every cell)."""
    at = when.astimezone(zone)
    text = f"{at.hour:02d}:{at.minute:02d}:{at.second:02d}"
    if day:
        text = f"{at.year:04d}-{at.month:02d}-{at.day:02d} {text}"
    if zone_name:
        text = f"{text} {at.tzname()}"
    return text


def _job_rows(jobs) -> list[dict]:
    """The job list's cells, worked out once per row here: the same text the
    template filters made (relative_time, date, status_label, duration,
    truncatechars), at a fraction of their cost over 50 rows."""
    detail_url = _url_maker("jobs:job_detail")
    rows = []
    for job in jobs:
        zone = job.zone
        row = {
            "job": job,
            "url": detail_url(job.pk),
            # The template's {% blocktranslate %} msgids, filled in here.
            "tick_label": _("Tick %(name)s") % {"name": job.name},
            "description": _short(job.description, 90) if job.description else "",
            "schedule": _describe_schedule(job),
        }
        if job.schedule_type == Job.ScheduleType.INTERVAL:
            row["every"] = _("every %(seconds)s s") % {"seconds": job.interval_seconds}
        if job.next_fire_at:
            row["next_relative"] = relative_time(job.next_fire_at)
            row["next_utc"] = _stamp(job.next_fire_at)
            row["next_local"] = _stamp(job.next_fire_at, zone, zone_name=True)
        if job.last_status:
            row["status_label"] = status_label(job.last_status)
            row["duration"] = duration(job.last_duration_ms)
            if job.last_fire_at:
                row["last_utc"] = _stamp(job.last_fire_at)
                row["last_relative"] = relative_time(job.last_fire_at)
        rows.append(row)
    return rows


def _live_runs(job: Job):
    return Run.objects.filter(LIVE_RUN, job=job)


def _describe_schedule(job: Job) -> str:
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
        return describe_cron(job.cron_expression)
    except cron.CronError as exc:
        return _("Invalid expression ({code})").format(code=exc.code)


@login_required
def job_list(request):
    return _partial_or_page(request, "jobs/job_list.html", "job-table", _job_list_context(request))


BULK_ACTIONS = ("pause", "resume", "run", "delete")


@login_required
def job_export(request):
    """The listed jobs (the list's filters) as a `manage.py jobs import`
    file, the same JSON as `manage.py jobs export`, in pages: `limit` jobs
    (JOB_PAGE_DEFAULT, at most JOB_PAGE_MAX) oldest first, fewer once the
    file passes PAGE_MAX_CHARS; a `Link: <…>; rel="next"` header names the
    next page (`cursor`)."""
    import json

    from jobs.serializers import JOB_PAGE_DEFAULT, JOB_PAGE_MAX, job_page, job_to_spec

    jobs, *_rest = _filtered_jobs(request)
    try:
        limit = min(max(int(request.GET.get("limit") or JOB_PAGE_DEFAULT), 1), JOB_PAGE_MAX)
    except ValueError:
        return HttpResponseBadRequest(_("“limit” must be a whole number."), content_type="text/plain")
    after = None
    if cursor := request.GET.get("cursor"):
        after = parse_run_cursor(cursor)
        if after is None:
            return HttpResponseBadRequest(
                _("This cursor is not one the export gave out."), content_type="text/plain"
            )
    page = job_page(
        jobs,
        limit=limit,
        after=after,
        render=lambda job: json.dumps(job_to_spec(job), indent=2, ensure_ascii=False),
    )
    response = HttpResponse(
        "[\n" + ",\n".join(page.items) + "\n]\n", content_type="application/json; charset=utf-8"
    )
    response["Content-Disposition"] = 'attachment; filename="cronboard-jobs.json"'
    if page.next_cursor:
        following = request.GET.copy()
        following["cursor"] = page.next_cursor
        response["Link"] = f'<{request.build_absolute_uri(request.path)}?{following.urlencode()}>; rel="next"'
    return response


def _import_refusal(*, size: int = 0, jobs: int = 0) -> str:
    """Why the console will not import a file this large ("" if it will):
    it validates job by job while a web worker waits, so bigger files go
    through the command."""
    from django.conf import settings

    command = _("Import it with “manage.py jobs import FILE” instead.")
    if size > settings.JOBS_IMPORT_MAX_BYTES:
        return " ".join(
            (
                _("The file has {size} bytes; the console imports at most {limit} bytes at once.").format(
                    size=f"{size:,}", limit=f"{settings.JOBS_IMPORT_MAX_BYTES:,}"
                ),
                command,
            )
        )
    if jobs > settings.JOBS_IMPORT_MAX_JOBS:
        return " ".join(
            (
                _("The file holds {count} jobs; the console imports at most {limit} at once.").format(
                    count=f"{jobs:,}", limit=f"{settings.JOBS_IMPORT_MAX_JOBS:,}"
                ),
                command,
            )
        )
    return ""


@login_required
@staff_required
@require_http_methods(["GET", "POST"])
def job_import(request):
    """Import a `manage.py jobs import` file in the console: the first POST
    previews what would be created, updated or left alone (and every error,
    with nothing saved); "Apply" imports it, all or nothing (jobs.imports)."""
    from jobs import imports

    context = {"text": "", "planned": None, "file_error": ""}
    if request.method == "POST":
        upload = request.FILES.get("file")
        if upload is not None:
            if refusal := _import_refusal(size=upload.size):
                text, context["file_error"] = "", refusal
            else:
                try:
                    text = upload.read().decode("utf-8")
                except UnicodeDecodeError:
                    text, context["file_error"] = "", _("The file is not UTF-8 text.")
        else:
            text = request.POST.get("text", "")
            if refusal := _import_refusal(size=len(text.encode("utf-8", "surrogatepass"))):
                text, context["file_error"] = "", refusal
        context["text"] = text
        if not context["file_error"]:
            try:
                specs = imports.parse(text, source=_("The file"))
            except imports.ImportFileError as exc:
                context["file_error"] = str(exc)
            else:
                context["file_error"] = _import_refusal(jobs=len(specs))
            if not context["file_error"]:
                if "apply" in request.POST:
                    try:
                        created, updated, unchanged = imports.apply(
                            specs, user=request.user, via=AuditEvent.Via.CONSOLE
                        )
                    except imports.ImportFailed as failed:
                        # A job's own errors show in the preview below; one
                        # that another save caused (the job deleted
                        # meanwhile, a busy database) is told here.
                        for error in failed.errors:
                            if not error.get("field"):
                                messages.error(request, f"{error['job']}: {error['message']}")
                    else:
                        messages.success(
                            request,
                            _(
                                "Imported {count} job(s): {created} created, {updated} updated, {unchanged} unchanged."
                            ).format(count=len(specs), created=created, updated=updated, unchanged=unchanged),
                        )
                        return _done(request, reverse("jobs:job_list"))
                context["planned"] = imports.plan(specs, user=request.user)
                context["counts"] = {
                    action: sum(1 for p in context["planned"] if p.action == action)
                    for action in ("create", "update", "unchanged", "invalid")
                }
    return render(request, "jobs/job_import.html", context)


@login_required
@require_POST
@staff_required
def job_bulk(request):
    """Pause, resume, run or delete the ticked jobs, then show the list as it
    was filtered. Nothing ticked is refused; a crashed job is never paused (a
    pause would hide its crash): it is left crashed and the answer says so.
    Delete first answers a confirmation naming the jobs; only a POST with
    `confirm` deletes."""
    action = request.POST.get("action")
    ids = [i for i in request.POST.getlist("ids") if i.isdigit()]
    jobs = list(access.visible_jobs(request.user).filter(pk__in=ids).order_by("name")) if ids else []
    if action not in BULK_ACTIONS:
        messages.error(request, _("Choose pause, resume, run or delete."))
    elif not jobs:
        messages.error(
            request,
            {
                "pause": _("Nothing was paused: tick the jobs to pause first."),
                "resume": _("Nothing was resumed: tick the jobs to resume first."),
                "run": _("Nothing was run: tick the jobs to run first."),
                "delete": _("Nothing was deleted: tick the jobs to delete first."),
            }[action],
        )
    elif action == "delete" and not request.POST.get("confirm"):
        context = {**_job_list_context(request), "confirm_jobs": jobs}
        if request.htmx:
            return render(request, "jobs/job_list.html#bulk-delete-confirm", context)
        return render(request, "jobs/job_bulk_delete.html", context)
    else:
        _bulk_apply(request, action, jobs)
    if request.htmx:
        return render(request, "jobs/job_list.html#job-table", _job_list_context(request))
    return redirect(f"{reverse('jobs:job_list')}?{request.GET.urlencode()}")


def _names(jobs) -> str:
    return ", ".join(f"“{job.name}”" for job in jobs)


def _bulk_apply(request, action: str, jobs: list[Job]) -> None:
    done, skipped, refused, unchanged = [], [], [], []
    for job in jobs:
        try:
            if action == "pause":
                if job.state == Job.State.CRASHED:
                    skipped.append(job)
                elif job.state != Job.State.PAUSED:
                    services.pause_job(job=job, user=request.user)
                    done.append(job)
                else:
                    unchanged.append(job)
            elif action == "resume":
                if job.state != Job.State.ENABLED:
                    services.resume_job(job=job, user=request.user)
                    done.append(job)
                else:
                    unchanged.append(job)
            elif action == "run":
                _run, created = services.run_now(job=job, user=request.user)
                (done if created else skipped).append(job)
            else:
                services.delete_job(job=job, user=request.user)
                done.append(job)
        except services.ServiceError as exc:
            # Demo mode, an SQL job this user may not change, a built-in job
            # that cannot be deleted: the rest go ahead.
            refused.append((job, str(exc)))
    count = len(done)
    text = {
        "pause": ngettext("Paused {count} job.", "Paused {count} jobs.", count),
        "resume": ngettext("Resumed {count} job.", "Resumed {count} jobs.", count),
        "run": ngettext("Queued a manual run of {count} job.", "Queued a manual run of {count} jobs.", count),
        "delete": ngettext("Deleted {count} job.", "Deleted {count} jobs.", count),
    }[action].format(count=count)
    if skipped and action == "pause":
        text += " " + ngettext(
            "Left {count} crashed job crashed ({names}): re-enable or resume it to schedule it again.",
            "Left {count} crashed jobs crashed ({names}): re-enable or resume them to schedule them again.",
            len(skipped),
        ).format(count=len(skipped), names=_names(skipped))
    elif skipped:
        text += " " + _("{names} already had a manual run queued or running.").format(names=_names(skipped))
    if unchanged:
        # Not a bare "Paused 0 jobs.": say why nothing changed for these.
        if action == "pause":
            already = ngettext("{names} was already paused.", "{names} were already paused.", len(unchanged))
        else:
            already = ngettext(
                "{names} was already enabled.", "{names} were already enabled.", len(unchanged)
            )
        text += " " + already.format(names=_names(unchanged))
    (messages.warning if skipped or not done else messages.success)(request, text)
    reasons: dict[str, list[Job]] = {}
    for job, reason in refused:
        reasons.setdefault(reason, []).append(job)
    for reason, refused_jobs in reasons.items():
        messages.error(
            request, _("Not changed: {names}: {reason}").format(names=_names(refused_jobs), reason=reason)
        )


# -- job form --------------------------------------------------------------------


FORM_LABELS = {
    "name": gettext_lazy("Name"),
    "description": gettext_lazy("Description"),
    "namespace": gettext_lazy("Namespace"),
    "cron_expression": gettext_lazy("Cron expression"),
    "timezone": gettext_lazy("Timezone"),
    "notify_recovered": gettext_lazy("Notify recovered"),
    "state": gettext_lazy("State"),
    "kind": gettext_lazy("Kind"),
    "handler": gettext_lazy("Handler"),
    "url": gettext_lazy("URL"),
    "sql": gettext_lazy("SQL statement"),
    "sql_write": gettext_lazy("Allow the statement to write"),
    "properties": gettext_lazy("Properties"),
    "schedule_type": gettext_lazy("Schedule"),
    "interval_seconds": gettext_lazy("Every (seconds)"),
    "misfire_policy": gettext_lazy("When a fire was missed"),
    "run_once": gettext_lazy("Run once, then disable"),
    "max_retries": gettext_lazy("Retries"),
    "retry_interval_seconds": gettext_lazy("Retry after (seconds)"),
    "timeout_seconds": gettext_lazy("Timeout (seconds)"),
    "alert_threshold": gettext_lazy("Alert after this many failed fires in a row"),
    "alert_emails": gettext_lazy("Alert emails"),
    "alert_channels": gettext_lazy("Alert channels"),
    "alert_on": gettext_lazy("Alert on"),
    "late_after_seconds": gettext_lazy("Late after (seconds)"),
    "long_running_seconds": gettext_lazy("Long running after (seconds)"),
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
    "after",
    "max_retries",
    "retry_interval_seconds",
    "timeout_seconds",
    "alert_threshold",
    "alert_emails",
    "alert_channels",
    "alert_on",
    "late_after_seconds",
    "long_running_seconds",
}


def _job_form(data=None, *, job: Job | None, user, initial=None) -> JobForm:
    """The console's JobForm, its labels set before anything reads them: a
    bound form caches each field's label when it validates, so labels set
    later would show only on the blank form, not after a failed save."""
    form = JobForm(data, instance=job, user=user, initial=initial)
    for name, label in FORM_LABELS.items():
        form.fields[name].label = label
    form.fields["interval_seconds"].widget.attrs.update(
        {"min": cron.MIN_INTERVAL_SECONDS, "data-min-code": cron.INTERVAL_TOO_SHORT}
    )
    form.fields["interval_seconds"].help_text = _("At least {seconds} seconds.").format(
        seconds=cron.MIN_INTERVAL_SECONDS
    )
    return form


def _error_summary(form: JobForm) -> list[dict]:
    """Each field's first error with a link to the field, for the summary above the form."""
    out = []
    for name, errors in form.errors.items():
        if name == "__all__" or name not in form.fields:
            continue
        bound = form[name]
        out.append({"id": bound.id_for_label, "label": bound.label, "message": errors[0]})
    return out


def _cron_error(form: JobForm) -> dict | None:
    """The cron expression's coded error (47001…): the live preview shows it,
    in place of the field's own copy, and drops it once the text is valid."""
    for error in form.errors.as_data().get("cron_expression", []):
        if str(error.code or "").isdigit():
            return {"code": error.code, "message": error.messages[0]}
    return None


def _form_context(form: JobForm, job: Job | None) -> dict:
    kinds = Job.Kind.choices
    if not sql_enabled() and not (job and job.kind == Job.Kind.SQL):
        kinds = [choice for choice in kinds if choice[0] != Job.Kind.SQL]
        form.fields["kind"].choices = kinds
    if not command_enabled() and not (job and job.kind == Job.Kind.COMMAND):
        kinds = [choice for choice in kinds if choice[0] != Job.Kind.COMMAND]
        form.fields["kind"].choices = kinds
    form.fields["properties"].widget.attrs.update({"data-property-bag": "", "rows": 4})
    form.fields["timezone"].widget.attrs.update({"list": "timezone-names", "autocomplete": "off"})
    form.fields["description"].widget.attrs.update({"rows": 2})
    form.fields["headers"].widget.attrs.update({"rows": 3, "placeholder": "Header-Name: value"})
    form.fields["body"].widget.attrs.update({"rows": 3})
    form.fields["sql"].widget.attrs.update({"rows": 4})
    form.fields["alert_emails"].help_text = _("Comma separated. Empty: the global alert emails (Settings).")
    form.fields["alert_channels"].widget.attrs.update(
        {"rows": 2, "placeholder": "json://hooks.example.com/path"}
    )
    form.fields["alert_on"].help_text = _("None ticked: the kinds of alert in Settings.")
    form.fields["late_after_seconds"].help_text = _("Empty: the default in Settings.")
    form.fields["long_running_seconds"].help_text = _("Below the timeout. Empty: the default in Settings.")
    form.fields["alert_channels"].help_text = _(
        "Apprise URLs, one per line. Empty: the global alert channels (Settings). "
        "Secrets are masked once saved; leave a masked line as it is to keep it."
    )
    return {
        "form": form,
        "job": job,
        "error_summary": _error_summary(form) if form.is_bound else [],
        "error": _cron_error(form) if form.is_bound else None,
        "handlers": registry.available(),
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
    own = KIND_FIELDS.get(job.kind, ())
    return {k: v for k, v in (job.properties or {}).items() if k not in own}


def _save_job_form(request, job: Job | None):
    form = _job_form(request.POST, job=job, user=request.user)
    if form.is_valid():
        try:
            saved = services.save_job(
                job=form.save(commit=False),
                user=request.user,
                expected_version=form.cleaned_data.get("version"),
            )
        except services.StaleJobError as exc:
            form.add_error(None, ValidationError(str(exc), code="stale"))
        except services.GraphRefused as exc:
            form.add_error("after", exc.error)
        except IntegrityError:
            # Two people created the same name at the same moment.
            form.add_error("name", ValidationError(_("A job with this name already exists."), code="unique"))
        else:
            messages.success(request, _("Saved “{name}”.").format(name=saved.name))
            return _done(request, reverse("jobs:job_detail", args=[saved.pk]))
    # Invalid: 200 so htmx swaps the form with its errors in.
    return _partial_or_page(request, "jobs/job_form.html", "job-form", _form_context(form, job))


@login_required
@staff_required
def job_create(request):
    if request.method == "POST":
        return _save_job_form(request, None)
    form = _job_form(
        job=None, user=request.user, initial={"cron_expression": "0 0 * * * *", "timezone": "UTC"}
    )
    return render(request, "jobs/job_form.html", _form_context(form, None))


def _clone_name(name: str) -> str:
    """ "nightly (copy)", or "(copy 2)", … : a name no live job has."""
    taken = set(Job.objects.live().filter(name__startswith=f"{name} (copy").values_list("name", flat=True))
    candidate, n = f"{name} (copy)", 1
    while candidate in taken:
        n += 1
        candidate = f"{name} (copy {n})"
    return candidate[: Job._meta.get_field("name").max_length]


@login_required
@staff_required
def job_clone(request, job_id):
    """The new-job form filled in from another job; saving creates a new job
    (POST goes to job_create). It starts paused so it does not fire twice
    what the original fires until someone looks at it."""
    job = access.get_job_for_user(request.user, job_id)
    initial = {name: getattr(job, name) for name in Job.EDITABLE_FIELDS}
    initial.update(
        name=_clone_name(job.name),
        state=Job.State.PAUSED,
        properties=_handler_properties(job),
        **{name: (job.properties or {}).get(name, "") for name in PROPERTY_FIELDS},
    )
    form = _job_form(job=None, user=request.user, initial=initial)
    return render(request, "jobs/job_form.html", {**_form_context(form, None), "cloned_from": job})


@login_required
@staff_required
def job_edit(request, job_id):
    job = access.get_job_for_user(request.user, job_id)
    if request.method == "POST":
        return _save_job_form(request, job)
    form = _job_form(job=job, user=request.user, initial={"properties": _handler_properties(job)})
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
            preview = localized_preview(expression, zone_name, after=timezone.now(), count=5)
        except cron.CronError as exc:
            context["error"] = {"code": exc.code, "message": cron_error_message(exc)}
        else:
            zone = cron.get_zone(zone_name)
            context["preview"] = preview
            # Django's "T" format gives no abbreviation for an ambiguous local
            # time (the repeated hour), exactly where it tells the two apart:
            # the aware datetime's own tzname() knows which side of the fold.
            context["times"] = [
                {"utc": utc, "local": local, "abbr": local.tzname(), "dst": item.get("dst")}
                for item in preview["times"]
                for utc in [datetime.fromisoformat(item["utc"].replace("Z", "+00:00"))]
                for local in [utc.astimezone(zone)]
            ]
            context["zone_is_utc"] = cron.is_utc(zone)
    return render(request, "jobs/job_form.html#cron-preview", context)


# -- job detail ---------------------------------------------------------------------


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
    return {
        "poll_version": _fingerprint(
            live,
            [(run.pk, run.status, run.finished_at) for run in page],
            (job.version, job.state, job.next_fire_at, job.last_fire_at, job.consecutive_failures),
        ),
        "runs": page,
        "rows": _history_rows(job, page),
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


def _history_rows(job: Job, runs: list[Run]) -> list[dict]:
    """A history page's cells, worked out once per run (as the job list's
    are, see _job_rows): times in the job's zone, labels, durations."""
    zone = job.zone
    run_url = _url_maker("jobs:run_detail")

    return [
        {
            "run": run,
            "url": run_url(run.pk),
            "error_short": _short(run.error_head, 60) if run.error_head else "",
            "scheduled_utc": _stamp(run.scheduled_at),
            "scheduled": _stamp(run.scheduled_at, zone),
            "started": _stamp(run.started_at, zone, day=False) if run.started_at else "",
            "finished": _stamp(run.finished_at, zone, day=False) if run.finished_at else "",
            "duration": duration(run.duration_ms),
        }
        for run in runs
    ]


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
            iter(_live_runs(job).filter(MANUAL_RUN).only("id", "status").order_by()[:1]), None
        ),
    }


@login_required
def job_detail(request, job_id):
    job = access.get_job_for_user(request.user, job_id)
    if request.htmx and request.htmx.target == "run-history":
        # The history's filters and pages (their URL is this page's, pushed
        # into the address bar): the same answer as job_runs.
        return job_runs(request, job_id)
    context = {
        **_job_panels(job),
        "history": _history_context(job, request.GET),
        "audit_events": AuditEvent.objects.filter(job=job).order_by("-created_at", "-id")[:AUDIT_EVENTS],
        # The workflow: which jobs this one runs after, and which run after it
        # (a deleted or paused one shows as such).
        "upstream_links": job.upstream_links.select_related("upstream").order_by("upstream__name"),
        "downstream_links": job.downstream_links.select_related("downstream").order_by("downstream__name"),
    }
    return render(request, "jobs/job_detail.html", context)


@login_required
def job_runs(request, job_id):
    """The run history alone (its live polling; its filters and pages come
    through job_detail), with the job's state, crash banner, actions, summary
    and chart swapped out of band: a run that finishes changes them too."""
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
        messages.success(request, _("Paused “{name}”.").format(name=job.name))

    return _job_action(request, job_id, pause)


@login_required
@require_POST
@staff_required
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
@staff_required
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
    messages.success(request, _("Deleted “{name}”.").format(name=job.name))
    return _done(request, reverse("jobs:job_list"))


# -- runs ------------------------------------------------------------------------------

# ?since= on the all-runs page → how far back; "today" is since midnight UTC.
RUN_WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7), "today": None}


def _all_runs_context(request, *, now: datetime | None = None) -> dict:
    """One page of runs across every job the user may see, newest first,
    keyset-paginated like a job's history. ?status=live is "running now"."""
    now = now or timezone.now()
    params = request.GET
    runs = (
        access.visible_runs(request.user)
        .select_related("job")
        .only(
            "id",
            "job_id",
            "job__name",
            "job__timezone",
            "handler",
            "task_key",
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
    if status == "live":
        # The few live runs come from their partial index (run_live_idx);
        # filtered inside the big ordered walk, SQLite would scan every run.
        runs = runs.filter(pk__in=overview.live_run_ids())
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
    before = parse_run_cursor(params.get("before"))
    if before:
        runs = runs.older_than(*before)
    page = list(runs.order_by("-scheduled_at", "-id")[: RUNS_PER_PAGE + 1])
    older = len(page) > RUNS_PER_PAGE
    page = page[:RUNS_PER_PAGE]
    filters = {
        k: v
        for k, v in (
            ("status", status),
            ("trigger", trigger),
            ("job", str(job.pk) if job else ""),
            ("since", since),
        )
        if v
    }
    return {
        "runs": page,
        "status": status,
        "trigger": trigger,
        "since": since,
        "filter_job": job,
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
        "poll_version": _fingerprint([(run.pk, run.status, run.finished_at) for run in page]),
    }


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
    job list's are, see _job_rows)."""
    detail_url = _url_maker("jobs:job_detail")
    rows = []
    for job in jobs:
        n = job.consecutive_failures
        # The msgids the template's {% blocktranslate %} had, filled in here.
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
                "error_short": _short(job.last_error, 120) if job.last_error else "",
            }
        )
    return rows


def _html_message(message: str, **times) -> str:
    """A translated message whose %(name)s placeholders are times shown as
    relative_time (HTML): the message escaped, the times inserted."""
    return mark_safe(conditional_escape(message) % {k: relative_time(v) for k, v in times.items()})


@login_required
def dashboard(request):
    figures = overview.dashboard_figures(request.user, now=timezone.now())
    context = {
        **figures,
        "attention_rows": _attention_rows(figures["attention"]),
        "state_tiles": [(v, label, figures["jobs_by_state"][v]) for v, label in Job.State.choices],
        "bars": _status_bars(figures["runs_24h_by_status"]),
        "poll_version": _fingerprint(
            figures["jobs_by_state"],
            figures["runs_24h_by_status"],
            [(j.pk, j.state, j.consecutive_failures) for j in figures["attention"]],
            [(r.pk, r.status) for r in figures["running"]],
        ),
    }
    return _partial_or_page(request, "jobs/dashboard.html", "dashboard-body", context)


@login_required
def upcoming(request):
    """Every fire of the next 24 hours (or 7 days) across jobs, in time order."""
    from jobs import upcoming as fires

    now = timezone.now()
    window = request.GET.get("window", "24h")
    if window not in fires.WINDOWS:
        window = "24h"
    after = fires.parse_cursor(request.GET.get("after"))
    page, more = fires.upcoming_fires(
        access.visible_jobs(request.user), start=now, end=now + fires.WINDOWS[window], after=after
    )
    context = {
        "fires": page,
        "window": window,
        "windows": [("24h", _("Next 24 hours")), ("7d", _("Next 7 days"))],
        "later_query": urlencode({"window": window, "after": fires.cursor_of(page[-1])}) if more else "",
        "deeper": after is not None,
        "poll_version": _fingerprint([(fire.at, fire.job.pk) for fire in page]),
    }
    return _partial_or_page(request, "jobs/upcoming.html", "upcoming-list", context)


@login_required
def run_list(request):
    """All runs across jobs: "running now", "failed today", by job, trigger, time."""
    return _partial_or_page(request, "jobs/run_list.html", "run-list", _all_runs_context(request))


@login_required
def run_detail(request, run_id):
    run = access.get_run_for_user(request.user, run_id)
    context = {
        "run": run,
        "job": run.job,
        "retryable": Run.RETRYABLE,
        "caused_by": run.caused_by if run.caused_by_id else None,
        "caused_runs": list(run.caused_runs.select_related("job").order_by("id")[:50]),
    }
    return _partial_or_page(request, "jobs/run_detail.html", "run-viewer", context)


@login_required
@require_POST
@staff_required
def run_retry(request, run_id):
    """Run a failed (or timed out, interrupted, cancelled) run's job again,
    now, as a manual run; the audit trail names the run it retries."""
    run = access.get_run_for_user(request.user, run_id)
    if run.job_id is None or run.status not in Run.RETRYABLE:
        messages.error(
            request,
            _("Run {pk} is {get_status_display}: only a failed run of a job can be retried.").format(
                pk=run.pk, get_status_display=run.get_status_display().lower()
            ),
        )
        return _done(request, reverse("jobs:run_detail", args=[run.pk]))
    try:
        new, created = services.run_now(job=run.job, user=request.user, retry_of=run)
    except services.ServiceError as exc:
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
    return _done(request, reverse("jobs:job_detail", args=[run.job_id]))


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
@staff_required
def run_cancel(request, run_id):
    run = access.get_run_for_user(request.user, run_id)
    if services.cancel_run(run=run, user=request.user):
        messages.success(request, _("Cancelling run {pk}.").format(pk=run.pk))
    else:
        messages.info(request, _("Run {pk} had already finished.").format(pk=run.pk))
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
            raise PermissionDenied(_("Only staff can change settings."))
        form = SettingsForm(request.POST)
        if form.is_valid():
            form.save(user=request.user)
            messages.success(request, _("Settings saved."))
            return _done(request, reverse("jobs:settings"))
    else:
        form = SettingsForm()
    if not access.can_edit(request.user):
        for field in form.fields.values():
            field.disabled = True
    from jobs.checks import stored_refusals
    from jobs.handlers.sql import role_warnings

    context = {
        "form": form,
        "sql_role_warnings": role_warnings(),
        "stored_refusals": stored_refusals(),
        "channels": channel_rows(),
        "opened_at": links.base_url_mismatch(request.build_absolute_uri("/")),
        "base_url": settings.CRONBOARD_BASE_URL,
    }
    return _partial_or_page(request, "jobs/settings.html", "settings-form", context)


def _message_context(request) -> dict:
    mine = Message.objects.filter(user=request.user).select_related("job")
    page = Paginator(mine, 50).get_page(request.GET.get("page"))
    return {"page": page, "unread": mine.filter(read_at__isnull=True).count()}


@login_required
def message_list(request):
    return _partial_or_page(request, "jobs/messages.html", "message-list", _message_context(request))


@login_required
def unread_count(request):
    """The top bar's Messages link with its unread badge; every page polls it."""
    unread = Message.objects.filter(user=request.user, read_at__isnull=True).count()
    return render(request, "jobs/_unread_count.html", {"unread": unread})


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


NEW_TOKEN_SESSION_KEY = "cronboard_new_token"


@login_required
@require_http_methods(["GET", "POST"])
def profile(request):
    """The user's API tokens: create one or revoke one. Both POSTs redirect
    (a reload never creates a second token); a new token's secret rides in
    the session to the next page load, is shown there once and dropped."""
    if request.method == "POST":
        if "revoke" in request.POST:
            if tokens.revoke_token(user=request.user, token_id=request.POST["revoke"]):
                messages.success(request, _("Token revoked: programs using it are now refused."))
            else:
                messages.error(request, _("No such active token: nothing was revoked."))
            return redirect("jobs:profile")
        form = TokenForm(request.POST)
        if not form.is_valid():
            for errors in form.errors.values():
                messages.error(request, _("Token name: {join}").format(join=" ".join(errors)))
            return redirect("jobs:profile")
        token, secret = tokens.create_token(user=request.user, name=form.cleaned_data["name"])
        request.session[NEW_TOKEN_SESSION_KEY] = {"id": token.pk, "secret": secret}
        return redirect("jobs:profile")
    new_token = request.session.pop(NEW_TOKEN_SESSION_KEY, None)
    return render(
        request,
        "jobs/profile.html",
        {
            "api_tokens": request.user.api_tokens.all(),
            "new_secret": new_token["secret"] if new_token else None,
            "new_token_id": new_token["id"] if new_token else None,
        },
    )


def favicon(request):
    """/favicon.ico, which browsers ask for whatever the page links."""
    with open(finders.find("jobs/favicon.ico"), "rb") as icon:
        response = HttpResponse(icon.read(), content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response


@login_required
def cluster(request):
    """Scheduler nodes, the leader lease, recent leadership changes. Any
    signed-in user may look; the status section refreshes itself."""
    context = {"status": cluster_status(now=timezone.now())}
    template = "jobs/cluster.html#cluster-status" if request.htmx else "jobs/cluster.html"
    return render(request, template, context)
