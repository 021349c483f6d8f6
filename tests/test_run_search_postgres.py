"""Searching runs and their CSV export on PostgreSQL (a real server): the
same scenario as tests/test_run_search.py, read through the tsvector GIN
index instead of SQLite's FTS5, with the same answers."""

import json

import pytest

from tests.fixtures.runsearch import check

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SCRIPT = (
    "import json; from tests.fixtures.runsearch import scenario; print(json.dumps(scenario(), default=str))"
)


def test_search_and_export_on_postgresql(postgres_site):
    site = postgres_site("run_search_pg", ALLOWED_HOSTS="testserver")
    check(json.loads(site.django(SCRIPT, timeout=180).strip().splitlines()[-1]))
