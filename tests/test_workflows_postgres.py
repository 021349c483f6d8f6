"""Workflows on PostgreSQL (a real server, tests/fixtures/postgres.py), in a
`manage.py shell` process of its own: a chain A → B (success), A → C
(failure) run by two scheduler nodes, each downstream run written exactly
once per upstream run even when both nodes record the same outcome at once;
the unique (job, caused_by) index; a cycle and hostile `after` refused."""

import json
import textwrap

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SCRIPT = textwrap.dedent(
    """
    import json, threading, time
    from datetime import timedelta
    from django.contrib.auth import get_user_model
    from django.db import IntegrityError, connection, transaction
    from django.test import Client
    from django.utils import timezone
    from jobs import imports, services
    from jobs.handlers import HandlerError, JobHandler, register
    from jobs.models import Job, Run
    from jobs.engine.loop import Scheduler

    @register("test.step")
    class Step(JobHandler):
        def run(self, ctx):
            if ctx.properties.get("fail") == "yes":
                raise HandlerError("asked to fail")
            return "upstream=%s" % (ctx.upstream and ctx.upstream["run_id"])

    imports.apply([
        {"name": "B", "handler": "test.step", "schedule_type": "none", "after": [{"job": "A", "on": "success"}]},
        {"name": "C", "handler": "test.step", "schedule_type": "none", "after": [{"job": "A", "on": "failure"}]},
        {"name": "A", "handler": "test.step", "cron_expression": "0 0 3 * * *"},
    ])
    a = Job.objects.get(name="A")
    nodes = [Scheduler(worker_id=w, max_workers=2, clustered=True) for w in ("n1", "n2")]

    def drain():
        for _ in range(40):
            busy = False
            for node in nodes:
                busy |= node.claim_queued(timezone.now())
                node.collect(node.pool.wait(0.05), timezone.now())
                busy |= bool(node.pool.flights)
            if not busy and not Run.objects.filter(status__in=["queued", "running"]).exists():
                return
            time.sleep(0.05)

    ok, _ = services.run_now(job=a)
    drain()
    bad, _ = services.run_now(job=a, properties={"fail": "yes"})
    drain()
    chain = sorted((r.job.name, r.caused_by_id, r.status, r.result) for r in Run.objects.filter(trigger="upstream"))

    # Both nodes record the same upstream outcome at the same moment.
    ok.refresh_from_db()
    ok.job = a
    barrier = threading.Barrier(2)
    def race(node):
        try:
            barrier.wait()
            with transaction.atomic():
                node.recorder.start_downstream([ok], timezone.now())
        finally:
            connection.close()
    threads = [threading.Thread(target=race, args=(n,)) for n in nodes]
    [t.start() for t in threads]
    [t.join() for t in threads]
    after_race = Run.objects.filter(job__name="B", caused_by=ok).count()
    try:
        with transaction.atomic():
            Run.objects.create(job=Job.objects.get(name="B"), scheduled_at=timezone.now(), trigger="upstream", caused_by=ok)
        duplicate = "written"
    except IntegrityError:
        duplicate = "refused"

    user = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    from jobs.models import RoleGrant
    RoleGrant.objects.create(user=user, role="admin")
    client = Client()
    client.force_login(user)
    def patch(job, body):
        r = client.patch("/api/jobs/%d" % job.pk, data=json.dumps(body), content_type="application/json")
        return [r.status_code, r.json().get("code")]
    answers = [patch(a, {"after": [{"job": "C"}]}), patch(a, {"after": [{"job": "A"}]}),
               patch(a, {"after": [{"job": "gh\\u0000ost"}]}), patch(a, {"after": [{"job": "x" * 5000}]}),
               patch(a, {"after": "[" * 5000}), patch(a, {"after": [{"job": "nope", "on": "success"}]}),
               patch(a, {"schedule_type": "none", "after": [{"job": "B", "on": "finish"}]})]
    a.refresh_from_db()
    print(json.dumps({"chain": chain, "ok": ok.pk, "bad": bad.pk, "after_race": after_race,
                      "duplicate": duplicate, "answers": answers, "a_after": a.after}))
    """
)


def test_workflows_on_postgresql(postgres_site):
    site = postgres_site(
        "workflows_pg",
        SECRET_KEY="pg-workflows-key",
        # The handler is registered by the script itself: run it in threads.
        JOBS_EXECUTOR="thread",
        ALLOWED_HOSTS="testserver",
    )
    result = json.loads(site.django(SCRIPT, timeout=240).strip().splitlines()[-1])
    ok, bad = result["ok"], result["bad"]
    assert result["chain"] == [
        ["B", ok, "succeeded", f"upstream={ok}"],
        ["C", bad, "succeeded", f"upstream={bad}"],
    ]
    assert result["after_race"] == 1
    assert result["duplicate"] == "refused"
    assert [code for _, code in result["answers"][:6]] == [
        "47008",
        "47008",
        "invalid",
        "invalid",
        "invalid",
        "47007",
    ]
    assert all(status == 400 for status, _ in result["answers"][:6])
    # None of the refused saves changed A; a loop-free edit saves (B runs after A: refused too).
    assert result["answers"][6] == [400, "47008"]
    assert result["a_after"] == []
