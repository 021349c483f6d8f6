"""The workflow as the console shows it: the chain around a job on its page
(two levels each way, each job's last status, links), the upstreams named in
the job list, the warning on a job nothing starts, and none of it showing a
job the viewer may not see."""

import pytest

from jobs import services
from jobs.handlers import JobHandler, registry
from tests.fixtures.core import make_user

pytestmark = pytest.mark.django_db


def _after(make_job, name, *upstreams, on="success", **fields):
    job = make_job(
        name=name,
        schedule_type="none",
        cron_expression="",
        after=[{"job": up, "on": on} for up in upstreams],
        **fields,
    )
    services.save_dependencies(job)
    return job


def _section(page: str, element_id: str) -> str:
    start = page.index(f'id="{element_id}"')
    return page[start : page.index("</div>", start)]


def test_the_job_page_draws_two_levels_each_way_with_statuses_and_links(make_job, staff_client):
    a = make_job(name="extract", last_status="succeeded")
    b = _after(make_job, "transform", "extract", last_status="failed")
    c = _after(make_job, "load", "transform", on="finish")
    d = _after(make_job, "report", "load")
    _after(make_job, "archive", "report")
    page = staff_client.get(f"/jobs/{c.pk}/").content.decode()
    up, down = _section(page, "job-upstream"), _section(page, "job-downstream")
    assert f'href="/jobs/{b.pk}/">transform</a>' in up and f'href="/jobs/{a.pk}/">extract</a>' in up
    assert "status-failed" in up and "status-succeeded" in up
    assert f'href="/jobs/{d.pk}/">report</a>' in down and "archive" in down
    # Three levels away is beyond the chain.
    page_a = staff_client.get(f"/jobs/{a.pk}/").content.decode()
    down_a = _section(page_a, "job-downstream")
    assert "transform" in down_a and "load" in down_a and "report" not in down_a


def test_the_chain_leaves_out_jobs_the_viewer_may_not_see(make_job, client):
    make_job(name="secret-upstream", namespace="finance")
    seen = _after(make_job, "visible-job", "secret-upstream", namespace="ops")
    _after(make_job, "secret-downstream", "visible-job", namespace="finance")
    client.force_login(make_user("opsviewer", "viewer", "ops"))
    page = client.get(f"/jobs/{seen.pk}/").content.decode()
    assert "secret-upstream" not in page and "secret-downstream" not in page
    listing = client.get("/jobs/").content.decode()
    assert "secret-upstream" not in listing and "1 job you cannot see" in listing


def test_the_job_list_names_each_upstream_with_a_link(make_job, staff_client):
    a = make_job(name="backup-db")
    b = make_job(name="rotate-logs")
    _after(make_job, "verify", "backup-db", "rotate-logs")
    page = staff_client.get("/jobs/").content.decode()
    assert f'after <a href="/jobs/{a.pk}/">backup-db</a>, <a href="/jobs/{b.pk}/">rotate-logs</a>' in page


def test_a_job_nothing_starts_is_flagged_on_its_page_and_in_the_list(make_job, staff_client):
    idle = make_job(name="orphan", schedule_type="none", cron_expression="")
    make_job(name="paused-orphan", schedule_type="none", cron_expression="", state="paused")
    fed = _after(make_job, "fed", "orphan")
    assert 'id="never-starts"' in staff_client.get(f"/jobs/{idle.pk}/").content.decode()
    assert 'id="never-starts"' not in staff_client.get(f"/jobs/{fed.pk}/").content.decode()
    listing = staff_client.get("/jobs/").content.decode()
    assert listing.count("Nothing starts it: no schedule, no upstream job") == 1


@pytest.fixture
def task_handler():
    @registry.register("test.on-demand", task=True)
    class OnDemand(JobHandler):
        def run(self, ctx):
            return "done"

    yield "test.on-demand"
    registry.unregister("test.on-demand")


def test_a_job_running_a_task_handler_needs_nothing_to_start_it(make_job, staff_client, task_handler):
    """Code starts a task handler's job when it has work for it (Run now, the
    API), so neither its page nor the list warns; a plain handler's still does."""
    on_demand = make_job(name="rebuild-index", handler=task_handler, schedule_type="none", cron_expression="")
    idle = make_job(name="orphan", schedule_type="none", cron_expression="")
    assert 'id="never-starts"' not in staff_client.get(f"/jobs/{on_demand.pk}/").content.decode()
    assert 'id="never-starts"' in staff_client.get(f"/jobs/{idle.pk}/").content.decode()
    listing = staff_client.get("/jobs/").content.decode()
    assert listing.count("Nothing starts it: no schedule, no upstream job") == 1
    assert registry.is_task(task_handler) and not registry.is_task(idle.handler)
    assert {info.name: info.task for info in registry.available()}[task_handler] is True
