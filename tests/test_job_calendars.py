"""Jobs on working-day calendars, H and jitter, through the API and the
job's own next-fire rule: official data (China's 2025 holidays and make-up
days), custom calendars that change without a restart, the data-missing
state and its alert, and the coded refusals."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.urls import reverse

from jobs import alerts, calendars, cron, workdays
from jobs.models import Alert, AuditEvent, Job, WorkCalendar
from tests.fixtures.api import JOB, assert_error

pytestmark = pytest.mark.django_db


def fires(job: Job, after: datetime, count: int) -> list[datetime]:
    out = []
    for _ in range(count):
        after = job.next_fire_after(after)
        if after is None:
            break
        out.append(after)
    return out


def local_days(times, zone):
    return [t.astimezone(cron.get_zone(zone)).date() for t in times]


def test_a_working_days_job_skips_national_day_and_fires_on_the_make_up_weekend(make_job):
    job = make_job(cron_expression="0 0 9 * * ?", timezone="Asia/Shanghai", calendar="CN")
    days = local_days(fires(job, datetime(2025, 9, 26, 2, tzinfo=UTC), 4), "Asia/Shanghai")
    assert days == [date(2025, 9, 28), date(2025, 9, 29), date(2025, 9, 30), date(2025, 10, 9)]


def test_the_rule_counts_in_the_jobs_zone(make_job):
    """23:00 on September 30 in Los Angeles is October 1 in China, but the
    job's day is its own local date: a working day there."""
    job = make_job(cron_expression="0 0 23 * * ?", timezone="America/Los_Angeles", calendar="CN")
    first = job.next_fire_after(datetime(2025, 9, 30, 12, tzinfo=UTC))
    assert first.astimezone(cron.get_zone("America/Los_Angeles")).date() == date(2025, 9, 30)


def test_h_is_stable_across_edits_of_other_fields(staff_api):
    body = staff_api.post("/api/jobs", {**JOB, "name": "spread-1", "cron_expression": "0 H * * * ?"}).json()
    job = Job.objects.get(pk=body["id"])
    minute = job.next_fire_at.minute
    assert body["cron_expression"] == "0 H * * * ?"
    response = staff_api.patch(
        f"/api/jobs/{job.pk}", {"cron_expression": "0 H 3 * * ?", "version": job.version}
    )
    assert response.status_code == 200, response.content
    job.refresh_from_db()
    assert job.next_fire_at.minute == minute and job.next_fire_at.hour == 3
    assert minute == cron.parse("0 H * * * ?", "spread-1").minutes[0]


def test_jitter_moves_each_fire_by_its_stable_amount(make_job):
    job = make_job(cron_expression="0 0 * * * ?", jitter_seconds=900)
    after = datetime(2026, 1, 5, tzinfo=UTC)
    times = fires(job, after, 6)
    for at in times:
        nominal = at.replace(minute=0, second=0)
        assert at - nominal == timedelta(seconds=cron.jitter_seconds(job.name, nominal, 900))
    assert [t.hour for t in times] == [0, 1, 2, 3, 4, 5] or times[0].hour in (0, 1)


@pytest.mark.parametrize(
    ("extra", "code", "field"),
    [
        ({"calendar": "XX"}, "47030", "calendar"),
        ({"calendar": "US-ZZ"}, "47030", "calendar"),
        ({"calendar": "nope"}, "47030", "calendar"),
        ({"calendar": "CN", "calendar_rule": "sometimes"}, "invalid_choice", "calendar_rule"),
        ({"jitter_seconds": 3601}, None, "jitter_seconds"),
        ({"jitter_seconds": -1}, None, "jitter_seconds"),
        ({"schedule_type": "none", "calendar": "CN"}, "invalid", "calendar"),
        (
            {"schedule_type": "interval", "interval_seconds": 60, "jitter_seconds": 5},
            "invalid",
            "jitter_seconds",
        ),
        ({"cron_expression": "0 0 0 HL * ?"}, "47001", "cron_expression"),
    ],
)
def test_bad_calendar_input_is_a_coded_400_and_saves_nothing(staff_api, extra, code, field):
    assert_error(staff_api.post("/api/jobs", {**JOB, **extra}), 400, code, field)
    assert not Job.objects.filter(name=JOB["name"]).exists()


def test_a_rule_that_can_never_fire_is_refused(staff_api):
    start = date.today() - timedelta(days=5)
    calendars.save_calendar(
        name="closed",
        non_working=[{"date": (start + timedelta(days=i)).isoformat(), "name": "closed"} for i in range(800)],
    )
    body = {**JOB, "cron_expression": "0 0 9 * * ?", "calendar": "closed"}
    assert_error(staff_api.post("/api/jobs", body), 400, "47032", "calendar_rule")
    # The same calendar read the other way round fires every day.
    assert staff_api.post("/api/jobs", {**body, "calendar_rule": "non_working_days"}).status_code == 201


def test_the_api_stores_a_canonical_code_and_shows_the_fields(staff_api):
    response = staff_api.post("/api/jobs", {**JOB, "calendar": "us-ca", "calendar_rule": "skip_holidays"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["calendar"], body["calendar_rule"], body["jitter_seconds"]) == ("US-CA", "skip_holidays", 0)
    event = AuditEvent.objects.filter(job_id=body["id"]).latest("id")
    assert event.changes["calendar"] == [None, "US-CA"]


def test_a_custom_calendar_change_takes_effect_at_the_next_computation(make_job):
    calendars.save_calendar(name="office", base="CN")
    now = datetime(2025, 9, 25, tzinfo=UTC)
    job = make_job(cron_expression="0 0 9 * * ?", timezone="Asia/Shanghai", calendar="office")
    assert local_days([job.next_fire_after(now)], "Asia/Shanghai") == [date(2025, 9, 25)]
    calendars.save_calendar(name="office", original="office", base="CN", non_working="2025-09-25 Office move")
    job = Job.objects.get(pk=job.pk)
    assert local_days([job.next_fire_after(now)], "Asia/Shanghai") == [date(2025, 9, 26)]
    assert AuditEvent.objects.filter(subject=AuditEvent.Subject.CALENDAR).count() == 2


def test_saving_a_custom_calendar_counts_its_jobs_next_fire_again(make_job):
    calendars.save_calendar(name="plant")
    job = make_job(cron_expression="0 0 9 * * ?", calendar="plant")
    job.next_fire_at = job.next_fire_after(datetime.now(UTC))
    job.save()
    day = job.next_fire_at.date()
    calendars.save_calendar(
        name="plant", original="plant", non_working=[{"date": day.isoformat(), "name": "x"}]
    )
    job.refresh_from_db()
    assert job.next_fire_at.date() > day


def test_a_calendar_based_on_itself_or_a_loop_is_refused():
    with pytest.raises(workdays.CalendarError) as caught:
        calendars.save_calendar(name="a", base="a")
    assert caught.value.code == workdays.SELF_REFERENCE
    calendars.save_calendar(name="a", base="CN")
    calendars.save_calendar(name="b", base="a")
    with pytest.raises(workdays.CalendarError) as caught:
        calendars.save_calendar(name="a", original="a", base="b")
    assert caught.value.code == workdays.SELF_REFERENCE
    assert WorkCalendar.objects.get(name="a").base == "CN"


@pytest.mark.parametrize("name", ["CN", "us-ca", ""])
def test_a_custom_calendar_may_not_take_a_built_in_name(name):
    with pytest.raises(workdays.CalendarError):
        calendars.save_calendar(name=name)
    assert not WorkCalendar.objects.exists()


def test_bad_dates_are_47023_and_save_nothing():
    with pytest.raises(workdays.CalendarError) as caught:
        calendars.save_calendar(name="x", non_working="2025-13-01 nope")
    assert caught.value.code == workdays.BAD_DATE
    assert not WorkCalendar.objects.exists()


def test_a_calendar_in_use_is_not_deleted(make_job):
    calendars.save_calendar(name="ops")
    make_job(calendar="ops")
    with pytest.raises(workdays.CalendarError) as caught:
        calendars.delete_calendar(name="ops")
    assert caught.value.code == calendars.IN_USE


ICS = b"""BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:1
DTSTART;VALUE=DATE:20251001
DTEND;VALUE=DATE:20251004
SUMMARY:National Day
END:VEVENT
BEGIN:VEVENT
UID:2
DTSTART;VALUE=DATE:20251225
SUMMARY:Christmas
END:VEVENT
END:VCALENDAR
"""


def test_an_ics_file_reads_into_dates():
    assert calendars.parse_ics(ICS) == [
        {"date": "2025-10-01", "name": "National Day"},
        {"date": "2025-10-02", "name": "National Day"},
        {"date": "2025-10-03", "name": "National Day"},
        {"date": "2025-12-25", "name": "Christmas"},
    ]
    with pytest.raises(workdays.CalendarError):
        calendars.parse_ics(b"not a calendar")


def test_beyond_the_installed_data_the_job_stops_and_a_calendar_alert_is_raised(make_job, monkeypatch):
    last = workdays.builtin("CN").covered_until
    job = make_job(
        cron_expression="0 0 9 * * ?", timezone="Asia/Shanghai", calendar="CN", alert_on=["calendar"]
    )
    before_end = datetime(last.year, 12, 30, tzinfo=UTC)
    times = fires(job, before_end, 5)
    assert times and all(t.astimezone(cron.get_zone("Asia/Shanghai")).date() <= last for t in times)
    assert job.next_fire_after(times[-1]) is None
    # Far from the end: no state, no alert.
    assert job.calendar_missing(datetime(last.year, 1, 10, tzinfo=UTC)) is None
    now = datetime(last.year, 12, 5, tzinfo=UTC)
    assert job.calendar_missing(now) == last + timedelta(days=1)
    assert alerts.check_calendar(now) == 1
    alert = Alert.objects.get(kind=Alert.Kind.CALENDAR)
    assert f"calendar data for {last.year + 1} missing" in alert.subject
    assert alerts.check_calendar(now + timedelta(days=1)) == 0  # one per job and year


def test_a_built_in_calendar_without_a_notice_is_never_missing(make_job):
    job = make_job(cron_expression="0 0 9 * * ?", calendar="DE-BY")
    assert job.calendar_missing(datetime(2099, 12, 20, tzinfo=UTC)) is None
    assert job.next_fire_after(datetime(2099, 12, 20, tzinfo=UTC)) is not None


def test_the_console_describes_h_as_the_jobs_own_values(staff_client, make_job):
    job = make_job(name="nightly-export", cron_expression="0 H 2 * * ?")
    minute = cron.parse("0 H 2 * * ?", "nightly-export").minutes[0]
    page = staff_client.get(reverse("jobs:job_detail", args=[job.pk])).content.decode()
    assert f"At 02:{minute:02d}" in page


SHANGHAI = cron.get_zone("Asia/Shanghai")


def local(*args) -> datetime:
    return datetime(*args, tzinfo=SHANGHAI)


def test_an_interval_job_on_working_days_skips_holidays_and_keeps_its_grid(make_job):
    """Every 15 minutes on working days, on the grid of its last fire (:05,
    :20, :35, :50): National Day's week is skipped whole, and the first fire
    after it is the grid's first slot of October 9; the Sunday make-up day
    before it fires, the Saturday does not."""
    job = make_job(schedule_type="interval", interval_seconds=900, timezone="Asia/Shanghai", calendar="CN")
    last = local(2025, 9, 30, 23, 50)
    assert job.next_fire_after(last, last_fire=last) == local(2025, 10, 9, 0, 5)
    friday = local(2025, 9, 26, 23, 50)
    assert job.next_fire_after(friday, last_fire=friday) == local(2025, 9, 28, 0, 5)
    # Within a working day it is the plain interval.
    noon = local(2025, 9, 30, 12, 5)
    assert job.next_fire_after(noon, last_fire=noon) == local(2025, 9, 30, 12, 20)
    job.calendar_rule = "non_working_days"
    assert job.next_fire_after(friday, last_fire=friday) == local(2025, 9, 27, 0, 5)


@pytest.mark.timeout(20)
def test_an_interval_grid_inside_a_refused_date_s_last_second_moves_on_to_the_next_date(make_job):
    """A job saved at hh:mm:59.5 has its slots at :59.5: one falls in a
    refused date's last second (23:59:59.5), and the walk still leaves for the
    next date (it used to step by nothing there, for ever, hanging the planner)."""
    job = make_job(schedule_type="interval", interval_seconds=60, timezone="Asia/Shanghai", calendar="CN")
    half = timedelta(seconds=59, microseconds=500_000)
    friday = local(2025, 9, 26, 23, 59) + half  # the last slot of a working day
    assert job.next_fire_after(friday, last_fire=friday) == local(2025, 9, 28, 0, 0) + half


def test_an_interval_job_with_a_calendar_is_saved_and_planned_on_its_days(staff_api):
    body = {**JOB, "schedule_type": "interval", "interval_seconds": 900, "calendar": "cn"}
    body.pop("cron_expression", None)
    response = staff_api.post("/api/jobs", body)
    assert response.status_code == 201, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.calendar, job.calendar_rule) == ("CN", "working_days")
    working, _reason, _holiday = workdays.builtin("CN").status(job.next_fire_at.astimezone(job.zone).date())
    assert working


def test_an_interval_rule_that_can_never_fire_is_refused(staff_api):
    start = date.today() - timedelta(days=5)
    calendars.save_calendar(
        name="closed",
        non_working=[{"date": (start + timedelta(days=i)).isoformat(), "name": "closed"} for i in range(800)],
    )
    body = {**JOB, "schedule_type": "interval", "interval_seconds": 900, "calendar": "closed"}
    body.pop("cron_expression", None)
    assert_error(staff_api.post("/api/jobs", body), 400, "47032", "calendar_rule")
    assert not Job.objects.filter(name=JOB["name"]).exists()


def test_upcoming_counts_an_interval_job_s_fires_by_its_calendar(make_job):
    from jobs import upcoming

    start = local(2025, 9, 30, 20, 0)
    make_job(
        schedule_type="interval",
        interval_seconds=120,
        timezone="Asia/Shanghai",
        calendar="CN",
        next_fire_at=start,
    )
    (series,), _more = upcoming.timeline(Job.objects.all(), start=start, end=start + timedelta(hours=24))
    assert series.count == 120, "every two minutes until midnight; October 1 is a holiday"
    assert series.last == local(2025, 9, 30, 23, 58)


def test_the_schedule_check_leaves_an_interval_job_moved_past_a_holiday(make_job):
    from jobs.engine.schedulecheck import off_schedule

    job = make_job(
        schedule_type="interval",
        interval_seconds=900,
        timezone="Asia/Shanghai",
        calendar="CN",
        next_fire_at=local(2025, 10, 9, 0, 5),
    )
    assert job not in off_schedule(local(2025, 10, 1, 12, 0))


def test_an_interval_job_stops_where_the_calendar_data_ends(make_job):
    last = workdays.builtin("CN").covered_until
    job = make_job(schedule_type="interval", interval_seconds=3600, timezone="Asia/Shanghai", calendar="CN")
    end = datetime(last.year, last.month, last.day, 23, 0, tzinfo=SHANGHAI)
    assert job.next_fire_after(end, last_fire=end) is None
    assert job.calendar_missing(datetime(last.year, 12, 5, tzinfo=UTC)) == last + timedelta(days=1)


def test_a_country_whose_next_year_is_only_estimated_gets_the_missing_state_and_alert(make_job, monkeypatch):
    """Indonesia's Eid al-Fitr of 2027 is only estimated by the installed
    library: 30 days before 2027 the job says so, alerts, and stops at the
    end of 2026 as a CN job does without next year's notice."""
    monkeypatch.setattr(workdays, "_this_year", lambda: 2026)
    job = make_job(
        cron_expression="0 0 9 * * ?", timezone="Asia/Jakarta", calendar="ID", alert_on=["calendar"]
    )
    assert job.calendar_missing(datetime(2026, 11, 1, tzinfo=UTC)) is None
    now = datetime(2026, 12, 5, tzinfo=UTC)
    assert job.calendar_missing(now) == date(2027, 1, 1)
    assert job.next_fire_after(datetime(2026, 12, 31, 3, tzinfo=UTC)) is None
    assert alerts.check_calendar(now) == 1
    assert "calendar data for 2027 missing" in Alert.objects.get(kind=Alert.Kind.CALENDAR).subject


def test_a_custom_calendar_s_versions_are_read_at_most_once_a_recheck(make_job, monkeypatch):
    """A scheduler computes hundreds of next fires a second: a custom
    calendar costs no query between version checks, and a change another
    process made is seen at the first check after RECHECK_SECONDS."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobs.models import calendars as calendar_rows

    now = [100.0]
    monkeypatch.setattr(calendar_rows, "_clock", lambda: now[0])
    calendars.save_calendar(name="office", base="CN")
    job = make_job(cron_expression="0 0 9 * * ?", timezone="Asia/Shanghai", calendar="office")
    after = datetime(2025, 9, 25, tzinfo=UTC)
    assert local_days([job.next_fire_after(after)], "Asia/Shanghai") == [date(2025, 9, 25)]
    with CaptureQueriesContext(connection) as queries:
        for _ in range(50):
            job.next_fire_after(after)
    assert len(queries) == 0
    # Another process's edit: the row and its version, not through this process's save.
    WorkCalendar.objects.filter(name="office").update(
        non_working=[{"date": "2025-09-25", "name": "Office move"}], version=2
    )
    now[0] += calendar_rows.RECHECK_SECONDS / 2
    assert local_days([job.next_fire_after(after)], "Asia/Shanghai") == [date(2025, 9, 25)]
    now[0] += calendar_rows.RECHECK_SECONDS
    assert local_days([job.next_fire_after(after)], "Asia/Shanghai") == [date(2025, 9, 26)]


def test_a_custom_calendar_deleted_and_made_again_elsewhere_is_read_afresh(make_job, monkeypatch):
    """Another process deletes a calendar and makes one of the same name:
    its version starts at 1 again, as the one this process built; the new
    row's dates are used from the first check after RECHECK_SECONDS, and so
    are those of a base made again under the same name."""
    from jobs.models import calendars as calendar_rows

    now = [100.0]
    monkeypatch.setattr(calendar_rows, "_clock", lambda: now[0])
    calendars.save_calendar(name="team", base="CN")
    calendars.save_calendar(name="office", base="team")
    job = make_job(cron_expression="0 0 9 * * ?", timezone="Asia/Shanghai", calendar="office")
    after = datetime(2025, 9, 25, tzinfo=UTC)
    assert local_days([job.next_fire_after(after)], "Asia/Shanghai") == [date(2025, 9, 25)]
    # Not through this process's delete and save: no forget() here.
    WorkCalendar.objects.filter(name="office").delete()
    WorkCalendar.objects.create(
        name="office", base="team", non_working=[{"date": "2025-09-25", "name": "Office move"}]
    )
    now[0] += calendar_rows.RECHECK_SECONDS
    assert local_days([job.next_fire_after(after)], "Asia/Shanghai") == [date(2025, 9, 26)]
    WorkCalendar.objects.filter(name="team").delete()
    WorkCalendar.objects.create(
        name="team", base="CN", non_working=[{"date": "2025-09-26", "name": "Team day"}]
    )
    now[0] += calendar_rows.RECHECK_SECONDS
    assert local_days([job.next_fire_after(after)], "Asia/Shanghai") == [date(2025, 9, 28)]


def test_saving_a_custom_calendar_counts_its_interval_jobs_next_fire_again(make_job):
    calendars.save_calendar(name="plant")
    job = make_job(schedule_type="interval", interval_seconds=3600, calendar="plant")
    job.next_fire_at = job.next_fire_after(datetime.now(UTC))
    job.save()
    day = job.next_fire_at.date()
    calendars.save_calendar(
        name="plant", original="plant", non_working=[{"date": day.isoformat(), "name": "x"}]
    )
    job.refresh_from_db()
    assert job.next_fire_at.date() > day


def test_an_interval_job_gets_the_calendar_alert_too(make_job, monkeypatch):
    monkeypatch.setattr(workdays, "_this_year", lambda: 2026)
    job = make_job(
        schedule_type="interval",
        interval_seconds=600,
        timezone="Asia/Jakarta",
        calendar="ID",
        alert_on=["calendar"],
    )
    assert alerts.check_calendar(datetime(2026, 12, 5, tzinfo=UTC)) == 1
    assert Alert.objects.get(kind=Alert.Kind.CALENDAR).job_id == job.pk
