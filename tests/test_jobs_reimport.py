"""Jobs as code: importing an unchanged export is a
no-op per job, and `jobs import` says what it created, updated and left alone."""

import json
from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command

from jobs import services
from jobs.models import AuditEvent, Job
from tests.fixtures.core import T0
from tests.fixtures.processes import Site

pytestmark = pytest.mark.django_db

SPECS = [
    {"name": "hourly", "handler": "demo.echo", "schedule_type": "interval", "interval_seconds": 3600},
    {
        "name": "nightly",
        "handler": "demo.echo",
        "cron_expression": "0 30 2 * * *",
        "timezone": "Europe/Berlin",
    },
    {"name": "tagged", "handler": "demo.echo", "cron_expression": "@daily", "properties": {"a": "1"}},
]


def jobs(*args) -> str:
    out = StringIO()
    call_command("jobs", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def state():
    return {
        job.name: (job.version, job.next_fire_at, job.updated_at, job.state)
        for job in Job.objects.live().filter(builtin=False)
    }


def test_reimporting_an_unchanged_export_changes_nothing(tmp_path):
    source = tmp_path / "jobs.json"
    source.write_text(json.dumps(SPECS))
    with time_machine.travel(T0, tick=False):
        assert "3 created" in jobs("import", str(source))
        exported = tmp_path / "export.json"
        exported.write_text(jobs("export"))
    before, audits = state(), AuditEvent.objects.count()
    with time_machine.travel(T0 + timedelta(minutes=25), tick=False):
        out = jobs("import", str(exported))
    assert out.strip().endswith("0 created, 0 updated, 4 unchanged")  # with the built-in retention job
    assert state() == before
    assert AuditEvent.objects.count() == audits


def test_a_changed_job_is_updated_and_the_others_are_left_alone(tmp_path):
    source = tmp_path / "jobs.json"
    source.write_text(json.dumps(SPECS))
    with time_machine.travel(T0, tick=False):
        jobs("import", str(source))
    before = state()
    changed = [SPECS[0], {**SPECS[1], "description": "now with words"}, SPECS[2]]
    source.write_text(json.dumps(changed))
    with time_machine.travel(T0 + timedelta(minutes=25), tick=False):
        out = jobs("import", str(source))
    assert "0 created, 1 updated, 2 unchanged" in out
    after = state()
    assert after["hourly"] == before["hourly"] and after["tagged"] == before["tagged"]
    assert after["nightly"][0] == before["nightly"][0] + 1
    # The schedule did not change, so neither does the next fire.
    assert after["nightly"][1] == before["nightly"][1]
    assert list(
        AuditEvent.objects.filter(job__name="nightly", action="edit").values_list("changes", flat=True)
    ) == [{"description": ["", "now with words"]}]


def test_a_crashed_job_stays_crashed_when_its_export_is_imported(tmp_path):
    source = tmp_path / "jobs.json"
    source.write_text(json.dumps(SPECS))
    jobs("import", str(source))
    Job.objects.filter(name="hourly").update(state=Job.State.CRASHED, next_fire_at=None)
    exported = tmp_path / "export.json"
    exported.write_text(jobs("export"))
    assert "4 unchanged" in jobs("import", str(exported))
    assert Job.objects.get(name="hourly").state == Job.State.CRASHED


@pytest.mark.parametrize("state", ["enabled", "paused"])
def test_the_import_preview_shows_a_crashed_job_staying_crashed_as_the_save_keeps_it(tmp_path, state):
    from jobs import imports

    source = tmp_path / "jobs.json"
    source.write_text(json.dumps(SPECS))
    jobs("import", str(source))
    Job.objects.filter(name="hourly").update(state=Job.State.CRASHED, next_fire_at=None)
    specs = [{**SPECS[0], "state": state, "description": "edited"}]

    (planned,) = imports.plan(specs)
    imports.apply(specs)

    assert planned.changes == {"description": ["", "edited"]}
    assert Job.objects.get(name="hourly").state == Job.State.CRASHED


def test_an_identical_save_through_the_service_is_a_no_op(make_job):
    job = make_job(name="same", next_fire_at=T0)
    stored, changed = services.save_job_if_changed(job=Job.objects.get(pk=job.pk))
    assert changed is False and stored.version == 1 and stored.next_fire_at == T0
    assert not AuditEvent.objects.filter(job=job).exists()


@pytest.mark.postgres
@pytest.mark.slow
def test_reimporting_an_unchanged_export_changes_nothing_on_postgresql(
    postgres_server, migrated_postgres, tmp_path
):
    site = Site(tmp_path, postgres_server.create_database("reimport", template=migrated_postgres))

    def manage(*args):
        done = site.manage(*args, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    source = tmp_path / "jobs.json"
    source.write_text(json.dumps([*SPECS, {**SPECS[2], "name": "mailed", "alert_emails": ["a@example.com"]}]))
    assert "4 created" in manage("jobs", "import", str(source))
    exported = tmp_path / "export.json"
    exported.write_text(manage("jobs", "export"))
    listed = manage("jobs", "list")
    assert manage("jobs", "import", str(exported)).strip().endswith("0 created, 0 updated, 5 unchanged")
    assert manage("jobs", "list") == listed
    assert manage("jobs", "export") == exported.read_text()
