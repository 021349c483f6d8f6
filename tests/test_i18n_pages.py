"""No English left on a Chinese page: every console page rendered in
zh-hans, its visible text and labels read, and each run of ASCII words that
is an English interface string (a msgid of the catalog whose translation
differs from it, or a raw value the console must label) is flagged. Data
(job names, zones, addresses, code, logs) is left aside."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs import services
from jobs.handlers import registry
from jobs.models import Alert, Job, Message, Run
from tests.factories import make_job
from tests.fixtures.i18n import english_left

pytestmark = pytest.mark.django_db


def seed(user) -> tuple[Job, Run]:
    now = timezone.now()
    job = make_job(
        name="billing-sync", timezone="Europe/Berlin", next_fire_at=now + timedelta(minutes=7), owner=user
    )
    make_job(name="utc-job", timezone="UTC", next_fire_at=now + timedelta(minutes=3))
    make_job(
        name="warm",
        kind=Job.Kind.HTTP,
        handler="",
        properties={"url": "https://example.com/warm"},
        schedule_type=Job.ScheduleType.INTERVAL,
        cron_expression="",
        interval_seconds=300,
    )
    runs = [
        Run.objects.create(
            job=job,
            scheduled_at=now - timedelta(minutes=10 * i),
            started_at=now - timedelta(minutes=10 * i),
            finished_at=now - timedelta(minutes=10 * i - 1),
            duration_ms=1200,
            trigger="schedule",
            status="succeeded",
        )
        for i in range(1, 4)
    ]
    for status in ("failed", "failed_permanent", "sent"):
        Alert.objects.create(
            job=job,
            kind="crash",
            status=status,
            recipients=["ops@example.com"],
            subject="x",
            body_text="x",
            body_html="x",
            message_id=f"<{status}@cronboard>",
        )
    Message.objects.create(user=user, job=job, subject="x", body="x")
    services.pause_job(job=job, user=user)
    services.resume_job(job=job, user=user)
    services.run_now(job=job, user=user, retry_of=runs[0])
    return job, runs[0]


def test_no_english_interface_string_is_left_on_a_chinese_page(staff_client, staff_user):
    job, run = seed(staff_user)
    data = [
        "billing-sync",
        "utc-job",
        "warm",
        "Europe/Berlin",
        "ops@example.com",
        "staff",
        "Cronboard",
        *Job.objects.values_list("handler", flat=True),
        # The built-in job's description is written in English, as data.
        *Job.objects.filter(builtin=True).values_list("description", flat=True),
    ]
    for handler in registry.available():
        # A handler's label, description and property help are its author's words.
        # (Shown with their code spans as <code>: the words between are the pieces.)
        for text in [handler.name, handler.label, handler.description, *handler.properties_help.values()]:
            data += [piece.strip() for piece in re.split(r"`[^`]*`", str(text))]
    left = {}
    for url in [
        "/",
        "/jobs/",
        "/jobs/new/",
        f"/jobs/{job.pk}/",
        f"/jobs/{job.pk}/edit/",
        f"/jobs/{job.pk}/alerts/",
        f"/runs/{run.pk}/",
        "/runs/",
        "/upcoming/",
        "/settings/",
        "/audit/",
        "/messages/",
        "/alerts/",
        "/alerts/?status=failed",
        "/cluster/",
        "/profile/",
        "/secrets/",
        "/jobs/import/",
    ]:
        response = staff_client.get(url, headers={"accept-language": "zh-CN"})
        assert response.status_code == 200, url
        html = response.content.decode()
        assert 'lang="zh-hans"' in html or url.endswith("/alerts/"), url
        found = english_left(html, data)
        if found:
            left[url] = found
    assert left == {}


def test_the_check_finds_an_english_string_left_behind():
    """The check itself: an untranslated label and a raw kind are caught,
    a job's name and code are not."""
    html = (
        '<p>任务 <a title="Run now">billing-sync</a></p><td>python</td>'
        '<p>Gave up</p><code>Pause</code><span class="count" title="3 unread">3</span>'
    )
    html += '<button title="A manual run is already queued">立即执行</button>'
    assert english_left(html, ["billing-sync"]) == [
        "3 unread",
        "A manual run is already queued",
        "Gave up",
        "Run now",
        "python",
    ]
