"""Secrets (jobs.secrets): stored encrypted and never read back, referenced
from a job's properties, resolved only inside a run, and hidden in all the
run writes."""

import io
import json
import time
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

import tests.hostile_handlers  # noqa: F401  (registers hostile.leak)
from jobs import secrets, services
from jobs.core import crypto
from jobs.engine.execution.pool import HandlerRef, run_handler
from jobs.engine.loop import Scheduler
from jobs.handlers.base import RunContext
from jobs.models import AuditEvent, Job, Run, Secret
from jobs.models.secrets import MAX_VALUE_BYTES

pytestmark = pytest.mark.django_db
VALUE = "s3cr3t-V4lue"


def set_value(name, value=VALUE, **kwargs):
    return secrets.set_secret(name=name, value=value, via="cli", **kwargs)


# -- the store -------------------------------------------------------------------


def test_a_value_is_stored_encrypted_and_only_a_run_reads_it(staff_user):
    secret = set_value("api.token-1", description="for the API", user=staff_user)
    row = Secret.objects.get(name="api.token-1")
    assert VALUE not in row.token
    assert crypto.decrypt(row.token, purpose=crypto.SECRETS) == VALUE
    # Another purpose's key does not read it: a channel token is not a secret.
    assert crypto.decrypt(row.token, purpose=crypto.CHANNELS) is None
    assert (secret.set_by, secret.description) == (staff_user.username, "for the API")


@pytest.mark.parametrize("name", ["", "a b", "x" * 101, "naïve", "a/b", "{{x}}"])
def test_a_bad_name_is_refused(name):
    with pytest.raises(ValidationError) as info:
        set_value(name)
    assert info.value.code == "invalid"
    assert not Secret.objects.exists()


def test_the_value_is_limited_to_64_kb_and_must_be_storable_text():
    set_value("big", "é" * (MAX_VALUE_BYTES // 2))
    with pytest.raises(ValidationError) as info:
        set_value("bigger", "x" * (MAX_VALUE_BYTES + 1))
    assert info.value.code == "max_length"
    for bad in ["", "a\x00b", "a\udfffb"]:
        with pytest.raises(ValidationError):
            set_value("bad", bad)
    assert list(Secret.objects.values_list("name", flat=True)) == ["big"]


@pytest.mark.parametrize("name", ["has space", "", "x" * 101, "a\nb", "ok\n"])
def test_the_database_refuses_a_name_no_reference_could_name(both_databases, name):
    from django.db import DataError, IntegrityError, transaction

    with pytest.raises((IntegrityError, DataError)), transaction.atomic():
        Secret.objects.create(name=name, token="x")
    Secret.objects.create(name="Ok_1.2-3", token="x")


def test_the_audit_trail_says_changed_and_never_holds_the_value(staff_user):
    set_value("tok", user=staff_user, description="one")
    set_value("tok", "another-value", user=staff_user)
    secrets.delete_secret(name="tok", user=staff_user, via="console")
    events = list(AuditEvent.objects.order_by("id"))
    assert [e.action for e in events] == ["secret-create", "secret-set", "secret-delete"]
    assert all(e.changes["value"] == "changed" for e in events)
    text = json.dumps([e.changes for e in events])
    assert VALUE not in text and "another-value" not in text


def test_rotate_moves_every_value_to_the_first_key(settings):
    set_value("tok")
    before = Secret.objects.get().token
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-key-" + "k" * 40
    assert secrets.rotate_all() == (1, [])
    after = Secret.objects.get().token
    assert after != before
    settings.SECRET_KEY_FALLBACKS = []
    assert crypto.decrypt(after, purpose=crypto.SECRETS) == VALUE


# -- the command line ------------------------------------------------------------


def run_command(*args, stdin=""):
    import sys

    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode() if isinstance(stdin, str) else stdin))
    try:
        call_command("secrets", *args, stdout=out, stderr=err)
    finally:
        sys.stdin = old
    return out.getvalue()


def test_the_command_reads_the_value_from_stdin_and_lists_no_value():
    run_command("set", "db.password", "--description", "the reporting DB", stdin=VALUE + "\n")
    assert crypto.decrypt(Secret.objects.get().token, purpose=crypto.SECRETS) == VALUE
    listed = run_command("list")
    assert "db.password" in listed and "the reporting DB" in listed and "set on " in listed
    assert VALUE not in listed
    run_command("set", "db.password", stdin="new")
    assert Secret.objects.get().description == "the reporting DB", "a description not given is kept"
    run_command("delete", "db.password")
    assert not Secret.objects.exists()
    with pytest.raises(CommandError, match="No secret named"):
        run_command("delete", "db.password")


def test_the_command_refuses_a_bad_value_without_echoing_it():
    with pytest.raises(CommandError) as info:
        run_command("set", "tok", stdin=b"x" * (MAX_VALUE_BYTES + 5))
    assert "65536" in str(info.value)
    with pytest.raises(CommandError) as info:
        run_command("set", "tok", stdin=b"abc\xffdef")
    assert "cannot be stored" in str(info.value)
    with pytest.raises(CommandError):
        run_command("set", "bad name", stdin="v")
    assert not Secret.objects.exists()


def test_the_command_rotates():
    run_command("set", "tok", stdin="v")
    assert "1 secret(s) re-encrypted" in run_command("rotate")


# -- references ------------------------------------------------------------------


def test_only_the_exact_shapes_are_references(monkeypatch):
    set_value("tok")
    monkeypatch.setenv("CRONBOARD_SECRET_FROM_ENV", "env-value")
    resolved = secrets.resolve(
        {
            "a": "Bearer {{ secret.tok }}",
            "b": "{{secret.tok}}|{{ env:FROM_ENV }}",
            "c": "{{ literal }} {{{ x }}} {{ secret.tok",
            "d": "{{ secrets.tok }}",
        }
    )
    assert resolved.properties == {
        "a": f"Bearer {VALUE}",
        "b": f"{VALUE}|env-value",
        "c": "{{ literal }} {{{ x }}} {{ secret.tok",
        "d": "{{ secrets.tok }}",
    }
    assert sorted(resolved.values) == sorted([VALUE, "env-value"])


def test_a_value_goes_into_json_text_escaped():
    set_value("q", 'a"b\\c\nd')
    resolved = secrets.resolve({"headers": '{"Authorization": "Bearer {{ secret.q }}"}'})
    assert json.loads(resolved.properties["headers"]) == {"Authorization": 'Bearer a"b\\c\nd'}


def test_a_missing_secret_or_variable_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("CRONBOARD_SECRET_NOPE", raising=False)
    with pytest.raises(secrets.SecretMissing, match="'gone' does not exist"):
        secrets.resolve({"a": "{{ secret.gone }}"})
    with pytest.raises(secrets.SecretMissing, match="CRONBOARD_SECRET_NOPE is not set"):
        secrets.resolve({"a": "{{ env:NOPE }}"})


def test_redaction_hides_each_value_and_its_json_form():
    hidden = secrets.redaction_forms(['a"b', "abc-long"])
    assert secrets.redact('x a"b a\\"b abc-long', hidden) == "x **** **** ****"


# -- at run time: what the handler sees, what the run writes -------------------------


def make_ctx(properties, run_id=1):
    now = timezone.now()
    return RunContext(
        run_id=run_id,
        fire_id="f",
        attempt=1,
        scheduled_at=now,
        deadline=now + timedelta(seconds=30),
        properties=properties,
    )


@pytest.mark.parametrize("mode", ["return", "handler-error", "crash"])
def test_the_handler_gets_the_value_and_nothing_it_writes_keeps_it(mode):
    set_value("tok", 'tok"en-' + VALUE)
    ctx = make_ctx({"token": "{{ secret.tok }}", "mode": mode})
    outcome = run_handler(ctx, HandlerRef("python", "hostile.leak"))
    text = ctx.log_text() + outcome.result + outcome.error
    assert "the token is ****" in ctx.log_text()
    assert '{"token": "****"}' in ctx.log_text()
    assert VALUE not in text
    assert outcome.status == ("succeeded" if mode == "return" else "failed")
    assert "****" in (outcome.result or outcome.error)


def test_a_secret_deleted_since_the_save_fails_the_run_with_its_name():
    set_value("tok")
    ctx = make_ctx({"token": "{{ secret.tok }}"})
    secrets.delete_secret(name="tok", via="cli")
    outcome = run_handler(ctx, HandlerRef("python", "hostile.leak"))
    assert outcome.status == "failed"
    assert "'tok' does not exist" in outcome.error


def drive(scheduler, run_id, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        now = timezone.now()
        scheduler.claim_queued(now)
        scheduler.collect(scheduler.pool.wait(0.1), now)
        run = Run.objects.get(pk=run_id)
        if run.status in Run.FINISHED:
            return run
    raise AssertionError("the run did not end")


@pytest.mark.django_db(transaction=True)
def test_through_the_scheduler_the_stored_run_keeps_the_reference_and_hides_the_value(make_job, settings):
    through_the_scheduler(make_job, settings)


@pytest.mark.postgres
def test_through_the_scheduler_on_postgres(make_job, settings, postgres_database):
    through_the_scheduler(make_job, settings)


def through_the_scheduler(make_job, settings):
    settings.JOBS_EXECUTOR = "thread"
    set_value("tok")
    job = make_job(handler="hostile.leak", properties={"token": "{{ secret.tok }}", "mode": "handler-error"})
    run, _created = services.run_now(job=job, properties={"mode": "return"})
    scheduler = Scheduler(worker_id="node-s", max_workers=1, misfire_threshold=60)
    try:
        run = drive(scheduler, run.pk)
    finally:
        scheduler.pool.close()
    assert run.status == "succeeded", run.error
    stored = json.dumps([run.log, run.result, run.error, run.properties])
    assert VALUE not in stored
    assert "the token is ****" in run.log and run.result == "result ****"
    assert run.properties == {"mode": "return"}
    assert Job.objects.get(pk=job.pk).properties["token"] == "{{ secret.tok }}"


@pytest.mark.parametrize("mode", ["return", "crash"])
def test_a_run_process_sends_its_log_and_outcome_with_the_value_hidden(mode):
    """The process executor's child side (jobs.engine.execution.child), run
    here on the test database: every message it sends the scheduler."""
    import multiprocessing

    from jobs.engine.execution import child
    from jobs.engine.execution.pool import HandlerRef

    set_value("tok")
    ctx = make_ctx({"token": "{{ secret.tok }}", "mode": mode})
    ours, theirs = multiprocessing.Pipe()
    child._run(
        theirs,
        HandlerRef("python", "hostile.leak"),
        "tests.hostile_handlers",
        child.payload_of(ctx),
        {"log_keep": 10_000, "memory_mb": 0},
    )
    sent = []
    while ours.poll():
        sent.append(ours.recv())
    assert sent[-1][0] == "done"
    assert any(message[0] == "log" for message in sent)
    text = repr(sent)
    assert VALUE not in text and "****" in text


# -- refused at save ---------------------------------------------------------------


def test_the_job_form_refuses_a_reference_to_a_missing_secret_naming_it():
    from jobs.forms import JobForm
    from tests.factories import job_data

    data = job_data(properties=json.dumps({"token": "{{ secret.nope }}"}))
    form = JobForm(data)
    assert not form.is_valid()
    error = form.errors.as_data()["properties"][0]
    assert error.code == secrets.UNKNOWN_CODE and "nope" in error.message
    set_value("nope")
    assert JobForm(data).is_valid()


def test_an_http_url_with_a_reference_passes_the_kinds_checks(settings):
    from jobs import kinds

    set_value("key")
    settings.JOBS_HTTP_ALLOWED_HOSTS = ["127.0.0.2"]
    props = {"url": "http://127.0.0.2:9/hook?key={{ secret.key }}", "headers": "X-Api-Key: {{ secret.key }}"}
    assert kinds.property_errors("http", props) == []


def test_the_command_refuses_a_description_no_database_stores():
    with pytest.raises(CommandError, match="at most 500"):
        run_command("set", "tok", "--description", "d" * 501, stdin="v")
    with pytest.raises(CommandError, match="cannot be stored"):
        run_command("set", "tok", "--description", "a\x00b", stdin="v")
    assert not Secret.objects.exists()


def test_deleting_a_name_no_secret_can_have_finds_none():
    assert secrets.delete_secret(name="a\udfffb", via="cli") is False
    with pytest.raises(CommandError, match="No secret named"):
        run_command("delete", "bad name")


def test_the_command_refuses_a_name_that_is_not_utf8():
    with pytest.raises(CommandError, match="cannot be stored"):
        run_command("delete", "a\udcffb")


def test_without_a_shared_secret_key_the_command_refuses_in_a_sentence(settings):
    settings.SECRET_KEY_SOURCE = "process"
    with pytest.raises(CommandError, match="No SECRET_KEY: secrets are encrypted with it"):
        run_command("set", "tok", stdin="v")
    with pytest.raises(CommandError, match="No SECRET_KEY"):
        run_command("rotate")
    assert not Secret.objects.exists()


def test_a_value_is_redacted_as_a_url_or_base64_carries_it_too():
    """A handler that puts a secret into a URL (percent-encoded) or into
    Basic credentials (base64) and logs or raises it leaks nothing either."""
    import base64
    from urllib.parse import quote, quote_plus

    value = "p@ss w/rd+1&x=y"
    hidden = secrets.redaction_forms([value])
    for carried in (
        value,
        quote(value, safe=""),
        quote_plus(value, safe=""),
        base64.b64encode(value.encode()).decode(),
        base64.b64encode(value.encode()).decode().rstrip("="),
    ):
        text = f"GET https://127.0.0.1/?token={carried} failed"
        assert secrets.redact(text, hidden) == "GET https://127.0.0.1/?token=**** failed", carried
