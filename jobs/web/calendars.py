"""The Calendars page: everyone signed in sees the custom calendars (a job
form names them); administrators create, change and delete them."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from jobs import access, calendars, workdays
from jobs.access import login_required
from jobs.i18n import cron_error_message
from jobs.models import WorkCalendar
from jobs.web.common import done, role_required


@login_required
def calendar_list(request):
    """GET: the list and the form (`?name=` loads that calendar to edit).
    POST (administrators): save."""
    editing = request.GET.get("name") or request.POST.get("original") or ""
    row = WorkCalendar.objects.filter(name=editing).first() if editing else None
    may_edit = access.can_administer(request.user)
    if request.method == "POST":
        if not may_edit:
            raise Http404
        form = calendars.CalendarForm(request.POST, request.FILES)
        if form.is_valid() and form.save(user=request.user, original=row.name if row else None):
            messages.success(request, _("Calendar “{name}” saved.").format(name=form.cleaned_data["name"]))
            return done(request, reverse("jobs:calendar_list"))
    else:
        form = calendars.CalendarForm.for_row(row) if row else calendars.CalendarForm()
    context = {
        "form": form,
        "editing": row,
        "may_edit": may_edit,
        "rows": WorkCalendar.objects.all(),
        "rules": workdays.RULES,
    }
    return render(request, "jobs/calendar_list.html", context)


@login_required
@require_POST
@role_required(access.ADMIN)
def calendar_delete(request, name):
    try:
        calendars.delete_calendar(name=name, user=request.user)
    except workdays.CalendarError as exc:
        if exc.code == workdays.UNKNOWN_CALENDAR:
            raise Http404(_("No such calendar.")) from None
        messages.error(request, cron_error_message(exc))
    else:
        messages.success(request, _("Calendar “{name}” deleted.").format(name=name))
    return done(request, reverse("jobs:calendar_list"))
