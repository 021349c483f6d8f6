"""What the Schemathesis run against the generated document found
(tests/test_api_schemathesis.py), pinned so it stays fixed without the slow
run; and the document's own promises about shapes that only the job form
can enforce."""

from tests.test_api import JOB, assert_error


def test_renaming_a_job_that_runs_after_another_is_saved(staff_api, make_job):
    # Renaming a job with upstreams was a 500 (TypeError in the cycle check).
    make_job(name="upstream")
    created = staff_api.post("/api/jobs", {**JOB, "name": "downstream", "after": ["upstream"]}).json()
    response = staff_api.patch(f"/api/jobs/{created['id']}", {"name": "renamed", "after": ["upstream"]})
    assert response.status_code == 200, response.content
    assert response.json()["name"] == "renamed"


def test_renaming_a_job_to_run_after_itself_is_47008(staff_api, make_job):
    job = make_job(name="loner")
    response = staff_api.patch(f"/api/jobs/{job.pk}", {"name": "0", "after": ["0"]})
    assert_error(response, 400, "47008", "after")
