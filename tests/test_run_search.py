"""Searching runs' errors and logs (jobs.runsearch, the runs page's search
box) and exporting the filtered runs as CSV. `scenario()` runs in this
process on SQLite (FTS5) and in a process of its own on PostgreSQL
(tsvector, test_run_search_postgres.py), with the same answers: the index
follows inserts, updates and deletes of runs, words match in any case, and
hostile queries are words like any others."""

import pytest

from jobs import runsearch
from tests.factories import make_job
from tests.fixtures.runsearch import check, finished_run, scenario


@pytest.mark.django_db
def test_search_and_export_on_sqlite():
    check(scenario())


def test_a_query_is_read_as_words():
    assert runsearch.words("  Upstream, said: 503!  503 ") == ["upstream", "said", "503"]
    assert runsearch.words("") == []
    with pytest.raises(runsearch.SearchError, match="200 characters"):
        runsearch.words("x" * 201)
    with pytest.raises(runsearch.SearchError, match="10 words"):
        runsearch.words(" ".join(f"w{i}" for i in range(11)))


@pytest.mark.django_db
def test_the_runs_page_searches_and_links_its_export(client, django_user_model):
    from jobs.models import RoleGrant

    user = django_user_model.objects.create_user("ann", password="pw-ann-123")
    RoleGrant.objects.create(user=user, role="viewer", namespace=None)
    client.force_login(user)
    job = make_job(name="nightly")
    hit = finished_run(job, 1, error="disk full on /var")
    finished_run(job, 2, error="network down")
    page = client.get("/runs/?q=disk").content.decode()
    assert f'id="run-{hit.pk}"' in page and page.count('<tr id="run-') == 1
    assert 'href="/runs/export.csv?q=disk"' in page
