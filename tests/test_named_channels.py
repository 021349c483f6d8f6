"""Named alert channels (jobs.channelbook, jobs.channelnames): created by
administrators on the Alerts area's Channels tab and in /api/channels,
named by jobs and by sys.job.alertChannels, each receiving only its kinds;
the migration that named the URL lists of earlier releases."""

import pytest
from django.db import connection

from jobs import alerts, channelbook, channels
from jobs.config import get_stored, set_setting
from jobs.models import Alert, AlertChannel, AuditEvent, Job
from tests.fixtures.api import assert_error
from tests.fixtures.core import T0

SECRET = "s3cr3tTOKENvalue"
URL = f"json://hooks.example.com/cronboard/{SECRET}"
JOB = {"name": "nightly", "handler": "demo.echo", "cron_expression": "0 * * * * *"}


def make_channel(name, url=URL, **fields) -> AlertChannel:
    return channelbook.save_channel(name=name, url=url, **fields)


# -- the page and the API ----------------------------------------------------------------


def test_an_admin_creates_a_channel_stored_encrypted_shown_masked_and_audited(db, staff_client):
    response = staff_client.post(
        "/alerts/channels/", {"name": "ops-slack", "url": URL, "kinds": ["crashed"], "description": "Ops"}
    )
    assert response.status_code == 302
    channel = AlertChannel.objects.get(name="ops-slack")
    assert channel.kinds == ["crashed"] and channel.description == "Ops"
    with connection.cursor() as cursor:
        cursor.execute("SELECT url FROM jobs_alertchannel WHERE name = %s", ["ops-slack"])
        (stored,) = cursor.fetchone()
    assert SECRET not in stored and channels.decrypt(stored) == URL
    page = staff_client.get("/alerts/channels/").content.decode()
    assert channels.mask(URL) in page and SECRET not in page
    event = AuditEvent.objects.get(subject=AuditEvent.Subject.CHANNELS, action="channel-save")
    assert event.subject_name == "ops-slack"
    assert event.changes["url"] == [None, channels.mask(URL)] and SECRET not in str(event.changes)


def test_saving_a_channel_back_as_shown_keeps_its_url(db, staff_client):
    make_channel("ops", kinds=["crashed"])
    response = staff_client.post(
        "/alerts/channels/", {"name": "ops", "url": channels.mask(URL), "kinds": ["failed"]}
    )
    assert response.status_code == 302
    channel = AlertChannel.objects.get(name="ops")
    assert channels.decrypt(channel.url) == URL and channel.kinds == ["failed"]


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"name": "Ops Slack", "url": URL}, "name", "lower-case letters"),
        ({"name": "ops", "url": "notaurl"}, "url", "needs a scheme"),
        ({"name": "ops", "url": ""}, "url", "Enter the channel"),
    ],
)
def test_a_bad_channel_is_refused_on_its_field_and_nothing_saved(db, staff_client, data, field, words):
    response = staff_client.post("/alerts/channels/", data)
    assert response.status_code == 200
    assert words in " ".join(response.context["form"].errors[field])
    assert not AlertChannel.objects.exists()
    assert not AuditEvent.objects.filter(subject=AuditEvent.Subject.CHANNELS).exists()


def test_only_administrators_see_the_page_and_the_urls(db, staff_api, viewer_api, viewer_client):
    assert viewer_client.get("/alerts/channels/").status_code == 403
    response = staff_api.put("/api/channels/ops", {"url": URL, "kinds": ["crashed", "late"]})
    assert response.status_code == 200, response.content
    assert response.json()["url"] == channels.mask(URL)
    (row,) = viewer_api.get("/api/channels").json()["results"]
    assert row["name"] == "ops" and row["kinds"] == ["crashed", "late"] and row["url"] is None
    assert_error(viewer_api.put("/api/channels/ops", {"url": URL}), 403)


def test_the_api_refuses_a_bad_url_with_its_code(db, staff_api):
    assert_error(
        staff_api.put("/api/channels/ops", {"url": "mailto://a@example.com"}), 400, "invalid_channel"
    )
    assert_error(staff_api.put("/api/channels/ops", {"url": URL, "kinds": ["nope"]}), 400, field="kinds")
    assert not AlertChannel.objects.exists()


def test_demo_mode_refuses_channel_changes(db, staff_api, settings):
    make_channel("ops")
    settings.DEMO_MODE = True
    assert_error(staff_api.put("/api/channels/new", {"url": URL}), 403, "demo_mode")
    assert_error(staff_api.delete("/api/channels/ops"), 403, "demo_mode")
    assert list(AlertChannel.objects.values_list("name", flat=True)) == ["ops"]


def test_a_channel_a_job_or_the_setting_names_cannot_be_deleted(db, staff_api):
    make_channel("ops")
    make_channel("spare", url="json://hooks.example.com/spare")
    job = staff_api.post("/api/jobs", {**JOB, "alert_channels": ["ops"]}).json()
    set_setting("sys.job.alertChannels", ["spare"])
    body = assert_error(staff_api.delete("/api/channels/ops"), 409, "47035")
    assert "nightly" in body["message"]
    assert "global" in assert_error(staff_api.delete("/api/channels/spare"), 409, "47035")["message"]
    staff_api.patch(f"/api/jobs/{job['id']}", {"alert_channels": [], "version": job["version"]})
    assert staff_api.delete("/api/channels/ops").status_code == 204
    assert staff_api.delete("/api/channels/ops").status_code == 404


# -- jobs name channels -------------------------------------------------------------------


def test_a_job_names_its_channels_and_an_unknown_name_is_refused(db, staff_api):
    make_channel("ops")
    body = assert_error(staff_api.post("/api/jobs", {**JOB, "alert_channels": ["nope"]}), 400, "47029")
    assert body["field"] == "alert_channels" and "“nope” is not an alert channel" in body["message"]
    assert not Job.objects.filter(name="nightly").exists()
    created = staff_api.post("/api/jobs", {**JOB, "alert_channels": ["ops"]})
    assert created.status_code == 201, created.content
    assert created.json()["alert_channels"] == ["ops"]


def test_a_url_from_an_older_file_stands_for_the_channel_that_has_it(db, staff_api):
    make_channel("ops")
    created = staff_api.post("/api/jobs", {**JOB, "alert_channels": [URL]})
    assert created.status_code == 201 and created.json()["alert_channels"] == ["ops"]
    masked = staff_api.post("/api/jobs", {**JOB, "name": "other", "alert_channels": [channels.mask(URL)]})
    assert masked.json()["alert_channels"] == ["ops"]
    body = assert_error(
        staff_api.post(
            "/api/jobs", {**JOB, "name": "third", "alert_channels": ["json://elsewhere.example.com/x"]}
        ),
        400,
        "47029",
    )
    assert "create" in body["message"] and "elsewhere.example.com" in body["message"]


def test_the_job_form_offers_the_channels_as_boxes(db, staff_client):
    make_channel("ops", description="Ops room")
    page = staff_client.get("/jobs/new/").content.decode()
    assert 'type="checkbox" name="alert_channels" value="ops"' in page
    assert "Ops room" in page and "None ticked: the global channels" in page


def test_the_global_setting_is_chosen_from_the_channels(db, staff_client):
    make_channel("ops")
    page = staff_client.get("/settings/").content.decode()
    assert 'type="checkbox" name="sys.job.alertChannels" value="ops"' in page
    response = staff_client.post("/settings/", {"sys.job.alertChannels": ["ops"]})
    assert response.status_code in (200, 302)
    assert get_stored("sys.job.alertChannels") == ["ops"]
    response = staff_client.post("/settings/", {"sys.job.alertChannels": ["gone"]})
    assert "“gone” is not an alert channel" in response.content.decode()
    assert get_stored("sys.job.alertChannels") == ["ops"]


# -- delivery -----------------------------------------------------------------------------


def deliveries(alert) -> set[str]:
    return {channels.decrypt(delivery.channel) for delivery in alert.deliveries.all()}


def test_an_alert_goes_to_each_channel_that_receives_its_kind(db, make_job):
    make_channel("crashes", url="json://hooks.example.com/crashes", kinds=["crashed"])
    make_channel("failures", url="json://hooks.example.com/failures", kinds=["failed"])
    make_channel("all", url="json://hooks.example.com/all")
    job = make_job(alert_channels=["crashes", "failures", "all"], alert_emails=["ops@example.com"])
    crash = alerts.record_alert(job=job, run=None, kind=Alert.Kind.CRASH, now=T0)
    assert deliveries(crash) == {"json://hooks.example.com/crashes", "json://hooks.example.com/all"}
    failed = alerts.record_alert(job=job, run=None, kind=Alert.Kind.FAILED, now=T0)
    assert deliveries(failed) == {"json://hooks.example.com/failures", "json://hooks.example.com/all"}


def test_a_job_naming_no_channel_alerts_the_global_ones(db, make_job):
    make_channel("global", url="json://hooks.example.com/global")
    make_channel("unused", url="json://hooks.example.com/unused")
    set_setting("sys.job.alertChannels", ["global"])
    alert = alerts.record_alert(job=make_job(), run=None, kind=Alert.Kind.CRASH, now=T0)
    assert deliveries(alert) == {"json://hooks.example.com/global"}


def test_send_test_reaches_one_named_channel(db, webhook_server, loopback_fence_open, staff_client):
    make_channel("hook", url=webhook_server.url("/named"))
    response = staff_client.post("/alerts/test-channel/", {"channel": "hook"})
    assert "Sent to" in response.content.decode()
    (hook,) = webhook_server.received
    assert hook.path == "/named"
    response = staff_client.post("/alerts/test-channel/", {"channel": "nope"})
    assert "No such channel" in response.content.decode()


# -- the upgrade --------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_upgrading_names_every_channel_of_the_jobs_and_the_setting():
    from django.db.migrations.executor import MigrationExecutor

    before = [("jobs", "0034_audit_subjects_with_calendars")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    OldJob, OldSetting = old.get_model("jobs", "Job"), old.get_model("jobs", "Setting")
    slack, hook, other = (
        "slack://T000/B000/XXXXsecret",
        "json://hooks.example.com/a",
        "json://hooks.example.com/b",
    )
    unreadable = "gAAAAAnotatokenofthiskey"
    OldSetting.objects.create(
        key="sys.job.alertChannels", value=[channels.encrypt(slack), channels.encrypt(hook)]
    )
    OldJob.objects.create(
        name="one",
        handler="demo.echo",
        cron_expression="0 * * * * *",
        alert_channels=[channels.encrypt(hook), other],
    )
    OldJob.objects.create(
        name="two",
        handler="demo.echo",
        cron_expression="0 * * * * *",
        alert_channels=[unreadable, channels.encrypt(slack)],
    )
    OldJob.objects.create(name="three", handler="demo.echo", cron_expression="0 * * * * *", alert_channels=[])
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    named = {row.name: channels.reveal(row.url) for row in AlertChannel.objects.all()}
    assert named == {"slack-1": slack, "json-1": hook, "json-2": other, "unreadable-1": None}
    assert AlertChannel.objects.get(name="unreadable-1").url == unreadable
    assert channels.decrypt(AlertChannel.objects.get(name="json-2").url) == other, "encrypted on the way"
    assert get_stored("sys.job.alertChannels") == ["slack-1", "json-1"]
    assert dict(
        Job.objects.filter(name__in=["one", "two", "three"]).values_list("name", "alert_channels")
    ) == {
        "one": ["json-1", "json-2"],
        "two": ["unreadable-1", "slack-1"],
        "three": [],
    }


def test_a_job_page_shows_its_channels_url_to_administrators_only(db, make_job, staff_user, viewer_user):
    from django.test import Client

    make_channel("ops")
    job = make_job(alert_channels=["ops"])
    for user, shown in ((staff_user, True), (viewer_user, False)):
        client = Client()
        client.force_login(user)
        page = client.get(f"/jobs/{job.pk}/alerts/").content.decode()
        assert "ops" in page and (channels.mask(URL) in page) is shown
