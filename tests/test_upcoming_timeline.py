"""The Upcoming timeline: the next hour, day or week grouped by time, a job
that fires every few seconds on one row ("every 20 s, 180 fires"), filters
by job name and namespace, and only jobs the viewer may see."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from jobs.models import Job
from jobs.upcoming import Series, timeline
from tests.fixtures.core import make_user

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)


def every(make_job, name, seconds, first, **fields):
    return make_job(
        name=name,
        schedule_type="interval",
        cron_expression="",
        interval_seconds=seconds,
        next_fire_at=first,
        **fields,
    )


def test_a_job_firing_every_20_seconds_is_one_row_counting_its_fires(make_job):
    demo = every(make_job, "demo-20s", 20, NOW)
    cron_fast = make_job(
        name="cron-30s", cron_expression="*/30 * * * * *", next_fire_at=NOW + timedelta(seconds=30)
    )
    hourly = every(make_job, "hourly", 3600, NOW + timedelta(minutes=30))
    rows, more = timeline(Job.objects.live(), start=NOW, end=NOW + timedelta(hours=1))
    assert not more
    by_name = {row.job.name: row for row in rows}
    assert len(rows) == 3 and [row.at for row in rows] == sorted(row.at for row in rows)
    series = by_name[demo.name]
    assert isinstance(series, Series) and series.count == 180 and series.every == timedelta(seconds=20)
    assert series.last == NOW + timedelta(minutes=59, seconds=40) and series.counted_all
    assert isinstance(by_name[cron_fast.name], Series) and by_name[cron_fast.name].count == 119
    assert not isinstance(by_name[hourly.name], Series)


def test_a_collapsed_job_never_comes_back_on_a_later_page(make_job):
    every(make_job, "fast", 20, NOW + timedelta(seconds=1))
    for i in range(5):
        every(make_job, f"slow-{i}", 86_400, NOW + timedelta(minutes=10 + i))
    first, more = timeline(Job.objects.live(), start=NOW, end=NOW + timedelta(hours=1), limit=3)
    assert more and first[0].job.name == "fast"
    rest, more = timeline(
        Job.objects.live(), start=NOW, end=NOW + timedelta(hours=1), after=(first[-1].at, first[-1].job.pk)
    )
    assert not more and [row.job.name for row in rest] == ["slow-2", "slow-3", "slow-4"]


@time_machine.travel(NOW, tick=False)
def test_the_page_groups_by_time_filters_and_shows_only_visible_jobs(make_job, client):
    every(make_job, "demo-20s", 20, NOW, namespace="ops")
    every(make_job, "backup", 86_400, NOW + timedelta(minutes=15), namespace="ops")
    every(make_job, "report", 86_400, NOW + timedelta(minutes=45), namespace="ops")
    every(make_job, "payroll", 86_400, NOW + timedelta(minutes=5), namespace="finance")
    client.force_login(make_user("opsviewer", "viewer", "ops"))
    html = client.get("/upcoming/?window=1h").content.decode()
    assert "payroll" not in html
    assert "every 20 s, 180 fires" in html
    headings = re.findall(r'<th scope="rowgroup" colspan="4">([^<]+)</th>', html)
    assert headings == ["12:00", "12:10", "12:40"]
    filtered = client.get("/upcoming/?window=1h&q=back").content.decode()
    assert "backup" in filtered and "report" not in filtered and "demo-20s" not in filtered
    assert "report" not in client.get("/upcoming/?window=1h&namespace=finance").content.decode()


def test_the_pages_make_the_same_few_queries_however_many_jobs_fire():
    """Every field a job's next fire reads comes with the job: a field left
    out was one query per job on the page (83 on PostgreSQL at 10,000 jobs).
    tests/test_upcoming_postgres.py asks the same of PostgreSQL."""
    from tests.fixtures.upcoming import page_queries

    for window, (few, many) in page_queries().items():
        assert few == many, window


def test_a_frequent_cron_series_is_counted_to_the_windows_end(make_job):
    # Every 5 s for 7 days in Berlin (the week before clocks go forward):
    # far more fires than a walk would count.
    start = datetime(2026, 3, 18, 12, 0, 0, tzinfo=UTC)
    job = make_job(
        name="cron-5s", cron_expression="*/5 * * * * *", timezone="Europe/Berlin", next_fire_at=start
    )
    rows, _more = timeline(Job.objects.live(), start=start, end=start + timedelta(days=7))
    (series,) = [row for row in rows if row.job.pk == job.pk]
    assert isinstance(series, Series) and series.counted_all
    assert series.count == 7 * 86_400 // 5 and series.last == start + timedelta(days=7, seconds=-5)


def test_an_overdue_cron_job_keeps_its_own_period(make_job):
    """An overdue job shows its fire "now", then its next by the schedule:
    the gap between those two is not the job's period, so a cron job every
    5 minutes overdue at 12:03:30 is not a series "every 1 min 30 s", and
    one every minute is a series every minute."""
    start = NOW + timedelta(minutes=3, seconds=30)
    five = make_job(name="every-5-min", cron_expression="0 */5 * * * ?", next_fire_at=NOW)
    one = make_job(name="every-minute", cron_expression="0 * * * * ?", next_fire_at=NOW)
    rows, more = timeline(Job.objects.live(), start=start, end=start + timedelta(minutes=20))
    assert not more
    fires = [row for row in rows if row.job == five]
    assert not any(isinstance(row, Series) for row in fires)
    assert [row.at for row in fires] == [start] + [NOW + timedelta(minutes=m) for m in (5, 10, 15, 20)]
    (series,) = [row for row in rows if row.job == one]
    assert isinstance(series, Series) and series.every == timedelta(minutes=1)
    assert series.at == start and series.count == 1 + 20 and series.last == NOW + timedelta(minutes=23)


def test_only_an_overdue_jobs_first_fire_measures_from_the_next_one(make_job):
    """Minutes 0 and 3 of each hour: overdue at 11:30, its fire "now" is a
    row of its own (30 minutes to 12:00), and from 12:00 on it is what the
    same job on time is, a series (3 minutes to 12:03)."""
    start = NOW - timedelta(minutes=30)
    late = make_job(name="late", cron_expression="0 0,3 * * * *", next_fire_at=NOW - timedelta(hours=1))
    on_time = make_job(name="on-time", cron_expression="0 0,3 * * * *", next_fire_at=NOW)
    rows, _more = timeline(Job.objects.live(), start=start, end=start + timedelta(hours=2))
    late_rows = [(row.at, isinstance(row, Series)) for row in rows if row.job == late]
    on_time_rows = [(row.at, isinstance(row, Series)) for row in rows if row.job == on_time]
    assert on_time_rows == [(NOW, True)]
    assert late_rows == [(start, False), (NOW, True)]


def test_a_frequent_cron_job_over_a_clock_change_is_counted_to_the_cap(make_job):
    """Europe/Berlin springs forward on 29 March 2026: a window with that
    day is walked fire by fire, so a job every second is counted to
    MAX_COUNTED (shown as "1,000+"), not walked through 600,000 fires."""
    from jobs.upcoming import MAX_COUNTED

    start = datetime(2026, 3, 27, 12, tzinfo=UTC)
    make_job(name="every-second", cron_expression="* * * * * *", timezone="Europe/Berlin", next_fire_at=start)
    (series,) = timeline(Job.objects.live(), start=start, end=start + timedelta(days=7))[0]
    assert isinstance(series, Series) and series.count == MAX_COUNTED and not series.counted_all


def test_overdue_jobs_are_read_by_id_as_far_as_the_page_goes(make_job, monkeypatch):
    """Every overdue job fires at the window's start, so their order is by
    id: read in that order, a page takes the batches it shows and no more,
    however many jobs are overdue, and gives the fires in the order of
    reading every job (the overdue ones at the start, ties by id, and the
    jobs due later among them)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs import upcoming
    from jobs.upcoming import upcoming_fires

    monkeypatch.setattr(upcoming, "BATCH", 4)
    # Overdue by different times, created out of order; two due at the start
    # exactly, and daily jobs due in the window after it.
    for n in (7, 3, 11, 0, 5, 9, 1, 13, 2, 12, 4, 8, 6, 10):
        every(make_job, f"late-{n}", 86_400, NOW - timedelta(minutes=n + 1))
    for n in range(2):
        every(make_job, f"on-the-start-{n}", 86_400, NOW)
    for n in range(6):
        every(make_job, f"later-{n}", 86_400, NOW + timedelta(minutes=n))
    jobs = list(Job.objects.live().exclude(next_fire_at=None))
    expected = sorted((max(job.next_fire_at, NOW), job.pk) for job in jobs)
    end = NOW + timedelta(hours=1)

    fires, more = upcoming_fires(Job.objects.live(), start=NOW, end=end, limit=len(jobs))
    assert not more and [(fire.at, fire.job.pk) for fire in fires] == expected
    with CaptureQueriesContext(connection) as queries:
        first, more = upcoming_fires(Job.objects.live(), start=NOW, end=end, limit=3)
    assert more and [(fire.at, fire.job.pk) for fire in first] == expected[:3]
    # A batch of the overdue and one of the rest: not the 14 overdue jobs
    # in four batches before the first fire could be known.
    assert len(queries) == 2
    rest, more = upcoming_fires(
        Job.objects.live(), start=NOW, end=end, limit=100, after=(first[-1].at, first[-1].job.pk)
    )
    assert not more and [(fire.at, fire.job.pk) for fire in first + rest] == expected
