"""Counting a cron schedule's fires in a window without walking them
(CronSchedule.count_between, the Upcoming page's series): the count and the
last fire are the walk's own, for plain expressions, L/W/#, zones with
clock changes (gaps, folds, half-hour shifts) and windows cut mid-second,
with and without a calendar's day rule."""

import itertools
from datetime import UTC, date, datetime, timedelta

import pytest

from jobs import cron

EXPRESSIONS = [
    "0 */5 * * * *",
    "*/20 * 1-3 * * *",
    "0 0,30 1-3 * * *",
    "30 15 2 * * *",
    "0 0 * L * ?",
    "0 0 9 LW * ?",
    "0 * 2 ? * 5#3",
    "0 0/7 * 15W * ?",
    "0 0 * ? * 6L",
    "0 0 0 * * *",
    "59 59 23 * * *",
    "*/30 * 1-3 * * *",
    "0 15,45 0-4 L-3 * ?",
    "0 30 23 * * *",
]
ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Havana",
    "Pacific/Chatham",
    "America/Nuuk",  # a gap that ends at midnight: the moved fire lands on the next day
]
STARTS = [
    datetime(2026, 3, 27, 22, tzinfo=UTC),  # Berlin's spring forward inside the week
    datetime(2026, 10, 24, 0, 30, 15, tzinfo=UTC),  # Berlin's fall back
    datetime(2026, 3, 7, 5, tzinfo=UTC),  # New York's spring forward, Havana's midnight gap
    datetime(2026, 10, 31, 12, 0, 0, 500_000, tzinfo=UTC),  # mid-second start; New York's fall back
    datetime(2026, 4, 4, 13, 17, tzinfo=UTC),  # Lord Howe's half-hour fold, Chatham's change
    datetime(2026, 3, 27, 12, tzinfo=UTC),  # Nuuk's 23:00 → 00:00 on 28 March
    datetime(2026, 11, 1, 5, 59, 59, tzinfo=UTC),  # inside New York's repeated hour
    datetime(2026, 1, 31, 23, 59, 59, tzinfo=UTC),
    datetime(2028, 2, 26, 7, 0, 0, 999_999, tzinfo=UTC),  # a leap February's end
]
WINDOWS = [timedelta(hours=1), timedelta(days=1), timedelta(days=7, seconds=1, microseconds=5)]


def walked(schedule, after, end, zone, days=None):
    count, last = 0, None
    for step in schedule.walk(after, zone, days=days):
        if isinstance(step, cron.Uncovered) or (isinstance(step, cron.Fire) and step.at >= end):
            break
        if isinstance(step, cron.Fire):
            count, last = count + 1, step.at
    return count, last


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_the_count_and_last_fire_are_the_walks_in_every_zone_and_window(expression):
    schedule = cron.parse(expression)
    for zone, start, window in itertools.product(ZONES, STARTS, WINDOWS):
        expected = walked(schedule, start, start + window, zone)
        assert schedule.count_between(start, start + window, zone) == expected, (zone, start, window)


def test_starting_from_a_walks_fire_gives_the_rest_of_the_walk():
    schedule = cron.parse("0 */10 * * * *")
    start = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)  # New York, the night it falls back
    fires = list(schedule.next_n(start, "America/New_York", 40))
    for fire in fires:
        end = fire + timedelta(hours=5)
        assert schedule.count_between(fire, end, "America/New_York") == walked(
            schedule, fire, end, "America/New_York"
        )


class Weekdays:
    """A day rule as jobs.workdays gives one: Monday to Friday, known to a date."""

    def __init__(self, covered_until):
        self.covered_until = covered_until

    def verdict(self, day):
        return day.weekday() < 5, ""


@pytest.mark.parametrize("covered_until", [None, date(2026, 3, 31), date(2026, 10, 27)])
def test_a_calendars_refused_days_and_its_end_count_as_the_walk_counts_them(covered_until):
    days = Weekdays(covered_until)
    for expression, zone, start in itertools.product(
        ["0 */5 * * * *", "0 30 2 * * *", "0 0 12 L * ?"], ["UTC", "Europe/Berlin"], STARTS[:2]
    ):
        schedule = cron.parse(expression)
        end = start + timedelta(days=7)
        assert schedule.count_between(start, end, zone, days=days) == walked(
            schedule, start, end, zone, days
        ), (expression, zone, start)


def test_an_empty_or_reversed_window_counts_none():
    schedule = cron.parse("0 0 12 * * *")
    noon = datetime(2026, 1, 1, 12, tzinfo=UTC)
    assert schedule.count_between(noon, noon, "UTC") == (0, None)
    assert schedule.count_between(noon, noon - timedelta(days=1), "UTC") == (0, None)


def test_a_window_without_fires_counts_none():
    schedule = cron.parse("0 0 0 1 1 ?")
    start = datetime(2026, 3, 1, tzinfo=UTC)
    assert schedule.count_between(start, start + timedelta(days=7), "Europe/Berlin") == (0, None)
