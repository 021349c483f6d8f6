"""A job's state, which editors and the scheduler both change: an edit made
from a copy loaded before the scheduler crashed the job, or paused a run-once
job after its fire, never writes the old state back. Each door (the console
form, the API's PUT and PATCH with and without `version`, `jobs import`) is
raced step by step: the job is loaded, the scheduler changes its state
through its own code (a failed fire at the alert threshold, a run-once
job's claim), then the stale edit is saved. docs/cron.md states the rule."""

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from django.urls import reverse

from jobs import services
from jobs.models import Job
from tests.factories import edit_form_data
from tests.fixtures.core import T0, drain, runs_of

pytestmark = pytest.mark.django_db

LATER = T0 + timedelta(seconds=1)


@pytest.fixture
def node(make_scheduler, clock):
    """One node on the fixed clock, on either database."""
    return make_scheduler(max_workers=4, clock=clock, misfire_threshold=60, clustered=False)


def failing_job(make_job, **fields):
    """Due at T0; its first failed fire reaches the alert threshold."""
    return make_job(
        name="nightly",
        handler="demo.fail",
        alert_threshold=1,
        max_retries=0,
        next_fire_at=T0,
        cron_expression="0 * * * * *",
        **fields,
    )


def run_once_job(make_job, **fields):
    """Due at T0, to fire once."""
    return make_job(name="once", run_once=True, next_fire_at=T0, cron_expression="0 * * * * *", **fields)


def engine_acts(node):
    """The scheduler's pass at T0: it claims the due fire (a run-once job is
    paused by its claim), runs it and records the outcome (a failure at the
    threshold crashes the job)."""
    node.plan_due(T0)
    node.claim_queued(T0)
    drain(node, T0)


@pytest.fixture
def engine_before_save(monkeypatch, node):
    """The scheduler acts after a door loaded the job and before it saves:
    the window a door without `version` cannot see."""
    real = services.save_job_if_changed

    def racing(**kwargs):
        engine_acts(node)
        return real(**kwargs)

    monkeypatch.setattr(services, "save_job_if_changed", racing)


def stored(job) -> Job:
    return Job.objects.get(pk=job.pk)


# -- the scheduler's state changes make a new version ---------------------------------------


def test_crashing_a_job_bumps_its_version(both_databases, make_job, node):
    job = failing_job(make_job)
    engine_acts(node)
    after = stored(job)
    assert (after.state, after.version, after.next_fire_at) == (Job.State.CRASHED, job.version + 1, None)


def test_the_claim_that_pauses_a_run_once_job_bumps_its_version(both_databases, make_job, node):
    job = run_once_job(make_job)
    other = make_job(name="every-minute", next_fire_at=T0)
    node.plan_due(T0)
    after = stored(job)
    assert (after.state, after.version, after.next_fire_at) == (Job.State.PAUSED, job.version + 1, None)
    # A job claimed in the same batch that stays enabled keeps its version.
    assert stored(other).version == other.version
    assert len(runs_of(job)) == 1


def test_the_single_claim_that_pauses_a_run_once_job_bumps_its_version(both_databases, make_job, node):
    # The claim used when a batch is refused by a duplicate fire.
    job = run_once_job(make_job)
    plan = node.planner.plan_fire(Job.objects.get(pk=job.pk), T0, busy=False)
    with transaction.atomic():
        assert node.planner.claim_fire(plan, T0, epoch=None)
    after = stored(job)
    assert (after.state, after.version) == (Job.State.PAUSED, job.version + 1)


def test_a_claim_planned_before_an_edit_is_planned_again_on_the_next_pass(both_databases, make_job, node):
    job = make_job(name="every-minute", next_fire_at=T0)
    plan = node.planner.plan_fire(Job.objects.get(pk=job.pk), T0, busy=False)
    services.pause_job(job=stored(job), now=T0)
    services.resume_job(job=stored(job), now=T0 - timedelta(minutes=1))  # due at T0 again, new version
    assert stored(job).next_fire_at == T0
    assert not node.planner.claim_batch([plan], T0, epoch=None)
    assert not runs_of(job)
    node.plan_due(T0)
    assert [run.scheduled_at for run in runs_of(job)] == [T0]


# -- the console form ---------------------------------------------------------------


@pytest.mark.parametrize("make", [failing_job, run_once_job])
def test_a_console_edit_loaded_before_the_scheduler_changed_the_state_is_stale(
    both_databases, staff_client, make_job, node, make
):
    job = make(make_job)
    url = reverse("jobs:job_edit", args=[job.pk])
    assert f'name="version" value="{job.version}"' in staff_client.get(url).content.decode()
    engine_acts(node)
    changed = stored(job)
    assert changed.state != Job.State.ENABLED

    response = staff_client.post(url, edit_form_data(job, description="looked at it"))

    assert response.status_code == 200
    assert "changed by someone else" in response.content.decode()
    after = stored(job)
    assert (after.state, after.version, after.description) == (changed.state, changed.version, "")


def test_an_admin_re_enables_a_crashed_job_in_the_console_form(both_databases, staff_client, make_job, node):
    job = failing_job(make_job)
    engine_acts(node)
    crashed = stored(job)
    page = staff_client.get(reverse("jobs:job_edit", args=[job.pk])).content.decode()
    assert f'name="version" value="{crashed.version}"' in page

    response = staff_client.post(
        reverse("jobs:job_edit", args=[job.pk]), edit_form_data(crashed, state=Job.State.ENABLED)
    )

    assert response.status_code == 302
    after = stored(job)
    assert after.state == Job.State.ENABLED and after.next_fire_at is not None


# -- the API --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["put", "patch"])
@pytest.mark.parametrize("make", [failing_job, run_once_job])
def test_an_api_edit_with_the_version_before_the_state_changed_is_409(
    both_databases, staff_api, make_job, node, make, method
):
    job = make(make_job)
    read = staff_api.get(f"/api/jobs/{job.pk}").json()
    engine_acts(node)
    changed = stored(job)

    body = {**read, "description": "looked at it"} if method == "put" else {"description": "looked at it"}
    response = getattr(staff_api, method)(f"/api/jobs/{job.pk}", {**body, "version": read["version"]})

    assert response.status_code == 409 and response.json()["code"] == "stale_version"
    after = stored(job)
    assert (after.state, after.version, after.description) == (changed.state, changed.version, "")


@pytest.mark.parametrize(
    "body",
    [{"description": "looked at it"}, {"description": "looked at it", "state": "enabled"}],
    ids=["state left out", "state enabled"],
)
def test_an_api_patch_without_version_leaves_a_job_crashed_in_between_crashed(
    both_databases, staff_api, make_job, engine_before_save, body
):
    job = failing_job(make_job)

    response = staff_api.patch(f"/api/jobs/{job.pk}", body)

    assert response.status_code == 200
    after = stored(job)
    assert (after.state, after.next_fire_at, after.description) == (Job.State.CRASHED, None, "looked at it")
    assert response.json()["state"] == "crashed"


def test_an_api_put_without_version_leaves_a_job_crashed_in_between_crashed(
    both_databases, staff_api, make_job, engine_before_save
):
    job = failing_job(make_job)
    read = staff_api.get(f"/api/jobs/{job.pk}").json()
    del read["version"]

    response = staff_api.put(f"/api/jobs/{job.pk}", {**read, "description": "looked at it"})

    assert response.status_code == 200
    after = stored(job)
    assert (after.state, after.description) == (Job.State.CRASHED, "looked at it")


@pytest.mark.parametrize("method", ["put", "patch"])
def test_an_api_edit_without_version_never_fires_a_run_once_job_twice(
    both_databases, staff_api, make_job, node, engine_before_save, method
):
    job = run_once_job(make_job)
    read = staff_api.get(f"/api/jobs/{job.pk}").json()
    del read["version"]
    body = {**read, "description": "edited"} if method == "put" else {"description": "edited"}

    response = getattr(staff_api, method)(f"/api/jobs/{job.pk}", body)

    assert response.status_code == 200
    after = stored(job)
    assert (after.state, after.next_fire_at, after.description) == (Job.State.PAUSED, None, "edited")
    node.plan_due(T0 + timedelta(hours=1))
    assert len(runs_of(job)) == 1


def test_an_api_patch_without_version_that_names_a_new_state_writes_it(staff_api, make_job, node):
    # The run-once job fired and was paused; asking for it enabled is an
    # explicit change, and it fires again.
    job = run_once_job(make_job)
    engine_acts(node)
    response = staff_api.patch(f"/api/jobs/{job.pk}", {"state": "enabled"})
    assert response.status_code == 200 and response.json()["state"] == "enabled"
    assert stored(job).next_fire_at is not None
    assert staff_api.patch(f"/api/jobs/{job.pk}", {"state": "paused"}).json()["state"] == "paused"


# -- jobs import (the CLI) ------------------------------------------------------------


@pytest.mark.parametrize("make", [failing_job, run_once_job])
def test_an_import_loaded_before_the_scheduler_changed_the_state_keeps_that_state(
    both_databases, tmp_path, make_job, node, engine_before_save, make
):
    job = make(make_job)
    out = StringIO()
    call_command("jobs", "export", job.name, stdout=out)
    specs = json.loads(out.getvalue())
    specs[0]["description"] = "from the repository"
    source = tmp_path / "jobs.json"
    source.write_text(json.dumps(specs))
    changed_to = Job.State.CRASHED if job.handler == "demo.fail" else Job.State.PAUSED

    call_command("jobs", "import", str(source), stdout=StringIO(), stderr=StringIO())

    after = stored(job)
    assert (after.state, after.next_fire_at, after.description) == (changed_to, None, "from the repository")
    node.plan_due(T0 + timedelta(hours=1))
    assert len(runs_of(job)) == 1


# -- pausing ----------------------------------------------------------------------------


@pytest.fixture
def engine_before_pause(monkeypatch, node):
    """The scheduler acts after a door loaded the job and chose to pause it."""
    real = services.pause_job

    def racing(**kwargs):
        engine_acts(node)
        return real(**kwargs)

    monkeypatch.setattr(services, "pause_job", racing)


def test_the_api_toggle_never_pauses_a_job_crashed_after_it_was_loaded(
    both_databases, staff_api, make_job, engine_before_pause
):
    job = failing_job(make_job)

    response = staff_api.post(f"/api/jobs/{job.pk}/toggle")

    assert response.status_code == 409 and response.json()["code"] == "conflict"
    assert "stays crashed" in response.json()["message"]
    after = stored(job)
    assert (after.state, after.version) == (Job.State.CRASHED, job.version + 1)
    assert not after.audit_events.filter(action="pause").exists()


def test_jobs_pause_leaves_a_crashed_job_crashed(make_job, node):
    job = failing_job(make_job)
    engine_acts(node)
    with pytest.raises(CommandError, match="stays crashed until it is re-enabled"):
        call_command("jobs", "pause", job.name, stdout=StringIO(), stderr=StringIO())
    assert stored(job).state == Job.State.CRASHED


def test_the_console_pause_leaves_a_crashed_job_crashed_and_says_so(staff_client, make_job, node):
    job = failing_job(make_job)
    engine_acts(node)
    response = staff_client.post(reverse("jobs:job_pause", args=[job.pk]), follow=True)
    assert "stays crashed until it is re-enabled" in response.content.decode()
    assert stored(job).state == Job.State.CRASHED
