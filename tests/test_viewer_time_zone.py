"""Times where people live: the console shows every time in the viewer's
zone (kept from the browser at the first sign-in, changed on the profile),
with UTC on hover, and one click switches to UTC and back. Schedules stay
in the job's own zone."""

import pytest

from jobs.models import Profile, Run
from tests.fixtures.core import T0, make_user

pytestmark = pytest.mark.django_db


def sign_in(client, zone):
    return client.post(
        "/login/", {"username": "ana", "password": "pw-ana-123", "time_zone": zone, "next": "/"}
    )


def test_the_first_sign_in_keeps_the_browsers_zone_and_later_ones_do_not_change_it(client):
    user = make_user("ana", "viewer")
    assert sign_in(client, "asia/tokyo").status_code == 302
    assert Profile.objects.get(user=user).time_zone == "Asia/Tokyo"
    client.post("/logout/")
    sign_in(client, "Europe/Berlin")
    assert Profile.objects.get(user=user).time_zone == "Asia/Tokyo"


def test_a_zone_the_system_does_not_know_is_not_kept(client):
    user = make_user("ana", "viewer")
    assert sign_in(client, "Mars/Olympus").status_code == 302
    assert not Profile.objects.filter(user=user, time_zone__gt="").exists()


def test_a_run_page_shows_its_times_in_the_viewers_zone_with_utc_on_hover(make_job, client):
    user = make_user("ana", "viewer")
    Profile.objects.create(user=user, time_zone="Asia/Tokyo")
    client.force_login(user)
    job = make_job(name="nightly", timezone="Europe/Berlin")
    run = Run.objects.create(job=job, scheduled_at=T0, trigger="manual", status="succeeded")
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert (
        '<time datetime="2026-03-02T12:00:00+00:00" title="2026-03-02 12:00:00 UTC">2026-03-02 21:00:00</time>'
        in page
    )
    history = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'title="2026-03-02 12:00:00 UTC">2026-03-02 21:00:00<' in history
    assert "Times in Asia/Tokyo" in history


def test_one_click_shows_utc_and_another_the_zone_again(make_job, client):
    user = make_user("ana", "viewer")
    Profile.objects.create(user=user, time_zone="Asia/Tokyo")
    client.force_login(user)
    run = Run.objects.create(job=make_job(), scheduled_at=T0, trigger="manual", status="succeeded")
    response = client.post("/profile/time-zone/", {"utc": "on", "next": f"/runs/{run.pk}/"})
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert ">2026-03-02 12:00:00</time>" in page and 'value="off"' in page
    client.post("/profile/time-zone/", {"utc": "off", "next": "/"})
    assert ">2026-03-02 21:00:00</time>" in client.get(f"/runs/{run.pk}/").content.decode()


def test_the_profile_sets_the_zone_and_refuses_an_unknown_one_with_its_code(client):
    user = make_user("ana", "viewer")
    client.force_login(user)
    client.post("/profile/time-zone/", {"time_zone": "america/new_york", "next": "/profile/"})
    assert Profile.objects.get(user=user).time_zone == "America/New_York"
    response = client.post(
        "/profile/time-zone/", {"time_zone": "Nowhere/City", "next": "/profile/"}, follow=True
    )
    assert "47006" in response.content.decode()
    assert Profile.objects.get(user=user).time_zone == "America/New_York"


def test_an_offsite_next_is_not_followed(client):
    client.force_login(make_user("ana", "viewer"))
    response = client.post("/profile/time-zone/", {"utc": "on", "next": "https://evil.example/"})
    assert response["Location"] == "/"


def test_the_schedule_stays_in_the_jobs_own_zone(make_job, client):
    user = make_user("ana", "viewer")
    Profile.objects.create(user=user, time_zone="Asia/Tokyo")
    client.force_login(user)
    job = make_job(name="berlin", timezone="Europe/Berlin", next_fire_at=T0)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "2026-03-02 13:00:00 CET" in page
