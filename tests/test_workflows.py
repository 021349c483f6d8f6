"""Jobs that run after other jobs: `after` edges, `schedule_type: none`, the
downstream run written with the upstream outcome (exactly once), what the
handler sees, and the coded refusals (47007 unknown upstream, 47008 cycle)."""

import json
import time
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import imports, services
from jobs.engine.loop import Scheduler
from jobs.forms import JobForm
from jobs.handlers import HandlerError, JobHandler, register
from jobs.handlers.registry import unregister
from jobs.models import AuditEvent, Job, JobDependency, Run
from jobs.serializers import spec_to_form_data

T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now


@pytest.fixture
def seen():
    """test.step: records (job, upstream) and fails when property fail=yes."""
    calls = []

    @register("test.step")
    class Step(JobHandler):
        def run(self, ctx):
            calls.append((ctx.job_name, ctx.upstream))
            if ctx.properties.get("fail") == "yes":
                raise HandlerError("asked to fail")
            return f"done {ctx.job_name}"

    yield calls
    unregister("test.step")


@pytest.fixture
def scheduler():
    clock = Clock()
    s = Scheduler(worker_id="node-w", max_workers=4, clock=clock, misfire_threshold=60)
    s.test_clock = clock
    yield s
    for flight in list(s.pool.flights.values()):
        s.pool.abandon(flight.run_id)


def drain(s, passes=10):
    """Claim and finish queued runs until nothing is left to do."""
    for _ in range(passes):
        s.test_clock.now += timedelta(seconds=1)
        started = s.claim_queued(s.test_clock.now)
        until = time.monotonic() + 5
        while s.pool.flights and time.monotonic() < until:
            s.collect(s.pool.wait(0.2), s.test_clock.now)
        if not started and not s.pool.flights:
            return


def import_file(tmp_path, specs):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(specs))
    out = StringIO()
    call_command("jobs", "import", str(path), stdout=out, stderr=StringIO())
    return out.getvalue()


CHAIN = [
    # Downstream jobs first: a file may name its jobs in any order.
    {"name": "B", "handler": "test.step", "schedule_type": "none", "after": [{"job": "A", "on": "success"}]},
    {"name": "C", "handler": "test.step", "schedule_type": "none", "after": [{"job": "A", "on": "failure"}]},
    {"name": "A", "handler": "test.step", "cron_expression": "0 0 3 * * *"},
]


def test_import_a_chain_and_follow_it_on_success_and_on_failure(tmp_path, seen, scheduler):
    assert "3 created" in import_file(tmp_path, CHAIN)
    a, b, c = (Job.objects.get(name=n) for n in "ABC")
    assert b.next_fire_at is None and c.next_fire_at is None and b.schedule_type == "none"
    assert {(d.upstream.name, d.downstream.name, d.on) for d in JobDependency.objects.all()} == {
        ("A", "B", "success"),
        ("A", "C", "failure"),
    }

    first, _ = services.run_now(job=a, now=T0)
    drain(scheduler)
    (b_run,) = Run.objects.filter(job=b)
    assert (b_run.trigger, b_run.caused_by_id, b_run.status) == ("upstream", first.pk, "succeeded")
    assert not Run.objects.filter(job=c).exists(), "C follows failures only"
    assert seen == [
        ("A", None),
        ("B", {"job": "A", "run_id": first.pk, "status": "succeeded", "result": "done A"}),
    ]

    second, _ = services.run_now(job=a, properties={"fail": "yes"}, now=T0)
    drain(scheduler)
    (c_run,) = Run.objects.filter(job=c)
    assert (c_run.caused_by_id, c_run.status) == (second.pk, "succeeded")
    assert Run.objects.filter(job=b).count() == 1
    assert list(first.caused_runs.values_list("job__name", flat=True)) == ["B"]


def test_a_downstream_starts_after_the_final_attempt_only(make_job, seen, scheduler):
    a = make_job(
        name="A", handler="test.step", max_retries=2, retry_interval_seconds=1, properties={"fail": "yes"}
    )
    c = make_job(name="C", handler="test.step", schedule_type="none", cron_expression="")
    JobDependency.objects.create(upstream=a, downstream=c, on="failure")
    services.run_now(job=a, now=T0)
    drain(scheduler, passes=20)
    assert Run.objects.filter(job=a).count() == 3
    (c_run,) = Run.objects.filter(job=c)
    assert c_run.caused_by == Run.objects.get(job=a, attempt=3)


@pytest.mark.parametrize(("state", "reason"), [("paused", "paused"), ("crashed", "crashed")])
def test_a_paused_or_crashed_downstream_is_not_started_and_that_is_recorded(
    make_job, seen, scheduler, state, reason
):
    a = make_job(name="A", handler="test.step")
    b = make_job(name="B", handler="test.step", schedule_type="none", cron_expression="", state=state)
    JobDependency.objects.create(upstream=a, downstream=b, on="finish")
    services.run_now(job=a, now=T0)
    drain(scheduler)
    (b_run,) = Run.objects.filter(job=b)
    assert (b_run.status, b_run.skip_reason, b_run.trigger) == ("skipped", reason, "upstream")
    assert state in b_run.error and [name for name, _ in seen] == ["A"]


def test_a_busy_downstream_follows_the_overlap_rule(make_job, seen, scheduler):
    a = make_job(name="A", handler="test.step")
    b = make_job(name="B", handler="test.step", schedule_type="none", cron_expression="")
    JobDependency.objects.create(upstream=a, downstream=b, on="success")
    Run.objects.create(
        job=b, scheduled_at=T0, trigger=Run.Trigger.MANUAL, status=Run.Status.RUNNING, worker_id="x"
    )
    services.run_now(job=a, now=T0)
    drain(scheduler)
    skipped = Run.objects.get(job=b, trigger="upstream")
    assert (skipped.status, skipped.skip_reason) == ("skipped", "overlap")


def test_each_upstream_run_starts_a_downstream_job_once(make_job, seen, scheduler):
    a = make_job(name="A", handler="test.step")
    b = make_job(name="B", handler="test.step", schedule_type="none", cron_expression="")
    JobDependency.objects.create(upstream=a, downstream=b, on="success")
    upstream = Run.objects.create(job=a, scheduled_at=T0, trigger="manual", status="succeeded")
    upstream.job = a
    assert len(scheduler.recorder.start_downstream([upstream], T0)) == 1
    # Recording the same outcome again (a second scheduler) writes nothing more.
    scheduler.recorder.start_downstream([upstream], T0 + timedelta(seconds=5))
    assert Run.objects.filter(job=b).count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.create(job=b, scheduled_at=T0, trigger="upstream", caused_by=upstream)


def form_for(spec, instance=None):
    form = JobForm(data=spec_to_form_data(spec, instance=instance), instance=instance)
    form.is_valid()
    return form


def codes(form):
    return {(e["field"], e["code"]) for e in form.error_list()}


def test_cycles_and_unknown_upstreams_are_refused_with_their_codes(make_job):
    a = make_job(name="A")
    b = make_job(name="B", after=[{"job": "A", "on": "success"}])
    services.save_dependencies(b)
    c = make_job(name="C", after=[{"job": "B", "on": "finish"}])
    services.save_dependencies(c)
    # A after C closes A → B → C → A.
    form = form_for({"after": [{"job": "C"}]}, instance=a)
    assert codes(form) == {("after", "47008")}
    assert "“A” → “B” → “C” → “A”" in form.errors["after"][0]
    assert codes(form_for({"after": [{"job": "A"}]}, instance=a)) == {("after", "47008")}
    assert codes(form_for({"after": [{"job": "nope"}]}, instance=a)) == {("after", "47007")}
    new = {"name": "D", "handler": "demo.echo", "cron_expression": "0 * * * * *"}
    assert codes(form_for({**new, "after": [{"job": "D"}]})) == {("after", "47008")}
    assert form_for({**new, "after": [{"job": "C", "on": "failure"}]}).is_valid()


@pytest.mark.parametrize(
    "after",
    [
        "x",
        {"job": "A"},
        [{"job": "A", "on": "sometimes"}],
        [{"job": 3}],
        [{"job": "A", "extra": 1}],
        [{"job": "A"}, {"job": "A"}],
        [{"job": "a\x00"}],
        [{"job": "A"}] * 60,
    ],
)
def test_malformed_after_is_invalid(make_job, after):
    make_job(name="A")
    spec = {"name": "D", "handler": "demo.echo", "cron_expression": "0 * * * * *", "after": after}
    assert ("after", "invalid") in codes(form_for(spec))


def test_a_cycle_through_an_import_file_is_refused_and_nothing_is_saved(tmp_path):
    specs = [
        {"name": "X", "handler": "demo.echo", "schedule_type": "none", "after": [{"job": "Y"}]},
        {"name": "Y", "handler": "demo.echo", "schedule_type": "none", "after": [{"job": "X"}]},
    ]
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(specs))
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("jobs", "import", str(path), stdout=StringIO(), stderr=err)
    assert "47008" in err.getvalue() and "after itself" in err.getvalue()
    assert {e["code"] for p in imports.plan(specs) for e in p.errors} == {"47008"}
    assert not Job.objects.filter(name__in=["X", "Y"]).exists()


def test_api_knows_after_and_schedule_none(staff_api, make_job):
    make_job(name="A")
    body = {
        "name": "B",
        "handler": "demo.echo",
        "schedule_type": "none",
        "after": [{"job": "A", "on": "finish"}],
    }
    response = staff_api.post("/api/jobs", body)
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["schedule_type"] == "none" and data["next_fire_at"] is None
    assert data["after"] == [{"job": "A", "on": "finish"}]
    cycle = staff_api.patch(f"/api/jobs/{Job.objects.get(name='A').pk}", {"after": [{"job": "B"}]})
    assert cycle.status_code == 400 and cycle.json()["code"] == "47008" and cycle.json()["field"] == "after"
    unknown = staff_api.post("/api/jobs", {**body, "name": "C", "after": [{"job": "ghost"}]})
    assert unknown.status_code == 400 and unknown.json()["code"] == "47007"
    assert not Job.objects.filter(name="C").exists()


def test_renaming_an_upstream_keeps_its_downstreams_after(make_job, staff_api):
    a = make_job(name="A")
    staff_api.post(
        "/api/jobs", {"name": "B", "handler": "demo.echo", "schedule_type": "none", "after": ["A"]}
    )
    response = staff_api.patch(f"/api/jobs/{a.pk}", {"name": "A2"})
    assert response.status_code == 200, response.content
    assert Job.objects.get(name="B").after == [{"job": "A2", "on": "success"}]


def test_a_rename_gives_each_rewritten_downstream_a_new_version_and_an_audit_row(
    make_job, staff_api, staff_user, superuser
):
    a = make_job(name="A")
    # A superuser's command job, which the staff user may not edit, follows A.
    command = make_job(
        name="backup",
        kind="command",
        handler="",
        properties={"command": '["true"]'},
        schedule_type="none",
        cron_expression="",
        owner=superuser,
        after=[{"job": "A", "on": "failure"}],
    )
    services.save_dependencies(command)
    response = staff_api.patch(f"/api/jobs/{a.pk}", {"name": "A2"})
    assert response.status_code == 200, response.content
    command.refresh_from_db()
    assert command.after == [{"job": "A2", "on": "failure"}] and command.version == 2
    (event,) = AuditEvent.objects.filter(job=command)
    assert (event.action, event.user, event.via) == ("edit", staff_user, "api")
    assert event.changes == {"after": [[{"job": "A", "on": "failure"}], [{"job": "A2", "on": "failure"}]]}


def test_the_job_page_shows_upstream_and_downstream_and_runs_link_to_each_other(make_job, staff_client):
    a = make_job(name="up-job")
    b = make_job(
        name="down-job", schedule_type="none", cron_expression="", after=[{"job": "up-job", "on": "success"}]
    )
    services.save_dependencies(b)
    page_a = staff_client.get(f"/jobs/{a.pk}/").content.decode()
    page_b = staff_client.get(f"/jobs/{b.pk}/").content.decode()
    assert "down-job" in page_a and "up-job" in page_b
    up = Run.objects.create(job=a, scheduled_at=T0, trigger="manual", status="succeeded")
    down = Run.objects.create(job=b, scheduled_at=T0, trigger="upstream", status="queued", caused_by=up)
    assert f"/runs/{down.pk}/" in staff_client.get(f"/runs/{up.pk}/").content.decode()
    assert f"/runs/{up.pk}/" in staff_client.get(f"/runs/{down.pk}/").content.decode()


def test_the_console_form_edits_after_and_schedule_none(make_job, staff_client):
    make_job(name="A")
    form = staff_client.get("/jobs/new/").content.decode()
    assert 'name="after"' in form and 'value="none"' in form
    response = staff_client.post(
        "/jobs/new/",
        {
            "name": "B",
            "kind": "python",
            "handler": "demo.echo",
            "schedule_type": "none",
            "timezone": "UTC",
            "misfire_policy": "skip",
            "state": "enabled",
            "max_retries": 0,
            "retry_interval_seconds": 60,
            "timeout_seconds": 600,
            "alert_threshold": 3,
            "after": '[{"job": "A", "on": "failure"}]',
        },
    )
    assert response.status_code in (302, 303), response.content.decode()[-3000:]
    b = Job.objects.get(name="B")
    assert b.after == [{"job": "A", "on": "failure"}] and b.upstream_links.get().upstream.name == "A"


def test_an_http_job_started_by_an_upstream_run_names_it_in_headers(settings):
    from jobs.handlers.http import HttpJobHandler
    from tests.fixtures.http import TestServer, make_ctx

    server = TestServer("127.0.0.2", name="target")
    try:
        settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]
        ctx = make_ctx({"url": server.url("/echo"), "method": "GET"})
        ctx.upstream = {"job": "nightly", "run_id": 42, "status": "succeeded", "result": "ok"}
        result = HttpJobHandler().run(ctx)
    finally:
        server.stop()
    headers = json.loads(result.split("\n", 1)[1])["headers"]
    assert headers["X-Cronboard-Upstream-Job"] == "nightly"
    assert headers["X-Cronboard-Upstream-Run"] == "42"
    assert headers["X-Cronboard-Upstream-Status"] == "succeeded"


def test_the_job_list_shows_a_job_without_a_schedule(make_job, staff_client):
    make_job(name="A")
    make_job(name="B", schedule_type="none", cron_expression="", after=[{"job": "A", "on": "success"}])
    page = staff_client.get("/jobs/").content.decode()
    assert "after <a" in page and "every None s" not in page


@register("test.workflow_upstream_echo")
class UpstreamEcho(JobHandler):
    """Module level, so a child process of the process executor imports it."""

    def run(self, ctx):
        return json.dumps(ctx.upstream)


@pytest.mark.django_db(transaction=True)
def test_ctx_upstream_reaches_a_handler_in_a_child_process(make_job, settings):
    settings.JOBS_EXECUTOR = "process"
    a = make_job(name="A", handler="test.workflow_upstream_echo")
    b = make_job(name="B", handler="test.workflow_upstream_echo", schedule_type="none", cron_expression="")
    JobDependency.objects.create(upstream=a, downstream=b, on="success")
    s = Scheduler(worker_id="node-p", max_workers=2, clock=timezone.now, misfire_threshold=60)
    try:
        first, _ = services.run_now(job=a)
        until = time.monotonic() + 60
        while time.monotonic() < until and not Run.objects.filter(job=b, status="succeeded").exists():
            s.claim_queued(timezone.now())
            s.collect(s.pool.wait(0.1), timezone.now())
    finally:
        s.pool.close()
    (b_run,) = Run.objects.filter(job=b)
    assert json.loads(b_run.result) == {
        "job": "A",
        "run_id": first.pk,
        "status": "succeeded",
        "result": "null",
    }
