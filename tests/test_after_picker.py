"""The job form's "Runs after" picker (jobs.web.workflow_picker): adding,
choosing the outcome and removing upstreams writes the `after` field's
JSON; the search finds only jobs the editor may see; the graph's refusals
come with their codes while the form is edited; the form still takes the
JSON typed by hand."""

import json
import re
from html import unescape

import pytest

from jobs import services
from jobs.models import Job
from tests.factories import job_data
from tests.fixtures.core import make_user

pytestmark = pytest.mark.django_db
URL = "/jobs/after-picker/"


def written(html: str) -> list[dict]:
    return json.loads(unescape(re.search(r'data-after-text="([^"]*)"', html).group(1)))


def test_add_choose_and_remove_write_the_after_field(make_job, staff_client):
    make_job(name="backup-db", cron_expression="0 0 3 * * *")
    html = staff_client.get(
        URL, {"name": "verify", "op": "add", "target": "backup-db", "after": ""}
    ).content.decode()
    assert written(html) == [{"job": "backup-db", "on": "success"}]
    assert "backup-db" in html and "At 03:00" in html  # the upstream's schedule
    after = json.dumps(written(html))
    html = staff_client.get(
        URL, {"name": "verify", "op": "on", "target": "backup-db", "after_on": "failure", "after": after}
    ).content.decode()
    assert written(html) == [{"job": "backup-db", "on": "failure"}]
    html = staff_client.get(
        URL, {"name": "verify", "op": "remove", "target": "backup-db", "after": after}
    ).content.decode()
    assert 'data-after-text=""' in html


def test_the_search_finds_by_name_only_jobs_the_editor_may_see(make_job, client):
    make_job(name="backup-db", namespace="ops")
    make_job(name="backup-payroll", namespace="finance")
    client.force_login(make_user("opseditor", "editor", "ops"))
    html = client.get(URL, {"name": "verify", "after_q": "backup", "after": ""}).content.decode()
    assert "backup-db" in html and "backup-payroll" not in html


def test_unknown_upstreams_and_loops_are_refused_live_with_their_codes(make_job, staff_client):
    make_job(name="a")
    b = make_job(name="b", schedule_type="none", cron_expression="", after=[{"job": "a", "on": "success"}])
    services.save_dependencies(b)
    a = Job.objects.get(name="a")
    html = staff_client.get(URL, {"name": "x", "after": '[{"job": "nope"}]'}).content.decode()
    assert "47007" in html and "nope" in html
    html = staff_client.get(URL, {"name": "a", "after_job": a.pk, "after": '[{"job": "b"}]'}).content.decode()
    assert "47008" in html
    html = staff_client.get(URL, {"name": "x", "after": "[not json"}).content.decode()
    assert 'class="error"' in html


def test_a_viewer_may_not_use_the_picker(viewer_client):
    assert viewer_client.get(URL, {"after": ""}).status_code == 403


def test_the_form_shows_the_picker_with_its_rows_and_still_takes_typed_json(make_job, staff_client):
    make_job(name="backup-db")
    job = make_job(
        name="verify", schedule_type="none", cron_expression="", after=[{"job": "backup-db", "on": "finish"}]
    )
    services.save_dependencies(job)
    form = staff_client.get(f"/jobs/{job.pk}/edit/").content.decode()
    picker = form[form.index('id="after-picker"') : form.index('id="after-results"')]
    assert "backup-db" in picker and '<option value="finish" selected>' in picker
    response = staff_client.post(
        "/jobs/new/", job_data(name="report", after='[{"job": "backup-db", "on": "failure"}]')
    )
    assert response.status_code in (302, 303)
    assert Job.objects.get(name="report").after == [{"job": "backup-db", "on": "failure"}]
