"""Working days: which local dates a job with a calendar fires on.

A calendar is a built-in one, a country code with an optional subdivision
(`CN`, `US-CA`, `DE-BY`, `GB-SCT`) whose public holidays, weekend and
make-up working days come from the `holidays` library (maintained, 100+
countries; for China it carries the State Council's yearly notice: the
holidays and the weekend days that become working days), or a custom one
(jobs.models.calendars) that adjusts a base calendar with dates of its own.

A job's `calendar_rule` says which dates count:

* `working_days`: weekdays that are not holidays, and make-up working days
  even on a weekend;
* `non_working_days`: the others;
* `skip_holidays`: every date but a holiday (the cron as written, minus
  holidays).

Missing data is never guessed. A built-in calendar's data covers a year
(`covered_until`) when the library has it for certain: the year is within
the library's range for the country (its `end_year`), none of its holidays
is only estimated (lunar and Islamic dates the library computes ahead of
the official announcement, labelled "estimated"), and for a country whose
working days follow a yearly notice (China's, usually published in
November) the notice for that year is in. The first year from the current
one that fails any of these is missing: a job fires by the data up to the
end of the year before and no further. A custom calendar's own dates cover
the years they fall in, and only those, so it carries its base's data on
year by year.

No Django here, like jobs.cron: the models build custom calendars out of
rows and hand them in; the cron search asks `verdict` of each date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import cached_property, lru_cache

import holidays

__all__ = [
    "RULES",
    "Calendar",
    "CalendarError",
    "DayRule",
    "builtin_code",
]

UNKNOWN_CALENDAR = 47030
SELF_REFERENCE = 47031
NEVER_FIRES = 47032
BAD_DATE = 47033

WORKING_DAYS = "working_days"
NON_WORKING_DAYS = "non_working_days"
SKIP_HOLIDAYS = "skip_holidays"
RULES = (WORKING_DAYS, NON_WORKING_DAYS, SKIP_HOLIDAYS)

# Countries whose working days follow a yearly official notice rather than
# fixed rules: a year the installed library has no notice for is not covered.
YEARLY_NOTICE = frozenset({"CN"})

MAX_CALENDAR_CHARS = 100
_CODE = re.compile(r"([A-Za-z]{2,3})(?:-([A-Za-z0-9]{1,6}))?")


def gettext_noop(text: str) -> str:
    """Marks text for the translation catalog; jobs.i18n translates it."""
    return text


class CalendarError(ValueError):
    """A user-facing calendar problem, shaped like jobs.cron.CronError:
    ``code``, an English ``message``, and ``template`` with ``params`` for a
    caller that words it in another language."""

    def __init__(self, code: int, template: str, /, **params):
        message = template.format(**params) if params else template
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.template = template
        self.params = params


@lru_cache(maxsize=1)
def _countries() -> dict[str, tuple[str, ...]]:
    return {code.upper(): tuple(subdivs) for code, subdivs in holidays.list_supported_countries().items()}


def builtin_code(text: str) -> str:
    """The canonical spelling of a built-in calendar (`us-ca` → `US-CA`);
    CalendarError 47030 for a country or subdivision the library lacks."""
    match = _CODE.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise CalendarError(
            UNKNOWN_CALENDAR,
            gettext_noop(
                "Unknown calendar {name!r}: use a country code with an optional subdivision (CN, US-CA, DE-BY) or a custom calendar's name"
            ),
            name=text,
        )
    country, subdiv = match[1].upper(), match[2]
    subdivisions = _countries().get(country)
    if subdivisions is None:
        raise CalendarError(
            UNKNOWN_CALENDAR,
            gettext_noop("Unknown country code {country!r} in calendar {name!r}"),
            country=country,
            name=text,
        )
    if subdiv is None:
        return country
    known = {s.upper(): s for s in subdivisions}
    canonical = known.get(subdiv.upper())
    if canonical is None:
        raise CalendarError(
            UNKNOWN_CALENDAR,
            gettext_noop("Unknown subdivision {subdiv!r} of {country}: use one of {known}"),
            subdiv=subdiv,
            country=country,
            known=", ".join(subdivisions) or "none",
        )
    return f"{country}-{canonical}"


def is_builtin(text: str) -> bool:
    try:
        builtin_code(text)
    except CalendarError:
        return False
    return True


def _library_calendar(code: str, years):
    country, _, subdiv = code.partition("-")
    cls = holidays.country_holidays(country).__class__
    language = "en_US" if "en_US" in getattr(cls, "supported_languages", ()) else None
    return holidays.country_holidays(country, subdiv=subdiv or None, years=years, language=language)


@dataclass(frozen=True)
class _Year:
    off: dict[date, str]
    on: dict[date, str]
    weekend: frozenset[int]


def _read_year(code: str, year: int) -> _Year:
    data = _library_calendar(code, year)
    on = {day: "" for day in data.weekend_workdays if day.year == year}
    for day, names in data.items():
        # The library names the weekday a make-up day stands in for, not the
        # make-up day itself: its reason is the holiday it pays for.
        for label in names.split("; "):
            match = re.search(r"\(substituted from (\d\d)/(\d\d)/(\d{4})\)", label)
            if match:
                source = date(int(match[3]), int(match[1]), int(match[2]))
                if source in on:
                    on[source] = f"make-up working day for {day.isoformat()}"
    return _Year(off=dict(data.items()), on=on, weekend=frozenset(data.weekend))


# (code, year) → that year's dates: a few dozen entries per calendar in use.
_builtin_year = lru_cache(maxsize=1024)(_read_year)


def _this_year() -> int:
    return datetime.now(UTC).year


def covered_until(code: str) -> date | None:
    """The last date the installed data covers for a built-in calendar,
    counted from the current year (the module's docstring has the rule);
    None: the library sets no end."""
    return _covered_from(code, _this_year())


def _estimated_marker(data) -> str:
    """The word the library puts in an estimated holiday's name ("estimated"
    in English), in the language `data` speaks; "" if it estimates none."""
    label = getattr(data, "estimated_label", None)
    return data.tr(label).replace("%s", "").strip(" ()") if label else ""


@lru_cache(maxsize=256)
def _covered_from(code: str, since: int) -> date | None:
    """covered_until, the years before `since` left as they are (a past
    estimate is what the library knows of that year)."""
    country = code.partition("-")[0]
    data = _library_calendar(code, ())
    end_year = getattr(data, "end_year", None)
    ends = [date(end_year, 12, 31)] if end_year else []
    if country in YEARLY_NOTICE:
        notices = getattr(data, "special_public_holidays", {}) or {}
        if notices:
            ends.append(date(max(notices), 12, 31))
    marker = _estimated_marker(data)
    if marker and (end_year or since) >= since:
        dated = _library_calendar(code, range(since, (end_year or since) + 1))
        estimated = [day.year for day, name in dated.items() if marker in name]
        if estimated:
            ends.append(date(min(estimated) - 1, 12, 31))
    return min(ends) if ends else None


# eq=False: compared and hashed by identity, so a built-in calendar (one
# object per code, cached) keys the cache of rules below.
@dataclass(frozen=True, eq=False)
class Calendar:
    """A calendar: a built-in `base` (or another Calendar, or none: Monday to
    Friday working) adjusted by extra non-working dates (`off`) and extra
    working dates (`on`), each with its reason."""

    name: str
    base: str | Calendar | None = None
    off: dict[date, str] = field(default_factory=dict)
    on: dict[date, str] = field(default_factory=dict)

    def status(self, day: date) -> tuple[bool, str, bool]:
        """(working, reason, holiday): `reason` names the holiday of a
        non-working date or says why a weekend date is a working day;
        `holiday` is False for a plain weekend."""
        if day in self.on:
            return True, self.on[day] or "working day", False
        if day in self.off:
            return False, self.off[day], True
        if isinstance(self.base, Calendar):
            return self.base.status(day)
        if self.base is None:
            return (day.weekday() < 5, "" if day.weekday() < 5 else "weekend", False)
        year = _builtin_year(self.base, day.year)
        if day in year.on:
            return True, year.on[day] or "make-up working day", False
        if day in year.off:
            return False, year.off[day], True
        if day.weekday() in year.weekend:
            return False, "weekend", False
        return True, "", False

    @property
    def covered_until(self) -> date | None:
        if isinstance(self.base, Calendar):
            base = self.base.covered_until
        else:
            base = covered_until(self.base) if self.base else None
        if base is None:
            return base
        # Dates of its own for a year the base lacks: whoever added them has
        # that year, and only that one; the first year after the base's
        # with none of its own is missing, whatever comes later.
        year = base.year
        while year + 1 in self._own_years:
            year += 1
        return max(base, date(year, 12, 31))

    @cached_property
    def _own_years(self) -> frozenset[int]:
        return frozenset(day.year for day in (*self.off, *self.on))


@dataclass(frozen=True, eq=False)
class DayRule:
    """A calendar with a job's rule: what jobs.cron's search asks of each
    local date (`verdict`), and how far the data reaches (`covered_until`)."""

    calendar: Calendar
    rule: str

    @property
    def covered_until(self) -> date | None:
        return self.calendar.covered_until

    def verdict(self, day: date) -> tuple[bool, str]:
        """(fires on this date, note): the note is the reason a date is
        skipped, or marks a working day on a weekend."""
        working, reason, holiday = self.calendar.status(day)
        weekend_working = working and reason != ""
        if self.rule == WORKING_DAYS:
            return working, reason
        if self.rule == NON_WORKING_DAYS:
            return not working, reason
        # skip_holidays: only a holiday is skipped; a weekend stays as cron says.
        return (not holiday, reason if holiday or weekend_working else "")


def _make_rule(calendar: Calendar, rule: str) -> DayRule:
    return DayRule(calendar, rule)


# One DayRule per calendar object and rule: the planner asks for one per
# next fire it computes. A custom calendar rebuilt after an edit is a new
# object, hence a new entry; old ones age out.
day_rule = lru_cache(maxsize=4096)(_make_rule)


def _make_builtin(code: str) -> Calendar:
    canonical = builtin_code(code)
    return Calendar(name=canonical, base=canonical)


def builtin(code: str) -> Calendar:
    """The built-in calendar for a code (canonical spelling; 47030 if unknown)."""
    return _builtin(code)


# Keyed on text no longer than MAX_CALENDAR_CHARS (the job's field); unknown
# codes raise and are not cached.
_builtin = lru_cache(maxsize=1024)(_make_builtin)
