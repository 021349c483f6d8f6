"""The JSON API through HTTP: every endpoint's happy path and its errors."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from jobs import services, tasks
from jobs.models import AuditEvent, Job, Run
from tests.fixtures.api import JOB, ApiClient, assert_error

UTC = UTC


def make_run(job, *, at, status=Run.Status.SUCCEEDED, trigger=Run.Trigger.SCHEDULE, attempt=1, **fields):
    return Run.objects.create(
        job=job, scheduled_at=at, status=status, trigger=trigger, attempt=attempt, **fields
    )


# -- authentication ------------------------------------------------------------------------

ENDPOINTS = [
    ("get", "/api/jobs"),
    ("post", "/api/jobs"),
    ("get", "/api/jobs/{job}"),
    ("put", "/api/jobs/{job}"),
    ("patch", "/api/jobs/{job}"),
    ("delete", "/api/jobs/{job}"),
    ("post", "/api/jobs/{job}/toggle"),
    ("post", "/api/jobs/{job}/run"),
    ("get", "/api/jobs/{job}/runs"),
    ("get", "/api/runs/{run}"),
    ("post", "/api/runs/{run}/cancel"),
    ("get", "/api/handlers"),
    ("post", "/api/tasks"),
    ("post", "/api/cron/preview"),
]
MUTATIONS = [(m, u) for m, u in ENDPOINTS if m != "get" and u != "/api/cron/preview"]


@pytest.fixture
def job_and_run(make_job):
    job = make_job(name="target")
    run = make_run(
        job, at=datetime(2026, 1, 1, tzinfo=UTC), status=Run.Status.QUEUED, trigger=Run.Trigger.MANUAL
    )
    return job, run


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
def test_every_endpoint_needs_authentication(anon_api, job_and_run, method, url):
    job, run = job_and_run
    response = getattr(anon_api, method)(url.format(job=job.pk, run=run.pk), {} if method != "get" else None)
    assert_error(response, 401, "unauthenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "header", ["Bearer", "Bearer ", "Basic dXNlcjpwdw==", "Token cb_abc", "Bearer cb_not-a-real-token"]
)
def test_a_bad_authorization_header_is_401(db, header):
    response = Client().get("/api/jobs", headers={"Authorization": header})
    assert_error(response, 401)


def test_a_revoked_token_is_refused(staff_user):
    from jobs import tokens

    token, secret = tokens.create_token(user=staff_user, name="ci")
    api = ApiClient(secret)
    assert api.get("/api/jobs").status_code == 200
    assert tokens.revoke_token(user=staff_user, token_id=token.pk)
    assert_error(api.get("/api/jobs"), 401, "invalid_token")


def test_a_token_of_an_inactive_user_is_refused(staff_user, staff_api):
    staff_user.is_active = False
    staff_user.save()
    assert_error(staff_api.get("/api/jobs"), 401, "invalid_token")


def test_the_schema_is_public(anon_api):
    response = anon_api.get("/api/schema")
    assert response.status_code == 200
    assert response.json()["openapi"].startswith("3.")


# -- permissions: a viewer reads, only staff change -------------------------------------------------


@pytest.mark.parametrize(("method", "url"), MUTATIONS)
def test_a_non_staff_token_cannot_change_anything(viewer_api, job_and_run, method, url):
    job, run = job_and_run
    before = (
        Job.objects.live().count(),
        Job.objects.get(pk=job.pk).version,
        Run.objects.count(),
        AuditEvent.objects.count(),
    )
    body = {**JOB, "name": "sneaky"} if "jobs" in url else {"handler": "demo.echo", "key": "k"}
    response = getattr(viewer_api, method)(
        url.format(job=job.pk, run=run.pk), body if method != "delete" else None
    )
    assert_error(response, 403, "forbidden")
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED
    assert before == (
        Job.objects.live().count(),
        Job.objects.get(pk=job.pk).version,
        Run.objects.count(),
        AuditEvent.objects.count(),
    )


def test_a_viewer_reads_jobs_runs_handlers_and_previews(viewer_api, job_and_run):
    job, run = job_and_run
    assert viewer_api.get("/api/jobs").status_code == 200
    assert viewer_api.get(f"/api/jobs/{job.pk}").status_code == 200
    assert viewer_api.get(f"/api/jobs/{job.pk}/runs").status_code == 200
    assert viewer_api.get(f"/api/runs/{run.pk}").status_code == 200
    assert viewer_api.get("/api/handlers").status_code == 200
    assert viewer_api.post("/api/cron/preview", {"expression": "0 0 * * * *"}).status_code == 200


# -- CSRF: enforced for the session, not for tokens ---------------------------------------------------


@pytest.fixture
def csrf_session(staff_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    client.get("/profile/")  # sets the csrftoken cookie
    return client


@pytest.mark.parametrize(("method", "url"), MUTATIONS)
def test_session_mutations_without_csrf_token_are_refused(csrf_session, job_and_run, method, url):
    job, run = job_and_run
    api = ApiClient(client=csrf_session)
    body = {**JOB, "name": "x"} if "jobs" in url else {"handler": "demo.echo", "key": "k"}
    response = getattr(api, method)(url.format(job=job.pk, run=run.pk), body if method != "delete" else None)
    assert_error(response, 403, "csrf_failed")
    assert Job.objects.get(pk=job.pk).deleted_at is None


def test_session_mutation_with_csrf_header_works(csrf_session):
    api = ApiClient(client=csrf_session)
    response = api.post("/api/jobs", JOB, headers={"X-CSRFToken": csrf_session.cookies["csrftoken"].value})
    assert response.status_code == 201, response.content


def test_session_reads_need_no_csrf_token(csrf_session):
    assert csrf_session.get("/api/jobs").status_code == 200


def test_token_calls_are_csrf_exempt(staff_user):
    from jobs import tokens

    _token, secret = tokens.create_token(user=staff_user, name="ci")
    api = ApiClient(secret, client=Client(enforce_csrf_checks=True))
    assert api.post("/api/jobs", JOB).status_code == 201


# -- jobs: list and create -----------------------------------------------------------------------------


def test_list_jobs_filters_by_namespace_state_and_kind(staff_api, make_job):
    make_job(name="a", namespace="billing")
    make_job(name="b", namespace="billing", state=Job.State.PAUSED)
    make_job(name="c")
    names = lambda response: [job["name"] for job in response.json()["results"]]
    assert names(staff_api.get("/api/jobs", {"namespace": "billing"})) == ["a", "b"]
    assert names(staff_api.get("/api/jobs", {"namespace": "billing", "state": "paused"})) == ["b"]
    assert "c" in names(staff_api.get("/api/jobs", {"kind": "python"}))
    assert names(staff_api.get("/api/jobs", {"kind": "http"})) == []


def test_list_jobs_leaves_out_deleted_ones(staff_api, make_job):
    job = make_job(name="gone")
    services.delete_job(job=job)
    assert "gone" not in [j["name"] for j in staff_api.get("/api/jobs").json()["results"]]


@pytest.mark.parametrize("param", [{"state": "sleepy"}, {"kind": "perl"}])
def test_list_jobs_with_a_bad_filter_is_400(staff_api, param):
    assert_error(staff_api.get("/api/jobs", param), 400, "invalid_choice", next(iter(param)))


def test_create_job(staff_api, staff_user):
    response = staff_api.post(
        "/api/jobs",
        {
            **JOB,
            "properties": {"to": "ops", "n": 3},
            "alert_emails": ["ops@example.com"],
            "namespace": "reports",
            "max_retries": 2,
        },
    )
    assert response.status_code == 201, response.content
    body = response.json()
    job = Job.objects.get(pk=body["id"])
    assert job.owner == staff_user and job.namespace == "reports" and job.max_retries == 2
    assert body["properties"] == {"to": "ops", "n": "3"}
    assert body["next_fire_at"].endswith("Z") and body["version"] == 1
    event = AuditEvent.objects.get(job=job)
    assert (event.action, event.via, event.username) == ("create", "api", "staff")


def test_create_interval_job(staff_api):
    response = staff_api.post(
        "/api/jobs",
        {"name": "tick", "handler": "demo.echo", "schedule_type": "interval", "interval_seconds": 30},
    )
    assert response.status_code == 201
    assert response.json()["cron_expression"] == "" and response.json()["interval_seconds"] == 30


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({**JOB, "name": ""}, "required", "name"),
        ({"handler": "demo.echo", "cron_expression": "0 * * * * *"}, "required", "name"),
        ({**JOB, "handler": "no.such.handler"}, "invalid", "handler"),
        ({**JOB, "cron_expression": ""}, "required", "cron_expression"),
        ({**JOB, "schedule_type": "interval", "interval_seconds": 4}, "47004", "interval_seconds"),
        ({**JOB, "schedule_type": "interval", "interval_seconds": 10**8}, "invalid", "interval_seconds"),
        ({**JOB, "timezone": "Mars/Olympus"}, "47006", "timezone"),
        ({**JOB, "timeout_seconds": 0}, None, "timeout_seconds"),
        ({**JOB, "timeout_seconds": 86_401}, "invalid", "timeout_seconds"),
        ({**JOB, "kind": "perl"}, "invalid_choice", "kind"),
        ({**JOB, "state": "crashed"}, "invalid_choice", "state"),
        ({**JOB, "namespace": "Not OK"}, "invalid", "namespace"),
        ({**JOB, "alert_emails": ["not-an-email"]}, "invalid", "alert_emails"),
        ({**JOB, "properties": {"nested": {"a": 1}}}, "invalid", "properties"),
        ({**JOB, "max_retries": "3"}, "invalid", "max_retries"),
        ({**JOB, "max_retries": True}, "invalid", "max_retries"),
        ({**JOB, "max_retries": 2**40}, "invalid", "max_retries"),
        ({**JOB, "run_once": "yes"}, "invalid", "run_once"),
        ({**JOB, "name": ["a"]}, "invalid", "name"),
        ({**JOB, "properties": []}, "invalid", "properties"),
        ({**JOB, "colour": "blue"}, "unknown_field", "colour"),
    ],
)
def test_create_job_rejects_bad_input(staff_api, body, code, field):
    response = staff_api.post("/api/jobs", body)
    error = assert_error(response, 400, code, field)
    assert {"code": error["code"], "message": error["message"], "field": error["field"]} in error["errors"]
    assert not Job.objects.filter(name="nightly report").exists()


def test_create_job_reports_every_problem(staff_api):
    response = staff_api.post("/api/jobs", {"name": "", "handler": "", "cron_expression": ""})
    fields = {error["field"] for error in assert_error(response, 400)["errors"]}
    assert fields == {"name", "handler", "cron_expression"}


def test_create_job_with_a_duplicate_name_is_400(staff_api, make_job):
    make_job(name="taken")
    assert_error(staff_api.post("/api/jobs", {**JOB, "name": "taken"}), 400, "unique", "name")


def test_both_day_fields_restricted_is_47003(staff_api):
    assert_error(
        staff_api.post("/api/jobs", {**JOB, "cron_expression": "0 0 0 15 * MON"}),
        400,
        "47003",
        "cron_expression",
    )


@pytest.mark.parametrize(
    ("raw", "content"),
    [
        ("", "empty"),
        ("{", "truncated"),
        ("[1, 2]", "a list"),
        ('"text"', "a string"),
        ('{"name": NaN}', "NaN"),
        ("\xff\xfe", "not UTF-8"),
        ("[" * 100_000 + "]" * 100_000, "deeply nested"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_400(staff_api, raw, content):
    assert_error(
        staff_api.post("/api/jobs", raw=raw.encode("latin-1") if raw.startswith("\xff") else raw),
        400,
        "invalid_json",
    )


def test_read_only_fields_sent_back_are_ignored(staff_api, make_job):
    job = make_job(name="roundtrip")
    current = staff_api.get(f"/api/jobs/{job.pk}").json()
    response = staff_api.put(
        f"/api/jobs/{job.pk}", {**current, "description": "changed", "id": 999, "consecutive_failures": 7}
    )
    assert response.status_code == 200, response.content
    assert response.json()["id"] == job.pk and response.json()["consecutive_failures"] == 0


# -- jobs: one job ---------------------------------------------------------------------------------------


def test_get_job(staff_api, make_job):
    job = make_job(name="one")
    body = staff_api.get(f"/api/jobs/{job.pk}").json()
    assert body["name"] == "one" and body["id"] == job.pk


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_missing_or_deleted_job_is_404(staff_api, make_job, method):
    gone = make_job(name="gone")
    services.delete_job(job=gone)
    for url in (f"/api/jobs/{gone.pk}", "/api/jobs/999999", f"/api/jobs/{2**70}"):
        assert_error(
            getattr(staff_api, method)(url, {"description": "x"} if method in ("put", "patch") else None),
            404,
            "not_found",
        )


def test_put_replaces_the_job(staff_api, make_job):
    job = make_job(name="old", description="keep?", max_retries=5)
    response = staff_api.put(f"/api/jobs/{job.pk}", {**JOB, "name": "new", "version": job.version})
    assert response.status_code == 200, response.content
    job.refresh_from_db()
    assert (job.name, job.description, job.max_retries, job.version) == ("new", "", 0, 2)
    event = AuditEvent.objects.filter(job=job, action="edit").get()
    assert event.via == "api" and event.changes["name"] == ["old", "new"]


def test_patch_changes_only_the_given_fields(staff_api, make_job):
    job = make_job(name="keep", description="keep me", max_retries=5)
    response = staff_api.patch(f"/api/jobs/{job.pk}", {"timeout_seconds": 30})
    assert response.status_code == 200, response.content
    job.refresh_from_db()
    assert (job.name, job.description, job.max_retries, job.timeout_seconds) == ("keep", "keep me", 5, 30)


def test_patch_validates_like_create(staff_api, make_job):
    job = make_job(name="v")
    assert_error(
        staff_api.patch(f"/api/jobs/{job.pk}", {"schedule_type": "interval", "interval_seconds": 4}),
        400,
        "47004",
        "interval_seconds",
    )
    job.refresh_from_db()
    assert job.schedule_type == "cron" and job.version == 1


@pytest.mark.parametrize("method", ["put", "patch"])
def test_a_stale_version_is_409(staff_api, make_job, method):
    job = make_job(name="contested")
    assert staff_api.patch(f"/api/jobs/{job.pk}", {"description": "first", "version": 1}).status_code == 200
    response = getattr(staff_api, method)(
        f"/api/jobs/{job.pk}", {**JOB, "name": "contested", "description": "second", "version": 1}
    )
    assert_error(response, 409, "stale_version", "version")
    job.refresh_from_db()
    assert (job.description, job.version) == ("first", 2)


def test_delete_job(staff_api, make_job):
    job = make_job(name="bye")
    run = make_run(job, at=datetime(2026, 1, 1, tzinfo=UTC), status=Run.Status.QUEUED)
    response = staff_api.delete(f"/api/jobs/{job.pk}")
    assert response.status_code == 204 and response.content == b""
    job.refresh_from_db()
    run.refresh_from_db()
    assert job.is_deleted and run.status == Run.Status.CANCELLED
    assert AuditEvent.objects.filter(job=job, action="delete", via="api").exists()


def test_deleting_a_builtin_job_is_409(staff_api):
    builtin = Job.objects.get(builtin=True)
    assert_error(staff_api.delete(f"/api/jobs/{builtin.pk}"), 409, "conflict")
    assert not Job.objects.get(pk=builtin.pk).is_deleted


# -- toggle and run now ----------------------------------------------------------------------------------


def test_toggle_pauses_then_resumes(staff_api, make_job):
    job = make_job(name="t")
    paused = staff_api.post(f"/api/jobs/{job.pk}/toggle").json()
    assert paused["state"] == "paused" and paused["next_fire_at"] is None
    resumed = staff_api.post(f"/api/jobs/{job.pk}/toggle").json()
    assert resumed["state"] == "enabled" and resumed["next_fire_at"] is not None
    assert list(AuditEvent.objects.filter(job=job).values_list("action", "via").order_by("id")) == [
        ("pause", "api"),
        ("resume", "api"),
    ]


def test_toggle_re_enables_a_crashed_job(staff_api, make_job):
    job = make_job(name="crashed", state=Job.State.CRASHED, consecutive_failures=3)
    body = staff_api.post(f"/api/jobs/{job.pk}/toggle").json()
    assert body["state"] == "enabled" and body["consecutive_failures"] == 0


def test_toggle_missing_job_is_404(staff_api):
    assert_error(staff_api.post("/api/jobs/424242/toggle"), 404)


def test_run_now_queues_one_manual_run(staff_api, make_job):
    job = make_job(name="now")
    first = staff_api.post(f"/api/jobs/{job.pk}/run")
    assert first.status_code == 201
    assert (
        first.json()["status"] == "queued"
        and first.json()["trigger"] == "api"
        and first.json()["job_id"] == job.pk
    )
    second = staff_api.post(f"/api/jobs/{job.pk}/run")
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"]
    assert Run.objects.filter(job=job).count() == 1


def test_run_now_missing_job_is_404(staff_api):
    assert_error(staff_api.post("/api/jobs/424242/run"), 404)


def test_run_now_in_demo_mode_is_403(staff_api, make_job, settings):
    settings.DEMO_MODE = True
    job = make_job(name="demo")
    assert_error(staff_api.post(f"/api/jobs/{job.pk}/run"), 403, "demo_mode")
    assert not Run.objects.filter(job=job).exists()


# -- runs ----------------------------------------------------------------------------------------------------


def test_runs_are_listed_newest_first_in_cursor_pages(staff_api, make_job):
    job = make_job(name="history")
    start = datetime(2026, 3, 1, tzinfo=UTC)
    for i in range(45):
        # Pairs share a scheduled time: the cursor must break ties by id.
        make_run(job, at=start + timedelta(minutes=i // 2), attempt=i % 2 + 1)
    make_run(make_job(name="other"), at=start)
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 20, **({"cursor": cursor} if cursor else {})}
        body = staff_api.get(f"/api/jobs/{job.pk}/runs", params).json()
        seen += body["results"]
        pages += 1
        cursor = body["next_cursor"]
        if not cursor:
            break
    assert pages == 3 and len(seen) == 45 and len({r["id"] for r in seen}) == 45
    keys = [(r["scheduled_at"], r["id"]) for r in seen]
    assert keys == sorted(keys, reverse=True)


def test_runs_come_in_pages_of_a_hundred_and_at_most_a_thousand(staff_api, make_job):
    job = make_job(name="many")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    Run.objects.bulk_create(
        Run(
            job=job,
            scheduled_at=start + timedelta(minutes=i),
            status=Run.Status.SUCCEEDED,
            trigger="schedule",
        )
        for i in range(1005)
    )
    body = staff_api.get(f"/api/jobs/{job.pk}/runs").json()
    assert len(body["results"]) == 100 and body["next_cursor"]
    body = staff_api.get("/api/runs", {"limit": 1000}).json()
    assert len(body["results"]) == 1000 and body["next_cursor"]


def test_runs_filter_by_status_trigger_and_time(staff_api, make_job):
    job = make_job(name="filters")
    day = datetime(2026, 5, 1, tzinfo=UTC)
    ok = make_run(job, at=day)
    failed = make_run(job, at=day + timedelta(hours=1), status=Run.Status.FAILED)
    manual = make_run(job, at=day + timedelta(hours=2), trigger=Run.Trigger.MANUAL, status=Run.Status.FAILED)
    ids = lambda params: [
        r["id"] for r in staff_api.get(f"/api/jobs/{job.pk}/runs", params).json()["results"]
    ]
    assert ids({"status": "failed"}) == [manual.pk, failed.pk]
    assert ids({"status": "failed,succeeded"}) == [manual.pk, failed.pk, ok.pk]
    assert ids({"trigger": "manual"}) == [manual.pk]
    assert ids({"from": "2026-05-01T00:30:00Z"}) == [manual.pk, failed.pk]
    assert ids({"to": "2026-05-01T01:00:00+00:00"}) == [ok.pk]
    assert ids({"from": "2026-05-01", "to": "2026-05-02"}) == [manual.pk, failed.pk, ok.pk]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "1001"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"status": "exploded"}, "status"),
        ({"trigger": "cosmic"}, "trigger"),
        ({"from": "yesterday"}, "from"),
        ({"to": "2026-13-45T99:00"}, "to"),
        ({"cursor": "garbage"}, "cursor"),
        ({"cursor": "WzEsMl0"}, "cursor"),
    ],
)
def test_runs_with_bad_parameters_are_400(staff_api, make_job, params, field):
    job = make_job(name="p")
    assert_error(staff_api.get(f"/api/jobs/{job.pk}/runs", params), 400, field=field)


def test_runs_of_a_missing_job_are_404(staff_api):
    assert_error(staff_api.get("/api/jobs/424242/runs"), 404)


def test_run_detail_includes_the_log(staff_api, make_job):
    run = make_run(
        make_job(name="logged"), at=datetime(2026, 1, 1, tzinfo=UTC), log="line 1\nline 2", result="ok"
    )
    body = staff_api.get(f"/api/runs/{run.pk}").json()
    assert (
        body["log"] == "line 1\nline 2"
        and body["result"] == "ok"
        and body["scheduled_at"] == "2026-01-01T00:00:00Z"
    )


def test_run_detail_of_a_task(staff_api):
    run = tasks.enqueue("demo.echo", key="note:1")
    body = staff_api.get(f"/api/runs/{run.pk}").json()
    assert body["job_id"] is None and body["task_key"] == "note:1" and body["handler"] == "demo.echo"


def test_missing_run_is_404(staff_api, make_job):
    job = make_job(name="deleted")
    run = make_run(job, at=datetime(2026, 1, 1, tzinfo=UTC))
    services.delete_job(job=job)
    assert_error(staff_api.get(f"/api/runs/{run.pk}"), 404)
    assert_error(staff_api.get("/api/runs/424242"), 404)


def test_cancel_a_queued_run(staff_api, make_job):
    run = make_run(make_job(name="c"), at=datetime(2026, 1, 1, tzinfo=UTC), status=Run.Status.QUEUED)
    body = staff_api.post(f"/api/runs/{run.pk}/cancel").json()
    assert body["status"] == "cancelled"
    assert AuditEvent.objects.filter(action="cancel-run", via="api").exists()


def test_cancel_a_finished_run_is_409(staff_api, make_job):
    run = make_run(make_job(name="done"), at=datetime(2026, 1, 1, tzinfo=UTC))
    assert_error(staff_api.post(f"/api/runs/{run.pk}/cancel"), 409, "not_live")


def test_cancel_a_missing_run_is_404(staff_api):
    assert_error(staff_api.post("/api/runs/424242/cancel"), 404)


# -- handlers and tasks ----------------------------------------------------------------------------------------


def test_handlers_list_what_the_form_offers(staff_api):
    from jobs.forms import JobForm

    body = staff_api.get("/api/handlers").json()
    names = [h["name"] for h in body["results"]]
    assert names == [name for name, _label in JobForm.handler_choices() if name]
    sleep = next(h for h in body["results"] if h["name"] == "demo.sleep")
    assert sleep["properties_help"] == {"seconds": "how long to sleep (default 1)"}
    assert sleep["task"] is False


def test_enqueue_a_task_then_get_the_same_one_back(staff_api):
    body = {"handler": "demo.echo", "key": "invoice:42", "properties": {"n": 1}, "max_retries": 2}
    first = staff_api.post("/api/tasks", body)
    assert first.status_code == 201, first.content
    run = Run.objects.get(pk=first.json()["id"])
    assert (run.trigger, run.task_key, run.properties, run.max_retries) == (
        "task",
        "invoice:42",
        {"n": "1"},
        2,
    )
    second = staff_api.post("/api/tasks", body)
    assert second.status_code == 200 and second.json()["id"] == run.pk


def test_enqueue_a_delayed_task(staff_api):
    response = staff_api.post(
        "/api/tasks", {"handler": "demo.echo", "key": "later", "run_after": "2030-01-01T00:00:00Z"}
    )
    assert response.status_code == 201
    assert Run.objects.get(pk=response.json()["id"]).run_after == datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"key": "k"}, "required", "handler"),
        ({"handler": "demo.echo"}, "required", "key"),
        ({"handler": "no.such", "key": "k"}, "invalid", "handler"),
        ({"handler": "demo.echo", "key": "k" * 201}, "max_length", "key"),
        ({"handler": "demo.echo", "key": "k", "timeout_seconds": 0}, "min_value", "timeout_seconds"),
        ({"handler": "demo.echo", "key": "k", "max_retries": "2"}, "invalid", "max_retries"),
        ({"handler": "demo.echo", "key": "k", "run_after": "soon"}, "invalid", "run_after"),
        ({"handler": "demo.echo", "key": 42}, "invalid", "key"),
        ({"handler": "demo.echo", "key": "k", "priority": 1}, "unknown_field", "priority"),
    ],
)
def test_enqueue_rejects_bad_input(staff_api, body, code, field):
    assert_error(staff_api.post("/api/tasks", body), 400, code, field)
    assert not Run.objects.exists()


def test_enqueue_in_demo_mode_is_403(staff_api, settings):
    settings.DEMO_MODE = True
    assert_error(staff_api.post("/api/tasks", {"handler": "demo.echo", "key": "k"}), 403, "demo_mode")


# -- cron preview --------------------------------------------------------------------------------------------------


def test_preview_lists_the_next_five_times(staff_api):
    response = staff_api.post(
        "/api/cron/preview",
        {"expression": "0 30 9 * * *", "timezone": "Europe/Berlin", "after": "2026-06-01T00:00:00Z"},
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["times"][0]["utc"] == "2026-06-01T07:30:00Z"
    assert len(body["times"]) == 5 and {"expression", "description", "times"} <= set(body)


def test_preview_marks_the_dst_gap(staff_api):
    body = staff_api.post(
        "/api/cron/preview",
        {
            "expression": "0 30 2 * * *",
            "timezone": "America/New_York",
            "after": "2026-03-07T12:00:00Z",
            "count": 2,
        },
    ).json()
    # 2026-03-08 is the spring-forward day: 02:30 does not exist, it fires at 03:00 EDT.
    assert [t["dst"] for t in body["times"]] == ["skipped", None]
    assert body["times"][0]["local"] == "2026-03-08T03:00:00-04:00"
    assert body["times"][1]["local"] == "2026-03-09T02:30:00-04:00"


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({}, "required", "expression"),
        ({"expression": 5}, "required", "expression"),
        ({"expression": "0 * * * * *", "timezone": "Nowhere/Land"}, "47006", "timezone"),
        ({"expression": "0 * * * * *", "timezone": 3}, "invalid", "timezone"),
        ({"expression": "0 * * * * *", "count": 0}, "invalid", "count"),
        ({"expression": "0 * * * * *", "count": 51}, "invalid", "count"),
        ({"expression": "0 * * * * *", "after": "later"}, "invalid", "after"),
        ({"expression": "0 * * * * *", "after": 17}, "invalid", "after"),
        ({"expression": "not a cron expression"}, None, "expression"),
    ],
)
def test_preview_errors_are_coded(staff_api, body, code, field):
    assert_error(staff_api.post("/api/cron/preview", body), 400, code, field)


@pytest.mark.parametrize(
    ("expression", "code"),
    [("0 0 0 15 * MON", "47003"), ("0 0 0 30 2 ?", "47005"), ("0 61 * * * *", "47002")],
)
def test_preview_gives_the_spec_codes(staff_api, expression, code):
    assert_error(staff_api.post("/api/cron/preview", {"expression": expression}), 400, code, "expression")


# -- the edges of the API ----------------------------------------------------------------------------------------------


def test_a_wrong_method_is_405_with_allow(staff_api, make_job):
    job = make_job(name="m")
    response = staff_api.post(f"/api/jobs/{job.pk}", {})
    assert_error(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, PUT, PATCH, DELETE"


@pytest.mark.parametrize("url", ["/api/nope", "/api/jobs/", "/api/jobs/abc", "/api/", "/api/runs/%0A1"])
def test_unknown_api_paths_are_json_404(staff_api, url):
    assert_error(staff_api.get(url), 404, "not_found")


def test_an_unexpected_error_is_a_json_500_without_a_trace(staff_api, monkeypatch):
    def explode(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr("jobs.handlers.registry.available", explode)
    body = assert_error(staff_api.get("/api/handlers"), 500, "server_error")
    assert "secret" not in body["message"] and "Traceback" not in str(body)


# -- audit --------------------------------------------------------------------------------------------------------------------


def test_deleting_a_user_keeps_their_audit_history(staff_api, staff_user):
    job_id = staff_api.post("/api/jobs", JOB).json()["id"]
    staff_api.post(f"/api/jobs/{job_id}/toggle")
    get_user_model().objects.filter(pk=staff_user.pk).delete()
    events = AuditEvent.objects.filter(job_id=job_id).order_by("id")
    assert [(e.action, e.username, e.user_id, e.via) for e in events] == [
        ("create", "staff", None, "api"),
        ("pause", "staff", None, "api"),
    ]


def test_the_sql_text_of_a_sql_job_is_in_the_audit(superuser):
    # Saved through the service (the SQL handler's validation is another
    # branch's); what matters here is that the diff carries the statement.
    job = Job(
        name="purge",
        kind=Job.Kind.SQL,
        properties={"sql": "DELETE FROM t WHERE old"},
        cron_expression="0 0 * * * *",
    )
    services.save_job(job=job, user=superuser, via="api")
    job.properties = {"sql": "DELETE FROM t WHERE older"}
    services.save_job(job=job, user=superuser, via="api")
    create, edit = AuditEvent.objects.filter(job=job).order_by("id")
    assert create.changes["properties"] == [None, {"sql": "DELETE FROM t WHERE old"}]
    assert edit.changes["properties"] == [
        {"sql": "DELETE FROM t WHERE old"},
        {"sql": "DELETE FROM t WHERE older"},
    ]


def test_a_sql_job_created_over_the_api_is_audited_with_its_sql(superuser_api, settings):
    pytest.importorskip("jobs.handlers.sql", reason="the SQL handler lands from the fence branch")
    settings.JOBS_SQL_ENABLED = True
    response = superuser_api.post(
        "/api/jobs", {**JOB, "kind": "sql", "handler": "", "properties": {"sql": "SELECT 1"}}
    )
    assert response.status_code == 201, response.content
    event = AuditEvent.objects.get(job_id=response.json()["id"])
    assert event.via == "api" and event.changes["properties"][1]["sql"] == "SELECT 1"


def test_patch_leaves_a_crashed_job_crashed(staff_api, make_job):
    # Regression: the spec → form mapping filled a missing state with
    # "enabled", so any PATCH quietly re-enabled a crashed job.
    job = make_job(name="crashed", state=Job.State.CRASHED, consecutive_failures=3)
    body = staff_api.patch(f"/api/jobs/{job.pk}", {"description": "looked at it"}).json()
    assert body["state"] == "crashed" and body["description"] == "looked at it"


def test_http_job_errors_name_the_property(staff_api):
    response = staff_api.post(
        "/api/jobs",
        {
            **JOB,
            "kind": "http",
            "handler": "",
            "properties": {"url": "http://127.0.0.1/admin", "method": "BREW"},
        },
    )
    body = assert_error(response, 400, "fence", "properties.url")
    assert ("invalid", "properties.method") in [(e["code"], e["field"]) for e in body["errors"]]


def test_create_http_job(staff_api):
    response = staff_api.post(
        "/api/jobs",
        {
            **JOB,
            "kind": "http",
            "handler": "",
            "properties": {"url": "https://10.0.0.1/hook", "method": "POST"},
        },
    )
    assert response.status_code == 201, response.content
    assert response.json()["properties"] == {"url": "https://10.0.0.1/hook", "method": "POST"}


def test_a_staff_member_who_is_not_superuser_cannot_create_sql_jobs(staff_api, settings):
    settings.JOBS_SQL_ENABLED = True
    body = {**JOB, "kind": "sql", "handler": "", "properties": {"sql": "SELECT 1"}}
    assert_error(staff_api.post("/api/jobs", body), 403, "forbidden", "kind")
    assert not Job.objects.filter(name=JOB["name"]).exists()


def test_sql_errors_name_the_property(superuser_api, settings):
    settings.JOBS_SQL_ENABLED = True
    body = {**JOB, "kind": "sql", "handler": "", "properties": {"sql": "DROP TABLE jobs_job"}}
    assert_error(superuser_api.post("/api/jobs", body), 400, "invalid", "properties.sql")


EXTREME_INSTANTS = [
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "0001-01-01",
    "9999-12-31",
    "1899-12-31T23:59:59Z",
]


@pytest.mark.parametrize("instant", EXTREME_INSTANTS)
def test_instants_near_the_calendars_ends_are_400_not_500(staff_api, make_job, instant):
    # Regression: 0001-01-01T00:00+01:00 overflowed converting to UTC (a 500).
    job = make_job(name="ends")
    assert_error(staff_api.get(f"/api/jobs/{job.pk}/runs", {"from": instant}), 400, "out_of_range", "from")
    assert_error(
        staff_api.post("/api/cron/preview", {"expression": "0 0 0 1 1 *", "after": instant}),
        400,
        "out_of_range",
        "after",
    )
    assert_error(
        staff_api.post("/api/tasks", {"handler": "demo.echo", "key": "k", "run_after": instant}),
        400,
        "out_of_range",
        "run_after",
    )
