"""Requests whose cost is bounded by what they ask, not by what is stored:
the console's import is limited (jobs per file, bytes) and validated in time
proportional to the file, and the job and run lists and the console's
export come in pages of a bounded size, without the jobs' properties unless
asked for."""

import json
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobs import forms, imports
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


def test_reading_a_file_of_30000_jobs_takes_time_in_proportion_to_it():
    # Finding the names given twice compared every name with every other.
    text = json.dumps([spec(f"job-{i}") for i in range(30_000)])
    started = time.perf_counter()
    assert len(imports.parse(text)) == 30_000
    assert time.perf_counter() - started < 10


def test_a_files_loops_are_found_in_one_pass_over_a_chain_of_30000_jobs():
    # Each job's check walked every job upstream of it: the chain's length squared.
    file = {f"job-{i}": [f"job-{i - 1}"] if i else [] for i in range(30_000)}
    file.update({"loop-a": ["loop-b"], "loop-b": ["loop-c"], "loop-c": ["loop-a"], "self": ["self"]})
    started = time.perf_counter()
    workflow = forms.Workflow(file)
    assert not any(workflow.cycle(name, ups) for name, ups in file.items() if name.startswith("job-"))
    assert time.perf_counter() - started < 10
    assert workflow.cycle("loop-a", ["loop-b"]) == ["loop-a", "loop-b", "loop-c", "loop-a"]
    assert workflow.cycle("self", ["self"]) == ["self", "self"]
    # A job checked with other upstreams than the file's is checked as sent.
    assert workflow.cycle("job-5", ["job-9"]) == ["job-5", "job-9", "job-8", "job-7", "job-6", "job-5"]


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
