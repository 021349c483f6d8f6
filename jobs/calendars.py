"""Calendars on the domain's side: a job's calendar fields checked (for
JobForm, so the console, the API and `jobs import` refuse alike), custom
calendars saved and deleted (console, API, jobs-as-code), and an iCalendar
(.ics) file of holidays read into dates.

Codes (jobs.workdays): 47030 an unknown calendar (country, subdivision or
custom name), 47031 a custom calendar based on itself (or on a chain that
comes back to it), 47032 a calendar rule that never fires within
DAY_SEARCH_LIMIT days, 47033 a date that is not an ISO date, 47034 a custom
calendar still in use.
"""

from datetime import date, datetime, timedelta

import icalendar
from django import forms
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs import audit, cron, workdays
from jobs.core.wakeup import wake_schedulers
from jobs.i18n import cron_error_message
from jobs.models import AuditEvent, Job, WorkCalendar, find_calendar
from jobs.models.calendars import MAX_BASE_DEPTH, base_chain, build
from jobs.models.calendars import forget as forget_built
from jobs.text import find_unstorable, storable

IN_USE = 47034
# The job form's calendar fields, which its page places beside the cron expression.
FORM_FIELDS = frozenset({"calendar", "calendar_rule", "jitter_seconds"})
MAX_DATES = 2_000
MAX_ICS_BYTES = 1_000_000


def _error(exc: workdays.CalendarError) -> ValidationError:
    return ValidationError(cron_error_message(exc), code=str(exc.code))


def calendar_name(text: str) -> str:
    """A calendar a job or a base may name: a built-in code (canonical
    spelling) or an existing custom calendar; CalendarError 47030 if neither."""
    text = (text or "").strip()
    if workdays.is_builtin(text):
        return workdays.builtin_code(text)
    if text and not find_unstorable(text) and WorkCalendar.objects.filter(name=text).exists():
        return text
    workdays.builtin_code(text)  # raises with the reason (country or subdivision)
    return text


def preview_days(calendar: str, rule: str) -> workdays.DayRule | None:
    """What a preview reads a calendar by (None without one); CalendarError
    47030 for an unknown calendar or rule."""
    calendar = (calendar or "").strip()
    if not calendar:
        return None
    rule = rule or workdays.WORKING_DAYS
    if rule not in workdays.RULES:
        raise workdays.CalendarError(
            workdays.UNKNOWN_CALENDAR,
            workdays.gettext_noop("Unknown calendar rule {rule!r}: use one of {known}"),
            rule=rule[:40],
            known=", ".join(workdays.RULES),
        )
    return workdays.DayRule(find_calendar(calendar_name(calendar)), rule)


def preview_jitter(value) -> int:
    """A preview's jitter: 0 to MAX_JITTER_SECONDS, anything else 0."""
    try:
        seconds = int(value or 0)
    except (TypeError, ValueError):
        return 0
    return seconds if 0 <= seconds <= Job.MAX_JITTER_SECONDS else 0


def never_fires(
    *,
    expression: str,
    interval: int | None = None,
    seed: str,
    zone: str,
    calendar: str,
    rule: str,
    now: datetime,
) -> bool:
    """Whether the rule leaves the schedule (the cron `expression`, or every
    `interval` seconds) no fire within DAY_SEARCH_LIMIT days (a calendar
    marking every day a holiday). Reaching the end of the calendar's data
    first is not this: it is the data-missing state."""
    days = workdays.DayRule(find_calendar(calendar), rule)
    if interval:
        walk = cron.interval_walk(
            now + timedelta(seconds=interval), timedelta(seconds=interval), zone, days=days
        )
    else:
        walk = cron.parse(expression, seed).walk(now, zone, days=days)
    return not any(isinstance(step, cron.Fire | cron.Uncovered) for step in walk)


def clean_job_fields(form, data: dict) -> None:
    """JobForm's check of `calendar`, `calendar_rule` and `jitter_seconds`:
    errors go on the field, with their codes."""
    data["calendar_rule"] = data.get("calendar_rule") or Job.CalendarRule.WORKING_DAYS
    jitter = data.get("jitter_seconds")
    data["jitter_seconds"] = jitter = 0 if jitter is None else jitter
    if not 0 <= jitter <= Job.MAX_JITTER_SECONDS:
        form.add_error(
            "jitter_seconds",
            ValidationError(
                _("Jitter is 0 to {limit} seconds.").format(limit=Job.MAX_JITTER_SECONDS), code="invalid"
            ),
        )
    schedule_type = data.get("schedule_type", Job.ScheduleType.CRON)
    is_cron = schedule_type == Job.ScheduleType.CRON
    if jitter and not is_cron:
        # An interval job's fires are spread already: each counts from its own last fire.
        form.add_error(
            "jitter_seconds", ValidationError(_("Jitter applies to cron schedules only."), code="invalid")
        )
    name = (data.get("calendar") or "").strip()
    data["calendar"] = name
    if not name:
        return
    if schedule_type not in (Job.ScheduleType.CRON, Job.ScheduleType.INTERVAL):
        form.add_error(
            "calendar",
            ValidationError(_("A calendar applies to cron and interval schedules only."), code="invalid"),
        )
        return
    try:
        data["calendar"] = calendar_name(name)
    except workdays.CalendarError as exc:
        form.add_error("calendar", _error(exc))
        return
    expression = data.get("cron_expression") if is_cron else None
    interval = None if is_cron else data.get("interval_seconds")
    if not (expression or interval) or {"cron_expression", "interval_seconds", "timezone"} & set(form.errors):
        return
    seed = data.get("name") or form.instance.name or ""
    if never_fires(
        expression=expression,
        interval=interval,
        seed=seed,
        zone=data.get("timezone") or "UTC",
        calendar=data["calendar"],
        rule=data["calendar_rule"],
        now=timezone.now(),
    ):
        exc = workdays.CalendarError(
            workdays.NEVER_FIRES,
            workdays.gettext_noop(
                "With the calendar {calendar} and the rule {rule}, this schedule does not fire in the next {days} days"
            ),
            calendar=data["calendar"],
            rule=data["calendar_rule"],
            days=cron.DAY_SEARCH_LIMIT,
        )
        form.add_error("calendar_rule", _error(exc))


# -- custom calendars ------------------------------------------------------------


def parse_dates(value, field: str) -> list[dict]:
    """Dates as stored: [{"date": "2025-10-01", "name": "National Day"}],
    sorted, one per date. Accepts that list, or text with one date per line
    (`2025-10-01 National Day`). CalendarError 47033 names the bad entry."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        items = []
        for line in value.splitlines():
            if line.strip():
                day, _sep, name = line.strip().partition(" ")
                items.append({"date": day, "name": name.strip()})
    elif isinstance(value, list):
        items = value
    else:
        raise workdays.CalendarError(
            workdays.BAD_DATE, workdays.gettext_noop("{field}: a list of dates"), field=field
        )
    if len(items) > MAX_DATES:
        raise workdays.CalendarError(
            workdays.BAD_DATE,
            workdays.gettext_noop("{field}: at most {limit} dates"),
            field=field,
            limit=MAX_DATES,
        )
    dates: dict[str, str] = {}
    for item in items:
        text = item.get("date") if isinstance(item, dict) else item
        name = item.get("name", "") if isinstance(item, dict) else ""
        try:
            day = date.fromisoformat(text) if isinstance(text, str) and len(text) == 10 else None
        except ValueError:
            day = None
        if day is None or not isinstance(name, str) or len(name) > 200 or find_unstorable(name):
            raise workdays.CalendarError(
                workdays.BAD_DATE,
                workdays.gettext_noop(
                    "{field}: {entry!r} is not a date such as 2025-10-01 (with a name of at most 200 characters)"
                ),
                field=field,
                entry=str(text)[:40],
            )
        dates[day.isoformat()] = name.strip()
    return [{"date": day, "name": name} for day, name in sorted(dates.items())]


def parse_ics(data: bytes) -> list[dict]:
    """The all-day events of an iCalendar file as dates with names (an event
    over several days gives each of them). CalendarError 47033 if it is not
    one."""
    if len(data) > MAX_ICS_BYTES:
        raise workdays.CalendarError(
            workdays.BAD_DATE,
            workdays.gettext_noop("The .ics file is larger than {limit} bytes"),
            limit=MAX_ICS_BYTES,
        )
    try:
        dates = _ics_dates(icalendar.Calendar.from_ical(data))
    except (ValueError, TypeError, AttributeError, IndexError, KeyError, OverflowError):
        # Whatever the file holds that is not a calendar of dates.
        raise workdays.CalendarError(
            workdays.BAD_DATE, workdays.gettext_noop("The file is not an iCalendar (.ics) file")
        ) from None
    return parse_dates(dates, "ics")


def _ics_dates(parsed) -> list[dict]:
    dates = []
    for event in parsed.walk("VEVENT"):
        start = event.get("DTSTART")
        if start is None:
            continue
        first = start.dt.date() if isinstance(start.dt, datetime) else start.dt
        end = event.get("DTEND")
        last = (end.dt.date() if isinstance(end.dt, datetime) else end.dt) if end is not None else first
        if not isinstance(first, date) or not isinstance(last, date):
            raise ValueError("not a date")
        name = storable(str(event.get("SUMMARY", "")))[:200]
        day = first
        while True:
            dates.append({"date": day.isoformat(), "name": name})
            day += timedelta(days=1)
            if day >= last or len(dates) > MAX_DATES:
                break
    return dates


def check_base(name: str, base: str) -> str:
    """The base as stored: empty, a built-in code, or another custom
    calendar whose chain of bases never comes back to `name` (47031)."""
    base = (base or "").strip()
    if not base:
        return ""
    if base == name:
        raise workdays.CalendarError(
            workdays.SELF_REFERENCE,
            workdays.gettext_noop("The calendar {name!r} cannot be based on itself"),
            name=name,
        )
    base = calendar_name(base)
    if not workdays.is_builtin(base):
        chain = base_chain(base)
        if any(row.name == name for row in chain) or len(chain) > MAX_BASE_DEPTH:
            raise workdays.CalendarError(
                workdays.SELF_REFERENCE,
                workdays.gettext_noop(
                    "The calendar {name!r} cannot be based on {base!r}: its bases lead back to it (or nest deeper than {limit})"
                ),
                name=name,
                base=base,
                limit=MAX_BASE_DEPTH,
            )
    return base


def _check_storable(value) -> None:
    problem = find_unstorable(value)
    if problem:
        raise workdays.CalendarError(
            workdays.BAD_DATE,
            workdays.gettext_noop("The text contains {problem}, which cannot be stored"),
            problem=problem,
        )


def check_name(name: str) -> str:
    name = (name or "").strip()
    if not name or len(name) > workdays.MAX_CALENDAR_CHARS or workdays.is_builtin(name):
        raise workdays.CalendarError(
            workdays.UNKNOWN_CALENDAR,
            workdays.gettext_noop(
                "A custom calendar's name is 1 to {limit} characters and not a country code such as CN or US-CA"
            ),
            limit=workdays.MAX_CALENDAR_CHARS,
        )
    return name


def _snapshot(row: WorkCalendar) -> dict:
    return {
        "name": row.name,
        "description": row.description,
        "base": row.base,
        "non_working": row.non_working,
        "working": row.working,
    }


def save_calendar(
    *,
    name: str,
    base: str = "",
    description: str = "",
    non_working=None,
    working=None,
    original: str | None = None,
    user=None,
    via: str = AuditEvent.Via.CONSOLE,
    now: datetime | None = None,
) -> WorkCalendar:
    """Create or change a custom calendar (`original`: its name before, for
    an edit), audited; the enabled jobs that use it (directly or through a
    calendar based on it) get their next fire counted again in the same
    transaction, and the schedulers are woken. Raises CalendarError."""
    now = now or timezone.now()
    for field, value in (("name", name), ("base", base), ("description", description)):
        _on(field, _check_storable, value)
    name = _on("name", check_name, name)
    values = {
        "base": _on("base", check_base, name, base),
        "description": description or "",
        "non_working": _on("non_working", parse_dates, non_working, "non_working"),
        "working": _on("working", parse_dates, working, "working"),
    }
    with transaction.atomic():
        row = WorkCalendar.objects.select_for_update().filter(name=original or name).first()
        before = _snapshot(row) if row is not None else None
        if row is not None and original and original != name:
            raise workdays.CalendarError(
                workdays.UNKNOWN_CALENDAR,
                workdays.gettext_noop("A calendar keeps its name: create a new one instead"),
            )
        if row is None:
            if original:
                raise workdays.CalendarError(
                    workdays.UNKNOWN_CALENDAR, workdays.gettext_noop("No calendar {name!r}"), name=original
                )
            row = WorkCalendar(name=name, created_at=now)
        for key, value in values.items():
            setattr(row, key, value)
        row.version = (row.version or 0) + 1 if row.pk else 1
        row.updated_at = now
        build(_chain_with(row))  # a date that does not read fails before the save
        row.save()
        changes = audit.diff(before, _snapshot(row))
        audit.record(
            action="change" if before else "create",
            subject=AuditEvent.Subject.CALENDAR,
            user=user,
            via=via,
            changes=changes,
        )
        forget_built()  # replan reads the calendar as saved
        replan(name=row.name, now=now)
    forget_built()  # and had it rolled back, nothing of it stays
    wake_schedulers()
    return row


def _on(field: str, check, *args):
    """`check(*args)`, its CalendarError marked with the field it is about."""
    try:
        return check(*args)
    except workdays.CalendarError as exc:
        exc.field = field
        raise


def _chain_with(row: WorkCalendar) -> list[WorkCalendar]:
    return [row, *(base_chain(row.base) if row.base and not workdays.is_builtin(row.base) else [])]


def _dependents(name: str) -> set[str]:
    """`name` and every custom calendar based on it, however deep."""
    names, frontier = {name}, {name}
    while frontier:
        frontier = set(WorkCalendar.objects.filter(base__in=frontier).values_list("name", flat=True)) - names
        names |= frontier
    return names


def replan(*, name: str, now: datetime) -> int:
    """The enabled jobs on calendar `name` (or one based on it) count their
    next fire afresh, from now (a fire already due stays owed; an interval
    job stays on its grid)."""
    count = 0
    jobs = Job.objects.scheduled().exclude(schedule_type=Job.ScheduleType.NONE)
    for job in jobs.filter(calendar__in=_dependents(name)).select_for_update():
        if job.next_fire_at is not None and job.next_fire_at <= now:
            continue
        job.next_fire_at = job.next_fire_on_schedule(now)
        job.save(update_fields=["next_fire_at"])
        count += 1
    return count


def delete_calendar(*, name: str, user=None, via: str = AuditEvent.Via.CONSOLE) -> None:
    """Delete a custom calendar no job and no other calendar names (47034)."""
    with transaction.atomic():
        row = (
            None
            if find_unstorable(name)
            else WorkCalendar.objects.select_for_update().filter(name=name).first()
        )
        if row is None:
            raise workdays.CalendarError(
                workdays.UNKNOWN_CALENDAR, workdays.gettext_noop("No calendar {name!r}"), name=storable(name)
            )
        users = list(Job.objects.live().filter(calendar=name).values_list("name", flat=True)[:5])
        users += list(WorkCalendar.objects.filter(base=name).values_list("name", flat=True)[:5])
        if users:
            raise workdays.CalendarError(
                IN_USE,
                workdays.gettext_noop("The calendar {name!r} is in use by {users}"),
                name=name,
                users=", ".join(users),
            )
        before = _snapshot(row)
        row.delete()
        forget_built()
        audit.record(
            action="delete",
            subject=AuditEvent.Subject.CALENDAR,
            user=user,
            via=via,
            changes=audit.diff(None, before),
        )


def export(row: WorkCalendar) -> dict:
    """A calendar as jobs-as-code and the API write it."""
    return _snapshot(row)


CALENDAR_KEYS = frozenset({"name", "description", "base", "non_working", "working"})


def import_calendars(specs, *, user=None, via: str = AuditEvent.Via.CLI) -> tuple[int, int]:
    """`jobs import-calendars`: upsert a list of calendars (export's
    format) by name, all or nothing, a base in the file saved before the
    calendars on it. Returns (created, updated); CalendarError names the
    calendar (`calendar`) and the field."""
    if not isinstance(specs, list) or not all(isinstance(spec, dict) for spec in specs):
        raise workdays.CalendarError(
            workdays.BAD_DATE, workdays.gettext_noop("The file must hold a JSON list of calendar objects")
        )
    by_name = {str(spec.get("name", "")): spec for spec in specs}
    ordered, placed = [], set()

    def place(name: str, depth: int = 0) -> None:
        if name in placed or name not in by_name or depth > MAX_BASE_DEPTH:
            return
        place(str(by_name[name].get("base") or ""), depth + 1)
        placed.add(name)
        ordered.append(by_name[name])

    for name in by_name:
        place(name)
    created = updated = 0
    with transaction.atomic():
        for spec in ordered:
            unknown = sorted(set(spec) - CALENDAR_KEYS)
            try:
                if unknown:
                    raise workdays.CalendarError(
                        workdays.BAD_DATE, workdays.gettext_noop("Unknown key {key!r}"), key=unknown[0]
                    )
                name = str(spec.get("name", ""))
                exists = WorkCalendar.objects.filter(name=name).exists()
                save_calendar(
                    name=name,
                    original=name if exists else None,
                    base=str(spec.get("base") or ""),
                    description=str(spec.get("description") or ""),
                    non_working=spec.get("non_working"),
                    working=spec.get("working"),
                    user=user,
                    via=via,
                )
            except workdays.CalendarError as exc:
                exc.calendar = spec.get("name")
                raise
            created += not exists
            updated += exists
    return created, updated


def _dates_text(items: list[dict]) -> str:
    return "\n".join(f"{item['date']} {item['name']}".rstrip() for item in items)


class CalendarForm(forms.Form):
    """The console's calendar form; `save` goes through save_calendar, whose
    refusals land on the field they are about."""

    name = forms.CharField(label=gettext_lazy("Name"), max_length=workdays.MAX_CALENDAR_CHARS)
    base = forms.CharField(
        label=gettext_lazy("Based on"),
        required=False,
        max_length=workdays.MAX_CALENDAR_CHARS,
        help_text=gettext_lazy(
            "A country code (CN, US-CA, DE-BY), another custom calendar, or empty: Monday to Friday."
        ),
    )
    description = forms.CharField(label=gettext_lazy("Description"), required=False, max_length=1000)
    non_working = forms.CharField(
        label=gettext_lazy("Extra non-working dates"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "class": "mono"}),
        help_text=gettext_lazy("One per line: 2025-12-31 Year-end close"),
    )
    working = forms.CharField(
        label=gettext_lazy("Extra working dates"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}),
        help_text=gettext_lazy("One per line: 2025-10-11 Release weekend"),
    )
    ics = forms.FileField(
        label=gettext_lazy("Import holidays from an .ics file"),
        required=False,
        help_text=gettext_lazy("Its events' dates are added to the non-working dates."),
    )

    @classmethod
    def for_row(cls, row: WorkCalendar) -> "CalendarForm":
        return cls(
            initial={
                "name": row.name,
                "base": row.base,
                "description": row.description,
                "non_working": _dates_text(row.non_working),
                "working": _dates_text(row.working),
            }
        )

    def save(self, *, user, original: str | None) -> WorkCalendar | None:
        data = self.cleaned_data
        try:
            non_working = parse_dates(data["non_working"], "non_working")
            upload = data.get("ics")
            if upload is not None:
                # One byte past the limit, so that parse_ics sees a file too large.
                non_working += _on("ics", parse_ics, upload.read(MAX_ICS_BYTES + 1))
            return save_calendar(
                name=data["name"],
                original=original,
                base=data["base"],
                description=data["description"],
                non_working=non_working,
                working=data["working"],
                user=user,
            )
        except workdays.CalendarError as exc:
            self.add_error(getattr(exc, "field", "non_working"), _error(exc))
            return None
