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


def test_a_frequent_word_is_found_among_the_newest_runs_without_the_index(postgres_site):
    # The GIN index reads every match's id, whatever range of ids is asked
    # (100,000 for a word in one run in ten): the newest runs, tested one by
    # one, fill the page of a frequent word first.
    site = postgres_site("run_search_pg_walk", ALLOWED_HOSTS="testserver")
    script = (
        "import json; from tests.fixtures.runsearch import frequent_word_queries; "
        "print(json.dumps(frequent_word_queries()))"
    )
    found = json.loads(site.django(script, timeout=180).strip().splitlines()[-1])
    assert found["same"] and found["rows"] == 26
    assert not [sql for sql in found["queries"] if " @@ " in sql], found["queries"]
    assert len(found["queries"]) == 2, found["queries"]
    # The database's collation provider is asked once (the test server's is libc).
    assert found["first"][0].startswith("SELECT datlocprovider") and len(found["first"]) == 3
    assert found["lowers_as_parser"] is True
