"""The API's custom calendars: anyone signed in lists and reads them (a job
form names them); administrators create, replace and delete them. Each
change counts the next fire of the jobs on the calendar again."""

from django.http import HttpResponse, JsonResponse
from django.utils.translation import gettext_noop
from ninja import Path, Router

from jobs import calendars, workdays
from jobs.api.framework import VIA, ApiError
from jobs.api.schemas.base import CHANGE_ERRORS, EDIT_ERRORS, OBJECT_ERRORS, Error
from jobs.api.schemas.calendars import Calendar, CalendarInput, CalendarList
from jobs.models import WorkCalendar
from jobs.refusals import require_admin
from jobs.text import NO_NUL_PATTERN, find_unstorable

router = Router()
NAME = Path(
    ...,
    description="The custom calendar's name (not a country code).",
    max_length=workdays.MAX_CALENDAR_CHARS,
    pattern=NO_NUL_PATTERN,
)


def _refused(exc: workdays.CalendarError, field: str) -> ApiError:
    status = 409 if exc.code == calendars.IN_USE else 400
    return ApiError(status, str(exc.code), exc.message, field)


@router.get(
    "/calendars",
    operation_id="listCalendars",
    url_name="calendars",
    summary="Custom calendars (any signed-in user).",
    response={200: CalendarList, 401: Error},
)
def list_calendars(request):
    return JsonResponse({"results": [calendars.export(row) for row in WorkCalendar.objects.all()]})


@router.get(
    "/calendars/{name}",
    operation_id="getCalendar",
    url_name="calendar",
    summary="One custom calendar (any signed-in user).",
    response={200: Calendar, **OBJECT_ERRORS},
)
def get_calendar(request, name: str = NAME):
    row = None if find_unstorable(name) else WorkCalendar.objects.filter(name=name).first()
    if row is None:
        raise ApiError(404, "not_found", "No such calendar.")
    return JsonResponse(calendars.export(row))


@router.put(
    "/calendars/{name}",
    operation_id="setCalendar",
    url_name="calendar",
    summary="Create or replace a custom calendar (admin).",
    description="201 when created, 200 when replaced. Codes: 47030 a name that is a country code or an "
    "unknown base, 47031 a base leading back to the calendar, 47033 a bad date or .ics file.",
    response={200: Calendar, 201: Calendar, **EDIT_ERRORS},
)
def set_calendar(request, payload: CalendarInput, name: str = NAME):
    require_admin(request.user, gettext_noop("change calendars"))
    non_working = [item.dict() for item in payload.non_working]
    try:
        if payload.ics:
            non_working += calendars.parse_ics(payload.ics.encode())
        exists = WorkCalendar.objects.filter(name=name).exists()
        row = calendars.save_calendar(
            name=name,
            original=name if exists else None,
            base=payload.base,
            description=payload.description,
            non_working=non_working,
            working=[item.dict() for item in payload.working],
            user=request.user,
            via=VIA,
        )
    except workdays.CalendarError as exc:
        raise _refused(exc, getattr(exc, "field", "ics")) from None
    return JsonResponse(calendars.export(row), status=200 if exists else 201)


@router.delete(
    "/calendars/{name}",
    operation_id="deleteCalendar",
    url_name="calendar",
    summary="Delete a custom calendar no job or calendar names (admin; 409 47034 while in use).",
    response={204: None, **CHANGE_ERRORS},
)
def delete_calendar(request, name: str = NAME):
    require_admin(request.user, gettext_noop("change calendars"))
    try:
        calendars.delete_calendar(name=name, user=request.user, via=VIA)
    except workdays.CalendarError as exc:
        if exc.code == workdays.UNKNOWN_CALENDAR:
            raise ApiError(404, "not_found", "No such calendar.") from None
        raise _refused(exc, "name") from None
    return HttpResponse(status=204)
