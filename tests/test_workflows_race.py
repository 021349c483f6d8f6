"""Two saves at the same moment that would close a loop between them (A after
B, B after A), through every door that writes the graph: the API, the
console's form, `jobs import` (the command and the console's import page go
through the same imports.apply), a scope. Each pair runs in two threads of a
`manage.py shell` process, on a SQLite file and on the session's PostgreSQL
server; both saves are held after their form said yes, until the other's form
has said yes too, so both check a graph without the other's edge. Exactly one
must be saved, the other refused with 47008, and no loop stored."""

import json
import textwrap

import pytest

from tests.fixtures.processes import Site, copy_sqlite

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent(
    """
    import json, tempfile, threading
    from io import StringIO
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from jobs import imports
    from jobs.forms import JobForm
    from jobs.models import Job, JobDependency
    from jobs.scope import JobScope, JobValidationError

    user = get_user_model().objects.create_superuser("admin", password="pw")
    held = threading.local()
    barrier = threading.Barrier(2)
    clean_after = JobForm._clean_after

    def clean_after_then_wait(self, data):
        clean_after(self, data)
        if getattr(held, "wait", False):
            held.wait = False
            barrier.wait(timeout=60)

    JobForm._clean_after = clean_after_then_wait

    # Signed in before the threads start: signing in writes the session, and
    # on SQLite an import holds the write lock while its form checks.
    clients = {}
    for door in ("api", "console"):
        clients[door] = Client()
        clients[door].force_login(user)

    def by_api(name, upstream):
        r = clients["api"].patch("/api/jobs/%d" % Job.objects.get(name=name).pk,
                           data=json.dumps({"after": [{"job": upstream}]}), content_type="application/json")
        return "saved" if r.status_code == 200 else r.json()["code"]

    def by_console(name, upstream):
        job = Job.objects.get(name=name)
        r = clients["console"].post("/jobs/%d/edit/" % job.pk, {
            "name": name, "namespace": "demo", "kind": "python", "handler": "demo.echo", "schedule_type": "none",
            "timezone": "UTC", "misfire_policy": "skip", "state": "enabled", "max_retries": 0,
            "retry_interval_seconds": 60, "timeout_seconds": 600, "alert_threshold": 3,
            "after": json.dumps([{"job": upstream}]), "version": job.version})
        if r.status_code in (302, 303):
            return "saved"
        page = r.content.decode()
        return "47008" if "cannot run after itself" in page else "page: " + page[-2000:]

    def spec(name, upstream):
        return [{"name": name, "namespace": "demo", "handler": "demo.echo", "schedule_type": "none",
                 "after": [{"job": upstream}]}]

    def by_import(name, upstream):
        try:
            imports.apply(spec(name, upstream), user=user)
        except imports.ImportFailed as failed:
            return failed.errors[0]["code"]
        return "saved"

    def by_command(name, upstream):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(spec(name, upstream), f)
        err = StringIO()
        try:
            call_command("jobs", "import", f.name, stdout=StringIO(), stderr=err)
        except Exception:
            return "47008" if "error 47008" in err.getvalue() else "failed: " + err.getvalue()
        return "saved"

    def by_scope(name, upstream):
        try:
            JobScope("demo", user=user).update(name, after=[{"job": upstream}])
        except JobValidationError as exc:
            return exc.errors[0]["code"]
        return "saved"

    DOORS = {"api": by_api, "console": by_console, "import": by_import, "command": by_command,
             "scope": by_scope}
    out = {}
    for first, second in PAIRS:
        a, b = "%s-%s-a" % (first, second), "%s-%s-b" % (first, second)
        imports.apply([{"name": n, "namespace": "demo", "handler": "demo.echo", "schedule_type": "none"}
                       for n in (a, b)])
        answers = {}
        def save(door, name, upstream):
            held.wait = True
            try:
                answers[door + ":" + name] = DOORS[door](name, upstream)
            except Exception as exc:
                answers[door + ":" + name] = repr(exc)
                barrier.abort()
            finally:
                connection.close()
        threads = [threading.Thread(target=save, args=(first, a, b)),
                   threading.Thread(target=save, args=(second, b, a))]
        [t.start() for t in threads]
        [t.join() for t in threads]
        barrier.reset()
        edges = sorted((d.upstream.name, d.downstream.name)
                       for d in JobDependency.objects.filter(downstream__name__in=[a, b]))
        afters = {n: Job.objects.get(name=n).after for n in (a, b)}
        out[first + "/" + second] = {"answers": sorted(answers.values()), "edges": edges, "afters": afters}
    print(json.dumps(out))
    """
)

PAIRS = [("api", "api"), ("console", "import"), ("command", "api"), ("scope", "console")]


def race(site: Site) -> dict:
    script = f"PAIRS = {PAIRS!r}\n{SCRIPT}"
    return json.loads(site.django(script, timeout=240).strip().splitlines()[-1])


def check(result: dict) -> None:
    for pair, outcome in result.items():
        assert outcome["answers"] == ["47008", "saved"], (pair, outcome)
        assert len(outcome["edges"]) == 1, (pair, outcome)
        assert sum(1 for after in outcome["afters"].values() if after) == 1, (pair, outcome)


def test_of_two_saves_closing_a_loop_one_is_refused_on_sqlite(tmp_path, migrated_sqlite):
    site = Site(
        tmp_path,
        copy_sqlite(migrated_sqlite, tmp_path / "cronboard.sqlite3"),
        ALLOWED_HOSTS="testserver",
    )
    check(race(site))


@pytest.mark.postgres
def test_of_two_saves_closing_a_loop_one_is_refused_on_postgresql(postgres_site):
    check(race(postgres_site("workflow_race", ALLOWED_HOSTS="testserver")))
