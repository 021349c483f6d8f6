"""Cron expressions: parsing, validation, next fire times, descriptions.

Six fields, seconds first: ``sec min hour day-of-month month day-of-week``.
Five-field input gets ``0`` seconds prepended; ``@yearly`` and friends are
expanded when normalised.

What comes from where, and why
------------------------------
The semantics follow Cronos (HangfireIO/Cronos, MIT), the .NET library the
design names, read from its source (CronParser.cs, CronExpression.cs,
CalendarHelper.cs, TimeZoneHelper.cs) and its test suite:

* Parsing mirrors Cronos's grammar field by field: ``*``/``?`` with an
  optional ``/step``; lists of ``n``, ``a-b``, ``a-b/s``, ``n/s`` (``n/s``
  runs to the field's last value, 7 for day-of-week, and 7 is Sunday);
  reversed ranges wrap (``22-2``, ``FRI-TUE``, ``57-5/3`` keeps stepping
  across the wrap); three-letter names; ``L``, ``L-n`` (n <= 30), ``nW``,
  ``LW``, ``L-nW`` in day-of-month; ``nL`` and ``n#k`` (k 1-5) in
  day-of-week; numbers of at most two digits.
* ``H`` comes from Jenkins (its CronTab grammar): a field of ``H``,
  ``H(a-b)``, ``H/s`` or ``H(a-b)/s`` is one value (or one stepped series)
  picked by a stable hash of a seed, the job's name, so that many jobs
  written alike spread over the field's range and keep their value across
  restarts and edits of other fields. As in Jenkins, a bare ``H`` in
  day-of-month picks from 1-28 (every month has those days); ``H`` does not
  combine with lists, ``L``, ``W`` or ``#`` (47001). The hash is SHA-256 of
  the seed and the field's name, not Jenkins' Java hashCode, so the values
  differ from a Jenkins server's for the same name.
* The search returns the earliest local wall time that matches, strictly
  after the start (the start is floored to the second first). ``W`` moves to
  the nearest weekday without leaving the month, using the month's real last
  day. Cronos stops at year 2499; we search to the end of year 9999 (the
  last year a datetime holds), so every instant a client may name has its
  fires computed and there is no silent gap: ``None`` only when no fire
  falls before 10000-01-01 in UTC (or in the job's wall time).
* Time zones follow Cronos's GetOccurrenceConsideringTimeZone: a match in a
  spring-forward gap fires once at the first valid instant after the gap; a
  match in the repeated fall-back hour fires in the first pass, and again in
  the second pass only for *interval-based* expressions (``*``, ``?``, a
  range or a step in the second, minute or hour field); a start inside the
  second pass skips the rest of the repeated hour for other expressions.
  Gaps and folds are detected with PEP 495 ``fold`` (zoneinfo).

Differences from Cronos imposed by the design: always six fields (five get
``0`` seconds); day-of-month and day-of-week may not both be restricted
(47003); an expression that can never fire is rejected (47005) by a static
check over every month length and weekday the month can start on, which is
complete because those combinations all recur in the Gregorian cycle.

croniter (the stack's cron library) is not the engine: its DST handling and
its ``W``/``L`` forms differ from Cronos, and matching them would mean
patching most of it. It stays as a cross-check in the tests for plain
expressions in UTC. Human-readable text comes from cron-descriptor, with a
small fallback of our own for what it gets wrong or cannot read.

Languages: this module has no Django in it and speaks English. Its messages
are format strings marked with `gettext_noop` (so `makemessages` finds them)
whose fields travel on the CronError (`template`, `params`); jobs.i18n
translates them at the edge. `describe` takes a cron-descriptor locale and a
`translate` callable for our own phrases.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

__all__ = [
    "CronError",
    "CronSchedule",
    "describe",
    "get_zone",
    "jitter_seconds",
    "normalize",
    "parse",
    "preview",
    "validate_interval",
    "zone_name",
]

MALFORMED = 47001
OUT_OF_RANGE = 47002
BOTH_DAYS_RESTRICTED = 47003
INTERVAL_TOO_SHORT = 47004
NEVER_FIRES = 47005
UNKNOWN_ZONE = 47006

MIN_INTERVAL_SECONDS = 5
# The last year searched (datetime's own limit): next_after returns None
# only when nothing fires up to the end of it.
MAX_YEAR = 9999
MAX_PREVIEW_COUNT = 1000
# The one limit on what a client may send, shared by the job form (the model
# fields' max_length), the API's preview and the console's preview: the
# parse caches are keyed on text no longer than this.
MAX_EXPRESSION_CHARS = 200
MAX_ZONE_CHARS = 64
# Names the zoneinfo database holds that are not zones a job can mean:
# the host's own setting, a tzcode helper and a placeholder without rules.
REFUSED_ZONES = frozenset({"localtime", "posixrules", "factory"})


def gettext_noop(text: str) -> str:
    """Marks text for the translation catalog; jobs.i18n translates it."""
    return text


class CronError(ValueError):
    """A user-facing cron problem: ``code`` is one of the 4700x codes above.
    ``message`` is English; ``template`` and ``params`` let a caller word it
    in another language (``template.format(**params) == message``)."""

    def __init__(self, code: int, template: str, /, **params):
        message = template.format(**params) if params else template
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.template = template
        self.params = params


# Parameters of CronError messages that are themselves words to translate.
TRANSLATED_PARAMS = frozenset({"field", "what", "hint"})


# --- normalisation -----------------------------------------------------------

ALIASES = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
    # Cronos knows these two as well; harmless to accept.
    "@every_minute": "0 * * * * *",
    "@every_second": "* * * * * *",
}

_FIELD_SPLIT = re.compile(r"[ \t]+")


def _shape(expr: str) -> str:
    """Shape only: aliases, field count, spacing, case. Values are checked by
    `CronSchedule`."""
    text = expr
    if not text:
        raise CronError(MALFORMED, gettext_noop("Enter a cron expression, e.g. 0 30 3 * * ?"))
    if not text.isascii():
        # Upper-casing would read non-ASCII letters as names (ſun → SUN).
        raise CronError(
            MALFORMED,
            gettext_noop("Use ASCII only: digits, the symbols * , - / ? L W # and names such as MON"),
        )
    if text.startswith("@"):
        expanded = ALIASES.get(text.lower())
        if expanded is None:
            known = ", ".join(sorted(a for a in ALIASES if not a.startswith("@every")))
            raise CronError(
                MALFORMED,
                gettext_noop("Unknown alias {alias!r}: use one of {known}"),
                alias=text,
                known=known,
            )
        return expanded
    fields = _FIELD_SPLIT.split(text)
    if len(fields) == 5:
        fields.insert(0, "0")
    elif len(fields) != 6:
        raise CronError(
            MALFORMED,
            gettext_noop(
                "Expected 6 fields (sec min hour day-of-month month day-of-week) or 5 without seconds, got {count}"
            ),
            count=len(fields),
        )
    return " ".join(fields).upper()


# The caches wrap plain functions rather than decorate them: mutmut does not
# mutate decorated functions, and these bodies are worth mutating
# (docs/development.md, "Mutation testing").
_normalize_text = lru_cache(maxsize=4096)(_shape)


def normalize(expr: str) -> str:
    """The stored form: six fields, single spaces, aliases expanded, letters
    upper-cased. Fully validated (raises CronError like `parse`)."""
    return parse(expr).expression


# --- field parsing -----------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    name: str
    first: int
    last: int
    names: dict[str, int] | None = None
    can_define_interval: bool = False


_MONTH_NAMES = {
    n: i + 1
    for i, n in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    )
}
_DOW_NAMES = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}


def editor_names() -> dict:
    """What the console's cron editor (static/jobs/cron-editor.js) reads
    from this module instead of keeping copies: the aliases it expands into
    its six fields, and the day-of-week names in their numbering (SUN = 0),
    whose day it shows for a typed weekday."""
    return {"aliases": dict(ALIASES), "days": list(_DOW_NAMES)}


SECOND = _Field("Second", 0, 59, can_define_interval=True)
MINUTE = _Field("Minute", 0, 59, can_define_interval=True)
HOUR = _Field("Hour", 0, 23, can_define_interval=True)
DAY_OF_MONTH = _Field("Day-of-month", 1, 31)
MONTH = _Field("Month", 1, 12, names=_MONTH_NAMES)
DAY_OF_WEEK = _Field("Day-of-week", 0, 7, names=_DOW_NAMES)

_ITEM = re.compile(r"(?P<lo>[0-9]+|[A-Z]+)(?:-(?P<hi>[0-9]+|[A-Z]+))?(?:/(?P<step>[0-9]+))?")
_SUNDAYS = (1 << 0) | (1 << 7)


def _bad(field: _Field, token: str, hint: str = "") -> CronError:
    hint = hint or _HINTS[field.name]
    return CronError(
        MALFORMED,
        gettext_noop("{field} field {token!r} is not valid cron syntax: {hint}"),
        field=field.name,
        token=token,
        hint=hint,
    )


_HINTS = {
    "Second": gettext_noop("use *, 0-59, a list (1,15), a range (10-20) or a step (*/5)"),
    "Minute": gettext_noop("use *, 0-59, a list (1,15), a range (10-20) or a step (*/5)"),
    "Hour": gettext_noop("use *, 0-23, a list (8,12), a range (9-17) or a step (*/2)"),
    "Day-of-month": gettext_noop("use *, ?, 1-31, a list, a range, a step, L, L-3, 15W or LW"),
    "Month": gettext_noop("use *, 1-12 or JAN-DEC, a list, a range or a step"),
    "Day-of-week": gettext_noop(
        "use *, ?, 0-7 or SUN-SAT (0 and 7 are Sunday), a list, a range, a step, 5L (last Friday) or 5#3 (third Friday)"
    ),
}
# The field names as messages show them (translated at the edge).
_FIELD_LABELS = (
    gettext_noop("Second"),
    gettext_noop("Minute"),
    gettext_noop("Hour"),
    gettext_noop("Day-of-month"),
    gettext_noop("Month"),
    gettext_noop("Day-of-week"),
)


def _number(field: _Field, token: str, text: str, low: int, high: int, what: str) -> int:
    """A plain number (no names) such as a step, an L- offset or a # index."""
    if not text.isdigit():
        raise _bad(field, token)
    value = int(text)
    if not low <= value <= high:
        raise CronError(
            OUT_OF_RANGE,
            gettext_noop("{field} {token!r}: {what} must be {low}-{high}, got {value}"),
            field=field.name,
            token=token,
            what=what,
            low=low,
            high=high,
            value=value,
        )
    if len(text) > 2:
        raise _bad(field, token, gettext_noop("numbers have at most two digits"))
    return value


def _value(field: _Field, token: str, text: str) -> int:
    if text.isdigit():
        return _number(field, token, text, field.first, field.last, gettext_noop("a value"))
    if field.names is None:
        raise _bad(field, token)
    value = field.names.get(text)
    if value is None:
        known = ", ".join(field.names)
        raise CronError(
            MALFORMED,
            gettext_noop("{field} {token!r}: unknown name {name!r}, use {known}"),
            field=field.name,
            token=token,
            name=text,
            known=known,
        )
    return value


def _range_bits(low: int, high: int, step: int) -> int:
    bits = 0
    for i in range(low, high + 1, step):
        bits |= 1 << i
    return bits


def _c_mod(a: int, b: int) -> int:
    # C#'s % truncates toward zero; Cronos's reversed-range arithmetic relies on it.
    return a - b * int(a / b)


def _span_bits(field: _Field, low: int, high: int, step: int) -> int:
    if high >= low:
        return _range_bits(low, high, step)
    # Reversed range (22-2, FRI-TUE): step on across the wrap, as Cronos does.
    last = field.last - 1 if field is DAY_OF_WEEK else field.last
    bits = _range_bits(low, last, step)
    restart = field.first + step - _c_mod(last - low, step) - 1
    return bits | _range_bits(restart, high, step)


def _star(field: _Field, token: str) -> int | None:
    """Bits for ``*``, ``?``, ``*/s``, ``?/s``; None if the token is not one."""
    if token in ("*", "?"):
        return _range_bits(field.first, field.last, 1)
    if token[:2] in ("*/", "?/"):
        step = _number(field, token, token[2:], 1, field.last, gettext_noop("the step"))
        return _range_bits(field.first, field.last, step)
    return None


def _list_bits(field: _Field, token: str) -> int:
    bits = 0
    for item in token.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise _bad(field, token)
        low = _value(field, token, match["lo"])
        if match["hi"] is not None:
            high = _value(field, token, match["hi"])
        elif match["step"] is not None:
            high = field.last
        else:
            high = low
        step = 1
        if match["step"] is not None:
            step = _number(field, token, match["step"], 1, field.last, gettext_noop("the step"))
        bits |= _span_bits(field, low, high, step)
    return bits


def _is_interval_token(token: str) -> bool:
    return token in ("*", "?") or "-" in token or "/" in token


def _mask_to_list(bits: int) -> tuple[int, ...]:
    return tuple(i for i in range(bits.bit_length()) if bits >> i & 1)


def _next_table(values: tuple[int, ...], last: int) -> tuple[int, ...]:
    """table[v] = smallest allowed value >= v, or -1; two slots of -1 padding."""
    table = [-1] * (last + 3)
    upcoming = -1
    for v in range(last, -1, -1):
        if v in values:
            upcoming = v
        table[v] = upcoming
    return tuple(table)


# --- calendar helpers --------------------------------------------------------

_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def _days_in_month(year: int, month: int) -> int:
    if month == 2 and _is_leap(year):
        return 29
    return _DAYS_IN_MONTH[month]


def _first_weekday(year: int, month: int) -> int:
    """Cron weekday of the 1st of the month, 1-7 where 7 (like 0) is Sunday:
    the callers take weekdays modulo 7."""
    return date(year, month, 1).isoweekday()


# --- H: values from a stable hash --------------------------------------------

_HASHED = re.compile(r"H(?:\((?P<lo>[0-9]+)-(?P<hi>[0-9]+)\))?(?:/(?P<step>[0-9]+))?")
# Names that contain the letter H (THU) are not a hash.
_NAMES_WITH_H = re.compile(r"THU")


def _stable_hash(seed: str, salt: str) -> int:
    digest = hashlib.sha256(f"{seed}\x00{salt}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _hashed_token(field: _Field, token: str, seed: str) -> str:
    """The plain token an ``H`` token stands for with this seed; other
    tokens unchanged. ``H`` mixed with anything else is 47001."""
    if "H" not in _NAMES_WITH_H.sub("", token):
        return token
    match = _HASHED.fullmatch(token)
    if match is None:
        raise _bad(
            field,
            token,
            gettext_noop(
                "H stands alone in a field, with an optional range and step: H, H(0-29), H/15 or H(0-29)/10; it does not combine with lists, L, W or #"
            ),
        )
    if match["lo"] is not None:
        low = _number(field, token, match["lo"], field.first, field.last, gettext_noop("a value"))
        high = _number(field, token, match["hi"], field.first, field.last, gettext_noop("a value"))
        if high < low:
            raise _bad(field, token, gettext_noop("the range after H goes from low to high, e.g. H(0-29)"))
    else:
        low = field.first
        # Every month has days 1-28; day-of-week 7 is Sunday again.
        high = 28 if field is DAY_OF_MONTH else field.last - 1 if field is DAY_OF_WEEK else field.last
    value = _stable_hash(seed, field.name)
    if match["step"] is None:
        return str(low + value % (high - low + 1))
    step = _number(field, token, match["step"], 1, field.last, gettext_noop("the step"))
    start = low + value % min(step, high - low + 1)
    return f"{start}-{high}/{step}"


def jitter_seconds(seed: str, when: datetime, limit: int) -> int:
    """A stable pseudo-random delay of 0..limit seconds for one fire of a
    job: the same job and scheduled time always give the same delay."""
    if limit <= 0:
        return 0
    return _stable_hash(seed, iso_utc(when)) % (limit + 1)


# --- the schedule ------------------------------------------------------------


class CronSchedule:
    """A parsed, validated expression. Get one from `parse` (cached)."""

    __slots__ = (
        "_day_cache",
        "_dom_bits",
        "_dom_last",
        "_dow_bits",
        "_dow_last",
        "_hour_next",
        "_last_offset",
        "_min_next",
        "_month_next",
        "_nearest_weekday",
        "_nth",
        "_sec_next",
        "_w_day",
        "expression",
        "fields",
        "hashed",
        "hours",
        "is_interval_based",
        "minutes",
        "months",
        "seconds",
    )

    def __init__(self, expression: str, seed: str | None = None):
        """`expression` as normalised, kept as written (with any H);
        `fields` are the values the schedule fires on, H resolved by `seed`."""
        self.expression = expression
        written = expression.split(" ")
        self.fields = tuple(
            _hashed_token(field, token, seed or "")
            for field, token in zip(
                (SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK), written, strict=True
            )
        )
        self.hashed = tuple(written) != self.fields
        sec, minute, hour, dom, month, dow = self.fields
        self.is_interval_based = any(_is_interval_token(t) for t in (sec, minute, hour))

        second_bits = self._generic(SECOND, sec)
        minute_bits = self._generic(MINUTE, minute)
        hour_bits = self._generic(HOUR, hour)
        month_bits = self._generic(MONTH, month)
        self._parse_day_of_month(dom)
        self._parse_day_of_week(dow)

        if dom not in ("*", "?") and dow not in ("*", "?"):
            raise CronError(
                BOTH_DAYS_RESTRICTED,
                gettext_noop(
                    "Day-of-month ({dom}) and day-of-week ({dow}) cannot both be set: use ? in one of them"
                ),
                dom=dom,
                dow=dow,
            )

        self.seconds = _mask_to_list(second_bits)
        self.minutes = _mask_to_list(minute_bits)
        self.hours = _mask_to_list(hour_bits)
        self.months = _mask_to_list(month_bits)
        self._sec_next = _next_table(self.seconds, 59)
        self._min_next = _next_table(self.minutes, 59)
        self._hour_next = _next_table(self.hours, 23)
        self._month_next = _next_table(self.months, 12)
        self._day_cache: dict[tuple[int, int], tuple[int, ...]] = {}

        if not self._can_fire():
            raise CronError(
                NEVER_FIRES,
                gettext_noop("{expression!r} can never fire: {why}"),
                expression=expression,
                why=self._why_never(),
            )

    def __repr__(self) -> str:
        return f"CronSchedule({self.expression!r})"

    # -- parsing

    @staticmethod
    def _generic(field: _Field, token: str) -> int:
        bits = _star(field, token)
        return bits if bits is not None else _list_bits(field, token)

    def _parse_day_of_month(self, token: str) -> None:
        field = DAY_OF_MONTH
        self._dom_last = False
        self._last_offset = 0
        self._nearest_weekday = False
        self._w_day = 0
        bits = _star(field, token)
        if bits is None and token.startswith("L"):
            match = re.fullmatch(r"L(?:-([0-9]+))?(W?)", token)
            if match is None:
                raise _bad(field, token)
            self._dom_last = True
            if match[1] is not None:
                self._last_offset = _number(
                    field, token, match[1], 0, 30, gettext_noop("the offset after L-")
                )
            self._nearest_weekday = bool(match[2])
            bits = _range_bits(1, 31, 1)
        elif bits is None and token.endswith("W"):
            self._nearest_weekday = True
            self._w_day = _value(field, token, token[:-1]) if token[:-1].isdigit() else -1
            if self._w_day < 0:
                raise _bad(field, token, gettext_noop("W follows a single day, e.g. 15W, or L (LW)"))
            bits = 1 << self._w_day
        elif bits is None:
            bits = _list_bits(field, token)
        self._dom_bits = bits

    def _parse_day_of_week(self, token: str) -> None:
        field = DAY_OF_WEEK
        self._dow_last = False
        self._nth = 0
        bits = _star(field, token)
        special = re.fullmatch(r"([0-9]+|[A-Z]+)(?:(L)|#([0-9]*))", token) if bits is None else None
        if special is not None and special[2]:
            bits = 1 << _value(field, token, special[1])
            self._dow_last = True
        elif special is not None:
            bits = 1 << _value(field, token, special[1])
            self._nth = _number(field, token, special[3], 1, 5, gettext_noop("the number after #"))
        elif bits is None and ("#" in token or token.endswith("L")):
            raise _bad(
                field, token, "L and # follow a single day, e.g. 5L (last Friday) or 5#3 (third Friday)"
            )
        elif bits is None:
            bits = _list_bits(field, token)
        if bits & _SUNDAYS:
            bits |= _SUNDAYS
        self._dow_bits = bits

    # -- calendar

    def _days(self, days_in_month: int, first_weekday: int) -> tuple[int, ...]:
        """Matching days of a month, which depend only on its length and the
        weekday of its 1st (so there are at most 28 distinct answers)."""
        key = (days_in_month, first_weekday)
        cached = self._day_cache.get(key)
        if cached is not None:
            return cached
        if self._dom_last:
            day = days_in_month - self._last_offset
            candidates = [day] if day >= 1 else []
        elif self._nearest_weekday:
            candidates = [self._w_day] if self._w_day <= days_in_month else []
        else:
            candidates = [d for d in _mask_to_list(self._dom_bits) if d <= days_in_month]
        if self._nearest_weekday:
            candidates = [self._nearest(d, days_in_month, first_weekday) for d in candidates]
        days = []
        for day in candidates:
            weekday = (first_weekday + day - 1) % 7
            if not self._dow_bits >> weekday & 1:
                continue
            if self._dow_last and day + 7 <= days_in_month:
                continue
            if self._nth and (day - 1) // 7 + 1 != self._nth:
                continue
            days.append(day)
        result = tuple(days)
        self._day_cache[key] = result
        return result

    @staticmethod
    def _nearest(day: int, days_in_month: int, first_weekday: int) -> int:
        weekday = (first_weekday + day - 1) % 7
        if weekday == 6:  # Saturday: Friday before, unless that leaves the month
            return day + 2 if day == 1 else day - 1
        if weekday == 0:  # Sunday: Monday after, unless that leaves the month
            return day - 2 if day == days_in_month else day + 1
        return day

    def _can_fire(self) -> bool:
        for month in self.months:
            lengths = (28, 29) if month == 2 else (_DAYS_IN_MONTH[month],)
            for length in lengths:
                for first_weekday in range(7):
                    if self._days(length, first_weekday):
                        return True
        return False

    def _why_never(self) -> str:
        # Only day-of-month can be the cause: with day-of-week restricted,
        # day-of-month is free (47003), and every weekday form (n#5 included)
        # occurs in some month of at least 29 days, which every month list has.
        names = ", ".join(_MONTH_LABELS[m] for m in self.months)
        return f"day-of-month {self.fields[3]} never falls in {names}"

    # -- search in local wall time

    def _time_at_or_after(self, hour: int, minute: int, second: int) -> tuple[int, int, int] | None:
        h = self._hour_next[hour]
        if h < 0:
            return None
        if h == hour:
            m = self._min_next[minute]
            if m == minute:
                s = self._sec_next[second]
                if s >= 0:
                    return hour, minute, s
                m = self._min_next[minute + 1]
            if m >= 0:
                return hour, m, self.seconds[0]
            h = self._hour_next[hour + 1]
            if h < 0:
                return None
        return h, self.minutes[0], self.seconds[0]

    def _find(self, start: datetime) -> datetime | None:
        """Earliest matching naive wall time strictly after `start` (whole
        seconds; only its fields are read, so an aware `start` is fine).
        OverflowError after the last second of year 9999 (`_next` reads it
        as "past the horizon")."""
        start = start + _ONE_SECOND
        year, month, day = start.year, start.month, start.day
        same_day_time = (start.hour, start.minute, start.second)
        if self._month_next[month] != month:
            same_day_time = None
            day = 1
            month = self._month_next[month]
            if month < 0:
                month = self.months[0]
                year += 1
        while year <= MAX_YEAR:
            days = self._days(_days_in_month(year, month), _first_weekday(year, month))
            for i in range(bisect_left(days, day), len(days)):
                found_day = days[i]
                if found_day == day and same_day_time is not None:
                    t = self._time_at_or_after(*same_day_time)
                    if t is None:
                        continue
                    return datetime(year, month, found_day, *t)
                return datetime(year, month, found_day, self.hours[0], self.minutes[0], self.seconds[0])
            same_day_time = None
            day = 1
            month = self._month_next[month + 1]
            if month < 0:
                month = self.months[0]
                year += 1
        return None

    # -- time zones

    def _next(self, after: datetime, zone: tzinfo) -> tuple[datetime, str | None] | None:
        """Next fire (aware UTC) strictly after `after`, with a DST mark:
        None, "skipped" (wall time fell in a gap) or "repeated" (fall-back).
        None as well when the answer lies past the end of year 9999."""
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError("after must be a timezone-aware datetime")
        try:
            return self._next_unchecked(after, zone)
        except OverflowError:
            # A wall time or an offset pushed past datetime's range: the
            # answer, if any, is beyond the horizon.
            return None

    def _next_unchecked(self, after: datetime, zone: tzinfo) -> tuple[datetime, str | None] | None:
        start = after.astimezone(UTC).replace(microsecond=0)
        if zone is UTC:
            found = self._find(start)
            return None if found is None else (found.replace(tzinfo=UTC), None)

        # Searches below are strictly after `wall`: one second before a
        # window's first second makes the search include it.
        local = start.astimezone(zone)
        wall = local.replace(tzinfo=None, fold=0)
        first, second = _offsets(zone, wall)
        if first > second:
            # Start inside the repeated hour. Its wall-clock window is
            # [transition + standard offset, transition + daylight offset).
            transition = _transition(zone, wall - first, wall - second, second)
            repeat_start, repeat_end = transition + second, transition + first
            if local.fold == 0:
                found = self._find(wall)
                if found is not None and found < repeat_end:
                    return _aware(found - first), "repeated"
                wall = repeat_start - _ONE_SECOND
            if self.is_interval_based:
                found = self._find(wall)
                if found is not None and found < repeat_end:
                    return _aware(found - second), "repeated"
            wall = repeat_end - _ONE_SECOND

        found = self._find(wall)
        if found is None:
            return None
        first, second = _offsets(zone, found)
        if first > second:
            return _aware(found - first), "repeated"
        if first < second:
            # In a spring-forward gap: fire at the first instant after it.
            return _aware(_transition(zone, found - second, found - first, second)), "skipped"
        return _aware(found - first), None

    def next_after(self, after: datetime, tz: ZoneInfo | tzinfo | str) -> datetime | None:
        """The next fire time (aware, UTC, whole seconds) strictly after
        `after`, reading the fields in `tz`; None only past year 9999."""
        result = self._next(after, _zone(tz))
        return None if result is None else result[0]

    def next_n(self, after: datetime, tz: ZoneInfo | tzinfo | str, n: int) -> list[datetime]:
        return [when for when, _ in self._iter(after, _zone(tz), n)]

    def _iter(self, after: datetime, zone: tzinfo, n: int):
        for _ in range(n):
            result = self._next(after, zone)
            if result is None:
                return
            yield result
            after = result[0]

    def walk(
        self, after: datetime, tz: ZoneInfo | tzinfo | str, *, days=None, jitter: int = 0, seed: str = ""
    ):
        """The fires strictly after `after`, with a calendar and jitter:
        yields `Fire`s in schedule order, a `Skipped` for each local date
        `days` refuses (one per date), and ends with `Uncovered` at the
        first date past the calendar's data, or after DAY_SEARCH_LIMIT days
        of refused dates in a row (the rule leaves nothing to fire on).

        `days` (jobs.workdays.DayRule) has `verdict(date) -> (fires, note)`
        and `covered_until`; the day of a fire is its local date in `tz`.
        `jitter`: each fire is delayed by `jitter_seconds(seed, time,
        jitter)`, so the search starts that much earlier."""
        zone = _zone(tz)
        cursor = after - timedelta(seconds=jitter) if jitter > 0 else after
        covered = getattr(days, "covered_until", None)
        refused_since = None
        last_refused = None
        while True:
            result = self._next(cursor, zone)
            if result is None:
                return
            when, mark = result
            note = ""
            if days is not None:
                day = when.astimezone(zone).date()
                if covered is not None and day > covered:
                    yield Uncovered(day)
                    return
                fires, note = days.verdict(day)
                if not fires:
                    if day != last_refused:
                        yield Skipped(day, note)
                        last_refused = day
                    refused_since = refused_since or day
                    if (day - refused_since).days > DAY_SEARCH_LIMIT:
                        return
                    # Nothing else fires on this date: go on from its end.
                    cursor = max(when, _end_of_day(day, zone))
                    continue
                refused_since = None
            cursor = when
            at = when + timedelta(seconds=jitter_seconds(seed, when, jitter)) if jitter > 0 else when
            if at > after:
                yield Fire(at=at, scheduled=when, mark=mark, note=note)

    def count_between(
        self, after: datetime, end: datetime, tz: ZoneInfo | tzinfo | str, *, days=None
    ) -> tuple[int, datetime | None]:
        """How many fires `walk(after, tz, days=days)` yields before `end`
        (no jitter), and the last of them (None for none), without walking
        them: a day whose zone keeps one offset all day fires on
        hours × minutes × seconds of the fields (cut at `after` and `end` on
        the first and last day) if its date matches, L, W and # included; a
        day with a clock change is walked. A page counting a series every
        5 s for 7 days reads about 8 days, not 120,960 fires."""
        zone = _zone(tz)
        after, end = after.astimezone(UTC).replace(microsecond=0), end.astimezone(UTC)
        if end <= after:
            return 0, None
        if end.year >= MAX_YEAR:
            return self._count_walking(after, end, zone, days)
        covered = getattr(days, "covered_until", None)
        count, last, cursor = 0, None, after
        day = after.astimezone(zone).date()
        first_day, last_day = day, end.astimezone(zone).date()
        walk_next = False
        while day <= last_day:
            plain = _plain_day(zone, day)
            if not plain or walk_next:
                # Walk on from the walk's own state (a fire, or `after`) to
                # the next day's start: a clock change's folds and gaps, and
                # the day after one, on which a fire moved out of a gap that
                # ends at midnight lands (America/Nuuk: 23:00 → 00:00).
                walk_next = not plain
                bound = min(end, _day_start(day + timedelta(days=1), zone))
                for step in self.walk(cursor, zone, days=days):
                    if isinstance(step, Uncovered):
                        return count, last
                    if isinstance(step, Fire):
                        if step.at >= bound:
                            break
                        count, last, cursor = count + 1, step.at, step.at
                day += timedelta(days=1)
                continue
            low = _seconds_of_day(after.astimezone(zone)) + 1 if day == first_day else 0
            high = _seconds_of_day(end.astimezone(zone), up=True) if day == last_day else 86400
            found = self._times_before(high) - self._times_before(low) if self._matches(day) else 0
            if found and days is not None:
                if covered is not None and day > covered:
                    return count, last
                found = found if days.verdict(day)[0] else 0
            if found:
                wall = datetime.combine(day, self._nth_time(self._times_before(high) - 1))
                count, last = count + found, wall.replace(tzinfo=zone).astimezone(UTC)
                cursor = last
            day += timedelta(days=1)
        return count, last

    def _count_walking(self, after, end, zone, days) -> tuple[int, datetime | None]:
        count, last = 0, None
        for step in self.walk(after, zone, days=days):
            if isinstance(step, Uncovered) or (isinstance(step, Fire) and step.at >= end):
                break
            if isinstance(step, Fire):
                count, last = count + 1, step.at
        return count, last

    def _matches(self, day: date) -> bool:
        if self._month_next[day.month] != day.month:
            return False
        days = self._days(_days_in_month(day.year, day.month), _first_weekday(day.year, day.month))
        return day.day in days

    def _times_before(self, second_of_day: int) -> int:
        """How many of the day's matching times come before that second."""
        hour, rest = divmod(second_of_day, 3600)
        minute, second = divmod(rest, 60)
        per_minute = len(self.seconds)
        per_hour = len(self.minutes) * per_minute
        count = bisect_left(self.hours, hour) * per_hour
        if hour < 24 and self._hour_next[hour] == hour:
            count += bisect_left(self.minutes, minute) * per_minute
            if self._min_next[minute] == minute:
                count += bisect_left(self.seconds, second)
        return count

    def _nth_time(self, index: int) -> time:
        per_minute = len(self.seconds)
        per_hour = len(self.minutes) * per_minute
        return time(
            self.hours[index // per_hour],
            self.minutes[index // per_minute % len(self.minutes)],
            self.seconds[index % per_minute],
        )


@dataclass(frozen=True)
class Fire:
    at: datetime  # when it fires: UTC, jitter included
    scheduled: datetime  # the schedule's own time, UTC
    mark: str | None  # DST: None, "skipped" or "repeated"
    note: str = ""  # from the calendar: a working day on a weekend


@dataclass(frozen=True)
class Skipped:
    day: date  # a local date the calendar rule refuses
    reason: str


@dataclass(frozen=True)
class Uncovered:
    day: date  # the first local date the calendar has no data for


# How many days of refused dates in a row the search reads before it gives
# up (a calendar that leaves the rule nothing to fire on).
DAY_SEARCH_LIMIT = 400


def _end_of_day(day: date, zone: tzinfo) -> datetime:
    """The last second of a local date, aware UTC."""
    following = datetime.combine(day + timedelta(days=1), datetime.min.time())
    return (following.replace(tzinfo=zone).astimezone(UTC) - _ONE_SECOND).astimezone(UTC)


def _start_of_next_day(day: date, zone: tzinfo) -> datetime:
    """The first instant of the local date after `day`, aware UTC."""
    following = datetime.combine(day + timedelta(days=1), datetime.min.time())
    return following.replace(tzinfo=zone).astimezone(UTC)


_ONE_SECOND = timedelta(seconds=1)


def _seconds_of_day(local: datetime, *, up: bool = False) -> int:
    """The second of the day of a wall time; `up`: rounded up, not down."""
    return local.hour * 3600 + local.minute * 60 + local.second + (1 if up and local.microsecond else 0)


def _day_start(day: date, zone: tzinfo) -> datetime:
    """A local date's midnight (its first reading), aware UTC."""
    return datetime.combine(day, time()).replace(tzinfo=zone).astimezone(UTC)


def plain_days(tz: ZoneInfo | tzinfo | str, after: datetime, end: datetime) -> bool:
    """Whether every local date from `after`'s to `end`'s, and the one after
    (a fire moved out of a gap that ends at midnight lands there), keeps one
    UTC offset all day in the zone: then count_between counts without
    walking."""
    zone = _zone(tz)
    day, last_day = after.astimezone(zone).date(), end.astimezone(zone).date() + timedelta(days=1)
    while day <= last_day:
        if not _plain_day(zone, day):
            return False
        day += timedelta(days=1)
    return True


@lru_cache(maxsize=4096)
def _plain_day(zone: tzinfo, day: date) -> bool:
    """Whether the zone keeps one UTC offset through the whole local date
    (24 hours from midnight to midnight, no gap or fold): then its wall
    times and instants go one to one. Sampled hourly: a zone's changes are
    months apart."""
    midnight = datetime.combine(day, time())
    following = midnight + timedelta(days=1)
    if any(len(set(_offsets(zone, wall))) > 1 for wall in (midnight, following)):
        return False
    start = midnight.replace(tzinfo=zone).astimezone(UTC)
    if following.replace(tzinfo=zone).astimezone(UTC) - start != timedelta(days=1):
        return False
    offset = start.astimezone(zone).utcoffset()
    return all((start + timedelta(hours=h)).astimezone(zone).utcoffset() == offset for h in range(1, 25))


def interval_walk(first: datetime, step: timedelta, tz: ZoneInfo | tzinfo | str, *, days=None):
    """The fires of an interval schedule from `first` on, on its grid (first
    + k·step), with a calendar rule (`days`, as for CronSchedule.walk):
    yields `Fire`s, a `Skipped` for each local date the rule refuses, and
    ends with `Uncovered` at the first date past the calendar's data, or
    after DAY_SEARCH_LIMIT days of refused dates in a row. A refused date's
    slots are all skipped: the next fire is the grid's first slot of the
    next date the rule allows (docs/cron.md)."""
    zone = _zone(tz)
    covered = getattr(days, "covered_until", None)
    when, refused_since = first, None
    while True:
        try:
            day = when.astimezone(zone).date()
        except OverflowError:
            return
        fires, note = (True, "") if days is None else days.verdict(day)
        if days is not None and covered is not None and day > covered:
            yield Uncovered(day)
            return
        if fires:
            refused_since = None
            yield Fire(at=when, scheduled=when, mark=None, note=note)
            when += step
            continue
        yield Skipped(day, note)
        refused_since = refused_since or day
        if (day - refused_since).days > DAY_SEARCH_LIMIT:
            return
        # The grid's first slot at or after the next date's midnight (a
        # slot inside the date's last second, 23:59:59.5, is still the date).
        when += step * max(1, -((when - _start_of_next_day(day, zone)) // step))


_MONTH_LABELS = ("", *(n.title() for n in _MONTH_NAMES))


def _aware(naive_utc: datetime) -> datetime:
    return naive_utc.replace(tzinfo=UTC)


def _offsets(zone: tzinfo, wall: datetime) -> tuple[timedelta, timedelta]:
    """UTC offsets of a naive wall time (fold=0) in its first and second
    reading. Equal: ordinary time; first > second: repeated (fall back);
    first < second: gap."""
    return wall.replace(tzinfo=zone).utcoffset(), wall.replace(tzinfo=zone, fold=1).utcoffset()


def _transition(zone: tzinfo, before: datetime, after: datetime, offset_after: timedelta) -> datetime:
    """First whole-second UTC instant in (before, after] whose offset is
    `offset_after` (naive UTC in, naive UTC out). Transitions are rare, so a
    binary search over at most a few hours of seconds is plenty."""
    low, high = before, after
    while high - low > _ONE_SECOND:
        middle = low + timedelta(seconds=(high - low).total_seconds() // 2)
        if _aware(middle).astimezone(zone).utcoffset() == offset_after:
            high = middle
        else:
            low = middle
    return high


# --- public helpers ----------------------------------------------------------


# Jobs written with H each compile their own schedule (keyed by seed).
_compile = lru_cache(maxsize=8192)(CronSchedule)


def parse(expr: str, seed: str | None = None) -> CronSchedule:
    """Validate and compile an expression (cached on its normalised form and,
    when it uses H, on `seed`: the job's name, which picks the H values).
    Longer than MAX_EXPRESSION_CHARS, before or after normalising, is 47001:
    the caches only ever hold bounded text."""
    if not isinstance(expr, str):
        raise CronError(MALFORMED, gettext_noop("The cron expression must be text"))
    text = expr.strip()
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CronError(
            MALFORMED,
            gettext_noop("The cron expression is longer than {limit} characters"),
            limit=MAX_EXPRESSION_CHARS,
        )
    if text.isascii():
        # The cache key: spacing and case do not make a new entry.
        text = " ".join(_FIELD_SPLIT.split(text)).upper()
    normalized = _normalize_text(text)
    if len(normalized) > MAX_EXPRESSION_CHARS:
        raise CronError(
            MALFORMED,
            gettext_noop("The cron expression is longer than {limit} characters once normalised"),
            limit=MAX_EXPRESSION_CHARS,
        )
    if "H" not in normalized.replace("THU", ""):
        return _compile(normalized)
    return _compile(normalized, seed if isinstance(seed, str) else "")


_UTC_NAMES = {"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Etc/Zulu", "Zulu"}


@lru_cache(maxsize=1)
def _zone_names() -> dict[str, str]:
    """casefolded name → the canonical IANA spelling, for every zone a job may use."""
    return {name.casefold(): name for name in available_timezones() if name.casefold() not in REFUSED_ZONES}


def known_zones() -> list[str]:
    """Every zone name a job may use, canonical spelling, sorted (the job form's list)."""
    return sorted(_zone_names().values())


def zone_name(name: str | None) -> str:
    """The canonical spelling of a zone name (`europe/berlin` → `Europe/Berlin`);
    empty or left out means UTC, everywhere (form, API, command line). Unknown
    names, names longer than MAX_ZONE_CHARS and `localtime`, `posixrules`,
    `Factory` are CronError 47006."""
    if name is None:
        return "UTC"
    if not isinstance(name, str):
        raise CronError(
            UNKNOWN_ZONE, gettext_noop("The time zone must be an IANA name such as Europe/Berlin")
        )
    text = name.strip()
    if not text:
        return "UTC"
    if len(text) > MAX_ZONE_CHARS:
        raise CronError(
            UNKNOWN_ZONE,
            gettext_noop("A time zone name has at most {limit} characters"),
            limit=MAX_ZONE_CHARS,
        )
    canonical = _zone_names().get(text.casefold())
    if canonical is None:
        raise CronError(
            UNKNOWN_ZONE,
            gettext_noop("Unknown time zone {zone!r}: use an IANA name such as America/New_York"),
            zone=text,
        )
    return canonical


def get_zone(name: str) -> ZoneInfo:
    """The ZoneInfo for an IANA name, matched case-insensitively; CronError
    47006 if unknown, refused or empty (callers that mean UTC by an empty
    name pass it through `zone_name` first)."""
    if not isinstance(name, str) or not name.strip():
        raise CronError(UNKNOWN_ZONE, gettext_noop("Choose a time zone, e.g. Europe/Berlin or UTC"))
    return _load_zone(zone_name(name))


def _read_zone(canonical: str) -> ZoneInfo:
    try:
        return ZoneInfo(canonical)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(
            UNKNOWN_ZONE,
            gettext_noop("Unknown time zone {zone!r}: use an IANA name such as America/New_York"),
            zone=canonical,
        ) from None


# Keyed on canonical names only: a few hundred entries at most.
_load_zone = lru_cache(maxsize=1024)(_read_zone)


def is_utc(zone: tzinfo) -> bool:
    """UTC or one of its names (Etc/UTC, Zulu, …): local time is UTC all year."""
    return zone is UTC or getattr(zone, "key", None) in _UTC_NAMES


def _zone(tz: ZoneInfo | tzinfo | str) -> tzinfo:
    if isinstance(tz, str):
        tz = get_zone(tz)
    if isinstance(tz, ZoneInfo) and is_utc(tz):
        return UTC
    return tz


def validate_interval(seconds) -> int:
    """A whole number of seconds, at least 5 (47004); other input is 47001."""
    if isinstance(seconds, bool):
        raise CronError(MALFORMED, gettext_noop("The interval must be a whole number of seconds"))
    if isinstance(seconds, float):
        if not seconds.is_integer():
            raise CronError(
                MALFORMED,
                gettext_noop("The interval must be a whole number of seconds, got {seconds}"),
                seconds=seconds,
            )
        seconds = int(seconds)
    elif isinstance(seconds, str):
        text = seconds.strip()
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            raise CronError(
                MALFORMED,
                gettext_noop("The interval must be a whole number of seconds, got {seconds!r}"),
                seconds=seconds,
            )
        seconds = int(text)
    elif not isinstance(seconds, int):
        raise CronError(MALFORMED, gettext_noop("The interval must be a whole number of seconds"))
    if seconds < MIN_INTERVAL_SECONDS:
        raise CronError(
            INTERVAL_TOO_SHORT,
            gettext_noop("The interval must be at least {minimum} seconds, got {seconds}"),
            minimum=MIN_INTERVAL_SECONDS,
            seconds=seconds,
        )
    return seconds


# --- descriptions and previews -----------------------------------------------

_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_DAY_LABELS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# For descriptions in other languages: cron-descriptor's translations leave
# L-n out and word W, # and the day and month names in English, so the day
# part is ours, from these phrases (the translate callable words them).
_ORDINAL_WORDS = {
    1: gettext_noop("first"),
    2: gettext_noop("second (ordinal)"),
    3: gettext_noop("third"),
    4: gettext_noop("fourth"),
    5: gettext_noop("fifth"),
}
_DAY_WORDS = (
    gettext_noop("Sunday"),
    gettext_noop("Monday"),
    gettext_noop("Tuesday"),
    gettext_noop("Wednesday"),
    gettext_noop("Thursday"),
    gettext_noop("Friday"),
    gettext_noop("Saturday"),
    gettext_noop("Sunday"),
)
_MONTH_WORDS = (
    "",
    gettext_noop("January"),
    gettext_noop("February"),
    gettext_noop("March"),
    gettext_noop("April"),
    gettext_noop("May"),
    gettext_noop("June"),
    gettext_noop("July"),
    gettext_noop("August"),
    gettext_noop("September"),
    gettext_noop("October"),
    gettext_noop("November"),
    gettext_noop("December"),
)


def _named_values(text: str, names: dict[str, int], words: tuple[str, ...], translate) -> str:
    """A list or range of values (1-5, MON,WED) with each value worded."""

    def word(match: re.Match) -> str:
        token = match[0]
        index = int(token) if token.isdigit() else names.get(token)
        return translate(words[index]) if index is not None and 0 <= index < len(words) else token

    return re.sub(r"[0-9]+|[A-Z]+", word, text)


def _day_parts(schedule: CronSchedule, translate) -> list[str]:
    """The day-of-month, day-of-week and month part of a description, in the
    phrases of the catalog (L, L-n, nW, LW, L-nW, n#k, nL)."""
    _, _, _, dom, month, dow = schedule.fields
    parts = []
    if schedule._dom_last:
        offset = schedule._last_offset
        if schedule._nearest_weekday:
            parts.append(
                translate(
                    gettext_noop("on the weekday nearest {offset} days before the last day of the month")
                ).format(offset=offset)
                if offset
                else translate(gettext_noop("on the last weekday of the month"))
            )
        elif offset:
            parts.append(
                translate(gettext_noop("on the {offset}th day before the last day of the month")).format(
                    offset=offset
                )
            )
        else:
            parts.append(translate(gettext_noop("on the last day of the month")))
    elif schedule._nearest_weekday:
        parts.append(
            translate(gettext_noop("on the weekday nearest day {day} of the month")).format(
                day=schedule._w_day
            )
        )
    elif dom not in ("*", "?"):
        parts.append(translate(gettext_noop("on day {days} of the month")).format(days=dom))
    if schedule._nth or schedule._dow_last:
        weekday = translate(_DAY_WORDS[schedule._dow_bits.bit_length() - 1])
        if schedule._dow_last:
            parts.append(
                translate(gettext_noop("on the last {weekday} of the month")).format(weekday=weekday)
            )
        else:
            parts.append(
                translate(gettext_noop("on the {which} {weekday} of the month")).format(
                    which=translate(_ORDINAL_WORDS[schedule._nth]), weekday=weekday
                )
            )
    elif dow not in ("*", "?"):
        days = dow if "/" in dow or "*" in dow else _named_values(dow, _DOW_NAMES, _DAY_WORDS, translate)
        parts.append(translate(gettext_noop("on {days}")).format(days=days))
    if month not in ("*", "?"):
        names = (
            month
            if "/" in month or "*" in month
            else _named_values(month, _MONTH_NAMES, _MONTH_WORDS, translate)
        )
        parts.append(translate(gettext_noop("only in {months}")).format(months=names))
    return parts


def _day_phrase(schedule: CronSchedule) -> str | None:
    """Our own wording for the day forms cron-descriptor gets wrong."""
    dom = schedule.fields[3]
    match = re.fullmatch(r"L-([0-9]+)W", dom)
    if match:
        n = int(match[1])
        return f"on the weekday nearest {n} day{'s' if n != 1 else ''} before the last day of the month"
    return None


def _fallback_description(schedule: CronSchedule) -> str:
    sec, minute, hour, dom, month, dow = schedule.fields
    parts = [f"At second {sec}, minute {minute}, hour {hour}"]
    if schedule._dom_last:
        offset = schedule._last_offset
        day = (
            "the last day" if not offset else f"{offset} day{'s' if offset != 1 else ''} before the last day"
        )
        parts.append(
            ("on the weekday nearest " if schedule._nearest_weekday else "on ") + day + " of the month"
        )
    elif schedule._nearest_weekday:
        parts.append(f"on the weekday nearest day {schedule._w_day} of the month")
    elif dom not in ("*", "?"):
        parts.append(f"on day-of-month {dom}")
    if schedule._nth or schedule._dow_last:
        # A single day: its bit, or bits 0 and 7 for Sunday (label 7 is Sunday too).
        weekday = _DAY_LABELS[schedule._dow_bits.bit_length() - 1]
        which = "last" if schedule._dow_last else _ORDINALS[schedule._nth]
        parts.append(f"on the {which} {weekday} of the month")
    elif dow not in ("*", "?"):
        parts.append(f"on day-of-week {dow}")
    if month != "*" and month != "?":
        parts.append(f"in month {month}")
    return ", ".join(parts)


def describe(expr: str, *, locale: str = "en_US", translate=None, seed: str | None = None) -> str:
    """Human-readable text for an expression (raises CronError if invalid),
    with any H read as the value `seed` picks. Another `locale`
    (cron-descriptor's, e.g. zh_CN) needs `translate`, which words this
    module's own phrases (gettext)."""
    schedule = parse(expr, seed)
    phrase = _day_phrase(schedule)
    try:
        from cron_descriptor import CasingTypeEnum, ExpressionDescriptor, Options

        options = Options()
        options.use_24hour_time_format = True
        options.casing_type = CasingTypeEnum.Sentence
        options.day_of_week_start_index_zero = True
        if locale != "en_US" and translate is not None:
            options.locale_code = locale
            fields = list(schedule.fields)
            fields[3:6] = ["*", "*", "*"]
            time_only = ExpressionDescriptor(" ".join(fields), options).get_description()
            return translate(gettext_noop(", ")).join([time_only, *_day_parts(schedule, translate)])
        text = ExpressionDescriptor(" ".join(schedule.fields), options).get_description()
        if phrase:
            # It reads L-3W as L-3; describe the day part ourselves.
            fields = list(schedule.fields)
            fields[3] = "*"
            time_only = ExpressionDescriptor(" ".join(fields), options).get_description()
            text = f"{time_only}, {phrase}"
        return text
    except Exception:
        return _fallback_description(schedule)


def iso_utc(when: datetime) -> str:
    """ISO 8601 in UTC with a Z, whole seconds; the year always has four
    digits (strftime's %Y drops the zeros of years before 1000)."""
    return when.astimezone(UTC).replace(tzinfo=None, microsecond=0).isoformat() + "Z"


def _warnings(schedule: CronSchedule, translate) -> list[str]:
    warnings = []
    if len(schedule.seconds) == 60:
        warnings.append(translate(gettext_noop("The seconds field is *: this fires every second.")))
    elif len(schedule.seconds) > 1:
        warnings.append(
            translate(gettext_noop("The seconds field {field} fires {count} times a minute.")).format(
                field=schedule.fields[0], count=len(schedule.seconds)
            )
        )
    return warnings


def preview(
    expr: str,
    tz_name: str,
    *,
    after: datetime,
    count: int = 5,
    locale: str = "en_US",
    translate=None,
    seed: str | None = None,
    days=None,
    jitter: int = 0,
) -> dict:
    """Everything the cron editor shows: the normalised expression, its
    description, warnings and the next `count` fire times, with H read by
    `seed`, each fire delayed by its jitter, and the dates a calendar rule
    (`days`, see `CronSchedule.walk`) skips between them, each with its
    reason; `missing` is the first date past the calendar's data, if the
    fires reach it. Raises CronError. `locale` and `translate` as for
    `describe`."""
    schedule = parse(expr, seed)
    zone = get_zone(tz_name)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PREVIEW_COUNT:
        raise CronError(
            OUT_OF_RANGE,
            gettext_noop("Count must be a whole number from 1 to {limit}"),
            limit=MAX_PREVIEW_COUNT,
        )
    times, skipped, missing = [], [], None
    for step in schedule.walk(after, zone, days=days, jitter=jitter, seed=seed or ""):
        if isinstance(step, Skipped):
            skipped.append({"date": step.day.isoformat(), "reason": step.reason})
            continue
        if isinstance(step, Uncovered):
            missing = step.day.isoformat()
            break
        item = {"utc": iso_utc(step.at), "local": step.at.astimezone(zone).isoformat(), "dst": step.mark}
        if step.note:
            item["note"] = step.note  # a working day on a weekend
        times.append(item)
        if len(times) == count:
            break
    return {
        "expression": schedule.expression,
        "description": describe(schedule.expression, locale=locale, translate=translate, seed=seed),
        "warnings": _warnings(schedule, translate or (lambda text: text)),
        "times": times,
        "skipped": skipped,
        "missing": missing,
    }


# How far ahead the cron editor looks for a clock change that touches a
# schedule, and how often it samples the zone's offset on the way: every
# zone's changes are months apart, so two in one step cannot hide.
DST_HORIZON = timedelta(days=366)
_DST_STEP = timedelta(hours=12)


def _clock_changes(zone: tzinfo, start: datetime, end: datetime):
    """The zone's offset changes in (start, end] (naive UTC): (instant, offset
    before, offset after), found by sampling and a binary search."""
    before, offset = start, _aware(start).astimezone(zone).utcoffset()
    while before < end:
        after = min(before + _DST_STEP, end)
        new_offset = _aware(after).astimezone(zone).utcoffset()
        if new_offset != offset:
            yield _transition(zone, before, after, new_offset), offset, new_offset
            offset = new_offset
        before = after


def _clock(wall: datetime) -> str:
    return f"{wall:%H:%M}" if wall.second == 0 else f"{wall:%H:%M:%S}"


def next_dst_effect(expr: str, tz_name: str, *, after: datetime, translate=None) -> str | None:
    """The line under the cron editor's preview: the first clock change of
    the zone within DST_HORIZON after `after` at which the schedule has a wall
    time that does not exist (it fires at the first instant after the gap) or
    happens twice (interval-based: both passes; else the first only), as the
    rules in docs/cron.md say. None when no change touches it. `translate` as
    for `describe`."""
    translate = translate or (lambda text: text)
    schedule = parse(expr)
    zone = _zone(get_zone(tz_name))
    start = after.astimezone(UTC).replace(tzinfo=None, microsecond=0)
    for instant, before, later in _clock_changes(zone, start, start + DST_HORIZON):
        window_start, window_end = instant + min(before, later), instant + max(before, later)
        found = schedule._find(window_start - _ONE_SECOND)
        if found is None or found >= window_end:
            continue
        params = {"date": f"{found:%Y-%m-%d}", "time": _clock(found), "zone": tz_name}
        if later > before:
            text = gettext_noop(
                "{date}: {time} does not exist in {zone}; this schedule then fires at {fires}."
            )
            return translate(text).format(fires=_clock(instant + later), **params)
        if schedule.is_interval_based:
            text = gettext_noop(
                "{date}: {start}–{end} happens twice in {zone}; this schedule fires in both passes."
            )
            return translate(text).format(start=_clock(window_start), end=_clock(window_end), **params)
        text = gettext_noop(
            "{date}: {time} happens twice in {zone}; this schedule fires once, in the first pass."
        )
        return translate(text).format(**params)
    return None
