"""The API's cron preview: an expression described, with its next fire
times in a zone."""

from django.utils import timezone
from ninja import Router

from jobs import calendars, cron, workdays
from jobs.api.framework import ApiError
from jobs.api.queries import parse_time
from jobs.api.schemas.base import ERRORS
from jobs.api.schemas.overview import Preview, PreviewRequest

router = Router()

# Operations that change nothing although their method is not a safe one.
OPEN_TO_VIEWERS = {"previewCron"}


@router.post(
    "/cron/preview",
    operation_id="previewCron",
    url_name="cron_preview",
    summary="Describe an expression and list its next fire times (any signed-in user).",
    response={200: Preview, **ERRORS},
)
def cron_preview(request, payload: PreviewRequest):
    """The next fire times (with DST marks), the description and warnings
    for an expression in a zone, with H read by `name`, each fire's jitter,
    and the dates a calendar skipped, each with its reason; or the error
    with its code. Read-only,
    so any signed-in user may call it."""
    after = timezone.now() if payload.after is None else parse_time(payload.after, "after")
    try:
        # Bounded (MAX_ZONE_CHARS) and canonical before any cache sees it.
        zone = cron.zone_name(payload.timezone)
    except cron.CronError as exc:
        raise ApiError(400, exc.code, exc.message, "timezone") from None
    try:
        days = calendars.preview_days(payload.calendar, payload.calendar_rule)
    except workdays.CalendarError as exc:
        raise ApiError(400, exc.code, exc.message, "calendar") from None
    try:
        return cron.preview(
            payload.expression,
            zone,
            after=after,
            count=payload.count,
            seed=payload.name.strip(),
            days=days,
            jitter=payload.jitter_seconds,
        )
    except cron.CronError as exc:
        raise ApiError(400, exc.code, exc.message, "expression") from None
