"""Job names are compared after Unicode NFC normalisation wherever a job is
found by name: two names that differ only in normalisation (é as one code
point, or as e + a combining accent) are the same name, in `after`, in
`jobs import`, in the `jobs` command, in a scope, in the console's search;
the migration that made it so normalises stored names."""

import importlib
import json
from io import StringIO

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command

from jobs import imports
from jobs.models import AuditEvent, Job, JobDependency, Run
from jobs.scope import JobScope

pytestmark = pytest.mark.django_db

COMPOSED = "caf\u00e9"  # é, one code point: NFC
DECOMPOSED = "cafe\u0301"  # e and a combining acute accent: looks the same
NEW = {"handler": "demo.echo", "schedule_type": "none"}


def test_after_finds_an_upstream_by_either_spelling_and_stores_it_in_nfc(staff_api):
    created = staff_api.post("/api/jobs", {**NEW, "name": DECOMPOSED})
    assert created.status_code == 201 and created.json()["name"] == COMPOSED
    down = staff_api.post("/api/jobs", {**NEW, "name": "down", "after": [{"job": DECOMPOSED}]})
    assert down.status_code == 201, down.content
    assert down.json()["after"] == [{"job": COMPOSED, "on": "success"}]
    assert JobDependency.objects.get().upstream.name == COMPOSED
    # Two spellings in one `after` are one upstream named twice.
    twice = staff_api.post("/api/jobs", {**NEW, "name": "d2", "after": [COMPOSED, DECOMPOSED]})
    assert twice.status_code == 400 and twice.json()["field"] == "after"


def test_an_import_updates_the_job_whatever_the_spelling_of_its_name(make_job, tmp_path):
    make_job(name=COMPOSED, schedule_type="none", cron_expression="")
    assert imports.apply([{**NEW, "name": DECOMPOSED, "description": "from the file"}]) == (0, 1, 0)
    (job,) = Job.objects.live().filter(name__startswith="caf")
    assert (job.name, job.description) == (COMPOSED, "from the file")
    with pytest.raises(imports.ImportFileError, match="more than once"):
        imports.parse(json.dumps([{**NEW, "name": COMPOSED}, {**NEW, "name": DECOMPOSED}]))


def test_the_jobs_command_and_a_scope_find_a_job_by_either_spelling(make_job):
    job = make_job(name=COMPOSED, namespace="demo")
    out = StringIO()
    call_command("jobs", "run", DECOMPOSED, stdout=out)
    assert Run.objects.filter(job=job, trigger="manual").exists()
    call_command("jobs", "export", DECOMPOSED, stdout=(exported := StringIO()))
    assert [spec["name"] for spec in json.loads(exported.getvalue())] == [COMPOSED]
    call_command("jobs", "pause", DECOMPOSED, stdout=StringIO())
    job.refresh_from_db()
    assert job.state == "paused"
    with pytest.raises(CommandError, match="no such job"):
        call_command("jobs", "run", "cafe", stdout=StringIO())
    assert JobScope("demo").get(DECOMPOSED) == job


def test_the_console_search_finds_a_name_by_either_spelling(make_job, staff_client):
    make_job(name=COMPOSED)
    page = staff_client.get("/jobs/", {"q": DECOMPOSED}).content.decode()
    assert f">{COMPOSED}<" in page


def test_the_migration_cuts_a_name_that_nfc_lengthens_to_the_columns_length(both_databases, make_job):
    """U+0958 is a composition exclusion: NFC writes it as two code points,
    so 150 of them become 300, past the column's 200 (PostgreSQL refuses
    the write)."""
    migration = importlib.import_module("jobs.migrations.0018_workflow_chains")
    max_length = Job._meta.get_field("name").max_length
    nfc_pair = "\u0915\u093c"
    long_name = "\u0958" * 150
    twin = make_job(name=nfc_pair * 100)  # what the long name is cut to, stored in NFC already
    long = make_job(name=long_name)
    follower = make_job(name="follower", after=[{"job": long_name, "on": "success"}])
    JobDependency.objects.create(upstream=long, downstream=follower)
    gone = make_job(name="\u0958" * 120)
    Job.objects.filter(pk=gone.pk).update(deleted_at=gone.created_at)

    migration.normalize_names(apps, None)

    names = dict(Job.objects.values_list("pk", "name"))
    assert all(len(name) <= max_length for name in names.values()), names
    assert names[twin.pk] == nfc_pair * 100
    assert names[long.pk] == nfc_pair * 98 + " (2)"
    assert names[gone.pk] == nfc_pair * 100
    follower.refresh_from_db()
    assert follower.after == [{"job": nfc_pair * 98 + " (2)", "on": "success"}]
    trail = {event.job_id: event for event in AuditEvent.objects.filter(via="system")}
    assert trail[long.pk].job_name == nfc_pair * 98 + " (2)"


def test_the_migration_normalises_names_and_after_and_says_so_in_the_audit_trail(make_job):
    migration = importlib.import_module("jobs.migrations.0018_workflow_chains")
    older = make_job(name=COMPOSED)
    # Written behind the form's back, as versions that did not normalise could.
    twin = make_job(name=DECOMPOSED)
    follower = make_job(name="follower", after=[{"job": DECOMPOSED, "on": "success"}])
    JobDependency.objects.create(upstream=twin, downstream=follower)
    gone = make_job(name="gone " + DECOMPOSED)
    Job.objects.filter(pk=gone.pk).update(deleted_at=gone.created_at)

    migration.normalize_names(apps, None)

    names = dict(Job.objects.values_list("pk", "name"))
    assert names[older.pk] == COMPOSED
    assert names[twin.pk] == f"{COMPOSED} (2)"
    assert names[gone.pk] == "gone " + COMPOSED
    follower.refresh_from_db()
    assert follower.after == [{"job": f"{COMPOSED} (2)", "on": "success"}] and follower.version == 2
    trail = {event.job_id: event.changes for event in AuditEvent.objects.filter(via="system")}
    assert trail[twin.pk] == {"name": [DECOMPOSED, f"{COMPOSED} (2)"]}
    assert trail[follower.pk]["after"][1] == [{"job": f"{COMPOSED} (2)", "on": "success"}]
    assert older.pk not in trail
