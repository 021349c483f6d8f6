"""`H` in cron fields (Jenkins' hash) and per-fire jitter: stable values
from a seed, spread across a field, and coded refusals where H makes no
sense."""

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from jobs import cron

AFTER = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)


def minute_of(expr: str, seed: str) -> int:
    return cron.parse(expr, seed).next_after(AFTER, "UTC").minute


def test_h_is_stable_for_a_seed_and_differs_between_seeds():
    assert minute_of("0 H * * * ?", "backup") == minute_of("0 H * * * ?", "backup")
    # Editing another field keeps the hashed minute.
    assert minute_of("0 H 3 * * ?", "backup") == minute_of("0 H * * * ?", "backup")
    minutes = {minute_of("0 H * * * ?", f"job-{i}") for i in range(50)}
    assert len(minutes) > 20


def test_h_spreads_many_jobs_across_the_hour():
    counts = Counter(minute_of("0 H * * * ?", f"report-{i}") for i in range(600))
    assert set(counts) == set(range(60))
    assert max(counts.values()) < 25  # about 10 each


def test_h_with_a_range_stays_inside_it():
    for i in range(200):
        schedule = cron.parse("0 H(0-29) H(8-10) * * ?", f"j{i}")
        assert 0 <= schedule.minutes[0] <= 29 and len(schedule.minutes) == 1
        assert 8 <= schedule.hours[0] <= 10


def test_h_with_a_step_is_a_stepped_series_with_a_hashed_start():
    starts = set()
    for i in range(300):
        minutes = cron.parse("0 H/15 * * * ?", f"j{i}").minutes
        assert len(minutes) == 4 and all(b - a == 15 for a, b in itertools.pairwise(minutes))
        starts.add(minutes[0])
    assert starts == set(range(15))
    minutes = cron.parse("0 H(0-29)/10 * * * ?", "x").minutes
    assert len(minutes) == 3 and minutes[0] < 10 and minutes[-1] <= 29


def test_h_in_day_of_month_picks_a_day_every_month_has():
    days = {cron.parse("0 0 0 H * ?", f"j{i}")._dom_bits.bit_length() - 1 for i in range(300)}
    assert days <= set(range(1, 29)) and len(days) > 20


def test_h_keeps_the_expression_as_written_and_describes_the_values():
    schedule = cron.parse("0 h(0-29) 9 * * mon-fri", "nightly")
    assert schedule.expression == "0 H(0-29) 9 * * MON-FRI"
    assert cron.normalize("0 h 9 * * ?") == "0 H 9 * * ?"
    minute = schedule.minutes[0]
    assert cron.describe(schedule.expression, seed="nightly").startswith(f"At 09:{minute:02d}")


def test_thursday_is_a_name_not_a_hash():
    assert cron.parse("0 0 9 ? * THU").expression == "0 0 9 ? * THU"


@pytest.mark.parametrize(
    "expr",
    ["0 0 0 HL * ?", "0 0 0 HW * ?", "0 0 0 ? * H#2", "0 0 0 ? * HL", "0 H,5 * * * ?", "0 H(29-0) * * * ?"],
)
def test_h_where_it_makes_no_sense_is_a_coded_error(expr):
    with pytest.raises(cron.CronError) as caught:
        cron.parse(expr, "job")
    assert caught.value.code == cron.MALFORMED
    assert "H" in caught.value.message


def test_h_range_out_of_the_field_is_out_of_range():
    with pytest.raises(cron.CronError) as caught:
        cron.parse("0 H(0-75) * * * ?", "job")
    assert caught.value.code == cron.OUT_OF_RANGE


def test_jitter_is_stable_bounded_and_spread():
    when = datetime(2026, 3, 2, 9, tzinfo=UTC)
    assert cron.jitter_seconds("a", when, 0) == 0
    values = [cron.jitter_seconds("a", when + timedelta(hours=i), 300) for i in range(500)]
    assert all(0 <= v <= 300 for v in values) and len(set(values)) > 200
    assert values == [cron.jitter_seconds("a", when + timedelta(hours=i), 300) for i in range(500)]


def test_walk_delays_each_fire_by_its_jitter_and_keeps_order():
    schedule = cron.parse("0 0 * * * ?")
    fires = [
        step for step, _ in zip(schedule.walk(AFTER, "UTC", jitter=600, seed="s"), range(24), strict=False)
    ]
    for fire in fires:
        assert fire.at - fire.scheduled == timedelta(seconds=cron.jitter_seconds("s", fire.scheduled, 600))
    assert [f.at for f in fires] == sorted(f.at for f in fires)
    # A search that starts between a fire's schedule and its delayed time still finds it.
    first = fires[0]
    if first.at > first.scheduled:
        again = next(schedule.walk(first.scheduled, "UTC", jitter=600, seed="s"))
        assert again.at == first.at


def test_preview_shows_the_times_after_jitter():
    result = cron.preview("0 0 9 * * ?", "UTC", after=AFTER, count=3, seed="s", jitter=120)
    for item in result["times"]:
        at = datetime.fromisoformat(item["utc"].replace("Z", "+00:00"))
        assert at.hour == 9 and at.minute * 60 + at.second == cron.jitter_seconds(
            "s", at.replace(minute=0, second=0), 120
        )
