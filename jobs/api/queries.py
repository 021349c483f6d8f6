"""What the API's lists read from a query: an instant (`from`, `to`, the
preview's `after`), a page's cursor, and the page of runs that a job's run
list and the list of all runs both answer."""

import json
from datetime import UTC, datetime, time

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from jobs.api.framework import ApiError
from jobs.api.schemas.runs import RunFilters
from jobs.forms import check_instant
from jobs.models import parse_run_cursor
from jobs.serializers import json_page, run_to_dict


def parse_time(value: str, field: str) -> datetime:
    """An ISO-8601 instant (or a date, meaning its midnight); no zone means UTC."""
    try:
        when = parse_datetime(value)
        if when is None:
            day = parse_date(value)
            when = datetime.combine(day, time()) if day else None
    except ValueError:
        when = None
    if when is None:
        raise ApiError(400, "invalid", f"“{value[:50]}” is not an ISO-8601 date-time.", field)
    if timezone.is_naive(when):
        when = when.replace(tzinfo=UTC)
    try:
        return check_instant(when)
    except ValidationError as exc:
        raise ApiError(400, exc.code, exc.message, field) from None


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    parsed = parse_run_cursor(cursor)
    if parsed is None:
        raise ApiError(400, "invalid", "This cursor is not one the API gave out.", "cursor")
    return parsed


def run_page(runs, filters: RunFilters, *, masked: bool = False) -> HttpResponse:
    """One page of `runs` narrowed by `filters`, newest scheduled first;
    keyset-paginated on (scheduled_at, id); `masked`: credentials typed in
    clear in the runs' properties hidden (a reader who may not edit)."""
    statuses = [s for s in (filters.status or "").split(",") if s]
    if statuses:
        runs = runs.filter(status__in=statuses)
    if filters.trigger:
        runs = runs.filter(trigger=filters.trigger)
    if filters.from_:
        runs = runs.filter(scheduled_at__gte=parse_time(filters.from_, "from"))
    if filters.to:
        runs = runs.filter(scheduled_at__lt=parse_time(filters.to, "to"))
    if filters.cursor:
        runs = runs.older_than(*decode_cursor(filters.cursor))
    # The log (256 K characters) is getRun's alone.
    runs = runs.defer("log").order_by("-scheduled_at", "-id")[: filters.limit + 1]
    page = json_page(
        runs, limit=filters.limit, render=lambda run: json.dumps(run_to_dict(run, mask_credentials=masked))
    )
    return HttpResponse(page.envelope(), content_type="application/json")
