"""Saving a channel checks its syntax and the fence without a lookup from
the web server (the scheduler resolves and fences the host at each send),
and a refused line is quoted as typed, only its secret parts masked."""

import pytest
from django.core.exceptions import ValidationError

from jobs import channels

pytestmark = pytest.mark.django_db


def no_lookup(monkeypatch):
    def refuse(host, port):
        raise AssertionError(f"looked up {host} while saving")

    monkeypatch.setattr("jobs.fence.system_resolver", refuse)


@pytest.mark.parametrize(
    "url",
    [
        "gotify://internal-name-that-does-not-resolve.invalid/token",
        "json://hooks.only-the-scheduler-resolves.invalid/hook",
    ],
)
def test_a_host_that_does_not_resolve_here_can_be_saved(monkeypatch, url):
    no_lookup(monkeypatch)
    assert channels.validate(url) == url


@pytest.mark.parametrize(
    "url", ["json://127.0.0.1:8080/hook", "json://169.254.169.254/latest", "json://localhost/hook"]
)
def test_an_address_the_fence_refuses_is_still_refused_at_save(monkeypatch, url):
    no_lookup(monkeypatch)
    with pytest.raises(ValidationError) as refused:
        channels.validate(url)
    assert refused.value.code == "fenced_channel"


def test_the_send_resolves_and_fences_the_host(monkeypatch):
    """What the save let through is checked where it is sent from."""
    monkeypatch.setattr("jobs.fence.system_resolver", lambda host, port: ["127.0.0.1"])
    result = channels.send("json://hooks.internal.invalid/hook", title="t", body="b")
    assert not result.ok and result.permanent
    assert "fence" in result.reply


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("notaurl", "“notaurl”"),
        ("hooks.slack.com/services/T000/B000/XXXXSECRET", "“hooks.slack.com/se****/T0****/B0****/XX****”"),
    ],
)
def test_a_line_without_a_scheme_is_quoted_as_typed_with_its_secrets_masked(typed, shown):
    with pytest.raises(ValidationError) as refused:
        channels.validate(typed)
    message = refused.value.messages[0]
    assert message.startswith(shown), message
    assert "XXXXSECRET" not in message
