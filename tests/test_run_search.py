"""Searching runs' errors and logs (jobs.runsearch, the runs page's search
box) and exporting the filtered runs as CSV. `scenario()` runs in this
process on SQLite (FTS5) and in a process of its own on PostgreSQL
(tsvector, test_run_search_postgres.py), with the same answers: the index
follows inserts, updates and deletes of runs, words match in any case, and
hostile queries are words like any others."""

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest

from jobs import runsearch
from jobs.models import Run
from tests.factories import make_job

START = datetime(2026, 3, 10, 12, tzinfo=UTC)
HOSTILE = ['"', 'a" OR "b', "*", "NEAR(", "'; DROP TABLE jobs_run; --", "error:*", "^", "AND OR NOT"]


def _run(job, minutes, *, error="", log="", status="failed"):
    at = START + timedelta(minutes=minutes)
    return Run.objects.create(
        job=job, trigger="schedule", status=status, scheduled_at=at, finished_at=at, error=error, log=log
    )


def scenario() -> dict:
    from django.contrib.auth import get_user_model
    from django.test import Client

    from jobs.models import RoleGrant

    billing = make_job(name="billing-sync", namespace="billing")
    ops = make_job(name="disk-check", namespace="ops")
    upstream = _run(billing, 1, error="HandlerError: upstream said 503")
    timeout = _run(billing, 2, log="connecting to the ledger\nTimeout after 30 s")
    chinese = _run(ops, 3, log="数据 同步 失败")
    _run(ops, 4, status="succeeded")
    formula = _run(billing, 5, error='=HYPERLINK("http://evil.example","click")')
    changed = _run(ops, 6, log="first words")
    changed.log = "second words"
    changed.save(update_fields=["log"])
    gone = _run(ops, 7, error="upstream said 503 too")
    gone.delete()

    def ids(text):
        return sorted(runsearch.matching(Run.objects.all(), text).values_list("id", flat=True))

    names = {upstream.pk: "upstream", timeout.pk: "timeout", chinese.pk: "chinese", formula.pk: "formula"}
    names[changed.pk] = "changed"

    def found(text):
        return sorted(names.get(pk, str(pk)) for pk in ids(text))

    viewer = get_user_model().objects.create_user("bill", password="pw-bill-123")
    RoleGrant.objects.create(user=viewer, role="viewer", namespace="billing")
    client = Client()
    client.force_login(viewer)
    exported = b"".join(client.get("/runs/export.csv?q=503").streaming_content).decode()
    everything = b"".join(client.get("/runs/export.csv").streaming_content).decode()
    page = client.get("/runs/?q=" + "x" * 201)
    return {
        "503": found("503"),
        "upstream 503": found("upstream 503"),
        "TIMEOUT": found("TIMEOUT"),
        "timeouts": found("timeouts"),
        "同步": found("同步"),
        "first": found("first"),
        "second": found("second"),
        "empty": len(ids("")),
        "hostile": {text: found(text) for text in HOSTILE},
        "exported": list(csv.reader(io.StringIO(exported))),
        "everything": list(csv.reader(io.StringIO(everything))),
        "too_long": [page.status_code, "at most 200 characters" in page.content.decode()],
        "too_many": [client.get("/runs/export.csv?q=" + "+w".join("x" * 11)).status_code],
    }


def check(result: dict) -> None:
    assert result["503"] == ["upstream"]
    assert result["upstream 503"] == ["upstream"]
    assert result["TIMEOUT"] == ["timeout"], "any case"
    assert result["timeouts"] == [], "words, not substrings"
    assert result["同步"] == ["chinese"]
    assert result["first"] == [] and result["second"] == ["changed"], "an update re-indexes the log"
    assert result["empty"] == 6, "no words: no filter (the deleted run is gone)"
    # FTS operators and quotes are not operators here: a query without a word
    # filters nothing, the words of the others are looked up as words.
    assert len(result["hostile"]['"']) == len(result["hostile"]["*"]) == len(result["hostile"]["^"]) == 6
    for text in ["'; DROP TABLE jobs_run; --", 'a" OR "b', "NEAR(", "error:*", "AND OR NOT"]:
        assert result["hostile"][text] == [], text
    header, *rows = result["exported"]
    assert header[:4] == ["id", "job", "namespace", "status"]
    assert [(row[1], row[3]) for row in rows] == [("billing-sync", "failed")]
    # The viewer of billing exports billing's runs only, newest first; a cell
    # that a spreadsheet would read as a formula starts with an apostrophe.
    _header, *all_rows = result["everything"]
    assert [row[1] for row in all_rows] == ["billing-sync"] * 3
    assert all_rows[0][-1].startswith("'=HYPERLINK(")
    assert result["too_long"] == [200, True]
    assert result["too_many"] == [400]


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
    hit = _run(job, 1, error="disk full on /var")
    _run(job, 2, error="network down")
    page = client.get("/runs/?q=disk").content.decode()
    assert f'id="run-{hit.pk}"' in page and page.count('<tr id="run-') == 1
    assert 'href="/runs/export.csv?q=disk"' in page
