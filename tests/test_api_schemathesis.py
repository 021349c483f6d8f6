"""Schemathesis, every check, against the real server and the document it
serves at /api/schema (issue 14): every answer fits the document, nothing
the document forbids is accepted, no request gets a 500, and generated
requests create, change and delete jobs.

The run is deterministic (a fixed seed, a bounded number of examples per
operation, one worker) and talks only to a gunicorn on loopback, on SQLite
and on PostgreSQL (whose text refuses what SQLite stores: a NUL, a lone
surrogate).

What a JSON Schema cannot say is whether a value *means* something (a cron
expression that parses, a name no live job has yet, an HTTP job's URL
outside the fence): the job form decides those, with a coded 400. The
checkout's schemathesis.toml, which Schemathesis reads whenever it runs from
the checkout, names the operations that take such values and lets them
answer 400 to schema-valid data; this test runs with that file, so the
file is what is tested. Every other check, and every other operation, runs
as Schemathesis ships it."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures import processes

pytestmark = pytest.mark.slow

SEED = 14
# Per operation. PostgreSQL's run is there for what its text refuses and
# SQLite stores (a NUL, a lone surrogate), which the first examples of each
# operation reach; half as many keeps the suite's time down.
EXAMPLES_PER_OPERATION = {"sqlite": 10, "postgres": 5}
CONFIG = processes.REPO / "schemathesis.toml"

MAKE_SUPERUSER = """
from django.contrib.auth import get_user_model
from jobs import tokens
user = get_user_model().objects.create_superuser("fuzzer", password="pw-fuzzer-123")
print(tokens.create_token(user=user, name="schemathesis")[1])
"""


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def site(request, tmp_path):
    if request.param == "sqlite":
        template = request.getfixturevalue("migrated_sqlite")
        url = processes.copy_sqlite(template, tmp_path / "schemathesis.sqlite3")
    else:
        template = request.getfixturevalue("migrated_postgres")
        url = request.getfixturevalue("postgres_server").create_database("schemathesis", template=template)
    site = processes.Site(tmp_path, url)
    site.database = request.param
    yield site
    site.stop_all(timeout=15)


def run_schemathesis(base_url: str, token: str, workdir: Path, examples: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(CONFIG),
            "run",
            f"{base_url}/api/schema",
            "--checks",
            "all",
            "--seed",
            str(SEED),
            "--max-examples",
            str(examples),
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

    done = run_schemathesis(base_url, token, tmp_path, EXAMPLES_PER_OPERATION[site.database])

    report = done.stdout
    failures = report[report.find("FAILURES") : report.find("SUMMARY")] if "FAILURES" in report else report
    assert done.returncode == 0, failures[-30_000:] + done.stderr[-3_000:]
    audit = dict(site.sql("SELECT action, COUNT(*) FROM jobs_auditevent WHERE via = 'api' GROUP BY action"))
    # Generated requests created jobs, and changed and deleted them.
    assert audit.get("create", 0) >= 1, audit
    assert audit.get("edit", 0) >= 1, audit
    assert audit.get("delete", 0) >= 1, audit
