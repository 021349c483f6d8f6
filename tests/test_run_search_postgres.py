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


def test_the_newest_matches_are_never_asked_for_in_order_of_the_whole_index(postgres_site):
    # ORDER BY … LIMIT with the GIN index's condition lets the planner, which
    # takes any word for a rare one, walk every run backwards testing its
    # text (28 s on 1,000,000 runs for a word in none): the index is read
    # for a range of ids, unordered, and rows outside it are tested one by one.
    site = postgres_site("run_search_pg_plans", ALLOWED_HOSTS="testserver")
    script = "import json; from tests.fixtures.runsearch import newest_queries; print(json.dumps(newest_queries()))"
    queries = json.loads(site.django(script, timeout=180).strip().splitlines()[-1])
    indexed = [sql for sql in queries if " @@ " in sql]
    assert indexed, queries
    for sql in indexed:
        assert "ORDER BY" not in sql and '"jobs_run"."id" >' in sql, sql
