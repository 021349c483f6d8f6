"""The `when` filter writes the common date formats itself: its output is
the one Django's `dateformat` and `format_html` give, for every format the
templates use and others, in zones with and without daylight saving time;
except that a time the clocks show twice keeps its zone's abbreviation
(`T`), which Django leaves out there."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import dateformat, timezone
from django.utils.html import format_html

from jobs.web.templatetags.console import when

FORMATS = [
    "Y-m-d H:i:s",
    "Y-m-d H:i",
    "H:i:s",
    "Y-m-d H:i:s T",
    "d/m/Y <H>",  # text that needs escaping
    "D, j M Y",  # letters written by dateformat
    r"Y \\a\\t H",  # an escape
]
ZONES = ["UTC", "Europe/Berlin", "Asia/Shanghai", "America/St_Johns", "Australia/Lord_Howe", "Asia/Kolkata"]


def django_when(value, fmt):
    utc = value.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{} UTC">{}</time>',
        utc.isoformat(),
        f"{utc:%Y-%m-%d %H:%M:%S}",
        dateformat.format(timezone.localtime(value), fmt),
    )


@pytest.mark.parametrize("zone", ZONES)
def test_when_writes_what_django_writes(zone):
    start = datetime(2026, 3, 28, 23, 59, 59, 999999, tzinfo=UTC)
    moments = [start + timedelta(minutes=37 * i, microseconds=i) for i in range(200)]
    moments += [datetime(2026, 10, 25, 0, 30, tzinfo=UTC) + timedelta(minutes=30 * i) for i in range(6)]
    moments += [datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC)]
    with timezone.override(zone):
        for value in moments:
            local = timezone.localtime(value)
            twice = local.replace(fold=0).utcoffset() != local.replace(fold=1).utcoffset()
            for fmt in FORMATS:
                if not (twice and "T" in fmt):
                    assert when(value, fmt) == django_when(value, fmt), (value, fmt)
            assert when(value) == django_when(value, "Y-m-d H:i:s")


def test_a_time_shown_twice_says_which_by_its_abbreviation():
    first, second = datetime(2026, 10, 25, 0, 30, tzinfo=UTC), datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
    with timezone.override("Europe/Berlin"):
        assert ">2026-10-25 02:30:00 CEST<" in when(first, "Y-m-d H:i:s T")
        assert ">2026-10-25 02:30:00 CET<" in when(second, "Y-m-d H:i:s T")


def test_no_time_is_a_dash():
    assert when(None) == when("") == "—"
