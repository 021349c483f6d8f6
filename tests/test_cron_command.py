"""`manage.py cron next`: in-process through call_command, plus a couple of
real processes to prove exit codes and the absence of tracebacks."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parent.parent


def run_next(*args, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    options = {"stdout": out, "stderr": err}
    if stdin is not None:
        options["stdin"] = io.StringIO(stdin)
    code = 0
    try:
        call_command("cron", "next", *args, **options)
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_next_prints_utc_instants_one_per_line():
    code, out, err = run_next(
        "0 30 2 * * *", "--tz", "America/New_York", "--after", "2026-03-07T12:00:00Z", "--count", "3"
    )
    assert (code, err) == (0, "")
    assert out.splitlines() == ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"]


def test_next_defaults_to_five_times_in_utc():
    code, out, _ = run_next("@hourly", "--after", "2026-01-01T00:00:00")
    assert code == 0
    assert out.splitlines() == [f"2026-01-01T0{h}:00:00Z" for h in range(1, 6)]


def test_next_without_after_starts_from_now():
    code, out, _ = run_next("* * * * * *", "--count", "1")
    assert code == 0 and out.strip().endswith("Z")


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["0 0 0 30 2 ?"], 47005),
        (["0 0 0 1 * MON"], 47003),
        (["61 * * * * *"], 47002),
        (["* * *"], 47001),
        (["@daily", "--tz", "Mars/Base"], 47006),
        (["@daily", "--after", "yesterday"], 47001),
        (["@daily", "--count", "many"], 47001),
        (["@daily", "--count", "0"], 47002),
        (["@daily", "--count", "1001"], 47002),
        ([], 47001),
    ],
)
def test_user_errors_print_one_line_and_exit_1(args, code):
    status, out, err = run_next(*args)
    assert status == 1
    assert out == ""
    assert err.startswith(f"error {code}: ")
    assert err.count("\n") <= 1


def test_jsonl_answers_every_line_in_order_even_bad_ones():
    lines = [
        json.dumps({"expr": "0 30 2 * * *", "tz": "America/New_York", "start": "2026-03-07T12:00:00Z"}),
        "{not json",
        "",
        json.dumps({"expr": "0 0 0 1 * MON", "start": "2026-01-01T00:00:00Z"}),
        json.dumps(["a list"]),
        json.dumps({"expr": "@daily", "start": "2026-01-01T00:00:00+02:00"}),
        json.dumps({"expr": "@daily", "tz": "Nowhere/Land", "start": "2026-01-01T00:00:00Z"}),
        json.dumps({"expr": "@daily"}),
        json.dumps({"expr": "@daily", "start": "2026-01-01T00:00:00"}),
    ]
    code, out, err = run_next("--jsonl", stdin="\n".join(lines) + "\n")
    assert (code, err) == (0, "")
    results = [json.loads(line) for line in out.splitlines()]
    assert len(results) == len(lines)
    assert results[0] == {
        "next": [
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:30:00Z",
            "2026-03-10T06:30:00Z",
            "2026-03-11T06:30:00Z",
            "2026-03-12T06:30:00Z",
        ]
    }
    assert [r.get("error", {}).get("code") for r in results] == [
        None,
        47001,
        47001,
        47003,
        47001,
        None,
        47006,
        47001,
        None,
    ]
    assert results[5]["next"][0] == "2026-01-01T00:00:00Z"  # 02:00+02:00 is 00:00Z, strictly after 22:00Z
    assert results[8]["next"][0] == "2026-01-02T00:00:00Z"  # naive start means UTC
    assert all(isinstance(r["error"]["message"], str) for r in results if "error" in r)


def test_jsonl_results_are_strictly_after_start():
    line = json.dumps({"expr": "*/10 * * * * *", "start": "2026-05-05T10:00:10Z"})
    _, out, _ = run_next("--jsonl", stdin=line + "\n")
    assert json.loads(out)["next"][:2] == ["2026-05-05T10:00:20Z", "2026-05-05T10:00:30Z"]


@pytest.mark.slow
def test_real_process_exits_1_without_a_traceback():
    result = subprocess.run(
        [sys.executable, "manage.py", "cron", "next", "0 0 0 30 2 ?", "--count", "x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip().startswith("error 4700")
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_real_process_streams_thousands_of_jsonl_lines():
    request = json.dumps(
        {"expr": "0 */15 9-17 * * MON-FRI", "tz": "Europe/Berlin", "start": "2026-03-28T00:00:00Z"}
    )
    lines = [request] * 2000 + ["oops"] + [request] * 999
    result = subprocess.run(
        [sys.executable, "manage.py", "cron", "next", "--jsonl"],
        cwd=ROOT,
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert len(out) == 3000
    assert json.loads(out[2000])["error"]["code"] == 47001
    assert json.loads(out[2999]) == json.loads(out[0])
