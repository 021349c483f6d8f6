"""Requests whose cost is bounded by what they ask, not by what is stored:
the console's import is limited (jobs per file, bytes) and validated in time
proportional to the file, and the job and run lists and the console's
export come in pages of a bounded size, without the jobs' properties unless
asked for."""

import json

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs import imports, workflows
from jobs.models import Job

pytestmark = pytest.mark.django_db


def spec(name: str, **fields) -> dict:
    return {"name": name, "handler": "demo.echo", "cron_expression": "0 0 3 * * *", **fields}


# -- the console's import -----------------------------------------------------------


def test_the_console_refuses_a_file_with_more_jobs_than_its_limit_and_names_the_command(
    staff_client, settings
):
    settings.JOBS_IMPORT_MAX_JOBS = 3
    text = json.dumps([spec(f"many-{i}") for i in range(4)])
    html = staff_client.post(reverse("jobs:job_import"), {"text": text}).content.decode()
    assert 'id="form-errors"' in html
    assert "4 jobs" in html and "at most 3" in html and "manage.py jobs import" in html
    staff_client.post(reverse("jobs:job_import"), {"text": text, "apply": "1"})
    assert not Job.objects.filter(name__startswith="many-").exists()
    # At the limit, it is previewed.
    text = json.dumps([spec(f"many-{i}") for i in range(3)])
    html = staff_client.post(reverse("jobs:job_import"), {"text": text}).content.decode()
    assert "3 to create" in html


@pytest.mark.parametrize("how", ["file", "text"])
def test_the_console_refuses_a_file_larger_than_its_limit_and_names_the_command(staff_client, settings, how):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.JOBS_IMPORT_MAX_BYTES = 1000
    text = json.dumps([spec("big", description="é" * 480)])  # 960 characters, over 1,000 bytes
    data = {"file": SimpleUploadedFile("jobs.json", text.encode())} if how == "file" else {"text": text}
    html = staff_client.post(reverse("jobs:job_import"), data).content.decode()
    assert 'id="form-errors"' in html
    assert "1,000 bytes" in html and "manage.py jobs import" in html
    assert not Job.objects.filter(name="big").exists()


def test_reading_a_file_of_30000_jobs_compares_each_name_once(monkeypatch):
    # Finding the names given twice compared every name with every other
    # (list.count per name): quadratic in the file's length.
    seen = []
    real = imports.job_name
    monkeypatch.setattr(imports, "job_name", lambda name: seen.append(name) or real(name))
    text = json.dumps([spec(f"job-{i}") for i in range(30_000)])
    assert len(imports.parse(text)) == 30_000
    assert len(seen) == 30_000


class CountingWorkflow(workflows.Workflow):
    """Counts the look-ups of a job's upstreams, the unit of work of every walk."""

    lookups = 0

    def get(self, key, default=None):
        CountingWorkflow.lookups += 1
        return super().get(key, default)


def test_a_files_loops_are_found_in_one_pass_over_a_chain_of_30000_jobs():
    # Each job's check walked every job upstream of it: the chain's length
    # squared.
    file = {f"job-{i}": [f"job-{i - 1}"] if i else [] for i in range(30_000)}
    file.update({"loop-a": ["loop-b"], "loop-b": ["loop-c"], "loop-c": ["loop-a"], "self": ["self"]})
    CountingWorkflow.lookups = 0
    workflow = CountingWorkflow(file)
    assert not any(workflow.cycle(name, ups) for name, ups in file.items() if name.startswith("job-"))
    assert CountingWorkflow.lookups < 5 * len(file)
    assert workflow.cycle("loop-a", ["loop-b"]) == ["loop-a", "loop-b", "loop-c", "loop-a"]
    assert workflow.cycle("self", ["self"]) == ["self", "self"]
    # A job checked with other upstreams than the file's is checked as sent.
    assert workflow.cycle("job-5", ["job-9"]) == ["job-5", "job-9", "job-8", "job-7", "job-6", "job-5"]


def test_checking_every_job_of_a_chain_of_5000_measures_the_chain_once(db):
    # Measuring the depth limit walks the chain; each walk reuses what
    # the walks before it measured.
    file = {f"job-{i}": [f"job-{i - 1}"] if i else [] for i in range(5_000)}
    CountingWorkflow.lookups = 0
    workflow = CountingWorkflow(file)
    built = CountingWorkflow.lookups
    with override_settings(JOBS_MAX_CHAIN_DEPTH=100_000):
        for name, ups in list(file.items())[1:]:
            assert workflows.refusal(name=name, upstreams=ups, workflow=workflow) is None
    assert CountingWorkflow.lookups - built < 10 * len(file)


@pytest.mark.parametrize(
    "order",
    [["j4", "j2", "j1", "j3", "j0"], ["j0", "j1", "j2", "j3", "j4"], ["j2", "j4", "j0", "j3", "j1"]],
)
def test_a_files_jobs_get_the_answer_they_get_one_by_one_whatever_the_order_and_loops(db, order):
    # Lengths remembered from one job's walk, where a loop was cut, must not
    # answer for another job's: the file's view and the one-job view agree.
    file = {"j0": ["j1", "j3"], "j1": ["j0"], "j2": ["j0", "j4"], "j3": ["j1"], "j4": ["j3"]}
    workflow = workflows.Workflow(file)
    with override_settings(JOBS_MAX_CHAIN_DEPTH=3):
        for name in order:
            alone = workflows.refusal(name=name, upstreams=file[name], workflow=dict(file))
            filed = workflows.refusal(name=name, upstreams=file[name], workflow=workflow)
            assert (alone and alone.code) == (filed and filed.code), name
            assert (alone and alone.message) == (filed and filed.message), name


def test_planning_a_file_reads_the_stored_workflow_once(make_job):
    from jobs.models import JobDependency

    up = make_job(name="stored-up")
    JobDependency.objects.create(upstream=up, downstream=make_job(name="stored-down"), on="success")
    specs = [spec(f"chain-{i}", after=[f"chain-{i - 1}" if i else "stored-down"]) for i in range(20)]
    with CaptureQueriesContext(connection) as queries:
        planned = imports.plan(specs)
    assert {item.action for item in planned} == {"create"}, [item.errors for item in planned]
    assert sum("jobs_jobdependency" in query["sql"] for query in queries.captured_queries) == 1
    # A loop through the stored jobs and the file is still found.
    looped = imports.plan([spec("stored-up", after=["chain-19"]), *specs])
    assert looped[0].action == "invalid" and looped[0].errors[0]["code"] == "47008"


# -- pages of jobs and runs ---------------------------------------------------------

# One of the jobs staff planted: 100 properties of 23,000 characters, 2.3 MB.
BIG = {f"p{i}": "x" * 23_000 for i in range(100)}


def make_jobs(make_job, count: int, **fields) -> list[Job]:
    return [make_job(name=f"paged-{i:04}", **fields) for i in range(count)]


def test_the_job_list_comes_in_pages_of_100_that_a_job_created_meanwhile_does_not_disturb(
    viewer_api, make_job
):
    make_jobs(make_job, 230)
    first = viewer_api.get("/api/jobs").json()
    assert len(first["results"]) == 100 and first["next_cursor"]
    make_job(name="created-meanwhile")
    seen = [job["name"] for job in first["results"]]
    cursor = first["next_cursor"]
    while cursor:
        page = viewer_api.get("/api/jobs", {"cursor": cursor}).json()
        seen += [job["name"] for job in page["results"]]
        cursor = page["next_cursor"]
    live = set(Job.objects.live().values_list("name", flat=True))
    assert sorted(seen) == sorted(live) and len(seen) == len(live)
    assert seen[-1] == "created-meanwhile"
    assert len(viewer_api.get("/api/jobs", {"limit": 1000}).json()["results"]) == len(live)
    response = viewer_api.get("/api/jobs", {"limit": 1001})
    assert response.status_code == 400 and response.json()["field"] == "limit"
    response = viewer_api.get("/api/jobs", {"cursor": "not-a-cursor"})
    assert response.status_code == 400 and response.json()["field"] == "cursor"


def test_the_job_list_leaves_out_properties_and_does_not_read_them_unless_asked(viewer_api, make_job):
    make_jobs(make_job, 20, properties=BIG)
    with CaptureQueriesContext(connection) as queries:
        response = viewer_api.get("/api/jobs")
    assert response.status_code == 200 and len(response.content) < 200_000
    assert all("properties" not in job for job in response.json()["results"])
    assert not any('"properties"' in query["sql"] for query in queries.captured_queries)
    # Asked for, they come, in pages that end early once large.
    page = viewer_api.get("/api/jobs", {"include": "properties"}).json()
    assert [job["properties"] for job in page["results"] if job["name"] == "paged-0000"] == [BIG]
    assert 1 <= len(page["results"]) < 20 and page["next_cursor"]
    assert viewer_api.get("/api/jobs", {"include": "everything"}).status_code == 400


def test_a_page_ends_early_once_large_and_its_cursor_goes_on_from_there(viewer_api, make_job, monkeypatch):
    from jobs import serializers

    monkeypatch.setattr(serializers, "PAGE_MAX_CHARS", 10_000)
    make_jobs(make_job, 12, properties={"p": "x" * 4_000})
    seen, cursor, pages = [], None, 0
    params = {"include": "properties"}
    while True:
        page = viewer_api.get("/api/jobs", {**params, "cursor": cursor or ""}).json()
        pages += 1
        assert len(page["results"]) <= 4  # three, and the small built-in Retention job
        seen += [job["name"] for job in page["results"]]
        if not (cursor := page["next_cursor"]):
            break
    assert [name for name in seen if name != "Retention"] == [f"paged-{i:04}" for i in range(12)]
    assert pages >= 4  # twelve jobs of 4,000 characters in pages of 10,000


def test_a_run_page_does_not_read_the_runs_logs(viewer_api, make_job):
    from jobs.models import Run

    job = make_job(name="logged")
    Run.objects.create(job=job, scheduled_at=job.created_at, log="x" * 262_144, status=Run.Status.SUCCEEDED)
    for url in ("/api/runs", f"/api/jobs/{job.pk}/runs"):
        with CaptureQueriesContext(connection) as queries:
            response = viewer_api.get(url)
        assert len(response.json()["results"]) == 1
        assert not any('"jobs_run"."log"' in query["sql"] for query in queries.captured_queries), url


# -- the console's export and `jobs export` -------------------------------------------


def test_the_console_export_comes_in_pages_named_by_a_link_header(viewer_client, make_job):
    make_jobs(make_job, 5, properties={"a": "1"})
    make_job(name="other")
    url = reverse("jobs:job_export")
    names, params, pages = [], {"q": "paged", "limit": "2"}, 0
    while True:
        response = viewer_client.get(url, params)
        pages += 1
        names += [spec["name"] for spec in json.loads(response.content)]
        link = response.get("Link")
        if not link:
            break
        assert link.endswith('>; rel="next"') and "q=paged" in link and "limit=2" in link
        params = {**params, "cursor": link.split("cursor=")[1].split("&")[0].split(">")[0]}
    assert names == [f"paged-{i:04}" for i in range(5)] and pages == 3
    assert viewer_client.get(url, {"cursor": "1.x"}).status_code == 400


def test_the_console_export_gives_100_jobs_by_default_and_1000_at_most(viewer_client, make_job):
    make_jobs(make_job, 101)
    url = reverse("jobs:job_export")
    assert len(json.loads(viewer_client.get(url).content)) == 100
    assert len(json.loads(viewer_client.get(url, {"limit": "5000"}).content)) == 102  # with Retention


def test_jobs_export_writes_job_by_job(make_job):
    from io import StringIO

    from django.core.management import call_command

    class Writes(StringIO):
        largest = 0

        def write(self, text):
            Writes.largest = max(Writes.largest, len(text))
            return super().write(text)

    make_jobs(make_job, 10, properties={"p": "x" * 50_000})
    out = Writes()
    call_command("jobs", "export", stdout=out)
    specs = json.loads(out.getvalue())
    assert [spec["name"] for spec in specs if spec["name"].startswith("paged-")] == [
        f"paged-{i:04}" for i in range(10)
    ]
    assert specs[1]["properties"] == {"p": "x" * 50_000}
    assert Writes.largest < 60_000


# -- the same on PostgreSQL -----------------------------------------------------------

ON_POSTGRES = """
import json
from django.contrib.auth import get_user_model
from django.test import Client
from jobs import imports, serializers
from jobs.models import Job, RoleGrant
specs = [{"name": "pg-%03d" % i, "handler": "demo.echo", "cron_expression": "0 0 3 * * *",
          "properties": {"p": "x" * 2000}, "after": ["pg-%03d" % (i - 1)] if i else []} for i in range(150)]
imports.apply(specs)
looped = imports.plan([{**specs[0], "after": ["pg-149"]}])
serializers.PAGE_MAX_CHARS = 50_000
client = Client()
viewer = get_user_model().objects.create_user("pg-viewer", password="pw-pg-viewer-1")
RoleGrant.objects.create(user=viewer, role="viewer")  # a user made after the upgrade sees what is granted
client.force_login(viewer)
def walk(url, **params):
    names, pages, cursor, keys = [], 0, "", set()
    while True:
        body = client.get(url, {**params, "cursor": cursor}).json()
        pages += 1
        names += [job["name"] for job in body["results"]]
        keys |= {key for job in body["results"] for key in job}
        if not (cursor := body["next_cursor"]):
            return names, pages, "properties" in keys
export = []
response = client.get("/jobs/export.json", {"q": "pg-", "limit": 100})
export += [spec["name"] for spec in json.loads(response.content)]
print(json.dumps({"plain": walk("/api/jobs"), "with": walk("/api/jobs", include="properties"),
                  "export": export, "next": response.get("Link", ""),
                  "looped": [e["code"] for item in looped for e in item.errors]}))
"""


@pytest.mark.postgres
@pytest.mark.slow
def test_pages_and_import_loops_on_postgresql(postgres_site):
    # The file is one chain of 150 jobs, deeper than the default limit.
    site = postgres_site("bounded_pg", ALLOWED_HOSTS="testserver", JOBS_MAX_CHAIN_DEPTH="200")
    out = json.loads(site.django(ON_POSTGRES, timeout=240).strip().splitlines()[-1])
    names = [f"pg-{i:03}" for i in range(150)]
    plain, pages, has_properties = out["plain"]
    assert [name for name in plain if name != "Retention"] == names and not has_properties
    with_properties, more_pages, has_properties = out["with"]
    assert [name for name in with_properties if name != "Retention"] == names and has_properties
    assert more_pages > pages >= 2  # 50,000 characters a page
    assert 1 < len(out["export"]) < 30 and out["export"] == names[: len(out["export"])]
    assert 'rel="next"' in out["next"]
    assert out["looped"] == ["47008"]
