"""Chains of jobs that run after one another stay finite: the engine refuses a
downstream run that would repeat a job of its chain of runs, or go deeper
than JOBS_MAX_CHAIN_DEPTH, whatever the stored graph says (a skipped run with
its reason); saving refuses a chain deeper than JOBS_MAX_CHAIN_DEPTH (47009)
and more than JOBS_MAX_DOWNSTREAM jobs after one job (47010)."""

from datetime import timedelta

import pytest

from jobs import refusals, services
from jobs.forms import JobForm
from jobs.models import Job, JobDependency, Run
from jobs.serializers import spec_to_form_data
from tests.fixtures.core import T0

pytestmark = pytest.mark.django_db


def run_all(scheduler, clock, passes=12):
    """Claim and finish queued runs, pass after pass, until none is left (or
    `passes` is spent: a chain that never ends is seen, not waited for)."""
    for _ in range(passes):
        now = clock.advance(seconds=1)
        started = scheduler.claim_queued(now)
        while scheduler.pool.flights:
            scheduler.collect(scheduler.pool.wait(0.2), now)
        if not started:
            return


def chain_job(make_job, name, *upstreams):
    job = make_job(name=name, schedule_type="none", cron_expression="")
    for upstream in upstreams:
        JobDependency.objects.create(upstream=Job.objects.get(name=upstream), downstream=job, on="success")
    return job


def test_a_loop_in_the_stored_graph_runs_each_job_once_and_records_the_refusal(
    both_databases, make_job, scheduler, clock
):
    # A loop written behind the checks' back (as two racing saves once could).
    a = chain_job(make_job, "A")
    chain_job(make_job, "B", "A")
    JobDependency.objects.create(upstream=Job.objects.get(name="B"), downstream=a, on="success")
    first, _ = services.run_now(job=a, now=T0)
    run_all(scheduler, clock)

    runs = list(
        Run.objects.order_by("id").values_list(
            "job__name", "status", "skip_reason", "chain_id", "chain_depth"
        )
    )
    assert runs == [
        ("A", "succeeded", "", None, None),
        ("B", "succeeded", "", first.pk, 1),
        ("A", "skipped", "loop", first.pk, 2),
    ]
    refused = Run.objects.get(skip_reason="loop")
    assert refused.trigger == "upstream" and "“A” already ran earlier in this chain" in refused.error


def test_a_chain_deeper_than_the_setting_is_refused_by_the_engine(
    both_databases, make_job, make_scheduler, clock, settings
):
    settings.JOBS_MAX_CHAIN_DEPTH = 2
    scheduler = make_scheduler(max_workers=2, clock=clock, misfire_threshold=60)
    a = chain_job(make_job, "A")
    for name, upstream in [("B", "A"), ("C", "B"), ("D", "C")]:
        chain_job(make_job, name, upstream)
    services.run_now(job=a, now=T0)
    run_all(scheduler, clock)

    by_job = {run.job.name: run for run in Run.objects.select_related("job")}
    assert [(n, by_job[n].status, by_job[n].chain_depth) for n in "ABCD"] == [
        ("A", "succeeded", None),
        ("B", "succeeded", 1),
        ("C", "succeeded", 2),
        ("D", "skipped", 3),
    ]
    assert by_job["D"].skip_reason == "depth" and "JOBS_MAX_CHAIN_DEPTH (2)" in by_job["D"].error


def test_a_diamond_is_not_a_loop_and_a_retry_keeps_its_chain(make_job, scheduler, clock):
    # D runs after B and after C, both after A: once per upstream run, since
    # each finished upstream run starts its own downstream run.
    a = chain_job(make_job, "A")
    chain_job(make_job, "B", "A")
    chain_job(make_job, "C", "A")
    chain_job(make_job, "D", "B", "C")
    first, _ = services.run_now(job=a, now=T0)
    run_all(scheduler, clock)
    d_runs = Run.objects.filter(job__name="D")
    # One per upstream run (the second may meet the first still running: the
    # overlap rule), neither refused as a loop.
    assert sorted(d_runs.values_list("caused_by__job__name", "chain_id", "chain_depth")) == [
        ("B", first.pk, 2),
        ("C", first.pk, 2),
    ]
    assert set(d_runs.values_list("skip_reason", flat=True)) <= {"", "overlap"}
    retry = scheduler.recorder.queue_retry(d_runs.first(), clock())
    assert (retry.chain_id, retry.chain_depth) == (first.pk, 2)


def form_errors(spec, instance=None):
    form = JobForm(data=spec_to_form_data(spec, instance=instance), instance=instance)
    form.is_valid()
    return {(e["field"], e["code"]) for e in form.error_list()}


NEW = {"handler": "demo.echo", "schedule_type": "none"}


def test_saving_a_chain_deeper_than_the_setting_is_refused_with_47009(make_job, settings):
    settings.JOBS_MAX_CHAIN_DEPTH = 2
    chain_job(make_job, "A")
    chain_job(make_job, "B", "A")
    assert form_errors({**NEW, "name": "C", "after": ["B"]}) == set()
    chain_job(make_job, "C", "B")
    assert form_errors({**NEW, "name": "D", "after": ["C"]}) == {("after", "47009")}
    # Put at the head of a chain, a job makes it deeper too.
    chain_job(make_job, "X")
    assert form_errors({"after": [{"job": "X"}]}, instance=Job.objects.get(name="A")) == {("after", "47009")}
    # An edit that adds no upstream is not refused, whatever the setting says now.
    settings.JOBS_MAX_CHAIN_DEPTH = 1
    c = Job.objects.get(name="C")
    c.after = [{"job": "B", "on": "success"}]
    c.save()
    assert form_errors({"description": "still fine", "after": ["B"]}, instance=c) == set()


def test_more_downstream_jobs_than_the_setting_are_refused_with_47010(make_job, settings, staff_api):
    settings.JOBS_MAX_DOWNSTREAM = 2
    chain_job(make_job, "A")
    chain_job(make_job, "B", "A")
    chain_job(make_job, "C", "A")
    answer = staff_api.post("/api/jobs", {**NEW, "name": "D", "after": ["A"]})
    assert answer.status_code == 400 and answer.json()["code"] == "47010"
    assert "JOBS_MAX_DOWNSTREAM" in answer.json()["message"] and answer.json()["field"] == "after"
    assert not Job.objects.filter(name="D").exists()


def test_the_limits_are_checked_again_under_the_graph_lock(make_job, settings):
    """A form checked before another save committed: services.save_job finds
    what it missed (here, the setting lowered in between) and writes nothing."""
    chain_job(make_job, "A")
    chain_job(make_job, "B", "A")
    form = JobForm(data=spec_to_form_data({**NEW, "name": "C", "after": ["B"]}))
    assert form.is_valid(), form.errors
    settings.JOBS_MAX_CHAIN_DEPTH = 1
    with pytest.raises(refusals.GraphRefused) as refused:
        services.save_job(job=form.save(commit=False))
    assert refused.value.error_list()[0]["code"] == "47009"
    assert not Job.objects.filter(name="C").exists()


def test_a_refused_chain_run_counts_nowhere_else(make_job, scheduler, clock):
    """The skipped run is the downstream job's, finished, and leaves its job's
    state and failure count alone."""
    a = chain_job(make_job, "A")
    chain_job(make_job, "B", "A")
    JobDependency.objects.create(upstream=Job.objects.get(name="B"), downstream=a, on="success")
    services.run_now(job=a, now=T0)
    run_all(scheduler, clock)
    a.refresh_from_db()
    assert (a.state, a.consecutive_failures) == ("enabled", 0)
    assert Run.objects.get(skip_reason="loop").finished_at <= T0 + timedelta(minutes=1)


def test_the_api_and_the_run_page_show_a_runs_chain(make_job, scheduler, clock, staff_api, staff_client):
    a = chain_job(make_job, "A")
    chain_job(make_job, "B", "A")
    first, _ = services.run_now(job=a, now=T0)
    run_all(scheduler, clock)
    b_run = Run.objects.get(job__name="B")
    answer = staff_api.get(f"/api/runs/{b_run.pk}").json()
    assert (answer["caused_by"], answer["chain_id"], answer["chain_depth"]) == (first.pk, first.pk, 1)
    assert staff_api.get(f"/api/runs/{first.pk}").json()["chain_id"] is None
    page = staff_client.get(f"/runs/{b_run.pk}/").content.decode()
    assert 'id="run-chain"' in page and f'href="/runs/{first.pk}/"' in page
