"""`manage.py jobs …`: jobs as code, and bad input that must never give a traceback."""

import json
import subprocess
import sys
from datetime import UTC
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from jobs.models import AuditEvent, Job, Run
from tests.fixtures.processes import copy_sqlite

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.django_db

GOOD = {
    "name": "nightly",
    "description": "nightly echo",
    "kind": "python",
    "handler": "demo.echo",
    "properties": {"region": "eu", "count": 3},
    "schedule_type": "cron",
    "cron_expression": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "misfire_policy": "fire_once_now",
    "max_retries": 2,
    "retry_interval_seconds": 30,
    "timeout_seconds": 120,
    "alert_threshold": 4,
    "alert_emails": ["ops@example.com"],
    "state": "enabled",
}


def run_cmd(*args, stdin=None):
    out, err = StringIO(), StringIO()
    if stdin is not None:
        import io

        old = sys.stdin
        sys.stdin = io.StringIO(stdin)
    try:
        call_command("jobs", *args, stdout=out, stderr=err)
    finally:
        if stdin is not None:
            sys.stdin = old
    return out.getvalue(), err.getvalue()


def import_specs(tmp_path, specs):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(specs))
    return run_cmd("import", str(path))


def test_import_creates_a_job_with_every_field(tmp_path):
    out, _ = import_specs(tmp_path, [GOOD])
    assert "1 created" in out
    job = Job.objects.get(name="nightly")
    assert job.cron_expression == "0 30 2 * * *", "five fields get 0 seconds"
    assert job.properties == {"region": "eu", "count": "3"}, "properties are strings"
    assert (job.timezone, job.misfire_policy, job.max_retries, job.alert_emails) == (
        "Europe/Berlin",
        "fire_once_now",
        2,
        ["ops@example.com"],
    )
    assert job.next_fire_at is not None
    assert AuditEvent.objects.get(job=job).via == "import"


def test_export_then_import_round_trips(tmp_path):
    import_specs(
        tmp_path, [GOOD, {**GOOD, "name": "every-10s", "schedule_type": "interval", "interval_seconds": 10}]
    )
    exported, _ = run_cmd("export")
    before = json.loads(exported)
    path = tmp_path / "exported.json"
    path.write_text(exported)
    out, _ = run_cmd("import", str(path))
    assert "0 created, 0 updated, 3 unchanged" in out, "the built-in retention job round-trips too"
    assert json.loads(run_cmd("export")[0]) == before


def test_import_is_all_or_nothing_and_lists_every_error(tmp_path):
    specs = [
        {**GOOD, "name": "fine"},
        {**GOOD, "name": "too-fast", "schedule_type": "interval", "interval_seconds": 4},
        {**GOOD, "name": "bad-zone", "timezone": "Mars/Olympus"},
        {**GOOD, "name": "bad-handler", "handler": "no.such.handler"},
        {**GOOD, "name": "extra", "colour": "blue"},
        {**GOOD, "name": "typed", "max_retries": "three", "run_once": "yes"},
    ]
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(specs))
    err = StringIO()
    with pytest.raises(CommandError, match="nothing was saved"):
        call_command("jobs", "import", str(path), stdout=StringIO(), stderr=err)
    text = err.getvalue()
    assert "error 47004: job 'too-fast', field interval_seconds" in text
    assert "error 47006: job 'bad-zone', field timezone" in text
    assert "job 'bad-handler', field handler" in text
    assert "job 'extra', field colour" in text
    assert "error invalid: job 'typed', field max_retries: Must be a whole number." in text
    assert "error invalid: job 'typed', field run_once: Must be true or false." in text
    assert not Job.objects.filter(builtin=False).exists()


def test_import_reports_both_day_fields_with_47003(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([{**GOOD, "cron_expression": "0 0 12 15 * MON"}]))
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("jobs", "import", str(path), stdout=StringIO(), stderr=err)
    assert "error 47003: job 'nightly', field cron_expression" in err.getvalue()


def test_import_updates_by_name(tmp_path):
    import_specs(tmp_path, [GOOD])
    job = Job.objects.get(name="nightly")
    import_specs(tmp_path, [{"name": "nightly", "description": "changed"}])
    job.refresh_from_db()
    assert job.description == "changed"
    assert job.cron_expression == "0 30 2 * * *", "fields left out keep their values"
    assert Job.objects.filter(name="nightly").count() == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('"a string"', "must hold a JSON list of job objects"),
        ("[1, 2]", "must hold a JSON list of job objects"),
        (json.dumps([GOOD, GOOD]), "more than once"),
    ],
)
def test_import_of_a_malformed_file_is_a_clear_error(tmp_path, content, message):
    path = tmp_path / "jobs.json"
    path.write_text(content)
    with pytest.raises(CommandError, match=message):
        call_command("jobs", "import", str(path), stdout=StringIO(), stderr=StringIO())


def test_import_of_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        call_command("jobs", "import", str(tmp_path / "nope.json"))


def test_run_pause_resume_by_name(tmp_path):
    import_specs(tmp_path, [GOOD])
    out, _ = run_cmd("run", "nightly")
    assert out.startswith("queued: run")
    out, _ = run_cmd("run", "nightly")
    assert out.startswith("already queued")
    assert Run.objects.filter(trigger="manual").count() == 1
    run_cmd("pause", "nightly")
    assert Job.objects.get(name="nightly").state == "paused"
    run_cmd("resume", "nightly")
    job = Job.objects.get(name="nightly")
    assert job.state == "enabled" and job.next_fire_at is not None


def test_resume_re_enables_a_crashed_job(tmp_path):
    import_specs(tmp_path, [GOOD])
    Job.objects.filter(name="nightly").update(state="crashed", consecutive_failures=4, next_fire_at=None)
    run_cmd("resume", "nightly")
    job = Job.objects.get(name="nightly")
    assert (job.state, job.consecutive_failures) == ("enabled", 0)


def test_runs_json_lists_newest_scheduled_first_with_the_documented_keys(tmp_path):
    from datetime import datetime

    import_specs(tmp_path, [GOOD])
    job = Job.objects.get(name="nightly")
    for day in (1, 3, 2):
        Run.objects.create(
            job=job, scheduled_at=datetime(2026, 5, day, tzinfo=UTC), trigger="schedule", status="succeeded"
        )
    out, _ = run_cmd("runs", "nightly", "--json", "--limit", "2")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["scheduled_at"] for r in rows] == ["2026-05-03T00:00:00Z", "2026-05-02T00:00:00Z"]
    assert list(rows[0]) == [
        "fire_id",
        "scheduled_at",
        "attempt",
        "trigger",
        "status",
        "skip_reason",
        "worker_id",
        "started_at",
        "finished_at",
        "duration_ms",
        "result",
        "error",
    ]


@pytest.mark.parametrize("action", ["run", "pause", "resume", "runs", "export"])
def test_unknown_job_name_is_a_clear_error(action):
    with pytest.raises(CommandError, match="no such job"):
        call_command("jobs", action, "ghost", stdout=StringIO())


@pytest.mark.parametrize("action", ["run", "pause", "resume", "runs", "export"])
def test_a_job_name_with_bytes_that_are_not_utf8_is_a_clear_error(action):
    """`jobs run $'B\\xff'` reached the database with a lone surrogate
    (surrogateescape) and ended in a UnicodeEncodeError traceback."""
    with pytest.raises(CommandError, match=r"^The job name contains an unpaired surrogate \(U\+DCFF\)"):
        call_command("jobs", action, "B\udcff", stdout=StringIO())


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["jobs", "runs", "x", "--limit", "abc"],
        ["jobs", "frobnicate"],
        ["jobs", "import", "/nonexistent/file.json"],
        ["jobs", "runs", "ghost", "--limit", "0"],
    ],
)
def test_bad_command_lines_never_print_a_traceback(args, tmp_path, migrated_sqlite):
    env = {"DATABASE_URL": copy_sqlite(migrated_sqlite, tmp_path / "db.sqlite3"), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
