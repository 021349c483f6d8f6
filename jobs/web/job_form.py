"""The job form: create, edit and clone a job, and the cron editor's live
preview."""

import json
from datetime import datetime

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import access, calendars, cron, kinds, refusals, services, workdays
from jobs.access import login_required
from jobs.forms import JobForm
from jobs.handlers import registry
from jobs.handlers.http import METHODS as HTTP_METHODS
from jobs.i18n import cron_error_message, localized_dst_effect, localized_preview
from jobs.models import Job
from jobs.web.common import done, partial_or_page, role_required
from jobs.web.secrets import credential_moves, form_credential_moves
from jobs.web.workflow_picker import picker_context


def _job_form(data=None, *, job: Job | None, user, initial=None) -> JobForm:
    """The console's JobForm, with the interval's lower bound for the browser."""
    form = JobForm(data, instance=job, user=user, initial=initial)
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
    form.fields["kind"].choices = kinds.offered_choices(job.kind if job else None)
    form.fields["properties"].widget.attrs.update({"data-property-bag": "", "rows": 4})
    form.fields["timezone"].widget.attrs.update({"list": "timezone-names", "autocomplete": "off"})
    form.fields["description"].widget.attrs.update({"rows": 2})
    form.fields["headers"].widget.attrs.update({"rows": 3, "placeholder": "Header-Name: value"})
    form.fields["body"].widget.attrs.update({"rows": 3})
    form.fields["sql"].widget.attrs.update({"rows": 4})
    form.fields["alert_emails"].help_text = _("Comma separated. Empty: the global alert emails (Settings).")
    form.fields["alert_on"].help_text = _("None ticked: the kinds of alert in Settings.")
    form.fields["late_after_seconds"].help_text = _("Empty: the default in Settings.")
    form.fields["long_running_seconds"].help_text = _("Below the timeout. Empty: the default in Settings.")
    form.fields["alert_channels"].help_text = _(
        "None ticked: the global channels (Settings). An administrator creates channels under Alerts → Channels."
    )
    after = form["after"].value()
    return {
        "form": form,
        "job": job,
        "after_picker": picker_context(
            form.user,
            {
                "after": after if isinstance(after, str) else json.dumps(after or []),
                "name": form["name"].value() or "",
                "after_job": str(job.pk) if job and job.pk else "",
            },
        ),
        "error_summary": _error_summary(form) if form.is_bound else [],
        "error": _cron_error(form) if form.is_bound else None,
        "handlers": registry.available(),
        "http_methods": HTTP_METHODS,
        "timezones": cron.known_zones(),
        "cron_names": cron.editor_names(),
        "sql_enabled": kinds.get(Job.Kind.SQL).enabled(),
        "other_fields": form.unplaced_fields(),
        # Moving a value to a secret stores a secret: an admin's right.
        "credential_moves": (
            []
            if not access.can_administer(form.user)
            else form_credential_moves(form.data, form.data.get("name", ""))
            if form.is_bound
            else credential_moves(job.properties if job else {}, job.name if job else "")
        ),
    }


def _handler_properties(job: Job) -> dict:
    """The property bag without the keys the HTTP/SQL fields edit, so a key is
    never shown (and edited) twice."""
    own = kinds.get(job.kind).fields
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
        except refusals.StaleJobError as exc:
            form.add_error(None, ValidationError(str(exc), code="stale"))
        except refusals.GraphRefused as exc:
            form.add_error(exc.field, exc.error)
        except refusals.ServiceError as exc:
            # A refusal the service's own check found after the form's (demo
            # mode turned on, rights taken away in between).
            field = getattr(exc, "field", None)
            form.add_error(field if field in form.fields else None, str(exc))
        except IntegrityError:
            # Two people created the same name at the same moment.
            form.add_error("name", ValidationError(_("A job with this name already exists."), code="unique"))
        else:
            messages.success(request, _("Saved “{name}”.").format(name=saved.name))
            return done(request, reverse("jobs:job_detail", args=[saved.pk]))
    # Invalid: 200 so htmx swaps the form with its errors in.
    return partial_or_page(request, "jobs/job_form.html", "job-form", _form_context(form, job))


@login_required
@role_required(access.EDIT)
def job_create(request):
    if request.method == "POST":
        return _save_job_form(request, None)
    form = _job_form(
        job=None, user=request.user, initial={"cron_expression": "0 0 * * * *", "timezone": "UTC"}
    )
    return render(request, "jobs/job_form.html", _form_context(form, None))


@login_required
@role_required(access.EDIT)
def job_clone(request, job_id):
    """The new-job form filled in from another job; saving creates a new job
    (POST goes to job_create). It starts paused so it does not fire twice
    what the original fires until someone looks at it."""
    job = access.get_job_for_user(request.user, job_id)
    initial = {name: getattr(job, name) for name in Job.EDITABLE_FIELDS}
    initial.update(
        name=services.clone_name(job.name),
        state=Job.State.PAUSED,
        properties=_handler_properties(job),
        **{name: (job.properties or {}).get(name, "") for name in kinds.PROPERTY_FIELDS},
    )
    form = _job_form(job=None, user=request.user, initial=initial)
    return render(request, "jobs/job_form.html", {**_form_context(form, None), "cloned_from": job})


@login_required
@role_required(access.EDIT)
def job_edit(request, job_id):
    job = access.get_job_for_user(request.user, job_id)
    access.require(request.user, access.EDIT, job=job)
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
            preview = localized_preview(
                expression,
                zone_name,
                after=timezone.now(),
                count=5,
                # H reads the name typed; the calendar as chosen, skipped dates shown.
                seed=request.GET.get("name", "").strip()[: Job._meta.get_field("name").max_length],
                days=calendars.preview_days(
                    request.GET.get("calendar", "")[: workdays.MAX_CALENDAR_CHARS],
                    request.GET.get("calendar_rule", ""),
                ),
                jitter=calendars.preview_jitter(request.GET.get("jitter_seconds")),
            )
        except (cron.CronError, workdays.CalendarError) as exc:
            context["error"] = {"code": exc.code, "message": cron_error_message(exc)}
        else:
            zone = cron.get_zone(zone_name)
            context["preview"] = preview
            # Django's "T" format gives no abbreviation for an ambiguous local
            # time (the repeated hour), exactly where it tells the two apart:
            # the aware datetime's own tzname() knows which side of the fold.
            context["times"] = [
                {
                    "utc": utc,
                    "local": local,
                    "abbr": local.tzname(),
                    "dst": item.get("dst"),
                    "note": item.get("note"),
                }
                for item in preview["times"]
                for utc in [datetime.fromisoformat(item["utc"].replace("Z", "+00:00"))]
                for local in [utc.astimezone(zone)]
            ]
            context["zone_is_utc"] = cron.is_utc(zone)
            if not context["zone_is_utc"]:
                context["dst_effect"] = localized_dst_effect(expression, zone_name, after=timezone.now())
    return render(request, "jobs/job_form.html#cron-preview", context)
