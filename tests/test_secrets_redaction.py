"""Redaction of a value written in pieces: a run that logs a secret's value
in two lines (or a program whose output brings it in two reads) leaves no
piece of it beside the other in its log, as written or as streamed from a
run process."""

import multiprocessing
import re
from datetime import timedelta

import pytest
from django.utils import timezone

import tests.hostile_handlers  # noqa: F401  (registers hostile.leak-pieces)
from jobs import secrets
from jobs.engine.execution import child
from jobs.engine.execution.pool import HandlerRef, run_handler
from jobs.handlers.base import RunContext
from jobs.models import Secret

pytestmark = pytest.mark.django_db
VALUE = "pieces-s3cr3t-V4lue"
STAMP = re.compile(r"(^|\n)\d\d:\d\d:\d\d ")


def contents(log: str) -> str:
    """The log's lines without their newlines and stamps, run together: what
    a reader who puts the pieces back together would see."""
    return STAMP.sub("", log)


@pytest.mark.parametrize("cut", [1, 7, len(VALUE) - 1])
def test_pieces_of_a_value_are_hidden_together(cut):
    held = secrets.HeldRedaction(secrets.redaction_forms([VALUE]))
    written = held.add("", "before " + VALUE[:cut])
    written += held.add("|", VALUE[cut:] + " after")
    written += held.release_all()
    assert written == "before ****| after"


def test_text_with_no_value_is_written_whole_and_in_order():
    held = secrets.HeldRedaction(secrets.redaction_forms([VALUE]))
    pieces = [("", "one"), ("\n", "two"), ("\n", "x" * 50), ("\n", "p" + VALUE[:3])]
    written = "".join(held.add(separator, text) for separator, text in pieces)
    assert len(written) < len("".join(s + t for s, t in pieces))  # the end waits
    assert written + held.release_all() == "one\ntwo\n" + "x" * 50 + "\np" + VALUE[:3]


def test_two_values_and_one_inside_a_longer_one():
    held = secrets.HeldRedaction(secrets.redaction_forms(["abc", "xxabcxx"]))
    written = held.add("", "1 xxab") + held.add("/", "cxx 2 ab") + held.add("/", "c 3")
    assert written + held.release_all() == "1 ****/ 2 ****/ 3"


def make_ctx(properties):
    now = timezone.now()
    return RunContext(
        run_id=1,
        fire_id="f",
        attempt=1,
        scheduled_at=now,
        deadline=now + timedelta(seconds=30),
        properties=properties,
    )


@pytest.mark.parametrize("cut", [1, 9, len(VALUE) - 1])
def test_a_run_that_logs_a_value_in_two_lines_keeps_neither_piece_together(cut):
    secrets.set_secret(name="tok", value=VALUE, via="cli")
    ctx = make_ctx({"token": "{{ secret.tok }}", "cut": str(cut)})
    outcome = run_handler(ctx, HandlerRef("python", "hostile.leak-pieces"))
    assert outcome.status == "succeeded"
    log = ctx.log_text()
    assert VALUE not in contents(log)
    assert contents(log) == "first ****"
    assert log.count("\n") == 1  # still two lines


def test_a_run_process_streams_the_pieces_with_the_value_hidden():
    """The process executor's child, sending what was logged before the
    second piece exists: the first piece is held back, not sent."""
    Secret.objects.all().delete()
    secrets.set_secret(name="tok", value=VALUE, via="cli")
    ctx = make_ctx({"token": "{{ secret.tok }}"})
    ours, theirs = multiprocessing.Pipe()
    child._run(
        theirs,
        HandlerRef("python", "hostile.leak-pieces"),
        "tests.hostile_handlers",
        child.payload_of(ctx),
        {"log_keep": 10_000, "memory_mb": 0},
    )
    sent = []
    while ours.poll():
        sent.append(ours.recv())
    logged = "".join(message[1] for message in sent if message[0] == "log")
    assert sent[-1][0] == "done"
    assert contents(logged) == "first ****"
