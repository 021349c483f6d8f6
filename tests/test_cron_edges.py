"""Edges of the cron engine (jobs/cron.py) that the worked-example table in
test_cron.py does not pin down: found by mutation testing, each
test names the behaviour a plausible slip would break. Expected values were
worked out from calendars and the America/New_York tzdata transitions."""

from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import pytest

from jobs import cron
from jobs.cron import CronError, describe, get_zone, normalize, parse, preview

NY = "America/New_York"


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def fires(expr, start, zone="UTC", n=3):
    return parse(expr).next_n(start, zone, n)


# --- DST: the repeated fall-back hour (2026-11-01 in New York: 02:00 EDT
# becomes 01:00 EST, so 01:00-01:59 happens twice, at 05:xx and 06:xx UTC) --


def test_an_hourly_expression_fires_in_both_passes_of_the_repeated_hour():
    """`0 0 * * * *` has a star in the hour field: interval-based, so 01:00
    happens twice, once in EDT and once in EST, and both are marked."""
    result = preview("0 0 * * * *", NY, after=utc(2026, 11, 1, 4, 30), count=4)
    assert [(t["utc"], t["local"], t["dst"]) for t in result["times"]] == [
        ("2026-11-01T05:00:00Z", "2026-11-01T01:00:00-04:00", "repeated"),
        ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00-05:00", "repeated"),
        ("2026-11-01T07:00:00Z", "2026-11-01T02:00:00-05:00", None),
        ("2026-11-01T08:00:00Z", "2026-11-01T03:00:00-05:00", None),
    ]


def test_a_fixed_time_fires_once_in_the_repeated_hour():
    assert fires("0 0 1 * * *", utc(2026, 11, 1, 4, 30), NY, 2) == [
        utc(2026, 11, 1, 5),  # 01:00 EDT, the first pass only
        utc(2026, 11, 2, 6),  # 01:00 EST the next day
    ]


@pytest.mark.parametrize("microsecond", [0, 999_999])
def test_a_start_in_the_first_pass_finds_the_rest_of_both_passes(microsecond):
    start = utc(2026, 11, 1, 5, 20, 0, microsecond)  # 01:20 EDT
    # Interval-based: on in the first pass, then all of the second pass.
    assert fires("0 */30 * * * *", start, NY, 4) == [
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 1, 6, 0),
        utc(2026, 11, 1, 6, 30),
        utc(2026, 11, 1, 7, 0),
    ]
    # A fixed time still ahead in the first pass fires there, once.
    assert fires("0 45 1 * * *", start, NY, 2) == [utc(2026, 11, 1, 5, 45), utc(2026, 11, 2, 6, 45)]
    # A fixed time already passed in the first pass waits for tomorrow.
    assert fires("0 10 1 * * *", start, NY, 1) == [utc(2026, 11, 2, 6, 10)]


@pytest.mark.parametrize("microsecond", [0, 500_000, 999_999])
def test_a_start_in_the_second_pass(microsecond):
    start = utc(2026, 11, 1, 6, 20, 0, microsecond)  # 01:20 EST, the second pass
    # Interval-based: the rest of the second pass.
    assert fires("0 */30 * * * *", start, NY, 3) == [
        utc(2026, 11, 1, 6, 30),
        utc(2026, 11, 1, 7, 0),
        utc(2026, 11, 1, 7, 30),
    ]
    # Not interval-based: the rest of the repeated hour is skipped, even a
    # time that has not come round yet in the second pass.
    assert fires("0 45 1 * * *", start, NY, 1) == [utc(2026, 11, 2, 6, 45)]
    assert fires("0 0 2 * * *", start, NY, 1) == [utc(2026, 11, 1, 7)]


def test_a_start_on_the_last_second_before_a_repeated_fire():
    # Microseconds are dropped from the start, so 01:44:59.999999 EST is
    # "before 01:45:00 EST" and the second-pass fire is still ahead.
    start = utc(2026, 11, 1, 6, 44, 59, 999_999)
    assert fires("0 */15 * * * *", start, NY, 2) == [utc(2026, 11, 1, 6, 45), utc(2026, 11, 1, 7, 0)]
    start = utc(2026, 11, 1, 5, 44, 59, 999_999)  # the same wall time, first pass
    assert fires("0 45 1 * * *", start, NY, 1) == [utc(2026, 11, 1, 5, 45)]


def test_the_last_second_of_the_repeated_hour():
    # 01:59:59 EDT (05:59:59 UTC): the first pass ends one second later.
    assert fires("* * * * * *", utc(2026, 11, 1, 5, 59, 58), NY, 3) == [
        utc(2026, 11, 1, 5, 59, 59),
        utc(2026, 11, 1, 6, 0, 0),
        utc(2026, 11, 1, 6, 0, 1),
    ]
    # Second pass, its last second, not interval-based: tomorrow.
    assert fires("59 59 1 * * *", utc(2026, 11, 1, 6, 59, 58), NY, 1) == [utc(2026, 11, 2, 6, 59, 59)]
    assert fires("59 59 1 * * *", utc(2026, 11, 1, 5, 59, 58), NY, 1) == [utc(2026, 11, 1, 5, 59, 59)]


def test_a_spring_forward_gap_fires_once_at_the_end_of_the_gap():
    # 2026-03-08 in New York: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
    result = preview("0 30 2 * * *", NY, after=utc(2026, 3, 8, 0), count=2)
    assert [(t["utc"], t["dst"]) for t in result["times"]] == [
        ("2026-03-08T07:00:00Z", "skipped"),
        ("2026-03-09T06:30:00Z", None),
    ]


def test_a_zone_without_daylight_saving_matches_utc_shifted():
    assert fires("0 0 9 * * *", utc(2026, 5, 31, 12), "Asia/Tokyo", 2) == [
        utc(2026, 6, 1, 0),
        utc(2026, 6, 2, 0),
    ]


@pytest.mark.parametrize("name", ["UTC", "Etc/UTC", "Zulu", "Universal", "Etc/UCT"])
def test_utc_aliases_behave_as_utc(name):
    assert fires("0 30 3 * * *", utc(2026, 11, 1), name, 1) == [utc(2026, 11, 1, 3, 30)]


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        (UTC, True),
        (ZoneInfo("UTC"), True),
        (ZoneInfo("Etc/UTC"), True),
        (ZoneInfo("Zulu"), True),
        (ZoneInfo("Etc/Universal"), True),
        (ZoneInfo("Europe/London"), False),  # UTC in winter only
        (ZoneInfo("Etc/GMT-1"), False),
        (timezone(timedelta(hours=2)), False),  # no `key` at all
        (timezone(timedelta(0)), True),  # the very object datetime.UTC is
    ],
)
def test_is_utc_knows_the_names_of_utc_and_nothing_else(zone, expected):
    """cron.is_utc (the console's "times are UTC" hint) had no test of its
    own: mutmut's survivors after main's merge (the names not recognised, a
    zone without `key` raising)."""
    assert cron.is_utc(zone) is expected


def test_a_fixed_offset_zone_object_is_accepted():
    zone = timezone(timedelta(hours=2))
    assert parse("0 0 12 * * *").next_after(utc(2026, 1, 1), zone) == utc(2026, 1, 1, 10)


def test_a_start_in_the_first_pass_before_a_fire_just_after_the_repeated_hour():
    # 02:00 EST comes right after the second pass; from the first pass it is
    # not "in the first pass" (that ends at 01:59:59 EDT).
    result = preview("0 0 2 * * *", NY, after=utc(2026, 11, 1, 5, 20), count=1)
    assert [(t["utc"], t["dst"]) for t in result["times"]] == [("2026-11-01T07:00:00Z", None)]


@pytest.mark.parametrize("microsecond", [0, 500_000])
def test_the_second_after_the_repeated_hour_is_ordinary_time(microsecond):
    # From 01:59:59 EST (second pass) every second: 02:00:00 EST, not repeated.
    start = utc(2026, 11, 1, 6, 59, 59, microsecond)
    result = preview("* * * * * *", NY, after=start, count=2)
    assert [(t["utc"], t["dst"]) for t in result["times"]] == [
        ("2026-11-01T07:00:00Z", None),
        ("2026-11-01T07:00:01Z", None),
    ]
    # And from the last second of the first pass, the second pass begins.
    result = preview("* * * * * *", NY, after=utc(2026, 11, 1, 5, 59, 59, microsecond), count=1)
    assert [(t["utc"], t["local"], t["dst"]) for t in result["times"]] == [
        ("2026-11-01T06:00:00Z", "2026-11-01T01:00:00-05:00", "repeated")
    ]


@pytest.mark.parametrize("start", [utc(9999, 11, 7, 5, 30), utc(9999, 11, 7, 6, 30)])
def test_nothing_left_before_the_horizon_from_inside_a_repeated_hour(start):
    # 9999-11-07 01:30 New York, first and second pass; the next 1 January is
    # past the horizon, for a fixed and for an interval-based expression.
    assert parse("0 0 0 1 1 ?").next_after(start, NY) is None
    assert parse("* * * 1 1 ?").next_after(start, NY) is None


@pytest.mark.parametrize("server_zone", ["Asia/Kolkata", "America/Los_Angeles"])
def test_the_server_time_zone_changes_nothing(server_zone, monkeypatch):
    import time

    expected = [utc(2026, 11, 1, 5), utc(2026, 11, 1, 6), utc(2026, 11, 1, 7)]
    monkeypatch.setenv("TZ", server_zone)
    time.tzset()
    try:
        assert fires("0 0 * * * *", utc(2026, 11, 1, 4, 30), NY, 3) == expected
        assert fires("0 0 * * * *", utc(2026, 11, 1, 4, 30), "UTC", 3) == expected
        assert fires("0 30 2 * * *", utc(2026, 3, 8), NY, 1) == [utc(2026, 3, 8, 7)]
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_start_without_an_offset_is_refused():
    class NoOffset(tzinfo):
        def utcoffset(self, dt):
            return None

    for start in (datetime(2026, 1, 1), datetime(2026, 1, 1, tzinfo=NoOffset())):
        with pytest.raises(ValueError, match="^after must be a timezone-aware datetime$"):
            parse("@daily").next_after(start, "UTC")


def test_the_days_of_a_month_shape_are_worked_out_once():
    schedule = parse("0 0 12 ? * MON-FRI")
    first = schedule._days(31, 4)  # a 31-day month starting on a Thursday
    assert first == (1, 2, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 19, 20, 21, 22, 23, 26, 27, 28, 29, 30)
    assert schedule._days(31, 4) is first
    assert schedule._days(30, 4) is not first


# --- reversed ranges with a step ----------------------------------------------


def test_a_reversed_minute_range_keeps_its_step_across_the_wrap():
    # 50, 57, then 64 - 60 = 4; 11 is past the end of the range.
    assert parse("0 50-5/7 * * * *").minutes == (4, 50, 57)
    assert fires("0 50-5/7 * * * *", utc(2026, 1, 1, 10, 0), n=4) == [
        utc(2026, 1, 1, 10, 4),
        utc(2026, 1, 1, 10, 50),
        utc(2026, 1, 1, 10, 57),
        utc(2026, 1, 1, 11, 4),
    ]


def test_a_reversed_day_of_week_range_wraps_over_seven_days():
    # Friday, then three days on: Monday; Thursday is past the end (Tuesday).
    assert fires("0 0 12 ? * 5-2/3", utc(2026, 3, 1), n=4) == [
        utc(2026, 3, 2, 12),  # Monday
        utc(2026, 3, 6, 12),  # Friday
        utc(2026, 3, 9, 12),
        utc(2026, 3, 13, 12),
    ]
    assert normalize("0 0 12 ? * fri-tue/3") == "0 0 12 ? * FRI-TUE/3"
    assert fires("0 0 12 ? * FRI-TUE/3", utc(2026, 3, 1), n=4) == fires(
        "0 0 12 ? * 5-2/3", utc(2026, 3, 1), n=4
    )


def test_reversed_ranges_in_hours_and_seconds():
    assert parse("0 0 22-2 * * *").hours == (0, 1, 2, 22, 23)
    assert parse("0 0 20-3/3 * * *").hours == (2, 20, 23)
    assert parse("58-1 * * * * *").seconds == (0, 1, 58, 59)


def test_a_reversed_month_range():
    assert parse("0 0 0 1 NOV-FEB ?").months == (1, 2, 11, 12)
    assert parse("0 0 0 1 10-3/2 ?").months == (2, 10, 12)  # 10, 12, then 14 - 12 = 2


def test_a_step_without_a_range_runs_to_the_end_of_the_field():
    # 1, 3, 5, 7: Monday, Wednesday, Friday and (7) Sunday.
    assert parse("0 0 12 ? * 1/2").next_n(utc(2026, 3, 1), "UTC", 4) == [
        utc(2026, 3, 1, 12),  # Sunday
        utc(2026, 3, 2, 12),  # Monday
        utc(2026, 3, 4, 12),  # Wednesday
        utc(2026, 3, 6, 12),  # Friday
    ]
    assert parse("0 0 12 ? * 0/3").next_n(utc(2026, 3, 1), "UTC", 3) == [
        utc(2026, 3, 1, 12),  # Sunday (0, 3, 6)
        utc(2026, 3, 4, 12),  # Wednesday
        utc(2026, 3, 7, 12),  # Saturday
    ]
    assert parse("0 0 12 ? * 1/3").next_n(utc(2026, 3, 1), "UTC", 3) == [
        utc(2026, 3, 1, 12),  # Sunday: 1, 4, 7 and 7 is Sunday
        utc(2026, 3, 2, 12),
        utc(2026, 3, 5, 12),
    ]


# --- the calendar ---------------------------------------------------------------


def test_l_is_the_real_last_day_of_every_month():
    got = fires("0 0 0 L * ?", utc(2026, 1, 1), n=12)
    assert [(d.month, d.day) for d in got] == [
        (1, 31), (2, 28), (3, 31), (4, 30), (5, 31), (6, 30),
        (7, 31), (8, 31), (9, 30), (10, 31), (11, 30), (12, 31),
    ]  # fmt: skip


def test_l_minus_and_lw_use_the_real_last_day():
    got = fires("0 0 0 L-1 * ?", utc(2026, 1, 1), n=12)
    assert [d.day for d in got] == [30, 27, 30, 29, 30, 29, 30, 30, 29, 30, 29, 30]
    # LW in 2026: Jan 30 (Fri; 31 is a Saturday), Feb 27 (Fri; 28 is a Saturday), ...
    got = fires("0 0 0 LW * ?", utc(2026, 1, 1), n=12)
    assert [d.day for d in got] == [30, 27, 31, 30, 29, 30, 31, 31, 30, 30, 30, 31]


@pytest.mark.parametrize(
    ("year", "last_day"),
    [(2024, 29), (2025, 28), (2100, 28), (2200, 28), (2300, 28), (2400, 29), (2404, 29)],
)
def test_february_length_follows_the_gregorian_leap_rule(year, last_day):
    assert fires("0 0 0 L 2 ?", utc(year, 1, 1), n=1) == [utc(year, 2, last_day)]


def test_the_29th_of_february_skips_century_years_that_are_not_leap():
    assert fires("0 0 0 29 2 ?", utc(2097, 1, 1), n=2) == [utc(2104, 2, 29), utc(2108, 2, 29)]
    assert fires("0 0 0 29 2 ?", utc(2397, 1, 1), n=2) == [utc(2400, 2, 29), utc(2404, 2, 29)]


def test_nearest_weekday_stays_inside_the_month():
    # 2026-08-01 is a Saturday: 1W moves forward to Monday the 3rd, not back to July.
    assert fires("0 0 0 1W 8 ?", utc(2026, 1, 1), n=1) == [utc(2026, 8, 3)]
    # 2026-05-31 is a Sunday: 31W moves back to Friday the 29th, not on to June.
    assert fires("0 0 0 31W 5 ?", utc(2026, 1, 1), n=1) == [utc(2026, 5, 29)]
    # A Saturday mid-month goes to Friday, a Sunday to Monday.
    assert fires("0 0 0 14W 3 ?", utc(2026, 1, 1), n=1) == [utc(2026, 3, 13)]
    assert fires("0 0 0 15W 3 ?", utc(2026, 1, 1), n=1) == [utc(2026, 3, 16)]
    assert fires("0 0 0 16W 3 ?", utc(2026, 1, 1), n=1) == [utc(2026, 3, 16)]


def test_last_and_nth_weekday_of_the_month():
    # Fridays in 2026-01: 2, 9, 16, 23, 30.
    assert fires("0 0 0 ? 1 5L", utc(2026, 1, 1), n=1) == [utc(2026, 1, 30)]
    assert fires("0 0 0 ? 1 FRI#1", utc(2026, 1, 1), n=1) == [utc(2026, 1, 2)]
    assert fires("0 0 0 ? 1 5#5", utc(2026, 1, 1), n=1) == [utc(2026, 1, 30)]
    # Sundays in 2026-03: 1, 8, 15, 22, 29 (7 is Sunday too).
    assert fires("0 0 0 ? 3 7L", utc(2026, 1, 1), n=1) == [utc(2026, 3, 29)]
    assert fires("0 0 0 ? 3 0#2", utc(2026, 1, 1), n=1) == [utc(2026, 3, 8)]
    assert fires("0 0 0 ? 3 7#1", utc(2026, 1, 1), n=1) == [utc(2026, 3, 1)]


def test_a_search_that_starts_in_an_unlisted_month_or_late_in_a_month():
    assert fires("0 0 0 1 3,6 ?", utc(2026, 4, 10), n=2) == [utc(2026, 6, 1), utc(2027, 3, 1)]
    assert fires("0 0 0 1 3 ?", utc(2026, 12, 31, 23, 59, 59), n=1) == [utc(2027, 3, 1)]
    assert fires("0 0 10 5 * ?", utc(2026, 1, 5, 11), n=1) == [utc(2026, 2, 5, 10)]
    assert fires("0 0 10 5 * ?", utc(2026, 1, 5, 9, 59, 59), n=1) == [utc(2026, 1, 5, 10)]


def test_the_time_of_day_search_rolls_over_each_field():
    assert fires("10,20 15,45 8,17 * * *", utc(2026, 1, 1, 8, 15, 20), n=4) == [
        utc(2026, 1, 1, 8, 45, 10),
        utc(2026, 1, 1, 8, 45, 20),
        utc(2026, 1, 1, 17, 15, 10),
        utc(2026, 1, 1, 17, 15, 20),
    ]
    assert fires("10,20 15,45 8,17 * * *", utc(2026, 1, 1, 17, 45, 20), n=1) == [utc(2026, 1, 2, 8, 15, 10)]
    assert fires("10 15 8 * * *", utc(2026, 1, 1, 8, 15, 9), n=1) == [utc(2026, 1, 1, 8, 15, 10)]
    assert fires("0 59 23 * * *", utc(2026, 1, 1, 23, 58, 59), n=1) == [utc(2026, 1, 1, 23, 59)]
    assert fires("59 59 23 31 12 ?", utc(2026, 12, 31, 23, 59, 58), n=2) == [
        utc(2026, 12, 31, 23, 59, 59),
        utc(2027, 12, 31, 23, 59, 59),
    ]


def test_the_horizon_is_the_end_of_year_9999():
    assert fires("0 0 0 1 1 ?", utc(9997, 12, 31, 23, 59, 59), n=3) == [utc(9998, 1, 1), utc(9999, 1, 1)]
    last = utc(9999, 12, 31, 23, 59, 59)
    assert parse("* * * * * *").next_after(last - timedelta(seconds=1), "UTC") == last
    assert parse("* * * * * *").next_after(last, "UTC") is None
    assert parse("* * * * * *").next_after(last, NY) is None
    assert parse("0 0 0 29 2 ?").next_after(utc(9996, 3, 1), NY) is None  # 10000 is out of reach


# --- grammar ----------------------------------------------------------------------


def test_question_mark_with_a_step_is_a_star_with_a_step():
    assert parse("?/5 * * * * *").seconds == tuple(range(0, 60, 5))
    assert parse("0 0 0 ?/10 * ?").next_n(utc(2025, 12, 31, 12), "UTC", 4) == [
        utc(2026, 1, 1), utc(2026, 1, 11), utc(2026, 1, 21), utc(2026, 1, 31),
    ]  # fmt: skip
    assert parse("? * * * * *").seconds == tuple(range(60))


def test_step_bounds_are_the_field_size():
    assert parse("*/59 * * * * *").seconds == (0, 59)
    assert parse("0 0 */23 * * *").hours == (0, 23)
    assert parse("0 0 0 */31 * ?").next_n(utc(2025, 12, 31, 12), "UTC", 2) == [
        utc(2026, 1, 1),
        utc(2026, 2, 1),
    ]
    assert parse("0 0 0 1 */12 ?").months == (1,)
    assert parse("0 0 0 ? * */7").next_n(utc(2026, 2, 28, 12), "UTC", 2) == [utc(2026, 3, 1), utc(2026, 3, 8)]
    for bad in ("*/60 * * * * *", "0 0 */24 * * *", "0 0 0 */32 * ?", "0 0 0 1 */13 ?", "0 0 0 ? * */8"):
        with pytest.raises(CronError) as caught:
            parse(bad)
        assert caught.value.code == cron.OUT_OF_RANGE, bad


def test_lowest_and_highest_values_of_each_field():
    assert parse("0,59 0,59 0,23 * * *").next_n(utc(2026, 1, 1), "UTC", 2) == [
        utc(2026, 1, 1, 0, 0, 59),
        utc(2026, 1, 1, 0, 59, 0),
    ]
    assert parse("0 0 0 1,31 1,12 ?").months == (1, 12)
    assert parse("0 0 0 L-30 * ?").next_n(utc(2025, 12, 31, 12), "UTC", 2) == [
        utc(2026, 1, 1),
        utc(2026, 3, 1),
    ]
    assert parse("0 0 0 ? * 0,7").next_n(utc(2026, 2, 28, 12), "UTC", 1) == [utc(2026, 3, 1)]
    assert parse("0 0 0 ? * 6").next_n(utc(2026, 3, 1), "UTC", 1) == [utc(2026, 3, 7)]


def test_month_and_day_names():
    assert parse("0 0 0 1 jan,Dec ?").months == (1, 12)
    assert parse("0 0 0 ? * sat").next_n(utc(2026, 3, 1), "UTC", 1) == [utc(2026, 3, 7)]
    assert parse("0 0 0 ? * SUN").next_n(utc(2026, 3, 2), "UTC", 1) == [utc(2026, 3, 8)]
    with pytest.raises(CronError, match=r"Month 'FOO': unknown name 'FOO', use JAN, FEB"):
        parse("0 0 0 1 FOO ?")
    with pytest.raises(CronError) as caught:
        parse("0 0 0 1 * JAN")
    assert caught.value.code == cron.MALFORMED


@pytest.mark.parametrize(
    ("expr", "code"),
    [
        ("0 0 0 L-3X * ?", cron.MALFORMED),
        ("0 0 0 L- * ?", cron.MALFORMED),
        ("0 0 0 LL * ?", cron.MALFORMED),
        ("0 0 0 L-031 * ?", cron.OUT_OF_RANGE),
        ("0 0 0 L-100 * ?", cron.OUT_OF_RANGE),
        ("0 0 0 ? * 5#", cron.MALFORMED),
        ("0 0 0 ? * #3", cron.MALFORMED),
        ("0 0 0 ? * 5L1", cron.MALFORMED),
        ("0 0 0 32W * ?", cron.OUT_OF_RANGE),
        ("0 0 0 0W * ?", cron.OUT_OF_RANGE),
        ("0 0 0 JANW * ?", cron.MALFORMED),
        ("0 0 0 ? * 1-", cron.MALFORMED),
        ("* * * * * 1-2-3", cron.MALFORMED),
        ("1-60 * * * * *", cron.OUT_OF_RANGE),
        ("100 * * * * *", cron.OUT_OF_RANGE),
        ("1/100 * * * * *", cron.OUT_OF_RANGE),
        ("001 * * * * *", cron.MALFORMED),
        ("0 0 0 ? * 08", cron.OUT_OF_RANGE),
    ],
)
def test_malformed_special_forms(expr, code):
    with pytest.raises(CronError) as caught:
        parse(expr)
    assert caught.value.code == code


def test_a_three_digit_number_in_range_is_malformed_not_out_of_range():
    with pytest.raises(CronError, match="numbers have at most two digits") as caught:
        parse("0 0 0 ? * 5#001")
    assert caught.value.code == cron.MALFORMED


def test_l_offsets_and_w_days_at_their_limits():
    assert fires("0 0 0 L-0 * ?", utc(2026, 1, 1), n=1) == [utc(2026, 1, 31)]
    assert fires("0 0 0 L-0W * ?", utc(2026, 1, 1), n=1) == [utc(2026, 1, 30)]
    assert fires("0 0 0 31W * ?", utc(2026, 1, 1), n=2) == [utc(2026, 1, 30), utc(2026, 3, 31)]


def test_tabs_and_repeated_spaces_separate_fields():
    assert normalize("0\t0  12 \t * * ?") == "0 0 12 * * ?"
    assert normalize("5 4 * * sun") == "0 5 4 * * SUN"


# --- input types and codes -------------------------------------------------------------


@pytest.mark.parametrize("value", [None, 5, b"* * * * *", ["*"] * 6])
def test_parse_rejects_anything_but_text_with_a_code(value):
    with pytest.raises(CronError) as caught:
        parse(value)
    assert caught.value.code == cron.MALFORMED
    assert caught.value.message == "The cron expression must be text"


@pytest.mark.parametrize("value", [None, 5, "", " \t"])
def test_get_zone_rejects_a_missing_name_with_a_code(value):
    with pytest.raises(CronError) as caught:
        get_zone(value)
    assert caught.value.code == cron.UNKNOWN_ZONE
    assert caught.value.message == "Choose a time zone, e.g. Europe/Berlin or UTC"


def _of_length(n: int, rest: str) -> str:
    """A valid expression exactly `n` characters long: a seconds list, then `rest`."""
    width = n - len(rest)
    items = ["0"] * ((width + 1) // 2)
    if width % 2 == 0:
        items[0] = "10"
    text = ",".join(items) + rest
    assert len(text) == n
    return text


@pytest.mark.parametrize(
    ("longest", "rest", "message"),
    [
        (200, " 0 0 ? * *", "The cron expression is longer than 200 characters"),
        # Five fields get "0 " in front: 198 characters become 200, 199 become 201.
        (198, " 0 ? * *", "The cron expression is longer than 200 characters once normalised"),
    ],
)
def test_an_expression_of_200_characters_is_read_and_one_more_is_refused(longest, rest, message):
    assert cron.MAX_EXPRESSION_CHARS == 200
    assert len(parse(_of_length(longest, rest)).expression) == 200
    with pytest.raises(CronError) as caught:
        parse(_of_length(longest + 1, rest))
    assert caught.value.code == cron.MALFORMED
    assert caught.value.message == message
    assert caught.value.params == {"limit": 200}


def test_a_non_ascii_expression_is_refused_with_what_to_use_instead():
    with pytest.raises(CronError) as caught:
        parse("0 0 0 ? * ſun")
    assert caught.value.code == cron.MALFORMED
    assert caught.value.message == "Use ASCII only: digits, the symbols * , - / ? L W # and names such as MON"


@pytest.mark.parametrize("value", [None, "", "   "])
def test_zone_name_reads_nothing_as_utc(value):
    assert cron.zone_name(value) == "UTC"


@pytest.mark.parametrize("value", [5, b"UTC", ["UTC"]])
def test_zone_name_refuses_what_is_not_text_with_a_code(value):
    with pytest.raises(CronError) as caught:
        cron.zone_name(value)
    assert caught.value.code == cron.UNKNOWN_ZONE
    assert caught.value.message == "The time zone must be an IANA name such as Europe/Berlin"


def test_zone_names_are_at_most_64_characters():
    assert cron.MAX_ZONE_CHARS == 64
    at_limit, over = "Europe/" + "x" * 57, "Europe/" + "x" * 58
    with pytest.raises(CronError) as caught:
        cron.zone_name(at_limit)  # long enough to be read, and unknown
    assert caught.value.code == cron.UNKNOWN_ZONE
    assert caught.value.message.startswith("Unknown time zone 'Europe/xxx")
    with pytest.raises(CronError) as caught:
        cron.zone_name(over)
    assert caught.value.code == cron.UNKNOWN_ZONE
    assert caught.value.message == "A time zone name has at most 64 characters"
    assert caught.value.params == {"limit": 64}


def test_a_listed_zone_the_system_cannot_load_is_an_unknown_zone():
    # A name in the list of zones whose file is missing or unreadable.
    with pytest.raises(CronError) as caught:
        cron._read_zone("Nowhere/Atlantis")
    assert caught.value.code == cron.UNKNOWN_ZONE
    assert caught.value.message == (
        "Unknown time zone 'Nowhere/Atlantis': use an IANA name such as America/New_York"
    )
    assert caught.value.params == {"zone": "Nowhere/Atlantis"}


def test_get_zone_strips_the_name_and_names_an_unknown_one():
    assert get_zone(" Europe/Berlin ").key == "Europe/Berlin"
    with pytest.raises(CronError) as caught:
        get_zone("Mars/Olympus")
    assert caught.value.message == (
        "Unknown time zone 'Mars/Olympus': use an IANA name such as America/New_York"
    )


def test_cron_error_carries_code_and_message():
    error = CronError(47002, "too big")
    assert (error.code, error.message, str(error)) == (47002, "too big", "47002: too big")
    assert isinstance(error, ValueError)


def test_messages_give_the_field_the_value_and_the_allowed_range():
    with pytest.raises(CronError) as caught:
        parse("0 0 0 ? * 5#9")
    assert caught.value.message == "Day-of-week '5#9': the number after # must be 1-5, got 9"
    with pytest.raises(CronError) as caught:
        parse("0 0 0 L-31 * ?")
    assert caught.value.message == "Day-of-month 'L-31': the offset after L- must be 0-30, got 31"
    with pytest.raises(CronError) as caught:
        parse("*/0 * * * * *")
    assert caught.value.message == "Second '*/0': the step must be 1-59, got 0"
    with pytest.raises(CronError) as caught:
        parse("0 0 25 * * *")
    assert caught.value.message == "Hour '25': a value must be 0-23, got 25"
    with pytest.raises(CronError) as caught:
        parse("0 0 0 15X * ?")
    assert caught.value.message == (
        "Day-of-month field '15X' is not valid cron syntax: "
        "use *, ?, 1-31, a list, a range, a step, L, L-3, 15W or LW"
    )
    with pytest.raises(CronError) as caught:
        parse("0 0 0 1-2W * ?")
    assert caught.value.message.endswith("W follows a single day, e.g. 15W, or L (LW)")
    with pytest.raises(CronError) as caught:
        parse("0 0 0 ? * 1-5L")
    assert caught.value.message.endswith(
        "L and # follow a single day, e.g. 5L (last Friday) or 5#3 (third Friday)"
    )
    with pytest.raises(CronError) as caught:
        parse("* * * *")
    assert caught.value.message == (
        "Expected 6 fields (sec min hour day-of-month month day-of-week) or 5 without seconds, got 4"
    )
    with pytest.raises(CronError) as caught:
        parse("  ")
    assert caught.value.message == "Enter a cron expression, e.g. 0 30 3 * * ?"


def test_never_firing_messages_say_which_field_and_months():
    with pytest.raises(CronError) as caught:
        parse("0 0 0 31 4,6 ?")
    assert caught.value.message == "'0 0 0 31 4,6 ?' can never fire: day-of-month 31 never falls in Apr, Jun"
    with pytest.raises(CronError) as caught:
        parse("0 0 0 ? 2 1#5,2")
    assert caught.value.code == cron.MALFORMED  # a list with # is not a form


def test_both_day_fields_message():
    with pytest.raises(CronError) as caught:
        parse("0 0 0 1 * MON")
    assert caught.value.message == (
        "Day-of-month (1) and day-of-week (MON) cannot both be set: use ? in one of them"
    )


def test_a_question_mark_in_either_day_field_leaves_the_other_free():
    assert fires("0 0 0 ? * *", utc(2026, 1, 1), n=1) == [utc(2026, 1, 2)]
    assert fires("0 0 0 * * ?", utc(2026, 1, 1), n=1) == [utc(2026, 1, 2)]
    assert fires("0 0 0 15 * *", utc(2026, 1, 1), n=1) == [utc(2026, 1, 15)]
    assert fires("0 0 0 * * 1", utc(2026, 3, 1), n=1) == [utc(2026, 3, 2)]


# --- aliases ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "expression"),
    [
        ("@every_minute", "0 * * * * *"),
        ("@every_second", "* * * * * *"),
        ("@EVERY_MINUTE", "0 * * * * *"),
        ("@annually", "0 0 0 1 1 *"),
        ("@monthly", "0 0 0 1 * *"),
        ("@midnight", "0 0 0 * * *"),
    ],
)
def test_aliases(alias, expression):
    assert normalize(alias) == expression


def test_an_unknown_alias_lists_the_usual_ones():
    with pytest.raises(CronError) as caught:
        parse("@every_hour")
    assert caught.value.code == cron.MALFORMED
    assert caught.value.message == (
        "Unknown alias '@EVERY_HOUR': use one of @annually, @daily, @hourly, @midnight, @monthly, @weekly, @yearly"
    )


# --- descriptions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        ("0 30 15 * * ?", "At 15:30"),
        ("0 0 12 L-3W * ?", "At 12:00, on the weekday nearest 3 days before the last day of the month"),
        ("0 0 12 L-1W * ?", "At 12:00, on the weekday nearest 1 day before the last day of the month"),
        ("0 0 12 ? * 5#3", "At 12:00, on the third Friday of the month"),
        ("0 0 12 ? * 0#1", "At 12:00, on the first Sunday of the month"),
        ("0 0 12 ? * MON-FRI", "At 12:00, Monday through Friday"),
        ("0 0 12 L * ?", "At 12:00, on the last day of the month"),
    ],
)
def test_exact_descriptions(expr, text):
    assert describe(expr) == text


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (
            "0 0 12 L-3W * ?",
            "At second 0, minute 0, hour 12, on the weekday nearest 3 days before the last day of the month",
        ),
        ("0 0 12 LW * ?", "At second 0, minute 0, hour 12, on the weekday nearest the last day of the month"),
        ("0 0 12 L * ?", "At second 0, minute 0, hour 12, on the last day of the month"),
        ("0 0 12 L-1 * ?", "At second 0, minute 0, hour 12, on 1 day before the last day of the month"),
        ("0 0 12 L-3 * ?", "At second 0, minute 0, hour 12, on 3 days before the last day of the month"),
        ("0 0 12 15W * ?", "At second 0, minute 0, hour 12, on the weekday nearest day 15 of the month"),
        ("0 0 12 1,15 JAN ?", "At second 0, minute 0, hour 12, on day-of-month 1,15, in month JAN"),
        ("0 0 12 ? * 5L", "At second 0, minute 0, hour 12, on the last Friday of the month"),
        ("0 0 12 ? * 7L", "At second 0, minute 0, hour 12, on the last Sunday of the month"),
        ("0 0 12 ? * SAT#2", "At second 0, minute 0, hour 12, on the second Saturday of the month"),
        ("0 0 12 ? * 1#4", "At second 0, minute 0, hour 12, on the fourth Monday of the month"),
        ("0 0 12 ? * 2#5", "At second 0, minute 0, hour 12, on the fifth Tuesday of the month"),
        ("0 0 12 ? * MON-FRI", "At second 0, minute 0, hour 12, on day-of-week MON-FRI"),
        ("*/5 * * ? * *", "At second */5, minute *, hour *"),
        ("0 0 0 * ? ?", "At second 0, minute 0, hour 0"),
    ],
)
def test_fallback_descriptions(expr, text, monkeypatch):
    import cron_descriptor

    def broken(*args, **kwargs):
        raise RuntimeError("cron-descriptor is unavailable")

    monkeypatch.setattr(cron_descriptor, "ExpressionDescriptor", broken)
    assert describe(expr) == text


# --- preview ----------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, 1000])
def test_preview_returns_exactly_count_times(count):
    result = preview("* * * * * *", "UTC", after=utc(2026, 1, 1), count=count)
    assert len(result["times"]) == count
    assert (
        result["times"][-1]["utc"] == f"2026-01-01T{count // 3600:02}:{count // 60 % 60:02}:{count % 60:02}Z"
    )


def test_preview_shows_five_times_by_default():
    result = preview("0 0 12 * * ?", "Europe/Berlin", after=utc(2026, 1, 1))
    assert [t["local"] for t in result["times"]] == [f"2026-01-0{d}T12:00:00+01:00" for d in range(1, 6)]
    assert result["description"] == "At 12:00"
    assert result["expression"] == "0 0 12 * * ?"


def test_preview_describes_in_english_by_default_even_with_a_translate():
    # The default locale is en_US: a translate alone (the console passes its
    # gettext) words nothing in another language.
    result = preview("0 0 9 ? * MON-FRI", "UTC", after=utc(2026, 1, 1), count=1, translate=_marked)
    assert result["description"] == describe("0 0 9 ? * MON-FRI") == "At 09:00, Monday through Friday"
    assert "<" not in result["description"]
    assert preview(
        "0 0 9 ? * MON-FRI", "UTC", after=utc(2026, 1, 1), count=1, locale="zh_CN", translate=_marked
    )["description"] == describe("0 0 9 ? * MON-FRI", locale="zh_CN", translate=_marked)


def test_preview_utc_times_are_whole_seconds_in_utc_whatever_the_local_zone(monkeypatch):
    import time

    # The process's own zone (TZ) must not leak into "utc"; nor microseconds.
    monkeypatch.setenv("TZ", "Asia/Kathmandu")
    time.tzset()
    try:
        times = preview("*/2 * * * * *", "Asia/Tokyo", after=utc(2026, 1, 1, 0, 0, 0, 500_000), count=2)[
            "times"
        ]
        assert cron.iso_utc(datetime(2026, 1, 1, 12, 0, 0, 999_999, tzinfo=ZoneInfo("Asia/Tokyo"))) == (
            "2026-01-01T03:00:00Z"
        )
    finally:
        monkeypatch.undo()
        time.tzset()
    assert [t["utc"] for t in times] == ["2026-01-01T00:00:02Z", "2026-01-01T00:00:04Z"]
    assert [t["local"] for t in times] == ["2026-01-01T09:00:02+09:00", "2026-01-01T09:00:04+09:00"]


@pytest.mark.parametrize("count", [0, -1, 1001, True, False, 2.0, "5", None])
def test_preview_count_must_be_a_whole_number_from_1_to_1000(count):
    with pytest.raises(CronError) as caught:
        preview("@daily", "UTC", after=utc(2026, 1, 1), count=count)
    assert caught.value.code == cron.OUT_OF_RANGE
    assert caught.value.message == "Count must be a whole number from 1 to 1000"


def test_preview_stops_at_the_horizon():
    result = preview("0 0 0 1 1 ?", "UTC", after=utc(9996, 6, 1), count=5)
    assert [t["utc"] for t in result["times"]] == [
        "9997-01-01T00:00:00Z",
        "9998-01-01T00:00:00Z",
        "9999-01-01T00:00:00Z",
    ]


@pytest.mark.parametrize(
    ("expr", "warnings"),
    [
        ("* * * * * *", ["The seconds field is *: this fires every second."]),
        ("0-59 * * * * *", ["The seconds field is *: this fires every second."]),
        ("0,30 * * * * *", ["The seconds field 0,30 fires 2 times a minute."]),
        ("*/20 * * * * *", ["The seconds field */20 fires 3 times a minute."]),
        ("0-58 * * * * *", ["The seconds field 0-58 fires 59 times a minute."]),
        ("30 * * * * *", []),
        ("0 * * * *", []),
    ],
)
def test_preview_warnings_count_the_seconds(expr, warnings):
    assert preview(expr, "UTC", after=utc(2026, 1, 1), count=1)["warnings"] == warnings


# --- the exact text of every error -------------------------------------------------------------
# The API and the cron editor show these messages to people as they are, so
# the wording is behaviour: one row per place an error is raised.

SECOND_HINT = "use *, 0-59, a list (1,15), a range (10-20) or a step (*/5)"
DOM_HINT = "use *, ?, 1-31, a list, a range, a step, L, L-3, 15W or LW"
DOW_HINT = (
    "use *, ?, 0-7 or SUN-SAT (0 and 7 are Sunday), a list, a range, a step, "
    "5L (last Friday) or 5#3 (third Friday)"
)
DOW_FORMS = "L and # follow a single day, e.g. 5L (last Friday) or 5#3 (third Friday)"
MONTHS = "JAN, FEB, MAR, APR, MAY, JUN, JUL, AUG, SEP, OCT, NOV, DEC"
DAYS = "SUN, MON, TUE, WED, THU, FRI, SAT"

MESSAGES = [
    ("@nope", 47001, "Unknown alias '@NOPE': use one of @annually, @daily, @hourly, @midnight, @monthly, @weekly, @yearly"),
    ("x * * * * *", 47001, f"Second field 'X' is not valid cron syntax: {SECOND_HINT}"),
    ("MON * * * * *", 47001, f"Second field 'MON' is not valid cron syntax: {SECOND_HINT}"),
    ("1/k * * * * *", 47001, f"Second field '1/K' is not valid cron syntax: {SECOND_HINT}"),
    ("*/k * * * * *", 47001, f"Second field '*/K' is not valid cron syntax: {SECOND_HINT}"),
    ("1-k * * * * *", 47001, f"Second field '1-K' is not valid cron syntax: {SECOND_HINT}"),
    ("5-MON * * * * *", 47001, f"Second field '5-MON' is not valid cron syntax: {SECOND_HINT}"),
    ("0 x * * * *", 47001, f"Minute field 'X' is not valid cron syntax: {SECOND_HINT}"),
    ("0 0 x * * *", 47001, "Hour field 'X' is not valid cron syntax: use *, 0-23, a list (8,12), a range (9-17) or a step (*/2)"),
    ("0 0 0 x * ?", 47001, f"Day-of-month field 'X' is not valid cron syntax: {DOM_HINT}"),
    ("0 0 0 1,L * ?", 47001, f"Day-of-month field '1,L' is not valid cron syntax: {DOM_HINT}"),
    ("0 0 0 L-x * ?", 47001, f"Day-of-month field 'L-X' is not valid cron syntax: {DOM_HINT}"),
    ("0 0 0 1 1-2-3 ?", 47001, "Month field '1-2-3' is not valid cron syntax: use *, 1-12 or JAN-DEC, a list, a range or a step"),
    ("0 0 0 ? * 1-2-3", 47001, f"Day-of-week field '1-2-3' is not valid cron syntax: {DOW_HINT}"),
    ("0 0 0 ? * 5#", 47001, f"Day-of-week field '5#' is not valid cron syntax: {DOW_HINT}"),
    ("0 0 0 ? * 1-5L", 47001, f"Day-of-week field '1-5L' is not valid cron syntax: {DOW_FORMS}"),
    ("0 0 0 ? * L", 47001, f"Day-of-week field 'L' is not valid cron syntax: {DOW_FORMS}"),
    ("0 0 0 ? * 1-5#2", 47001, f"Day-of-week field '1-5#2' is not valid cron syntax: {DOW_FORMS}"),
    ("005 * * * * *", 47001, "Second field '005' is not valid cron syntax: numbers have at most two digits"),
    ("1/012 * * * * *", 47001, "Second field '1/012' is not valid cron syntax: numbers have at most two digits"),
    ("0 0 0 1-2W * ?", 47001, "Day-of-month field '1-2W' is not valid cron syntax: W follows a single day, e.g. 15W, or L (LW)"),
    ("0 0 0 JANW * ?", 47001, "Day-of-month field 'JANW' is not valid cron syntax: W follows a single day, e.g. 15W, or L (LW)"),
    ("0 0 0 1 FOO ?", 47001, f"Month 'FOO': unknown name 'FOO', use {MONTHS}"),
    ("0 0 0 ? * x", 47001, f"Day-of-week 'X': unknown name 'X', use {DAYS}"),
    ("0 0 0 ? * FOOL", 47001, f"Day-of-week 'FOOL': unknown name 'FOO', use {DAYS}"),
    ("0 0 0 ? * FOO#2", 47001, f"Day-of-week 'FOO#2': unknown name 'FOO', use {DAYS}"),
    ("100 * * * * *", 47002, "Second '100': a value must be 0-59, got 100"),
    ("1-60 * * * * *", 47002, "Second '1-60': a value must be 0-59, got 60"),
    ("*/0 * * * * *", 47002, "Second '*/0': the step must be 1-59, got 0"),
    ("?/60 * * * * *", 47002, "Second '?/60': the step must be 1-59, got 60"),
    ("1/0 * * * * *", 47002, "Second '1/0': the step must be 1-59, got 0"),
    ("1/60 * * * * *", 47002, "Second '1/60': the step must be 1-59, got 60"),
    ("1/100 * * * * *", 47002, "Second '1/100': the step must be 1-59, got 100"),
    ("0 0 24 * * *", 47002, "Hour '24': a value must be 0-23, got 24"),
    ("0 0 0 0 * ?", 47002, "Day-of-month '0': a value must be 1-31, got 0"),
    ("0 0 0 32W * ?", 47002, "Day-of-month '32W': a value must be 1-31, got 32"),
    ("0 0 0 L-31 * ?", 47002, "Day-of-month 'L-31': the offset after L- must be 0-30, got 31"),
    ("0 0 0 L-123 * ?", 47002, "Day-of-month 'L-123': the offset after L- must be 0-30, got 123"),
    ("0 0 0 1 13 ?", 47002, "Month '13': a value must be 1-12, got 13"),
    ("0 0 0 1 0 ?", 47002, "Month '0': a value must be 1-12, got 0"),
    ("0 0 0 ? * 8", 47002, "Day-of-week '8': a value must be 0-7, got 8"),
    ("0 0 0 ? * 9L", 47002, "Day-of-week '9L': a value must be 0-7, got 9"),
    ("0 0 0 ? * 5#0", 47002, "Day-of-week '5#0': the number after # must be 1-5, got 0"),
    ("0 0 0 ? * 5#123", 47002, "Day-of-week '5#123': the number after # must be 1-5, got 123"),
    ("0 0 0 30 FEB ?", 47005, "'0 0 0 30 FEB ?' can never fire: day-of-month 30 never falls in Feb"),
    ("0 0 0 L-30 2 ?", 47005, "'0 0 0 L-30 2 ?' can never fire: day-of-month L-30 never falls in Feb"),
    ("0 0 0 31W 2,9 ?", 47005, "'0 0 0 31W 2,9 ?' can never fire: day-of-month 31W never falls in Feb, Sep"),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "code", "message"), MESSAGES)
def test_error_messages(expr, code, message):
    with pytest.raises(CronError) as caught:
        parse(expr)
    assert (caught.value.code, caught.value.message) == (code, message)


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        (4, 47004, "The interval must be at least 5 seconds, got 4"),
        (" 3 ", 47004, "The interval must be at least 5 seconds, got 3"),
        ("abc", 47001, "The interval must be a whole number of seconds, got 'abc'"),
        ("5.0", 47001, "The interval must be a whole number of seconds, got '5.0'"),
        (5.5, 47001, "The interval must be a whole number of seconds, got 5.5"),
        (True, 47001, "The interval must be a whole number of seconds"),
        (None, 47001, "The interval must be a whole number of seconds"),
        ([5], 47001, "The interval must be a whole number of seconds"),
    ],
)
def test_interval_error_messages(value, code, message):
    with pytest.raises(CronError) as caught:
        cron.validate_interval(value)
    assert (caught.value.code, caught.value.message) == (code, message)


@pytest.mark.parametrize(("value", "seconds"), [(" 30 ", 30), ("+7", 7), (7.0, 7), (5, 5), (86400, 86400)])
def test_interval_values(value, seconds):
    assert cron.validate_interval(value) == seconds


# -- descriptions in another language ---------------------------------------------------
#
# With a locale other than en_US, cron-descriptor words the time of day in
# that language and this module words the day part itself, phrase by phrase,
# through `translate` (gettext in the console). A translate that marks what
# it was given shows which phrases and words went through it, and how they
# were put together, without depending on a catalog.


def _marked(text: str) -> str:
    return f"<{text}>"


@pytest.mark.parametrize(
    ("expression", "day_part"),
    [
        ("0 0 9 * * *", ""),
        ("0 0 9 L * ?", "<, ><on the last day of the month>"),
        ("0 0 9 L-3 * ?", "<, ><on the 3th day before the last day of the month>"),
        ("0 0 9 15W * ?", "<, ><on the weekday nearest day 15 of the month>"),
        ("0 0 9 LW * ?", "<, ><on the last weekday of the month>"),
        ("0 0 9 L-2W * ?", "<, ><on the weekday nearest 2 days before the last day of the month>"),
        ("0 0 9 10,20 * ?", "<, ><on day 10,20 of the month>"),
        ("0 0 9 ? * 5#3", "<, ><on the <third> <Friday> of the month>"),
        ("0 0 9 ? * 1#1", "<, ><on the <first> <Monday> of the month>"),
        ("0 0 9 ? * 5L", "<, ><on the last <Friday> of the month>"),
        ("0 0 9 ? * 0L", "<, ><on the last <Sunday> of the month>"),
        ("0 0 9 ? * 7L", "<, ><on the last <Sunday> of the month>"),
        ("0 0 9 ? * MON-FRI", "<, ><on <Monday>-<Friday>>"),
        ("0 0 9 ? * 0,3,7", "<, ><on <Sunday>,<Wednesday>,<Sunday>>"),
        ("0 0 9 ? * */2", "<, ><on */2>"),
        ("0 0 9 ? * 1/2", "<, ><on 1/2>"),
        ("0 0 9 1 JAN,MAR *", "<, ><on day 1 of the month><, ><only in <January>,<March>>"),
        ("0 0 9 1 1-3,12 ?", "<, ><on day 1 of the month><, ><only in <January>-<March>,<December>>"),
        ("0 0 9 1 */2 ?", "<, ><on day 1 of the month><, ><only in */2>"),
        ("0 0 9 1 1/2 ?", "<, ><on day 1 of the month><, ><only in 1/2>"),
        ("0 0 9 1 ? *", "<, ><on day 1 of the month>"),  # ? in the month: every month
        ("0 0 9 ? 2 SUN", "<, ><on <Sunday>><, ><only in <February>>"),
    ],
)
def test_another_language_words_the_day_part_through_translate(expression, day_part):
    assert cron.describe(expression, locale="zh_CN", translate=_marked) == "在 09:00" + day_part


def test_english_needs_no_translate():
    assert cron.describe("0 0 9 ? * MON-FRI", translate=_marked) == cron.describe("0 0 9 ? * MON-FRI")
    assert "<" not in cron.describe("0 0 9 ? * MON-FRI", translate=_marked)
