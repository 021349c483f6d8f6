"""Schemathesis, every check, against the real server and the document it
serves at /api/schema (issue 14): every answer fits the document, nothing
the document forbids is accepted, no request gets a 500, and generated
requests create, change and delete jobs.

The run is deterministic (a fixed seed, a bounded number of examples per
operation, one worker) and talks only to a gunicorn on loopback.

What a JSON Schema cannot say is whether a value *means* something: a cron
expression that parses, a name no live job has yet, a handler for a python
job, a long-running alert below the timeout, an opaque cursor the API gave
out, an HTTP job's URL outside the fence. The job form decides those (with a
coded 400, the same for the console and `jobs import`), so for the
operations that take such values a 400 on schema-valid data is accepted
(OPERATIONS_WITH_MEANING); every other check, and every other operation,
runs as Schemathesis ships it."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import processes

pytestmark = pytest.mark.slow

SEED = 14
EXAMPLES_PER_OPERATION = 10
# operationId → why a schema-valid request may still be refused with a 400.
OPERATIONS_WITH_MEANING = {
    "createJob": "the job form: cron syntax, unique names, handlers, URLs, cross-field rules",
    "replaceJob": "the job form, as for createJob",
    "updateJob": "the job form, on the fields sent merged over the stored job",
    "previewCron": "cron syntax and time zone names",
    "listRuns": "the cursor is opaque: only one the API gave out is valid",
    "listAllRuns": "the cursor is opaque",
    "listUpcomingFires": "the cursor is opaque",
}

CONFIG = """
[[operations]]
include-operation-id = [{ids}]
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409"]
"""

MAKE_SUPERUSER = """
from django.contrib.auth import get_user_model
from jobs import tokens
user = get_user_model().objects.create_superuser("fuzzer", password="pw-fuzzer-123")
print(tokens.create_token(user=user, name="schemathesis")[1])
"""


@pytest.fixture
def site(tmp_path, migrated_sqlite):
    url = processes.copy_sqlite(migrated_sqlite, tmp_path / "schemathesis.sqlite3")
    site = processes.Site(tmp_path, url)
    yield site
    site.stop_all(timeout=15)


def run_schemathesis(base_url: str, token: str, workdir: Path) -> subprocess.CompletedProcess:
    config = workdir / "schemathesis.toml"
    ids = ", ".join(f'"{operation}"' for operation in OPERATIONS_WITH_MEANING)
    config.write_text(CONFIG.format(ids=ids))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(config),
            "run",
            f"{base_url}/api/schema",
            "--checks",
            "all",
            "--seed",
            str(SEED),
            "--max-examples",
            str(EXAMPLES_PER_OPERATION),
            "--workers",
            "1",
            "--header",
            f"Authorization: Bearer {token}",
            "--request-timeout",
            "30",
            "--no-color",
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_schemathesis_finds_nothing_and_reaches_the_job_life_cycle(site, tmp_path):
    token = site.django(MAKE_SUPERUSER).strip().splitlines()[-1]
    base_url = site.start_web(workers=1)

    done = run_schemathesis(base_url, token, tmp_path)

    report = done.stdout
    failures = report[report.find("FAILURES") : report.find("SUMMARY")] if "FAILURES" in report else report
    assert done.returncode == 0, failures[-30_000:] + done.stderr[-3_000:]
    audit = dict(site.sql("SELECT action, COUNT(*) FROM jobs_auditevent WHERE via = 'api' GROUP BY action"))
    # Generated requests created jobs, and changed and deleted them.
    assert audit.get("create", 0) >= 1, audit
    assert audit.get("edit", 0) >= 1, audit
    assert audit.get("delete", 0) >= 1, audit
