"""Every alert channel is fenced or refused: the schemes Cronboard sends to,
held to docs/operations.md and to the Apprise installed from
requirements.txt, and hostile channel URLs refused with a human message."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from apprise.manager_plugins import NotificationManager
from django.core.exceptions import ValidationError

from jobs import channels, fence
from jobs.models import AlertChannel

REPO = Path(__file__).resolve().parent.parent
OPERATIONS = (REPO / "docs" / "operations.md").read_text()
APPRISE_SCHEMES = set(NotificationManager().schemas())
PUBLIC = "203.0.113.7"  # TEST-NET-3: outside every blocked range


@pytest.fixture(autouse=True)
def public_dns(monkeypatch):
    """Names resolve to a public address (no network in tests); localhost
    stays loopback (the fence itself says so)."""
    monkeypatch.setattr(fence, "system_resolver", lambda host, port: [PUBLIC])


def section(heading: str) -> str:
    start = OPERATIONS.index(heading)
    end = OPERATIONS.find("\n#", start + len(heading))
    return OPERATIONS[start:end]


def table_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows[1:]  # without the header


def documented_schemes() -> dict[str, set[str]]:
    """The doc's table: {"fenced on the host" | "the service's own address" |
    "refused": schemes}, each row's kind being its first bold phrase."""
    found: dict[str, set[str]] = {}
    table = section("### Which services, and how each is fenced").split("Examples, as")[0]
    for schemes, how in table_rows(table):
        if schemes.startswith("every other"):
            continue
        kind = re.search(r"\*\*(.+?)\*\*", how).group(1)
        found.setdefault(kind, set()).update(re.findall(r"`([a-z0-9]+)`", schemes))
    return found


def refusal(url: str) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        channels.validate(url)
    return caught.value


# -- the list --------------------------------------------------------------------------


def test_every_scheme_cronboard_sends_to_is_a_working_plugin_of_the_pinned_apprise():
    listed = channels.FENCED_ON_HOST_SCHEMAS | channels.FIXED_ENDPOINT_SCHEMAS | channels.REFUSED_SCHEMAS
    assert listed - APPRISE_SCHEMES == set()
    manager = NotificationManager()
    for scheme in channels.FENCED_ON_HOST_SCHEMAS | channels.FIXED_ENDPOINT_SCHEMAS:
        assert manager[scheme].enabled, scheme


def test_the_docs_list_exactly_the_schemes_the_code_accepts():
    assert documented_schemes() == {
        "fenced on the host": channels.FENCED_ON_HOST_SCHEMAS,
        "the service's own address": channels.FIXED_ENDPOINT_SCHEMAS,
        "refused": channels.REFUSED_SCHEMAS,
    }


def test_the_docs_name_the_pinned_apprise_version():
    import apprise

    pinned = re.search(r"^apprise==(\S+)$", (REPO / "requirements.txt").read_text(), re.M).group(1)
    assert apprise.__version__ == pinned
    assert f"the pinned Apprise ({pinned})" in section("### Which services, and how each is fenced")


@pytest.mark.parametrize(
    "scheme",
    sorted(
        APPRISE_SCHEMES
        - channels.FENCED_ON_HOST_SCHEMAS
        - channels.FIXED_ENDPOINT_SCHEMAS
        - {"mailto", "mailtos"}
    ),
)
def test_every_other_scheme_of_the_pinned_apprise_is_refused(scheme):
    error = refusal(f"{scheme}://user:pass@hooks.example.com/token")
    assert error.code == "unfenced_channel"
    assert f"Cronboard does not send to {scheme}:// channels" in error.messages[0]


# -- the doc's examples ------------------------------------------------------------------


def documented_examples() -> list[tuple[str, str]]:
    rows = table_rows(section("### Which services, and how each is fenced").split("Examples, as")[1])
    return [(url.strip("`"), answer) for url, answer in rows]


def test_the_docs_give_examples_of_each_answer():
    answers = " ".join(answer for _url, answer in documented_examples())
    for word in ("accepted", "fenced_channel", "unfenced_channel", "invalid_channel"):
        assert word in answers


@pytest.mark.parametrize(("url", "answer"), documented_examples())
def test_each_documented_example_answers_as_the_docs_say(url, answer):
    if answer.startswith("accepted"):
        assert channels.validate(url) == url
        assert url.split("://")[0] in APPRISE_SCHEMES
        target = channels.fence_url(url)
        fenced_on = re.search(r"fenced on `([^`]+)`", answer)
        if fenced_on:
            assert target is not None and f"://{fenced_on.group(1)}" in target
        else:
            assert target is None, answer
    else:
        code = re.search(r"refused: `(\w+)`", answer).group(1)
        assert refusal(url).code == code


# -- hostile input -----------------------------------------------------------------------

HOSTILE = [
    "rsyslog://",
    "RSYSLOG://",
    "rSysLog://",
    "  rsyslog://  ",
    "rsyslog:// /",
    "rsyslog://%20",
    "rsyslog://:514",
    "rsyslog://./",
    "rsyslog://[::]",
    "rsyslog://0",
    "rsyslog://127.1",
    "rsyslog://0x7f.1",
    "rsyslog://localhost",
    "rsyslog://[::ffff:127.0.0.1]",
    "rsyslog://ｌｏｃａｌｈｏｓｔ",
    "rsyslog://１２７。０。０。１",
    "ｒsyslog://logs.example.com",
    "rsyslog\u00a0://logs.example.com",
    "syslog://",
    "SYSLOG://local5",
    "syslog://local5?logpid=yes",
    "json://[::1]/x",
    "JSON://127.0.0.1/x",
    "jsons://localhost:443/",
    "ntfy://localhost/topic",
    "NTFY://127.0.0.1/topic",
    "gotify://169.254.169.254/token",
    "workflow://[fd00:ec2::254]/a/b",
    "matrix://user:pass@matrix.example.com/#room",
    "xmpp://user:pass@xmpp.example.com",
    "mqtt://broker.example.com/topic",
    "irc://irc.example.com/#ops",
    "smpp://user:pass@smpp.example.com/1234/5678",
    "dbus://",
    "gnome://",
    "macosx://",
    "windows://",
    "growl://",
    "kodi://",
    "vapid://subscriber@example.com/endpoint",
    "mailto://",
    "MAILTO://ops@example.com",
    "msteams://a/b/c",
    "://",
    "rsyslog:/logs.example.com",
    "rsyslog//logs.example.com",
    "\u202ersyslog://",
]


@pytest.mark.parametrize("url", HOSTILE)
def test_a_hostile_channel_url_is_refused_with_a_human_message(url):
    error = refusal(url)
    assert error.code in ("invalid_channel", "fenced_channel", "unfenced_channel")
    message = " ".join(error.messages)
    assert message and "Traceback" not in message and "Error(" not in message


@pytest.mark.parametrize("url", HOSTILE)
def test_a_hostile_channel_url_is_a_400_from_the_api_and_saves_nothing(db, staff_api, url):
    response = staff_api.put("/api/channels/x", {"url": url})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "url" and body["message"]
    assert not AlertChannel.objects.exists()


def test_rsyslog_without_a_host_says_why_in_a_sentence():
    error = refusal("rsyslog://")
    assert error.code == "unfenced_channel"
    assert "needs the host to send to" in error.messages[0]
    assert "ALERT_CHANNEL_UNFENCED_SCHEMES" in error.messages[0]


def test_a_stored_channel_without_a_host_is_never_sent_to():
    # A channel stored before the fence knew this (or written by hand).
    for url in ("rsyslog://", "syslog://"):
        result = channels.send(url, title="t", body="b")
        assert (result.ok, result.permanent) == (False, True)
        assert "ALERT_CHANNEL_UNFENCED_SCHEMES" in result.reply


# -- the operator's allowance ---------------------------------------------------------------


def test_the_operator_can_allow_a_scheme_unfenced(settings):
    settings.ALERT_CHANNEL_UNFENCED_SCHEMES = ["syslog", "rsyslog", "matrix"]
    for url in ("syslog://", "SYSLOG://local5", "rsyslog://", "rsyslog://127.0.0.1"):
        assert channels.validate(url) == url
        assert channels.fence_url(url) is None
    assert channels.validate("matrix://user:pass@matrix.example.com/#room")
    assert refusal("mailto://ops:pass@mail.example.com").code == "invalid_channel"
    assert refusal("json://127.0.0.1/hook").code == "fenced_channel"  # not listed: fenced as ever


@pytest.mark.slow
@pytest.mark.parametrize("value", ["sys log", "syslog://", "mailto", "rsyslog,MAILTOS"])
def test_a_bad_unfenced_schemes_setting_stops_start_up(value, tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "ALERT_CHANNEL_UNFENCED_SCHEMES": value,
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "ALERT_CHANNEL_UNFENCED_SCHEMES" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("url", ["rsyslog://", "syslog://", "RSysLog://"])
def test_the_channels_page_refuses_a_channel_without_a_host(db, staff_client, url):
    response = staff_client.post("/alerts/channels/", {"name": "logs", "url": url})
    assert response.status_code == 200
    assert "ALERT_CHANNEL_UNFENCED_SCHEMES" in response.content.decode()
    assert not AlertChannel.objects.exists()
