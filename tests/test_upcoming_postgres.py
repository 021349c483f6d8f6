"""The Upcoming pages on PostgreSQL (a real server): the same few queries
with 4 jobs as with 60, and as many as on SQLite
(tests/test_upcoming_timeline.py)."""

import json

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SCRIPT = "import json; from tests.fixtures.upcoming import page_queries; print(json.dumps(page_queries()))"


@pytest.mark.django_db
def test_the_pages_make_the_same_few_queries_as_on_sqlite(postgres_site):
    from tests.fixtures.upcoming import page_queries

    site = postgres_site("upcoming_pg", ALLOWED_HOSTS="testserver")
    on_postgres = json.loads(site.django(SCRIPT, timeout=180).strip().splitlines()[-1])
    on_sqlite = page_queries()
    assert on_postgres == on_sqlite
    for few, many in on_postgres.values():
        assert few == many
