"""The console's tables of runs show a split fire (sharded or broadcast) as
one row, its shard 0, that opens to its pieces on the Runs page; filtered
by status, every matching piece shows."""

import re
import uuid
from datetime import timedelta

import pytest

from jobs.models import Run
from tests.fixtures.core import T0

pytestmark = pytest.mark.django_db


@pytest.fixture
def fire(make_job):
    job = make_job(shards=3)
    fire_id = uuid.uuid4()
    runs = [
        Run.objects.create(
            job=job,
            fire_id=fire_id,
            scheduled_at=T0,
            trigger="schedule",
            shard_index=index,
            shard_total=3,
            status=status,
            finished_at=T0 + timedelta(seconds=1),
        )
        for index, status in enumerate(["succeeded", "succeeded", "failed"])
    ]
    return job, fire_id, runs


def run_ids(html: str) -> list[int]:
    return [int(n) for n in re.findall(r'<tr id="run-(\d+)"', html)]


def test_a_job_page_shows_a_split_fire_as_one_row_that_opens_to_its_pieces(staff_client, fire):
    job, fire_id, runs = fire
    page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
    assert run_ids(page) == [runs[0].pk]
    assert "a fire of 3 runs: open them" in page
    assert "1 Failed · 2 Succeeded" in page
    opened = staff_client.get(f"/runs/?job={job.pk}&fire={fire_id}").content.decode()
    assert sorted(run_ids(opened)) == [run.pk for run in runs]
    failed = staff_client.get(f"/jobs/{job.pk}/?status=failed").content.decode()
    assert run_ids(failed) == [runs[2].pk]


def test_the_runs_page_shows_a_split_fire_as_one_row(staff_client, fire, make_job):
    job, _fire_id, runs = fire
    other = make_job()
    alone = Run.objects.create(
        job=other, scheduled_at=T0 - timedelta(minutes=1), trigger="schedule", status="succeeded"
    )
    page = staff_client.get("/runs/").content.decode()
    assert run_ids(page) == [runs[0].pk, alone.pk]
    assert staff_client.get("/runs/?status=failed").content.decode().count('<tr id="run-') == 1
