"""The console in English (the default) and Simplified Chinese: where the
language comes from, the switcher, the JavaScript catalog."""

import json
import os
import re
import shutil
from datetime import timedelta
from pathlib import Path

import polib
import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import translation

from jobs import alerts, cron
from jobs.config import get_setting, set_setting
from jobs.engine.outbox import AlertSender
from jobs.i18n import cron_error_message, describe_cron
from jobs.management.commands.compilecatalogs import compile_catalogs
from jobs.management.commands.updatecatalogs import make_messages
from jobs.models import Message, Profile, Run
from tests.fixtures.core import T0
from tests.fixtures.smtp import use_smtp

pytestmark = pytest.mark.django_db


@pytest.mark.django_db
def test_english_is_the_default(staff_client):
    response = staff_client.get("/jobs/")
    assert response.status_code == 200
    assert '<html lang="en">' in response.content.decode()


@pytest.mark.django_db
def test_accept_language_zh_cn_gives_simplified_chinese(staff_client):
    response = staff_client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9,en;q=0.5")
    assert '<html lang="zh-hans">' in response.content.decode()
    assert response["Content-Language"] == "zh-hans"


@pytest.mark.django_db
def test_the_saved_choice_beats_the_browser(staff_client, staff_user):
    Profile.objects.create(user=staff_user, language="en")
    response = staff_client.get("/jobs/", HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert '<html lang="en">' in response.content.decode()


@pytest.mark.django_db
def test_the_switcher_saves_the_choice_on_the_profile_and_goes_back(staff_client, staff_user):
    response = staff_client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/runs/"})
    assert response.status_code == 302 and response["Location"] == "/runs/"
    assert Profile.objects.get(user=staff_user).language == "zh-hans"
    staff_client.cookies.clear()  # the profile, not the cookie, carries it to the next session
    staff_client.force_login(staff_user)
    assert '<html lang="zh-hans">' in staff_client.get("/runs/").content.decode()


@pytest.mark.django_db
def test_the_switcher_works_before_sign_in_with_a_cookie(client):
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/login/"})
    assert response.status_code == 302
    assert '<html lang="zh-hans">' in client.get("/login/").content.decode()


@pytest.mark.django_db
def test_the_switcher_refuses_an_unknown_language(staff_client, staff_user):
    response = staff_client.post("/i18n/setlang/", {"language": "xx", "next": "/jobs/"})
    assert response.status_code == 400
    assert not Profile.objects.filter(user=staff_user).exists()


@pytest.mark.django_db
def test_the_switcher_is_a_form_in_the_header(staff_client):
    html = staff_client.get("/jobs/").content.decode()
    assert 'action="/i18n/setlang/"' in html
    assert '<option value="zh-hans" lang="zh-hans">简体中文</option>' in html


@pytest.mark.django_db
def test_the_javascript_catalog_is_served_locally_in_the_active_language(client):
    response = client.get("/jsi18n/", HTTP_ACCEPT_LANGUAGE="zh-CN")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    body = response.content.decode()
    assert "django.gettext" in body
    # The scripts' own catalog (djangojs), JSON-escaped.
    assert '"Add property": "' + json.dumps("添加属性")[1:-1] + '"' in body


# -- the catalogs ---------------------------------------------------------------------

CATALOGS = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"


@pytest.mark.parametrize("domain", ["django", "djangojs"])
def test_the_chinese_catalog_has_no_untranslated_or_fuzzy_entry(domain):
    catalog = polib.pofile(str(CATALOGS / f"{domain}.po"))
    assert len(catalog) > 50
    assert not catalog.metadata_is_fuzzy
    assert [entry.msgid for entry in catalog.untranslated_entries()] == []
    assert [entry.msgid for entry in catalog.fuzzy_entries()] == []
    assert [entry.msgid for entry in catalog.obsolete_entries()] == []


@pytest.mark.parametrize("domain", ["django", "djangojs"])
def test_every_placeholder_of_a_message_survives_its_translation(domain):
    # A translation may drop a pluralising suffix (%(count2)s, Chinese has no
    # plural), never invent a name the code does not pass.
    named = re.compile(r"%\((\w+)\)s|\{(\w+)[^}]*\}|%s")
    for entry in polib.pofile(str(CATALOGS / f"{domain}.po")):
        sources = {entry.msgid, entry.msgid_plural} - {""}
        given = {m for source in sources for m in named.findall(source)}
        for translation_text in [entry.msgstr, *entry.msgstr_plural.values()]:
            if translation_text:
                assert set(named.findall(translation_text)) <= given, entry.msgid


def test_the_catalogs_are_up_to_date_with_the_sources(tmp_path, settings):
    """makemessages over a copy of the sources finds exactly the catalog's msgids:
    a string marked since, or no longer in the code, fails here (run
    `manage.py updatecatalogs`, translate, commit)."""
    if shutil.which("xgettext") is None:
        pytest.fail("GNU gettext (xgettext) is needed: apt-get install gettext (scripts/test.sh does)")
    base = Path(settings.BASE_DIR)
    for folder in ("jobs", "templates", "static"):
        shutil.copytree(base / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "locale").mkdir()
    settings.LOCALE_PATHS = [tmp_path / "locale"]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        make_messages()
    finally:
        os.chdir(cwd)
    for domain in ("django", "djangojs"):
        fresh = polib.pofile(str(tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES" / f"{domain}.po"))
        committed = polib.pofile(str(CATALOGS / f"{domain}.po"))
        key = lambda entry: (entry.msgctxt or "", entry.msgid, entry.msgid_plural)
        assert sorted(map(key, fresh)) == sorted(map(key, committed)), domain


def test_compilecatalogs_builds_the_mo_files_without_msgfmt(tmp_path, settings):
    shutil.copytree(CATALOGS.parent.parent, tmp_path / "locale")
    settings.LOCALE_PATHS = [tmp_path / "locale"]
    for mo in (tmp_path / "locale").rglob("*.mo"):
        mo.unlink()
    written = compile_catalogs()
    assert sorted(path.name for path in written) == ["django.mo", "djangojs.mo"]
    catalog = polib.mofile(str(tmp_path / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.mo"))
    assert catalog.find("Run now").msgstr == "立即执行"
    assert compile_catalogs() == []  # up to date: nothing rewritten


# -- words in Chinese -----------------------------------------------------------------


def test_the_operations_vocabulary_is_the_agreed_one():
    catalog = {e.msgid: e.msgstr for e in polib.pofile(str(CATALOGS / "django.po")) if not e.msgctxt}
    agreed = {
        "Jobs": "任务",
        "Runs": "执行记录",
        "Alerts": "告警",
        "Retries": "重试",
        "Crashed": "已崩溃",
        "Pause": "暂停",
        "Resume": "恢复",
        "Enabled": "已启用",
        "Run now": "立即执行",
        "Schedule": "调度",
        "Timed out": "已超时",
    }
    assert {msgid: catalog[msgid] for msgid in agreed} == agreed


@pytest.mark.parametrize(
    ("expression", "wording"),
    [
        ("0 0 9 L * ?", "在 09:00，每月最后一天"),
        ("0 0 9 L-3 * ?", "在 09:00，每月最后一天之前的第 3 天"),
        ("0 0 9 15W * ?", "在 09:00，每月最接近 15 号的工作日"),
        ("0 0 9 LW * ?", "在 09:00，每月最后一个工作日"),
        ("0 0 9 L-2W * ?", "在 09:00，每月最后一天之前第 2 天最近的工作日"),
        ("0 0 9 ? * 5#3", "在 09:00，每月第三个星期五"),
        ("0 0 9 ? * 5L", "在 09:00，每月最后一个星期五"),
        ("0 0 0 1 1 *", "在 00:00，每月的 1 号，仅在一月"),
        ("0 */5 * * * *", "每 5 分钟"),
    ],
)
def test_cron_descriptions_in_chinese_cover_the_day_forms(expression, wording):
    with translation.override("zh-hans"):
        assert describe_cron(expression) == wording


def test_cron_descriptions_in_english_are_unchanged():
    assert (
        describe_cron("0 0 9 ? * 5#3")
        == cron.describe("0 0 9 ? * 5#3")
        == "At 09:00, on the third Friday of the month"
    )


def test_a_cron_error_keeps_its_code_and_is_worded_in_chinese():
    with pytest.raises(cron.CronError) as caught:
        cron.parse("0 0 0 1 * MON")
    assert caught.value.code == cron.BOTH_DAYS_RESTRICTED
    assert caught.value.message == (
        "Day-of-month (1) and day-of-week (MON) cannot both be set: use ? in one of them"
    )
    with translation.override("zh-hans"):
        assert cron_error_message(caught.value) == "日（1）和星期（MON）不能同时指定：请在其中一个字段使用 ?"


@pytest.mark.django_db
def test_the_live_preview_shows_47003_in_chinese(staff_client):
    response = staff_client.get(
        "/cron/preview/",
        {"cron_expression": "0 0 0 1 * MON", "timezone": "UTC"},
        HTTP_ACCEPT_LANGUAGE="zh-CN",
    )
    html = response.content.decode()
    assert "47003" in html
    assert "不能同时指定" in html


@pytest.mark.django_db
def test_the_ui_language_setting_is_validated(staff_client):
    assert get_setting("sys.ui.language") == "en"
    assert set_setting("sys.ui.language", "zh-Hans") == "zh-hans"
    with pytest.raises(ValidationError):
        set_setting("sys.ui.language", "fr")


# -- alerts in sys.ui.language ----------------------------------------------------------


@pytest.fixture
def crashed_job(make_job, staff_user):
    job = make_job(
        name="nightly-report",
        alert_emails=["ops@example.com"],
        owner=staff_user,
        last_error="disk full on /var",
        consecutive_failures=3,
        alert_threshold=3,
    )
    Run.objects.create(
        job=job,
        scheduled_at=T0 - timedelta(minutes=1),
        trigger=Run.Trigger.SCHEDULE,
        status=Run.Status.FAILED,
        error="disk full on /var",
        finished_at=T0,
    )
    return job


def test_a_crash_alert_email_is_written_in_chinese_when_sys_ui_language_says_so(
    smtp_server, settings, crashed_job
):
    set_setting("sys.ui.language", "zh-hans")
    alerts.on_crash(job=crashed_job, run=None, now=T0)
    use_smtp(settings, smtp_server.port)
    sender = AlertSender()
    assert sender.step(T0)
    assert sender.wait_idle(30)
    sender.collect(T0)

    (received,) = smtp_server.received
    message = received.message
    assert message["Subject"].strip() == "[Cronboard] 任务“nightly-report”连续失败 3 次后已崩溃"
    text = message.get_body(("plain",)).get_content()
    html = message.get_body(("html",)).get_content()
    assert "任务“nightly-report”已崩溃：连续 3 次触发失败，达到告警阈值 3。" in text
    assert "任务页面：" in text and "失败" in text  # the run's status, translated too
    assert "重新启用" in html and "disk full on /var" in html
    for english in ("crashed", "consecutive", "Re-enable", "Threshold"):
        assert english not in text, english
    # The in-site message is written in the same language.
    assert "已崩溃" in Message.objects.get().body


def test_alert_emails_stay_english_by_default(crashed_job):
    alert = alerts.on_crash(job=crashed_job, run=None, now=T0)
    assert alert.subject == "[Cronboard] Job “nightly-report” crashed after 3 consecutive failures"
    assert "The job “nightly-report” has crashed: 3 consecutive fires failed" in alert.body_text


def test_a_chinese_alert_does_not_change_the_language_of_the_code_around_it(crashed_job):
    set_setting("sys.ui.language", "zh-hans")
    alerts.on_crash(job=crashed_job, run=None, now=T0)
    assert translation.get_language() == "en"
