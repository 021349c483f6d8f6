"""The trends' rollup on PostgreSQL (a real server): the same scenario as
tests/test_trends.py, in a process of its own, with the same answers
(GROUP BY with the hour truncated and lateness as an interval there)."""

import json

import pytest

from tests.fixtures.trends import check

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SCRIPT = "import json; from tests.fixtures.trends import scenario; print(json.dumps(scenario(), default=str))"


def test_the_rollup_on_postgresql(postgres_site):
    site = postgres_site("trends_pg", ALLOWED_HOSTS="testserver")
    result = json.loads(site.django(SCRIPT, timeout=180).strip().splitlines()[-1])
    result["failing"] = [tuple(pair) for pair in result["failing"]]
    check(result)


LISTS = (
    "import json; from tests.fixtures.trends import lists_against_runs; "
    "print(json.dumps(lists_against_runs(), default=str))"
)


def test_the_lists_of_jobs_are_the_runs_counted_on_postgresql(postgres_site):
    from tests.fixtures.trends import check_lists

    site = postgres_site("trend_lists_pg", ALLOWED_HOSTS="testserver")
    check_lists(json.loads(site.django(LISTS, timeout=240).strip().splitlines()[-1]))


MOVE = (
    "import json; from tests.fixtures.trends import totals_against_hours_after_a_move; "
    "print(json.dumps(totals_against_hours_after_a_move(), default=str))"
)


def test_a_moved_job_keeps_its_window_totals_with_its_hours_on_postgresql(postgres_site):
    from tests.fixtures.trends import check_totals_after_a_move

    site = postgres_site("trend_move_pg", ALLOWED_HOSTS="testserver")
    check_totals_after_a_move(json.loads(site.django(MOVE, timeout=240).strip().splitlines()[-1]))
