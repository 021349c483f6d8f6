"""Small display helpers for the console templates."""

import functools
import re
from datetime import UTC, datetime, timedelta

from django import template
from django.utils import dateformat, timezone
from django.utils.html import conditional_escape, escape
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _

from jobs import access

register = template.Library()

# The marker jobs.models.cap_message puts in the middle of a capped log.
_TRUNCATION_MARKER = re.compile(r"\[… \d+ characters omitted; original length \d+ characters …\]")


@register.filter
def can_edit(user, job=None) -> bool:
    """`user|can_edit`: somewhere; `user|can_edit:job`: that job."""
    return access.can_edit(user, job or None)


@register.filter
def can_operate(user, job=None) -> bool:
    """`user|can_operate:job`: run, pause, resume, cancel, retry it."""
    return access.can_operate(user, job or None)


@register.filter
def can_administer(user) -> bool:
    return access.can_administer(user)


@register.filter
def can_see_audit(user) -> bool:
    return access.can_see_audit(user)


@register.simple_tag(takes_context=True)
def unread_message_count(context) -> int:
    request = context.get("request")
    user = getattr(request, "user", None)
    if not access.can_view(user):
        return 0
    return access.visible_messages(user).filter(read_at__isnull=True).count()


@register.filter
def duration(ms) -> str:
    """1234 → "1.2 s"; 75000 → "1 min 15 s"."""
    if ms in (None, ""):
        return "—"
    ms = int(ms)
    if ms < 1000:
        return _("{ms} ms").format(ms=ms)
    if ms < 60_000:
        return _("{seconds} s").format(seconds=f"{ms / 1000:.1f}")
    minutes, seconds = divmod(round(ms / 1000), 60)
    if minutes < 60:
        return _("{minutes} min {seconds} s").format(minutes=minutes, seconds=seconds)
    hours, minutes = divmod(minutes, 60)
    return _("{hours} h {minutes} min").format(hours=hours, minutes=minutes)


@register.filter
def relative(when: datetime | None) -> str:
    """A short "in 3 min" / "2 h ago" next to an absolute time."""
    if when is None:
        return ""
    return relative_at(when, timezone.now())


def relative_at(when: datetime, now: datetime) -> str:
    """`relative` from `now`, which a table's rows can share."""
    delta = when - now
    future = delta >= timedelta(0)
    seconds = abs(delta.total_seconds())
    # The same msgids as console.js's relativeText (the djangojs catalog).
    if seconds < 60:
        text = _("%s s") % int(seconds)
    elif seconds < 3600:
        text = _("%s min") % int(seconds // 60)
    elif seconds < 86400 * 2:
        text = _("%s h") % int(seconds // 3600)
    else:
        text = _("%s days") % int(seconds // 86400)
    return (_("in %s") if future else _("%s ago")) % text


@register.filter
def coded_errors(errors) -> list[dict]:
    """A field's errors as [{message, code}], the code kept only when it is one
    of the spec's numeric codes (47003, …) worth showing to a person."""
    out = []
    for error in errors.as_data() if hasattr(errors, "as_data") else []:
        code = str(error.code or "")
        for message in error.messages:
            out.append({"message": message, "code": code if code.isdigit() else ""})
    return out


@register.filter
def log_with_marker(text: str | None) -> str:
    """Escape a log (it is job output: never trusted) and highlight the
    truncation marker so a reader sees where the middle was cut."""
    escaped = str(escape(text or ""))
    return mark_safe(
        _TRUNCATION_MARKER.sub(lambda m: f'<mark class="truncated">{m.group(0)}</mark>', escaped)
    )


@register.filter
def short_value(value, limit: int = 80) -> str:
    text = value if isinstance(value, str) else ("—" if value is None else str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"


@register.filter
def is_change(value) -> bool:
    """An audit row's [before, after]; anything else (a secret's "changed",
    the holder of a role) is shown as it is."""
    return isinstance(value, list) and len(value) == 2


@register.filter
def status_label(status: str) -> str:
    """A run status as people read it ("timed_out" → "Timed out")."""
    from jobs.models import Run

    try:
        return Run.Status(status).label
    except ValueError:
        return status


# http(s) URLs only (never javascript: or data:), up to whitespace or a
# character that cannot be in one unescaped; trailing punctuation is the
# sentence's, not the link's.
_URL = re.compile(r"\bhttps?://[^\s<>\"'`]+", re.IGNORECASE)
_TRAILING = ".,;:!?)]}’”"


@register.filter
def change_label(field: str) -> str:
    """An audit change's field as the job form labels it ("alert_on" → "Alert
    on"); a setting's key (sys.…) and an unknown name stay as written."""
    from jobs.forms import JobForm

    extra = {
        "state": _("State"),
        "run": _("Run"),
        "retry_of": _("Retry of run"),
        "secret": _("Secret"),
        "value": _("Value"),
    }
    if field in extra:
        return extra[field]
    form_field = JobForm.base_fields.get(field)
    if form_field is None or form_field.label is None:
        return field
    return str(form_field.label)


# A code span as Markdown writes it, the one markup help texts use.
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


@register.filter
def code_spans(text) -> str:
    """Help text (a setting's, a handler's) with its `code` spans shown as
    <code>, not as backticks; everything else escaped."""
    escaped = str(conditional_escape("" if text is None else text))
    return mark_safe(_CODE_SPAN.sub(r"<code>\1</code>", escaped))


@register.filter
def linkify(text) -> str:
    """Message text (an alert's body, a flash message) with its http(s) links
    made clickable. Everything else is escaped: the text may quote a job's
    name, its error or its output."""
    text = str(text or "")
    out, last = [], 0
    for match in _URL.finditer(text):
        url = match.group(0).rstrip(_TRAILING)
        end = match.start() + len(url)
        out.append(str(escape(text[last : match.start()])))
        out.append(f'<a href="{escape(url)}" rel="noopener noreferrer">{escape(url)}</a>')
        last = end
    out.append(str(escape(text[last:])))
    return mark_safe("".join(out))


@register.filter
def relative_time(when: datetime | None) -> str:
    """`relative` in a <time data-relative> element, which console.js keeps
    counting (the same wording) between refreshes of the page part around it."""
    if when is None:
        return ""
    return relative_element(when, timezone.now())


def relative_element(when: datetime, now: datetime) -> str:
    """`relative_time` from `now`, which a table's rows can share."""
    return mark_safe(
        f'<time datetime="{when.astimezone(UTC).isoformat()}" data-relative>'
        f"{conditional_escape(relative_at(when, now))}</time>"
    )


# The parts of a date format `when` writes itself (Django's `dateformat`
# builds a formatter object and calls a method per letter: about half of
# the filter's time, and a page of 100 runs calls it hundreds of times).
# Any other letter, or a backslash, goes through `dateformat`.
_DATE_PARTS = {
    "Y": lambda d: f"{d.year:04d}",
    "m": lambda d: f"{d.month:02d}",
    "d": lambda d: f"{d.day:02d}",
    "H": lambda d: f"{d.hour:02d}",
    "i": lambda d: f"{d.minute:02d}",
    "s": lambda d: f"{d.second:02d}",
    "T": lambda d: str(escape(d.tzname() or "")),
}


@functools.lru_cache(maxsize=64)
def _date_parts(fmt: str) -> tuple | None:
    """`fmt` as its parts (a function of the date, or escaped text), or
    None when it has a letter or escape this filter does not write itself."""
    parts = []
    for char in fmt:
        if char in _DATE_PARTS:
            parts.append(_DATE_PARTS[char])
        elif char.isalpha() or char == "\\":
            return None
        else:
            parts.append(str(escape(char)))
    return tuple(parts)


def _format_date(value: datetime, fmt: str) -> str:
    """dateformat.format(value, fmt), escaped."""
    parts = _date_parts(fmt)
    if parts is None:
        return str(escape(dateformat.format(value, fmt)))
    return "".join(part if isinstance(part, str) else part(value) for part in parts)


@register.filter
def when(value: datetime | None, fmt: str = "Y-m-d H:i:s") -> str:
    """Every time the console shows, one way: in the viewer's zone (the
    page's current one, jobs.web.i18n), with the instant in UTC on hover
    and in the `datetime` attribute; "—" when there is none."""
    if value is None or value == "":
        return "—"
    return time_element(value, timezone.localtime(value), fmt)


def time_element(value: datetime, local: datetime, fmt: str) -> str:
    """`when` of `value`, shown as `local` (`value` in the viewer's zone,
    which a table's rows can look up once)."""
    utc = value.astimezone(UTC)
    # Digits and the escaped format: no further escaping needed.
    return mark_safe(
        f'<time datetime="{utc.isoformat()}" title="{utc:%Y-%m-%d %H:%M:%S} UTC">'
        f"{_format_date(local, fmt)}</time>"
    )
