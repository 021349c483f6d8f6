"""Working-day calendars against official data: China's 2025 notice (holidays
and make-up working days), US-CA and DE-BY public holidays, in several
zones; unknown codes; the end of the installed data."""

from datetime import UTC, date, datetime, timedelta

import holidays
import pytest

from jobs import cron, workdays
from jobs.workdays import Calendar, CalendarError, DayRule


def local_dates(expr, zone, after, count, rule):
    steps = cron.parse(expr).walk(after, zone, days=rule)
    fires = []
    for step in steps:
        if isinstance(step, cron.Fire):
            fires.append(step.at.astimezone(cron.get_zone(zone)).date())
            if len(fires) == count:
                break
    return fires


def test_china_national_day_2025_and_its_make_up_saturday_and_sunday():
    rule = DayRule(workdays.builtin("CN"), workdays.WORKING_DAYS)
    fires = local_dates("0 0 9 * * ?", "Asia/Shanghai", datetime(2025, 9, 25, tzinfo=UTC), 8, rule)
    assert fires == [
        date(2025, 9, 25),
        date(2025, 9, 26),
        date(2025, 9, 28),  # Sunday, a working day (for October 7)
        date(2025, 9, 29),
        date(2025, 9, 30),
        # October 1-8: the holiday
        date(2025, 10, 9),
        date(2025, 10, 10),
        date(2025, 10, 11),  # Saturday, a working day (for October 8)
    ]


def test_china_sunday_january_26_2025_is_a_working_day():
    rule = DayRule(workdays.builtin("CN"), workdays.WORKING_DAYS)
    assert rule.verdict(date(2025, 1, 26))[0] is True
    assert "make-up" in rule.verdict(date(2025, 1, 26))[1]
    assert rule.verdict(date(2025, 1, 29)) == (False, "Chinese New Year (Spring Festival)")


def test_the_day_is_the_local_date_in_the_jobs_zone():
    """09:00 in Shanghai on October 9 is 01:00 UTC the same day, but 23:30
    in New York on September 30 is October 1 in UTC: the zone decides."""
    rule = DayRule(workdays.builtin("CN"), workdays.WORKING_DAYS)
    ny = local_dates("0 30 23 * * ?", "America/New_York", datetime(2025, 9, 30, 12, tzinfo=UTC), 1, rule)
    assert ny == [date(2025, 9, 30)]
    # The same wall time read in UTC+14 falls on October 1 there … and is skipped to the 9th.
    kiritimati = local_dates(
        "0 30 0 * * ?", "Pacific/Kiritimati", datetime(2025, 9, 30, 12, tzinfo=UTC), 1, rule
    )
    assert kiritimati == [date(2025, 10, 9)]


def test_non_working_days_and_skip_holidays():
    cn = workdays.builtin("CN")
    off = DayRule(cn, workdays.NON_WORKING_DAYS)
    fires = local_dates("0 0 9 * * ?", "Asia/Shanghai", datetime(2025, 9, 26, tzinfo=UTC), 3, off)
    assert fires == [date(2025, 9, 27), date(2025, 10, 1), date(2025, 10, 2)]
    skip = DayRule(cn, workdays.SKIP_HOLIDAYS)
    # Monday to Friday as cron says, minus holidays; the make-up Sunday is not in the cron.
    fires = local_dates("0 0 9 ? * MON-FRI", "Asia/Shanghai", datetime(2025, 9, 26, tzinfo=UTC), 3, skip)
    assert fires == [date(2025, 9, 26), date(2025, 9, 29), date(2025, 9, 30)]
    fires = local_dates("0 0 9 ? * MON-FRI", "Asia/Shanghai", datetime(2025, 10, 1, tzinfo=UTC), 1, skip)
    assert fires == [date(2025, 10, 9)]


def test_us_california_and_germany_bavaria():
    ca = DayRule(workdays.builtin("us-ca"), workdays.WORKING_DAYS)
    # 2025-11-27 Thanksgiving, 2025-11-28 the day after (a California holiday).
    fires = local_dates("0 0 8 * * ?", "America/Los_Angeles", datetime(2025, 11, 26, 17, tzinfo=UTC), 2, ca)
    assert fires == [date(2025, 12, 1), date(2025, 12, 2)]
    by = DayRule(workdays.builtin("DE-BY"), workdays.WORKING_DAYS)
    # 2025-06-19 Corpus Christi is a holiday in Bavaria, not in Berlin.
    fires = local_dates("0 0 8 * * ?", "Europe/Berlin", datetime(2025, 6, 18, 12, tzinfo=UTC), 1, by)
    assert fires == [date(2025, 6, 20)]
    be = DayRule(workdays.builtin("DE-BE"), workdays.WORKING_DAYS)
    fires = local_dates("0 0 8 * * ?", "Europe/Berlin", datetime(2025, 6, 18, 12, tzinfo=UTC), 1, be)
    assert fires == [date(2025, 6, 19)]


@pytest.mark.parametrize(
    ("text", "canonical"), [("cn", "CN"), ("us-ca", "US-CA"), ("DE-by", "DE-BY"), ("gb-sct", "GB-SCT")]
)
def test_codes_are_stored_canonically(text, canonical):
    assert workdays.builtin_code(text) == canonical


@pytest.mark.parametrize("text", ["XX", "US-ZZ", "C N", "", "CN-", "DE-BY-X"])
def test_unknown_codes_are_47020(text):
    with pytest.raises(CalendarError) as caught:
        workdays.builtin_code(text)
    assert caught.value.code == workdays.UNKNOWN_CALENDAR


def test_china_data_ends_with_the_last_notice_and_nothing_is_guessed_after_it():
    cn = workdays.builtin("CN")
    last = cn.covered_until
    assert last is not None and last.year >= 2025 and (last.month, last.day) == (12, 31)
    steps = list(
        cron.parse("0 0 9 * * ?").walk(
            datetime(last.year, 12, 29, tzinfo=UTC), "Asia/Shanghai", days=DayRule(cn, workdays.WORKING_DAYS)
        )
    )
    assert isinstance(steps[-1], cron.Uncovered) and steps[-1].day == last + timedelta(days=1)
    assert all(step.at.date() <= last for step in steps if isinstance(step, cron.Fire))
    # California's holidays follow fixed rules: covered to the library's last year.
    assert workdays.builtin("US-CA").covered_until == date(holidays.country_holidays("US").end_year, 12, 31)


@pytest.mark.parametrize(
    ("code", "covered"),
    [
        # Indonesia: Eid al-Fitr 2027 and later are only estimated by the library.
        ("ID", date(2026, 12, 31)),
        # Egypt: its 2026 Islamic holidays are still estimates, so 2026 is not covered.
        ("EG", date(2025, 12, 31)),
        # Japan: the library's range ends with 2099.
        ("JP", date(2099, 12, 31)),
        ("DE-BY", date(2100, 12, 31)),
        ("CN", date(2026, 12, 31)),
    ],
)
def test_a_year_with_an_estimated_holiday_or_past_the_library_s_range_is_not_covered(code, covered):
    assert workdays._covered_from(code, 2026) == covered


def test_a_custom_calendar_s_own_dates_carry_its_base_s_data_on():
    base = workdays.builtin("ID")
    last = base.covered_until
    year = last.year + 1
    custom = workdays.Calendar(name="office", base="ID", off={date(year, 3, 10): "Eid al-Fitr (official)"})
    assert custom.covered_until == date(year, 12, 31)
    assert workdays.Calendar(name="plain", base="ID").covered_until == last


def test_a_custom_calendar_s_own_dates_cover_their_years_only():
    # CN's data ends with a year; the custom calendar's dates three years on
    # say nothing of the two between: they stay missing.
    last = workdays.builtin("CN").covered_until
    later = {date(last.year + 3, 10, 1): "National Day (official)"}
    assert workdays.Calendar(name="office", base="CN", off=later).covered_until == last
    # With the next year's dates too, that year is covered, and no further.
    both = {**later, date(last.year + 1, 10, 1): "National Day (official)"}
    assert workdays.Calendar(name="office", base="CN", off=both).covered_until == date(last.year + 1, 12, 31)
    # On a custom calendar with dates of its own for the year after.
    parent = workdays.Calendar(name="parent", base="CN", on={date(last.year + 1, 9, 27): "make-up"})
    child = workdays.Calendar(name="child", base=parent, off=later)
    assert child.covered_until == date(last.year + 1, 12, 31)


def test_a_calendar_that_leaves_nothing_to_fire_on_ends_the_search():
    every_day = {date(2026, 1, 1) + timedelta(days=i): "closed" for i in range(800)}
    rule = DayRule(Calendar("closed", off=every_day), workdays.WORKING_DAYS)
    steps = list(cron.parse("0 0 9 * * ?").walk(datetime(2026, 1, 1, tzinfo=UTC), "UTC", days=rule))
    assert steps and all(isinstance(step, cron.Skipped) for step in steps)
    assert len(steps) <= cron.DAY_SEARCH_LIMIT + 2


def test_a_custom_calendar_adjusts_its_base():
    office = Calendar(
        "office",
        base=workdays.builtin("CN"),
        off={date(2025, 9, 29): "company outing"},
        on={date(2025, 10, 8): "release day"},
    )
    rule = DayRule(office, workdays.WORKING_DAYS)
    fires = local_dates("0 0 9 * * ?", "Asia/Shanghai", datetime(2025, 9, 28, 12, tzinfo=UTC), 3, rule)
    assert fires == [date(2025, 9, 30), date(2025, 10, 8), date(2025, 10, 9)]
    assert rule.covered_until == workdays.builtin("CN").covered_until


def test_every_second_schedule_skips_a_holiday_without_reading_each_second():
    rule = DayRule(workdays.builtin("CN"), workdays.WORKING_DAYS)
    schedule = cron.parse("* * * * * *")
    steps = schedule.walk(datetime(2025, 9, 30, 15, 59, 59, tzinfo=UTC), "Asia/Shanghai", days=rule)
    kinds = [type(next(steps)).__name__ for _ in range(9)]
    # October 1 to 8, one step each, then 00:00:00 on the 9th.
    assert kinds == ["Skipped"] * 8 + ["Fire"]
