"""Custom working-day calendars, and the calendar a job's schedule reads.

A custom calendar adjusts a base calendar (a built-in country code such as
`CN` or `US-CA`, another custom calendar, or none: Monday to Friday) with
dates of its own, each with a reason. jobs.workdays holds the rules; this
module turns rows into its `Calendar`s, cached by name, id and version. A
process reads a custom calendar's versions (one indexed row each) at most
once every RECHECK_SECONDS, not at every computation of a job's next fire
(a scheduler computes hundreds a second: a query each cost more than the
calendar itself); the process that saves or deletes one forgets them at
once (`forget`), and the others see the change within RECHECK_SECONDS,
without a restart, as a scheduler sees an edited job within its poll."""

import time
from datetime import date

from django.db import models
from django.db.models import F, Q
from django.utils.timezone import now as _now

from jobs import workdays

# How deep bases may nest (office → CN-based team calendar → CN): a save
# refuses deeper chains and cycles (jobs.calendars).
MAX_BASE_DEPTH = 5


class WorkCalendar(models.Model):
    name = models.CharField(max_length=workdays.MAX_CALENDAR_CHARS)
    description = models.TextField(blank=True)
    # A built-in code (CN, US-CA) or another custom calendar's name; empty:
    # Monday to Friday are working days.
    base = models.CharField(max_length=workdays.MAX_CALENDAR_CHARS, blank=True)
    # [{"date": "2025-10-01", "name": "National Day"}, ...], sorted by date.
    non_working = models.JSONField(default=list, blank=True)
    working = models.JSONField(default=list, blank=True)
    # Bumped on every save: the cache below compares it with the row's id
    # (a calendar deleted and made again starts at 1 again, under a new id).
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=_now)
    updated_at = models.DateTimeField(default=_now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint("name", name="workcalendar_unique_name"),
            # A calendar based on itself has no days: jobs.calendars refuses
            # it with 47031, and the database holds the rule for any writer.
            models.CheckConstraint(condition=~Q(base=F("name")), name="workcalendar_not_own_base"),
        ]

    def __str__(self):
        return self.name

    def dates(self, which: str) -> dict[date, str]:
        return {date.fromisoformat(item["date"]): item.get("name", "") for item in getattr(self, which)}


RECHECK_SECONDS = 1.0
# name → ((name, id, version) of its chain, Calendar, monotonic time of the
# last version check). The id as well: a calendar deleted and made again has
# version 1 again, and ids are never reused (AUTOINCREMENT on SQLite, a
# sequence on PostgreSQL), so (id, version) never repeats.
_built: dict[str, tuple[tuple, workdays.Calendar, float]] = {}
_clock = time.monotonic  # a test's stand-in clock replaces it


def forget() -> None:
    """Drop every built custom calendar: the next computation reads them afresh."""
    _built.clear()


def base_chain(name: str) -> list[WorkCalendar]:
    """The custom calendar `name` and the custom calendars it is based on."""
    rows = []
    while name and len(rows) <= MAX_BASE_DEPTH:
        row = WorkCalendar.objects.filter(name=name).first()
        if row is None:
            break
        rows.append(row)
        name = row.base
    return rows


def find_calendar(name: str) -> workdays.Calendar:
    """The calendar a job names: a built-in code, else the custom calendar
    of that name (a custom calendar may not take a built-in code's name, so
    a built-in one costs no query; a custom one costs one for its versions,
    at most once every RECHECK_SECONDS).
    CalendarError 47030 if neither."""
    try:
        return workdays.builtin(name)  # cached by code: no query
    except workdays.CalendarError:
        pass
    cached = _built.get(name)
    now = _clock()
    if cached is not None:
        if now - cached[2] < RECHECK_SECONDS:
            return cached[1]
        names = [n for n, *_ in cached[0]]
        current = WorkCalendar.objects.filter(name__in=names).values_list("name", "pk", "version")
        # A base that changed changes every calendar built on it.
        if sorted(current) == sorted(cached[0]):
            _built[name] = (cached[0], cached[1], now)
            return cached[1]
    rows = base_chain(name)
    if not rows:
        _built.pop(name, None)
        return workdays.builtin(name)
    calendar = build(rows)
    _built[name] = (tuple((row.name, row.pk, row.version) for row in rows), calendar, now)
    return calendar


def build(rows: list[WorkCalendar]) -> workdays.Calendar:
    """A chain of rows (the calendar first, its bases after) as one Calendar."""
    if not rows:
        raise ValueError("no calendar rows")
    head, rest = rows[0], rows[1:]
    if rest:
        base = build(rest)
    elif head.base:
        base = workdays.builtin_code(head.base)
    else:
        base = None
    return workdays.Calendar(
        name=head.name, base=base, off=head.dates("non_working"), on=head.dates("working")
    )
