"""The trends' rollup (jobs.trends): finished runs added per job and hour
and per namespace and hour, each once, behind the clock by ROLLUP_LAG, an
hour of history per step; and what the dashboard and a job page read from
it. `scenario()` runs in this process on SQLite and in a process of its own
on PostgreSQL (test_trends_postgres.py), with the same answers."""

import re
from datetime import timedelta

import pytest

from jobs import trends
from jobs.models import BOUNDS_MS, JobRollup, JobWindowTotal, Run
from tests.factories import make_job
from tests.fixtures.trends import NOW, check, finished_run, scenario


@pytest.mark.django_db
def test_finished_runs_are_rolled_up_once_per_job_and_namespace_behind_the_lag():
    check(scenario())


def test_percentiles_are_read_to_the_bucket():
    buckets = [0] * len(BOUNDS_MS)
    assert trends.percentile(buckets, 0, 0.5) is None
    # 10 values, all in (100, 250]: the median interpolated halfway.
    cumulative = [0, 0, 0, 0, 0, 0] + [10] * (len(BOUNDS_MS) - 6)
    assert trends.percentile(cumulative, 10, 0.5) == pytest.approx(175)
    # Above the last bound: that bound.
    assert trends.percentile(buckets, 3, 0.99) == BOUNDS_MS[-1]


@pytest.mark.django_db
def test_a_viewer_sees_the_trends_of_their_namespaces_only():
    from tests.fixtures.core import make_user

    billing = make_job(name="billing-sync", namespace="billing")
    other = make_job(name="secret-ops", namespace="ops")
    for job in (billing, other):
        finished_run(job, "failed", finished=NOW - timedelta(hours=1), duration_ms=10, late_ms=1)
    trends.roll_up(NOW)
    viewer = make_user("bob", "viewer", namespace="billing")
    seen = trends.window_trends(viewer, "7d", now=NOW)
    assert [row["name"] for row in seen["failing"]] == ["billing-sync"]
    assert seen["total"].failures == 1
    assert len(seen["points"]) == 7


@pytest.mark.django_db
def test_rollup_rows_outlive_the_runs_and_have_their_own_retention():
    job = make_job(name="nightly")
    finished_run(job, "succeeded", finished=NOW - timedelta(days=50), duration_ms=10, late_ms=1)
    while not trends.roll_up(NOW):
        pass
    Run.objects.all().delete()
    assert JobRollup.objects.filter(job=job).count() == 1
    assert trends.delete_before(NOW - timedelta(days=40)) == 2  # the job's row and its namespace's
    assert not JobRollup.objects.exists()


@pytest.mark.django_db
def test_the_scheduler_rolls_up_what_it_ran(scheduler, clock):
    from tests.fixtures.core import drain

    job = make_job(
        name="yearly", cron_expression="0 0 0 1 1 ?", next_fire_at=clock.now - timedelta(seconds=1)
    )
    scheduler.run_pass(clock.now)
    drain(scheduler, clock.now)
    scheduler.run_pass(clock.now)  # writes the outcome
    assert Run.objects.get(job=job).status == "succeeded"
    assert not JobRollup.objects.exists(), "inside the lag: not yet"
    scheduler.run_pass(clock.advance(seconds=trends.ROLLUP_LAG.seconds + 20))
    row = JobRollup.objects.get(job=job)
    assert (row.succeeded, row.duration_count, row.lateness_count) == (1, 1, 1)


@pytest.fixture(autouse=True)
def _no_cached_lists():
    """The dashboard's lists of jobs are cached per window and namespaces:
    each test starts without another's."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def rolled_up(db):
    """Two jobs with a day of runs rolled up: `steady` takes 100 ms, once 900 ms."""
    from django.utils import timezone

    now = timezone.now()
    steady = make_job(name="steady", namespace="ops")
    flaky = make_job(name="flaky", namespace="ops")
    for minutes in range(1, 9):
        finished_run(
            steady, "succeeded", finished=now - timedelta(minutes=minutes * 10), duration_ms=100, late_ms=2
        )
    slow = finished_run(steady, "succeeded", finished=now - timedelta(minutes=95), duration_ms=900, late_ms=2)
    finished_run(flaky, "failed", finished=now - timedelta(minutes=30), duration_ms=20, late_ms=2)
    while not trends.roll_up(now):
        pass
    return {"steady": steady, "flaky": flaky, "slow": slow}


def test_the_dashboard_shows_the_trends_of_a_window(rolled_up, client):
    from tests.fixtures.core import make_user

    client.force_login(make_user("ops-viewer", "viewer"))
    page = client.get("/").content.decode()
    assert 'id="trends"' in page and 'id="trend-runs">10<' in page
    assert 'id="trend-success">90.0 %<' in page
    slowest = page[page.index('id="trend-slowest"') : page.index('id="trend-failing"')]
    assert slowest.index("steady") < slowest.index("flaky")
    failing = page[page.index('id="trend-failing"') :]
    assert "flaky" in failing and "steady" not in failing.split("</ol>")[0]
    week = client.get("/trends/?window=7d", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="trends")
    assert week.status_code == 200 and 'aria-current="true">7 days<' in week.content.decode()
    assert client.get("/trends/?window=nonsense").status_code == 200


def test_a_job_page_shows_its_30_days_and_marks_a_slow_run(rolled_up, client):
    from tests.fixtures.core import make_user

    client.force_login(make_user("ops-viewer", "viewer"))
    steady = rolled_up["steady"]
    page = client.get(f"/jobs/{steady.pk}/").content.decode()
    assert 'id="job-success">100.0 %<' in page
    # Read to the bucket: the median of 8 × 100 ms and 900 ms lies in (50, 100].
    p50 = int(re.search(r'id="job-p50">(\d+) ms<', page).group(1))
    assert 50 < p50 <= 100
    row = page[page.index(f'id="run-{rolled_up["slow"].pk}"') :].split("</tr>")[0]
    assert ">slow<" in row
    assert page.count(">slow<") == 1


def test_the_trend_pages_cost_a_fixed_number_of_queries(rolled_up, client, django_assert_max_num_queries):
    from tests.fixtures.core import make_user

    client.force_login(make_user("ops-viewer", "viewer"))
    client.get("/")  # the lists of jobs are cached from here on
    with django_assert_max_num_queries(12) as first:
        client.get("/trends/?window=30d")
    for _ in range(3):
        make_job(name=f"more-{_}", namespace="ops")
    with django_assert_max_num_queries(len(first.captured_queries)):
        client.get("/trends/?window=30d")


@pytest.mark.django_db
def test_the_lists_of_jobs_are_the_runs_counted_whether_read_from_window_totals_or_hours():
    from tests.fixtures.trends import check_lists, lists_against_runs

    check_lists(lists_against_runs())


@pytest.mark.django_db
def test_a_job_moved_to_another_namespace_keeps_its_window_totals_with_its_hours():
    from tests.fixtures.trends import check_totals_after_a_move, totals_against_hours_after_a_move

    check_totals_after_a_move(totals_against_hours_after_a_move())


@pytest.mark.django_db
def test_the_lists_are_the_asked_window_when_the_roll_up_moves_it_meanwhile(monkeypatch):
    """The roll-up step moves the 24-hour window (and its totals) while a
    page is reading the window before it: the page's lists are still that
    window's, the run that is about to leave it included."""
    from django.contrib.auth import get_user_model

    from jobs import access

    admin = get_user_model().objects.create_user("admin", is_superuser=True)
    leaving, staying = make_job(name="leaving"), make_job(name="staying")
    boundary = trends.hour_of(NOW) + timedelta(hours=1)
    # `leaving` failed in the hour that leaves the window at `boundary`.
    finished_run(leaving, "failed", finished=boundary - timedelta(hours=23, minutes=55), duration_ms=9000)
    finished_run(staying, "failed", finished=NOW - timedelta(minutes=10), duration_ms=10)
    while not trends.roll_up(NOW):
        pass
    before = boundary - timedelta(seconds=1)
    trends.roll_up(before)

    real = access.visible_by_namespace
    moved = []

    def moving(user, rows):
        # The scheduler's roll-up step commits while the page builds its lists.
        if rows.model in (JobRollup, JobWindowTotal) and not moved:
            moved.append(trends.roll_up(boundary + timedelta(seconds=5)))
        return real(user, rows)

    monkeypatch.setattr(trends.access, "visible_by_namespace", moving)
    seen = trends.window_trends(admin, "24h", now=before)
    assert moved == [True]
    assert [row["name"] for row in seen["failing"]] == ["leaving", "staying"]
    assert [row["name"] for row in seen["slowest"]] == ["leaving", "staying"]


@pytest.mark.django_db
def test_both_lists_of_jobs_are_read_from_one_reading_of_the_sums(rolled_up):
    """The slowest and the most-failing jobs come from one query over the
    per-job sums (10,000 rows at scale, summed once rather than twice)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    admin = get_user_model().objects.create_user("lists-admin", is_superuser=True)
    with CaptureQueriesContext(connection) as queries:
        found = trends.window_trends(admin, "7d", now=timezone.now())
    assert found["slowest"] and found["failing"]
    read = [q["sql"] for q in queries if "jobs_jobwindowtotal" in q["sql"] or "jobs_jobrollup" in q["sql"]]
    assert len(read) == 1, read
