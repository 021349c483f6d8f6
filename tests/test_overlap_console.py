"""The console's pools page, a job's backfill form (count, then confirm) and
its cancel, and the waiting run's reason in the run tables."""

from datetime import timedelta

import pytest

from jobs import pools
from jobs.models import Backfill, Pool, Run
from tests.fixtures.core import T0

pytestmark = pytest.mark.django_db


def test_admins_create_and_resize_pools_and_size_zero_is_a_form_error(staff_client):
    page = staff_client.post("/pools/", {"name": "heavy", "size": "0"})
    assert page.status_code == 200
    assert "A pool&#x27;s size is a whole number from 1" in page.content.decode()
    assert not Pool.objects.exists()
    staff_client.post("/pools/", {"name": "heavy", "size": "2"})
    assert Pool.objects.get().size == 2
    page = staff_client.get("/pools/").content.decode()
    assert 'id="pool-heavy"' in page and "0/2" in page


def test_viewers_do_not_reach_the_pools_page(viewer_client):
    assert viewer_client.get("/pools/").status_code == 403


def test_the_backfill_form_counts_then_creates_on_confirmation(staff_client, make_job):
    job = make_job(cron_expression="0 0 * * * *")
    data = {"range_start": "2025-01-01 00:00", "range_end": "2025-01-01 02:00", "parallel": "1"}
    page = staff_client.post(f"/jobs/{job.pk}/backfill/", data).content.decode()
    assert "3 fires to run" in page
    assert not Run.objects.exists()
    staff_client.post(f"/jobs/{job.pk}/backfill/", {**data, "confirm": "yes"})
    backfill = Backfill.objects.get()
    assert backfill.fires == 3
    page = staff_client.get(f"/jobs/{job.pk}/backfill/").content.decode()
    assert f'id="backfill-{backfill.pk}"' in page
    staff_client.post(f"/backfills/{backfill.pk}/cancel/")
    assert set(Run.objects.values_list("status", flat=True)) == {"cancelled"}


def test_a_future_range_is_a_form_error_and_creates_nothing(staff_client, make_job):
    job = make_job()
    data = {"range_start": "2025-01-01 00:00", "range_end": "2999-01-01 00:00", "confirm": "yes"}
    page = staff_client.post(f"/jobs/{job.pk}/backfill/", data)
    assert page.status_code == 200
    assert "the range ends in the future" in page.content.decode()
    assert not Backfill.objects.exists()


def test_viewers_may_not_backfill(viewer_client, make_job):
    job = make_job()
    data = {"range_start": "2025-01-01 00:00", "range_end": "2025-01-01 02:00", "confirm": "yes"}
    assert viewer_client.post(f"/jobs/{job.pk}/backfill/", data).status_code == 403
    assert not Run.objects.exists()


def test_a_waiting_run_says_what_it_waits_for(staff_client, make_job):
    pools.save_pool(name="heavy", size=1)
    job = make_job(pool="heavy")
    Run.objects.create(job=job, scheduled_at=T0, trigger="schedule", status="running")
    waiting = Run.objects.create(
        job=make_job(pool="heavy"),
        scheduled_at=T0 + timedelta(seconds=1),
        trigger="schedule",
        status="waiting",
    )
    expected = "waiting for pool heavy (1/1)"
    assert expected in staff_client.get(f"/jobs/{waiting.job_id}/").content.decode()
    assert expected in staff_client.get("/runs/").content.decode()
    assert expected in staff_client.get(f"/runs/{waiting.pk}/").content.decode()
