"""JobScope: code bound to a namespace sees and changes only its own jobs,
runs and handlers."""

from datetime import UTC, datetime

import pytest
from django.http import Http404

from jobs import access, refusals, tasks
from jobs.handlers import JobHandler, registry
from jobs.models import AuditEvent, Job, Run
from jobs.scope import JobScope, JobValidationError

UTC = UTC


@pytest.fixture
def billing(db):
    scope = JobScope("billing")

    @scope.handler("invoices")
    class SendInvoices(JobHandler):
        label = "Send invoices"

        def run(self, ctx):
            return "sent"

    yield scope
    registry.unregister("billing.invoices")


@pytest.fixture
def shipping(db):
    scope = JobScope("shipping")
    scope.handler("labels")(type("Labels", (JobHandler,), {"run": lambda self, ctx: None}))
    yield scope
    registry.unregister("shipping.labels")


def test_handlers_are_registered_under_the_scope_prefix(billing):
    assert registry.is_registered("billing.invoices")
    assert [h.name for h in billing.handlers()] == ["billing.invoices"]
    assert billing.handler_name("invoices") == billing.handler_name("billing.invoices") == "billing.invoices"


def test_create_puts_the_job_in_the_namespace(billing):
    job = billing.create(name="send invoices", handler="invoices", cron_expression="0 0 6 * * *")
    assert (job.namespace, job.handler, job.version) == ("billing", "billing.invoices", 1)
    assert job.next_fire_at is not None
    event = AuditEvent.objects.get(job=job)
    assert (event.action, event.via) == ("create", "system")


def test_create_validates_like_the_form(billing):
    with pytest.raises(JobValidationError) as caught:
        billing.create(name="bad", handler="invoices", schedule_type="interval", interval_seconds=4)
    assert [(e["code"], e["field"]) for e in caught.value.errors] == [("47004", "interval_seconds")]
    assert not Job.objects.filter(name="bad").exists()


def test_a_scope_cannot_use_another_scopes_handler(billing, shipping):
    with pytest.raises(JobValidationError) as caught:
        billing.create(name="steal", handler="shipping.labels", cron_expression="0 0 * * * *")
    assert caught.value.errors[0]["field"] == "handler"
    with pytest.raises(JobValidationError):
        billing.create(name="steal", handler="demo.echo", cron_expression="0 0 * * * *")


def test_a_scope_cannot_move_a_job_out_of_its_namespace(billing):
    job = billing.create(name="stay", handler="invoices", cron_expression="0 0 * * * *")
    with pytest.raises(JobValidationError) as caught:
        billing.update(job, namespace="shipping")
    assert caught.value.errors[0]["code"] == "forbidden"
    with pytest.raises(JobValidationError):
        billing.create(name="elsewhere", namespace="", handler="invoices", cron_expression="0 0 * * * *")


def test_list_get_update_delete_stay_inside_the_namespace(billing, shipping, make_job):
    mine = billing.create(name="mine", handler="invoices", cron_expression="0 0 * * * *")
    theirs = shipping.create(name="theirs", handler="labels", cron_expression="0 0 * * * *")
    plain = make_job(name="plain")
    assert list(billing.jobs()) == [mine]
    for ref in (theirs, theirs.pk, "theirs", plain.pk):
        with pytest.raises(Job.DoesNotExist):
            billing.get(ref)
        with pytest.raises(Job.DoesNotExist):
            billing.update(ref, description="hijacked")
        with pytest.raises(Job.DoesNotExist):
            billing.delete(ref)
    assert billing.get("mine") == mine
    updated = billing.update(mine, timeout_seconds=30)
    assert (updated.timeout_seconds, updated.version, updated.handler) == (30, 2, "billing.invoices")
    billing.delete(mine)
    assert list(billing.jobs()) == []
    theirs.refresh_from_db()
    assert theirs.description == "" and not theirs.is_deleted


def test_update_with_a_stale_version_is_refused(billing):
    job = billing.create(name="v", handler="invoices", cron_expression="0 0 * * * *")
    billing.update(job, description="first", version=1)
    with pytest.raises(refusals.StaleJobError):
        billing.update(job, description="second", version=1)


def test_runs_are_only_the_scopes(billing, shipping):
    mine = billing.create(name="mine", handler="invoices", cron_expression="0 0 * * * *")
    theirs = shipping.create(name="theirs", handler="labels", cron_expression="0 0 * * * *")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    my_run = Run.objects.create(job=mine, scheduled_at=at, trigger="schedule", status="succeeded")
    Run.objects.create(job=theirs, scheduled_at=at, trigger="schedule", status="succeeded")
    my_task = billing.enqueue("invoices", key="inv:1")
    shipping.enqueue("labels", key="lbl:1")
    tasks.enqueue("demo.echo", key="global")
    assert my_task.handler == "billing.invoices"
    assert set(billing.runs()) == {my_run, my_task}
    assert list(billing.runs(mine)) == [my_run]
    with pytest.raises(Job.DoesNotExist):
        billing.runs(theirs)


def test_pause_resume_and_run_now(billing):
    job = billing.create(name="p", handler="invoices", cron_expression="0 0 * * * *")
    assert billing.pause(job).state == Job.State.PAUSED
    assert billing.resume(job).state == Job.State.ENABLED
    run, created = billing.run_now(job)
    assert created and run.job == job


@pytest.mark.parametrize("bad", ["", "Billing", "bill ing", "billing.eu", "-x", None, "x" * 101])
def test_a_scope_needs_a_proper_namespace(bad):
    with pytest.raises(ValueError):
        JobScope(bad)


def test_visible_jobs_can_be_limited_to_a_namespace(billing, make_job, viewer_user, superuser):
    mine = billing.create(name="mine", handler="invoices", cron_expression="0 0 * * * *")
    plain = make_job(name="plain")
    assert list(access.visible_jobs(viewer_user, namespace="billing")) == [mine]
    assert plain in access.visible_jobs(viewer_user, namespace="")
    assert {mine, plain} <= set(access.visible_jobs(superuser))
    assert access.get_job_for_user(viewer_user, mine.pk, namespace="billing") == mine
    with pytest.raises(Http404):
        access.get_job_for_user(viewer_user, plain.pk, namespace="billing")


def test_the_api_filters_by_namespace(billing, staff_api, make_job):
    billing.create(name="mine", handler="invoices", cron_expression="0 0 * * * *")
    make_job(name="plain")
    names = [j["name"] for j in staff_api.get("/api/jobs", {"namespace": "billing"}).json()["results"]]
    assert names == ["mine"]
