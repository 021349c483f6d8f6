"""Alert channels (named Apprise URLs, jobs.channels and jobs.channelbook) delivered through the outbox
(jobs.engine.outbox) to a real webhook receiver on loopback (tests/fixtures/webhook.py).

The scheduler and the sender are driven with a fixed clock; only the HTTP
exchange itself runs in real time."""

import json
from datetime import datetime, timedelta
from io import StringIO

import pytest
from apprise.plugins.telegram import NotifyTelegram
from django.core.management import call_command
from django.db import connection

from jobs import alerts, channelbook, channelnames, channels, services
from jobs.config import get_setting, set_setting
from jobs.engine.loop import Scheduler
from jobs.engine.outbox import AlertSender
from jobs.forms import JobForm
from jobs.models import Alert, AlertChannel, AlertDelivery, AuditEvent, Job
from tests.fixtures.core import T0, Clock, drain

LATER = timedelta(hours=2)  # past any backoff the step could have chosen
SECRET = "s3cr3tTOKENvalue"


def named(url: str) -> str:
    """The name of a channel holding `url`, created (as an administrator
    would, through jobs.channelbook) when there is none yet."""
    for name, token in AlertChannel.objects.values_list("name", "url"):
        if channels.reveal(token) == url:
            return name
    name = f"channel-{AlertChannel.objects.count() + 1}"
    channelbook.save_channel(name=name, url=url)
    return name


def save_job(channel_urls, **fields) -> Job:
    """Through JobForm, as the console, the API and the import save a job,
    naming a channel for each URL."""
    data = {
        "name": fields.pop("name", "nightly-report"),
        "handler": "demo.fail",
        "cron_expression": "*/10 * * * * *",
        "alert_threshold": 1,
        "alert_channels": [named(url) for url in channel_urls],
        **fields,
    }
    form = JobForm(data=data, user=None)
    assert form.is_valid(), form.errors
    return services.save_job(job=form.save(commit=False), now=T0)


def crash(job: Job, scheduler: Scheduler, clock: Clock) -> None:
    """Fire the failing job until it crashes (threshold 1: one fire)."""
    Job.objects.filter(pk=job.pk).update(next_fire_at=clock())
    scheduler.plan_due(clock())
    scheduler.claim_queued(clock())
    drain(scheduler, clock())
    job.refresh_from_db()
    assert job.state == Job.State.CRASHED


def send_pass(scheduler: Scheduler, now: datetime) -> bool:
    """One send_alerts step, its send, and the write-back."""
    did = scheduler.send_alerts(now)
    assert scheduler.alert_sender.wait_idle(30)
    scheduler.alert_sender.collect(now)
    return did


@pytest.fixture
def scheduler(make_scheduler, clock):
    s = make_scheduler(worker_id="node-a", max_workers=2, clock=clock, misfire_threshold=60)
    yield s
    s.alert_sender.stop(clock, wait=1)


# -- delivery --------------------------------------------------------------------------


def test_a_crash_sends_exactly_one_webhook_after_the_receiver_was_down_at_the_crossing(
    db, webhook_server, loopback_fence_open, scheduler, clock, settings
):
    settings.CRONBOARD_BASE_URL = "https://cron.example.com"
    job = save_job([webhook_server.url("/hooks/ops")])
    webhook_server.stop()  # down when the job crashes

    crash(job, scheduler, clock)
    (alert,) = Alert.objects.filter(job=job)
    (delivery,) = alert.deliveries.all()
    assert delivery.status == Alert.Status.PENDING

    send_pass(scheduler, clock())
    delivery.refresh_from_db()
    assert delivery.status == Alert.Status.PENDING and delivery.attempts == 1
    assert "Connection error" in delivery.last_error
    assert delivery.next_attempt_at > clock()

    webhook_server.start()
    assert not scheduler.send_alerts(clock.advance(seconds=1)), "not before its backoff"
    send_pass(scheduler, clock.advance(seconds=LATER.total_seconds()))
    delivery.refresh_from_db()
    assert delivery.status == Alert.Status.SENT and delivery.attempts == 2

    for _ in range(3):  # nothing more is due: no second webhook
        send_pass(scheduler, clock.advance(minutes=10))
    (hook,) = webhook_server.received
    assert hook.method == "POST" and hook.path == "/hooks/ops"
    payload = hook.json
    assert "nightly-report" in payload["title"]
    assert "nightly-report" in payload["message"]
    assert f"https://cron.example.com/jobs/{job.pk}/" in payload["message"]


def test_each_crossing_is_one_webhook(db, webhook_server, loopback_fence_open, scheduler, clock):
    job = save_job([webhook_server.url()])
    crash(job, scheduler, clock)
    send_pass(scheduler, clock())
    services.resume_job(job=job, now=clock.advance(minutes=5))
    clock.advance(minutes=5)
    crash(job, scheduler, clock)
    send_pass(scheduler, clock.advance(minutes=5))
    send_pass(scheduler, clock.advance(minutes=5))
    assert len(webhook_server.received) == 2
    assert AlertDelivery.objects.filter(status=Alert.Status.SENT).count() == 2


def test_a_4xx_answer_stops_the_channel_and_shows_why(
    db, webhook_server, loopback_fence_open, scheduler, clock, staff_client
):
    webhook_server.script.append(404)
    job = save_job([webhook_server.url()])
    crash(job, scheduler, clock)
    send_pass(scheduler, clock())
    send_pass(scheduler, clock.advance(hours=3))
    (delivery,) = AlertDelivery.objects.all()
    assert delivery.status == Alert.Status.FAILED_PERMANENT
    assert "404" in delivery.last_error
    assert len(webhook_server.received) == 1

    page = staff_client.get("/alerts/").content.decode()
    assert f'id="delivery-{delivery.pk}"' in page and "Refused" in page and "404" in page
    refused = staff_client.get("/alerts/?status=failed_permanent").content.decode()
    assert f'id="delivery-{delivery.pk}"' in refused, "the filter finds a refused channel"
    assert f'id="delivery-{delivery.pk}"' not in staff_client.get("/alerts/?status=sent").content.decode()


def test_a_5xx_answer_is_retried(db, webhook_server, loopback_fence_open, scheduler, clock):
    webhook_server.script.extend([503, 502])
    job = save_job([webhook_server.url()])
    crash(job, scheduler, clock)
    send_pass(scheduler, clock())
    send_pass(scheduler, clock.advance(hours=2))
    send_pass(scheduler, clock.advance(hours=2))
    (delivery,) = AlertDelivery.objects.all()
    assert delivery.status == Alert.Status.SENT and delivery.attempts == 3
    assert len(webhook_server.received) == 3


def test_a_storm_is_one_message_per_channel_per_minute_listing_the_jobs(
    db, webhook_server, loopback_fence_open, scheduler, clock
):
    url = webhook_server.url()
    set_setting("sys.job.alertChannels", [named(url)])  # the global channel: jobs name none
    jobs = [save_job([], name=f"storm-{i}") for i in range(3)]
    for job in jobs:
        crash(job, scheduler, clock)
    send_pass(scheduler, clock())
    (hook,) = webhook_server.received
    for job in jobs:
        assert job.name in hook.json["message"] and f"/jobs/{job.pk}/" in hook.json["message"]
    assert "3 alerts" in hook.json["title"]

    late = save_job([], name="storm-late")
    clock.advance(seconds=10)
    crash(late, scheduler, clock)
    send_pass(scheduler, clock.advance(seconds=1))
    assert len(webhook_server.received) == 1, "a second message within the minute waits"
    send_pass(scheduler, clock.advance(seconds=60))
    assert len(webhook_server.received) == 2
    assert "storm-late" in webhook_server.received[1].json["title"]
    assert AlertDelivery.objects.filter(status=Alert.Status.SENT).count() == 4


def test_an_alert_with_channels_and_no_email_is_not_called_undeliverable_for_nobody(
    db, webhook_server, loopback_fence_open, scheduler, clock
):
    job = save_job([webhook_server.url()])
    crash(job, scheduler, clock)
    alert = Alert.objects.get(job=job)
    assert alert.last_error == alerts.NO_EMAIL
    assert alert.deliveries.count() == 1


def test_a_target_fenced_off_after_saving_is_not_contacted(
    db, webhook_server, loopback_fence_open, scheduler, clock, settings
):
    job = save_job([webhook_server.url()])
    settings.JOBS_HTTP_ALLOWED_HOSTS = []  # the operator closes the fence again
    crash(job, scheduler, clock)
    send_pass(scheduler, clock())
    (delivery,) = AlertDelivery.objects.all()
    assert delivery.status == Alert.Status.FAILED_PERMANENT
    assert "fence" in delivery.last_error and "loopback" in delivery.last_error
    assert webhook_server.received == []


def test_one_delivery_row_per_alert_and_channel(db, webhook_server, loopback_fence_open):
    from django.db import IntegrityError, transaction

    job = save_job([webhook_server.url()])
    alert = alerts.on_crash(job=job, run=None, now=T0)
    (row,) = alert.deliveries.all()
    with pytest.raises(IntegrityError), transaction.atomic():
        AlertDelivery.objects.create(
            alert=alert,
            channel=row.channel,
            channel_key=row.channel_key,
            channel_masked=row.channel_masked,
            next_attempt_at=T0,
        )


def test_concurrent_senders_never_claim_the_same_delivery(db, webhook_server, loopback_fence_open):
    job = save_job([webhook_server.url()])
    alerts.on_crash(job=job, run=None, now=T0)
    first, second = AlertSender(), AlertSender()
    assert first.claim_channel(T0) is not None
    assert second.claim_channel(T0) is None


# -- secrets ---------------------------------------------------------------------------


def secret_url(server) -> str:
    return f"json://ops:{SECRET}@{server.host}:{server.port}/hooks/{SECRET}?+X-Token={SECRET}"


def test_the_url_is_encrypted_at_rest(db, webhook_server, loopback_fence_open):
    job = save_job([secret_url(webhook_server)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT url FROM jobs_alertchannel")
        (raw,) = cursor.fetchone()
    assert SECRET not in raw and str(webhook_server.port) not in raw
    assert channelnames.urls_for(job.alert_channels) == [(job.alert_channels[0], secret_url(webhook_server))]


def test_another_secret_key_cannot_read_the_url_and_a_rotated_one_still_can(
    db, webhook_server, loopback_fence_open, settings
):
    job = save_job([secret_url(webhook_server)])
    old = settings.SECRET_KEY
    settings.SECRET_KEY = "another-key-entirely"
    assert channelnames.urls_for(job.alert_channels) == []
    settings.SECRET_KEY_FALLBACKS = [old]
    assert [url for _name, url in channelnames.urls_for(job.alert_channels)] == [secret_url(webhook_server)]


def test_the_secret_is_never_shown_in_the_console_api_export_or_audit_trail(
    db, webhook_server, loopback_fence_open, staff_client, staff_api
):
    job = save_job([secret_url(webhook_server)])
    (name,) = job.alert_channels
    masked = channels.mask(secret_url(webhook_server))
    assert SECRET not in masked and f"{webhook_server.host}:{webhook_server.port}" in masked

    pages = [
        staff_client.get(f"/jobs/{job.pk}/edit/"),
        staff_client.get(f"/jobs/{job.pk}/alerts/"),
        staff_client.get(f"/jobs/{job.pk}/"),
        staff_client.get("/alerts/channels/"),
    ]
    for page in pages:
        assert page.status_code == 200
        assert SECRET not in page.content.decode()
    assert name in pages[0].content.decode()
    assert masked in pages[1].content.decode() and masked in pages[3].content.decode()

    assert staff_api.get(f"/api/jobs/{job.pk}").json()["alert_channels"] == [name]
    assert SECRET not in json.dumps(staff_api.get("/api/jobs").json())
    assert SECRET not in json.dumps(staff_api.get("/api/channels").json())

    for flags in ([], ["--with-secrets"]):
        out = StringIO()
        call_command("jobs", "export", "nightly-report", *flags, stdout=out)
        assert SECRET not in out.getvalue()
        assert json.loads(out.getvalue())[0]["alert_channels"] == [name]

    for event in AuditEvent.objects.all():
        assert SECRET not in json.dumps(event.changes)
    assert AuditEvent.objects.get(job=job, action="create").changes["alert_channels"] == [None, [name]]


def test_an_export_imported_back_is_no_change(db, webhook_server, loopback_fence_open, tmp_path):
    job = save_job([secret_url(webhook_server)])
    out = StringIO()
    call_command("jobs", "export", "nightly-report", stdout=out)
    path = tmp_path / "jobs.json"
    path.write_text(out.getvalue())
    imported = StringIO()
    call_command("jobs", "import", str(path), stdout=imported)
    assert "1 unchanged" in imported.getvalue()
    job.refresh_from_db()
    assert [url for _name, url in channelnames.urls_for(job.alert_channels)] == [secret_url(webhook_server)]


def test_a_masked_url_that_matches_no_channel_is_refused(db, webhook_server, loopback_fence_open, staff_api):
    masked = channels.mask(secret_url(webhook_server))
    response = staff_api.post(
        "/api/jobs",
        {"name": "x", "handler": "demo.echo", "cron_expression": "0 * * * * *", "alert_channels": [masked]},
    )
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["field"] == "alert_channels" and error["code"] == "47029"
    assert masked in error["message"]
    assert not Job.objects.filter(name="x").exists()


def test_the_global_channels_are_masked_on_the_settings_page_and_kept_when_saved_back(
    db, webhook_server, loopback_fence_open, staff_client
):
    name = named(secret_url(webhook_server))
    set_setting("sys.job.alertChannels", [name])
    page = staff_client.get("/settings/").content.decode()
    assert SECRET not in page
    assert channels.mask(secret_url(webhook_server)) in page
    response = staff_client.post(
        "/settings/",
        {"sys.job.logRetentionDays": "30", "sys.job.alertEmails": "", "sys.job.alertChannels": [name]},
    )
    assert response.status_code in (200, 302)
    assert get_setting("sys.job.alertChannels") == [name]


# -- validation: hostile input -----------------------------------------------------------------

BAD_CHANNELS = [
    ("nonsense", "invalid_channel"),
    ("bogus://x", "invalid_channel"),
    ("json://", "invalid_channel"),
    ("mailto://u:p@example.com", "invalid_channel"),
    ("json://127.0.0.1:8080/hook", "fenced_channel"),
    ("json://169.254.169.254/latest/meta-data", "fenced_channel"),
    ("jsons://[::1]/hook", "fenced_channel"),
    ("json://2130706433/hook", "fenced_channel"),
    ("json://localhost/hook", "fenced_channel"),
    ("ntfy://127.0.0.1/topic", "fenced_channel"),
    ("workflow://169.254.169.254:443/abcdef0123456789/signature", "fenced_channel"),
    # A NUL is text no database stores: refused by the one rule for that (jobs.text).
    ("json://example.com/\x00", "invalid_text"),
    ("json://example.com/" + "a" * 3000, "invalid_channel"),
    # urlsplit raised ValueError on these and the save answered 500.
    ("json://[::1/hook", "invalid_channel"),
    ("json://[example.com]/hook", "invalid_channel"),
    ("json://[::1]]/hook", "invalid_channel"),
]


@pytest.mark.parametrize(("url", "code"), BAD_CHANNELS)
def test_bad_channel_urls_are_refused_with_a_clear_error_and_nothing_saved(db, staff_api, url, code):
    response = staff_api.put("/api/channels/x", {"url": url})
    assert response.status_code == 400, response.content
    body = response.json()
    errors = body.get("errors") or [body]
    assert any(e["field"] == "url" and e["code"] == code for e in errors), errors
    assert not AlertChannel.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ",
        "tgram://123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/987654321",
        "dingtalk://SECRETTOKEN/",
        "wecombot://BOTKEY",
        "ntfy://my-topic",
    ],
)
def test_services_at_a_fixed_address_save_without_a_lookup_and_are_masked(db, staff_api, url):
    response = staff_api.put("/api/channels/x", {"url": url})
    assert response.status_code == 200, response.content
    shown = response.json()["url"]
    assert shown == channels.mask(url) and shown != url


def test_a_secret_in_a_bad_url_never_reaches_the_log(db, staff_api, caplog):
    # A scheme Cronboard sends to, so Apprise parses it (and logs it, masked).
    url = f"tgram://{SECRET}/"
    with caplog.at_level("DEBUG"):
        response = staff_api.put("/api/channels/x", {"url": url})
    assert response.status_code == 400
    assert SECRET not in response.content.decode()
    assert "Unparseable Telegram URL" in caplog.text and SECRET not in caplog.text


@pytest.mark.parametrize("value", ["json://example.com", {"a": 1}, [1], [None], [["json://example.com"]]])
def test_channels_must_be_a_list_of_strings(db, staff_api, value):
    response = staff_api.post(
        "/api/jobs",
        {"name": "x", "handler": "demo.echo", "cron_expression": "0 * * * * *", "alert_channels": value},
    )
    assert response.status_code == 400
    assert not Job.objects.filter(name="x").exists()


def test_a_bad_global_channel_is_refused_and_the_setting_kept(db, staff_client):
    response = staff_client.post(
        "/settings/",
        {
            "sys.job.logRetentionDays": "30",
            "sys.job.alertEmails": "",
            "sys.job.alertChannels": "json://127.0.0.1/x",
        },
    )
    assert response.status_code == 200
    assert "no named channel has it" in response.content.decode()
    assert get_setting("sys.job.alertChannels") == []


# -- send test -----------------------------------------------------------------------------


def test_send_test_reaches_the_channel_and_reports(db, webhook_server, loopback_fence_open, staff_client):
    job = save_job([webhook_server.url("/a"), webhook_server.url("/b")])
    first, second = job.alert_channels
    response = staff_client.post("/alerts/test-channel/", {"job": job.pk, "channel": second})
    assert response.status_code == 200
    assert "Sent to" in response.content.decode()
    (hook,) = webhook_server.received
    assert hook.path == "/b" and "Test message" in hook.json["title"] and job.name in hook.json["message"]

    webhook_server.script.append(410)
    response = staff_client.post("/alerts/test-channel/", {"job": job.pk, "channel": first})
    assert "Not sent" in response.content.decode() and "410" in response.content.decode()
    named(webhook_server.url("/c"))  # a channel, but not this job's
    response = staff_client.post("/alerts/test-channel/", {"job": job.pk, "channel": "channel-3"})
    assert "No such channel" in response.content.decode()
    assert len(webhook_server.received) == 2


def test_a_reply_that_echoes_the_url_is_shown_and_stored_masked(
    db, webhook_server, loopback_fence_open, staff_client, scheduler, clock
):
    webhook_server.echo = True
    webhook_server.stop()
    webhook_server.start()
    password, topic = "pa55-" + SECRET, "topic-" + SECRET[:8]
    url = f"ntfy://bob:{password}@127.0.0.1:{webhook_server.port}/{topic}?token=q-{SECRET}"
    job = save_job([url])
    webhook_server.script.append(400)
    response = staff_client.post("/alerts/test-channel/", {"job": job.pk, "channel": job.alert_channels[0]})
    shown = response.content.decode()
    assert "Not sent" in shown and "refused" in shown and "400" in shown
    assert SECRET not in shown and SECRET[:8] not in shown and "bob:" not in shown
    # The same reply from an alert's delivery, as the alerts page shows it.
    webhook_server.script.append(400)
    crash(job, scheduler, clock)
    send_pass(scheduler, clock())
    (delivery,) = AlertDelivery.objects.all()
    assert "refused" in delivery.last_error
    assert SECRET not in delivery.last_error and SECRET[:8] not in delivery.last_error
    page = staff_client.get("/alerts/").content.decode()
    assert "refused" in page and SECRET not in page and SECRET[:8] not in page


def test_send_test_is_for_staff_only(db, webhook_server, loopback_fence_open, viewer_client):
    job = save_job([webhook_server.url()])
    response = viewer_client.post("/alerts/test-channel/", {"job": job.pk, "channel": job.alert_channels[0]})
    assert response.status_code == 403
    assert webhook_server.received == []


def test_send_test_for_a_global_channel_from_the_settings_page(
    db, webhook_server, loopback_fence_open, staff_client
):
    name = named(webhook_server.url("/global"))
    set_setting("sys.job.alertChannels", [name])
    page = staff_client.get("/settings/").content.decode()
    assert "Send test" in page and channels.mask(webhook_server.url("/global")) in page
    response = staff_client.post("/alerts/test-channel/", {"channel": name})
    assert "Sent to" in response.content.decode()
    (hook,) = webhook_server.received
    assert hook.path == "/global"


def test_a_plain_url_written_to_the_database_by_hand_still_alerts_and_is_encrypted_when_saved(
    db, webhook_server, loopback_fence_open, scheduler, clock, staff_api
):
    url = webhook_server.url("/by-hand")
    AlertChannel.objects.create(name="by-hand", url=url)
    job = Job.objects.create(
        name="by-hand",
        handler="demo.fail",
        cron_expression="*/10 * * * * *",
        alert_threshold=1,
        alert_channels=["by-hand"],
    )
    assert staff_api.get("/api/channels").json()["results"][0]["url"] == channels.mask(url)
    crash(job, scheduler, clock)
    send_pass(scheduler, clock())
    (hook,) = webhook_server.received
    assert hook.path == "/by-hand"
    assert AlertDelivery.objects.get().channel != url, "the delivery row is encrypted"

    response = staff_api.put("/api/channels/by-hand", {"description": "saved"})
    assert response.status_code == 200, response.content
    stored = AlertChannel.objects.get(name="by-hand").url
    assert stored != url and channels.decrypt(stored) == url


def test_a_reply_that_echoes_a_telegram_bot_token_shows_neither_half(db, webhook_server, monkeypatch):
    """urlsplit reads tgram://123456:ABC-DEF as host 123456 and port ABC-DEF:
    both halves are the bot's secret. Telegram's endpoint is fixed, so the
    plugin is pointed at the loopback echo for the test."""
    webhook_server.echo = True
    webhook_server.stop()
    webhook_server.start()
    monkeypatch.setattr(NotifyTelegram, "notify_url", f"http://127.0.0.1:{webhook_server.port}/bot")
    bot_id, bot_secret = "987654321", "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
    webhook_server.script.append(401)
    result = channels.send(f"tgram://{bot_id}:{bot_secret}/", title="t", body="b")
    (hook,) = webhook_server.received
    assert hook.path == f"/bot{bot_id}:{bot_secret}/getUpdates"  # the echo did name the token
    assert not result.ok and "refused" in result.reply
    assert bot_secret not in result.reply and bot_id not in result.reply


@pytest.mark.parametrize(
    "url",
    [
        "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ",
        "tgram://123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/12315544",
        "pover://uQiRzpo4DXghDmr9QzzfQu27cmVRsG@AzGDORePK8gMaC0QOYAMyEEuzJnyUi",
    ],
)
def test_a_token_host_is_masked_in_a_reply_as_it_was_typed(url):
    """urlsplit lowers the host; a service echoes the token in its own case."""
    host = url.split("://")[1].split("/")[0].rpartition("@")[2]
    reply = f"POST https://service.example/{host}/send refused; token={host}"
    masked = channels.mask_reply(url, reply)
    assert host not in masked and host.lower() not in masked
    for half in host.split(":"):
        assert half not in masked
