"""The job list: its filters, sorting and rows, the export and import of
job files, and the bulk actions on ticked jobs."""

import json
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import F, Q
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_http_methods, require_POST

from jobs import access, imports, kinds, refusals, services
from jobs.access import login_required
from jobs.models import Job, job_name, parse_run_cursor
from jobs.serializers import JOB_PAGE_DEFAULT, JOB_PAGE_MAX, job_page, job_to_spec
from jobs.web.common import (
    describe_schedule,
    done,
    fingerprint,
    partial_or_page,
    role_required,
    short,
    stamp,
    url_maker,
)
from jobs.web.templatetags.console import duration, relative_time, status_label

JOBS_PER_PAGE = 50

# ?sort= value → model field; "-" in front sorts descending.
JOB_SORTS = {
    "name": "name",
    "kind": "kind",
    "state": "state",
    "next": "next_fire_at",
    "last": "last_fire_at",
    "timezone": "timezone",
}


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
    rows = _job_rows(page.object_list, user=request.user)
    poll_version = fingerprint(
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


def _visible_upstreams(jobs, user) -> dict[str, int]:
    """{name: id} of the upstream jobs the page's rows name that `user` may
    see: one query for the page, none when no row runs after another job."""
    names = {name for job in jobs for name in job.upstream_names}
    if not names:
        return {}
    return dict(access.visible_jobs(user).named(*names).values_list("name", "pk"))


def _job_rows(jobs, *, user) -> list[dict]:
    """The job list's cells, worked out once per row here: the same text the
    template filters give (relative_time, date, status_label, duration,
    truncatechars), at a fraction of their cost over 50 rows. An upstream
    the viewer may not see is counted, never named."""
    detail_url = url_maker("jobs:job_detail")
    jobs = list(jobs)
    upstream_ids = _visible_upstreams(jobs, user)
    rows = []
    for job in jobs:
        names = job.upstream_names
        zone = job.zone
        row = {
            "job": job,
            "url": detail_url(job.pk),
            # The template's {% blocktranslate %} msgids, filled in here.
            "tick_label": _("Tick %(name)s") % {"name": job.name},
            "description": short(job.description, 90) if job.description else "",
            "schedule": describe_schedule(job),
            "upstreams": [
                {"name": name, "url": detail_url(upstream_ids[name])}
                for name in names
                if name in upstream_ids
            ],
            "hidden_upstreams": sum(1 for name in names if name not in upstream_ids),
            "never_starts": kinds.never_starts(job),
        }
        if job.schedule_type == Job.ScheduleType.INTERVAL:
            row["every"] = _("every %(seconds)s s") % {"seconds": job.interval_seconds}
        if job.next_fire_at:
            row["next_relative"] = relative_time(job.next_fire_at)
            row["next_utc"] = stamp(job.next_fire_at)
            row["next_local"] = stamp(job.next_fire_at, zone, zone_name=True)
        if job.last_status:
            row["status_label"] = status_label(job.last_status)
            row["duration"] = duration(job.last_duration_ms)
            if job.last_fire_at:
                row["last_utc"] = stamp(job.last_fire_at)
                row["last_relative"] = relative_time(job.last_fire_at)
        rows.append(row)
    return rows


@login_required
def job_list(request):
    return partial_or_page(request, "jobs/job_list.html", "job-table", _job_list_context(request))


@login_required
def job_export(request):
    """The listed jobs (the list's filters) as a `manage.py jobs import`
    file, the same JSON as `manage.py jobs export`, in pages: `limit` jobs
    (JOB_PAGE_DEFAULT, at most JOB_PAGE_MAX) oldest first, fewer once the
    file passes PAGE_MAX_CHARS; a `Link: <…>; rel="next"` header names the
    next page (`cursor`)."""
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
    masked = not access.sees_credentials(request.user)
    page = job_page(
        jobs,
        limit=limit,
        after=after,
        render=lambda job: json.dumps(
            job_to_spec(job, mask_credentials=masked), indent=2, ensure_ascii=False
        ),
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
@role_required(access.EDIT)
@require_http_methods(["GET", "POST"])
def job_import(request):
    """Import a `manage.py jobs import` file in the console: the first POST
    previews what would be created, updated or left alone (and every error,
    with nothing saved); "Apply" imports it, all or nothing (jobs.imports)."""
    context = {"text": "", "planned": None, "file_error": ""}
    if request.method == "POST":
        try:
            # Refused at upload: the preview would check every job (its form,
            # the DNS fence) only for Apply to refuse.
            refusals.check_demo_mode("importing jobs")
        except refusals.DemoModeError as exc:
            context["file_error"] = str(exc)
            return render(request, "jobs/job_import.html", context)
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
                        created, updated, unchanged = imports.apply(specs, user=request.user)
                    except refusals.DemoModeError as exc:
                        messages.error(request, str(exc))
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
                        return done(request, reverse("jobs:job_list"))
                context["planned"] = imports.plan(specs, user=request.user)
                context["counts"] = {
                    action: sum(1 for p in context["planned"] if p.action == action)
                    for action in ("create", "update", "unchanged", "invalid")
                }
    return render(request, "jobs/job_import.html", context)


# Each bulk action is a service over many jobs; what happens to each job is
# decided there (services.BulkOutcome), the messages here.
BULK_SERVICES = {
    "pause": services.pause_jobs,
    "resume": services.resume_jobs,
    "run": services.run_jobs,
    "delete": services.delete_jobs,
}


@login_required
@require_POST
@role_required(access.OPERATE)
def job_bulk(request):
    """Pause, resume, run or delete the ticked jobs, then show the list as it
    was filtered. Nothing ticked is refused; a crashed job is never paused (a
    pause would hide its crash, services.pause_job): it is left crashed and
    the answer says so.
    Delete first answers a confirmation naming the jobs; only a POST with
    `confirm` deletes."""
    action = request.POST.get("action")
    ids = [i for i in request.POST.getlist("ids") if i.isdigit()]
    jobs = list(access.visible_jobs(request.user).filter(pk__in=ids).order_by("name")) if ids else []
    if action not in BULK_SERVICES:
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
    outcome = BULK_SERVICES[action](jobs=jobs, user=request.user)
    skipped, unchanged = outcome.skipped, outcome.unchanged
    count = len(outcome.done)
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
    (messages.warning if skipped or not outcome.done else messages.success)(request, text)
    reasons: dict[str, list[Job]] = {}
    for job, reason in outcome.refused:
        reasons.setdefault(reason, []).append(job)
    for reason, refused_jobs in reasons.items():
        messages.error(
            request, _("Not changed: {names}: {reason}").format(names=_names(refused_jobs), reason=reason)
        )
