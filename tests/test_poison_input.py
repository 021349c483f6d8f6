"""Poison-proof input: text no database stores (NUL, a lone UTF-16
surrogate) is refused wherever a person or program sends it, with a clear
400 or form error, the same on SQLite and PostgreSQL, and nothing is saved.

Regression: `"\\udfff"` is valid JSON, so a property holding it passed the
API, the console and `jobs import`; on SQLite the job's page then answered
500, on PostgreSQL the import ended in a traceback."""

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from jobs.models import AuditEvent, Job, Run
from tests.factories import job_data
from tests.fixtures.processes import copy_sqlite

REPO = Path(__file__).resolve().parent.parent
# As the bytes of a JSON document: the escapes are JSON's, decoded by the parser.
NUL = "\\u0000"
SURROGATE = "\\udfff"
POISONS = [pytest.param(NUL, id="nul"), pytest.param(SURROGATE, id="surrogate")]

GOOD_JOB = (
    '{"name": "poisoned", "handler": "demo.echo", "schedule_type": "interval", "interval_seconds": 60%s}'
)


def poisoned_job_bodies(poison: str) -> dict[str, str]:
    """Where in a job a poison can hide → the JSON body that hides it there."""
    return {
        "name": GOOD_JOB.replace('"poisoned"', f'"poi{poison}soned"') % "",
        "description": GOOD_JOB % f', "description": "a{poison}b"',
        "namespace": GOOD_JOB % f', "namespace": "ns{poison}"',
        "timezone": GOOD_JOB % f', "timezone": "Europe/Ber{poison}lin"',
        "property value": GOOD_JOB % f', "properties": {{"region": "eu{poison}"}}',
        "property name": GOOD_JOB % f', "properties": {{"re{poison}gion": "eu"}}',
        "nested property": GOOD_JOB % f', "properties": {{"deep": {{"deeper": ["x{poison}"]}}}}',
        "alert email": GOOD_JOB % f', "alert_emails": ["ops{poison}@example.com"]',
        "field name": GOOD_JOB % f', "descr{poison}iption": "x"',
    }


def assert_refused(response, *, codes=("invalid_text",)):
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert body["code"] in codes or any(e["code"] in codes for e in body.get("errors", [])), body
    return body


# -- the API --------------------------------------------------------------------------


@pytest.mark.parametrize("poison", POISONS)
def test_api_refuses_a_job_with_unstorable_text_anywhere(both_databases, staff_api, poison):
    for where, body in poisoned_job_bodies(poison).items():
        response = staff_api.post("/api/jobs", raw=body)
        # A nested property, or an address, is refused by its own field first.
        simple = where not in ("nested property", "alert email")
        assert_refused(response, codes=("invalid_text",) if simple else ("invalid_text", "invalid"))
    assert not Job.objects.filter(name__startswith="poi").exists()
    assert not AuditEvent.objects.exists()
    # The same job without the poison is fine.
    assert staff_api.post("/api/jobs", raw=GOOD_JOB % "").status_code == 201


@pytest.mark.parametrize("poison", POISONS)
def test_api_refuses_an_update_with_unstorable_text_and_changes_nothing(
    both_databases, staff_api, poison, make_job
):
    job = make_job(name="kept", properties={"region": "eu"})
    for method in ("patch", "put"):
        body = (
            f'{{"name": "kept", "handler": "demo.echo", "cron_expression": "0 * * * * *", '
            f'"properties": {{"region": "{poison}"}}}}'
        )
        assert_refused(getattr(staff_api, method)(f"/api/jobs/{job.pk}", raw=body))
    job.refresh_from_db()
    assert (job.properties, job.version) == ({"region": "eu"}, 1)


@pytest.mark.parametrize("poison", POISONS)
def test_api_refuses_a_task_with_unstorable_text(both_databases, staff_api, poison):
    for body in (
        f'{{"handler": "demo.echo", "key": "k{poison}"}}',
        f'{{"handler": "demo.echo", "key": "k", "properties": {{"a": "{poison}"}}}}',
        f'{{"handler": "demo.echo", "key": "k", "properties": {{"{poison}": "a"}}}}',
    ):
        assert_refused(staff_api.post("/api/tasks", raw=body))
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "query",
    [
        "/api/jobs?namespace=%00",
        "/api/jobs?state=%00",
        "/api/jobs?na%00me=x",
        "/api/jobs/{job}/runs?cursor=%00",
    ],
)
def test_api_refuses_query_parameters_with_a_nul(both_databases, staff_api, make_job, query):
    job = make_job()
    body = assert_refused(staff_api.get(query.format(job=job.pk)))
    assert "NUL" in body["message"]
    name = query.split("?")[1].split("=")[0]
    assert body["field"] == (None if "%00" in name else name)


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/api/jobs?namespace=%00"),
        ("post", "/api/jobs?x=%00"),
        ("delete", "/api/runs?x=%00"),
        ("get", "/api/no-such-endpoint?x=%00"),
    ],
)
def test_api_refuses_a_query_with_a_nul_before_anything_else_about_the_request(anon_api, method, url):
    """Before authentication, the method and the route: as the console's
    middleware answers it, in the API's JSON error shape."""
    response = getattr(anon_api, method)(url)
    assert response["Content-Type"] == "application/json"
    body = assert_refused(response)
    assert body["field"] == ("namespace" if "namespace" in url else "x")


# -- the console ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "/?q=%00",
        "/?q=report&namespace=%00",
        "/jobs/{job}/?status=%00",
        "/jobs/{job}/runs/?before=%00",
        "/cron/preview/?cron_expression=%00",
        "/alerts/?status=%00",
    ],
)
def test_console_refuses_query_parameters_with_a_nul(both_databases, staff_client, make_job, url):
    job = make_job()
    response = staff_client.get(url.format(job=job.pk))
    assert response.status_code == 400
    assert "NUL character" in response.content.decode()


@pytest.mark.parametrize("poison", POISONS)
def test_console_job_form_shows_unstorable_text_as_a_form_error(both_databases, staff_client, poison):
    """A form body cannot carry a lone surrogate, but the properties field is
    JSON text, whose escapes can; a NUL comes as %00."""
    before = Job.objects.count()
    for data in (
        job_data(properties=f'{{"region": "eu{poison}"}}'),
        job_data(properties=f'{{"re{poison}gion": "eu"}}'),
        job_data(description="a\x00b"),
        job_data(name="re\x00port"),
    ):
        response = staff_client.post("/jobs/new/", data)
        assert response.status_code == 200
        assert "which cannot be stored" in response.content.decode()
    assert Job.objects.count() == before


# -- jobs import ----------------------------------------------------------------------


def import_file(tmp_path, text: str) -> tuple[str, str]:
    path = tmp_path / "jobs.json"
    path.write_text(text, encoding="utf-8")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("jobs", "import", str(path), stdout=out, stderr=err)
    return str(failed.value), err.getvalue()


@pytest.mark.parametrize("poison", POISONS)
def test_import_reports_unstorable_text_like_any_validation_error(both_databases, tmp_path, poison):
    good = json.loads(GOOD_JOB % "")
    specs = [
        {**good, "name": "fine"},
        json.loads(GOOD_JOB % f', "properties": {{"region": "eu{poison}"}}'),
        {**json.loads(GOOD_JOB % f', "description": "a{poison}b"'), "name": "second"},
    ]
    message, errors = import_file(tmp_path, json.dumps(specs).replace("\\\\u", "\\u"))
    assert message == "2 error(s); nothing was saved."
    lines = errors.splitlines()
    assert lines[0].startswith("error invalid_text: job 'poisoned', field properties: Contains ")
    assert lines[1].startswith("error invalid_text: job 'second', field description: Contains ")
    assert not Job.objects.filter(name__in=["fine", "poisoned", "second"]).exists()


def test_import_of_unstorable_text_ends_in_a_message_not_a_traceback(migrated_sqlite, tmp_path):
    """The real command, its messages written to a real (UTF-8) stream: a
    lone surrogate quoted in a message must not break the writing."""
    path = tmp_path / "jobs.json"
    path.write_text(
        json.dumps([{"name": "x\udfff", "handler": "demo.echo", "alert_emails": ["a\udfff@b"]}]),
        encoding="utf-8",
    )
    env = {"DATABASE_URL": copy_sqlite(migrated_sqlite, tmp_path / "db.sqlite3"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "manage.py", "jobs", "import", str(path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=120,
    )
    stderr = done.stderr.decode("utf-8")
    assert done.returncode == 1
    assert "Traceback" not in stderr
    assert "error invalid_text: job 'x\ufffd', field name: Contains an unpaired surrogate (U+DFFF)" in stderr
    assert "nothing was saved" in stderr


def test_console_token_name_and_settings_refuse_a_nul(both_databases, staff_client):
    from jobs.models import APIToken, Setting

    response = staff_client.post("/profile/", {"name": "deploy\x00"}, follow=True)
    assert response.status_code == 200
    assert "which cannot be stored" in response.content.decode()
    assert not APIToken.objects.exists()

    before = list(Setting.objects.values_list("key", "value"))
    response = staff_client.post("/settings/", {"sys.job.alertEmails": "ops\x00@example.com"})
    assert response.status_code == 200
    assert list(Setting.objects.values_list("key", "value")) == before


# -- what SQLite stored before the rule ------------------------------------------------


def test_migration_repairs_unstorable_text_sqlite_stored_before(db, staff_client, make_job):
    """Django writes JSON with escapes, so SQLite kept a lone surrogate in a
    job's properties, and the job page answered 500 for everyone."""
    import importlib

    from django.apps import apps
    from django.db import connection

    migration = importlib.import_module("jobs.migrations.0010_poison")
    job = make_job(properties={"k": "a\udfffb", "n\x00": "ok"}, alert_emails=["ops@example.com"])
    AuditEvent.objects.create(
        job=job, job_name=job.name, action="edit", changes={"properties": [{}, {"k": "\udfff"}]}
    )
    clean = make_job(properties={"hangul": "\ud55c"})
    staff_client.raise_request_exception = False
    assert staff_client.get(f"/jobs/{job.pk}/").status_code == 500

    migration.repair(apps, connection.schema_editor())

    job.refresh_from_db()
    assert job.properties == {"k": "a\ufffdb", "n\ufffd": "ok"}
    assert AuditEvent.objects.get(job=job).changes == {"properties": [{}, {"k": "\ufffd"}]}
    clean.refresh_from_db()
    assert clean.properties == {"hangul": "\ud55c"}
    assert staff_client.get(f"/jobs/{job.pk}/").status_code == 200
