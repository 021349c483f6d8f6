"""Settings come from the environment; a bad value is a one-line error naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JOBS_MAX_CONCURRENT_RUNS", "abc"),
        ("JOBS_MAX_CONCURRENT_RUNS", "0"),
        ("JOBS_MISFIRE_THRESHOLD", "-1"),
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "foo://x"),
        ("JOBS_HTTP_BLOCKED_CIDRS", "10.0.0.0/33"),
        ("JOBS_EXECUTOR", "fork"),
        ("JOBS_RUN_MEMORY_MB", "lots"),
        ("JOBS_RUN_MEMORY_MB", "100"),
        ("JOBS_MAX_CHAIN_DEPTH", "0"),
        ("JOBS_MAX_CHAIN_DEPTH", "1001"),
        ("JOBS_MAX_DOWNSTREAM", "0"),
        ("JOBS_MAX_CLOCK_SKEW", "2s"),
        ("JOBS_MAX_CLOCK_SKEW", "0"),
        ("JOBS_MAX_CLOCK_SKEW", "nan"),
        ("CRONBOARD_DEFAULT_ROLE", "admin"),
        ("CRONBOARD_DEFAULT_ROLE", "reader"),
        ("CRONBOARD_LOG_FORMAT", "xml"),
        ("JOBS_METRICS_BIND", "9464"),
        ("JOBS_METRICS_BIND", "127.0.0.1:99999"),
        ("JOBS_METRICS_TOKEN", "short"),
        ("JOBS_METRICS_ALLOW", "10.0.0.0/33"),
        ("JOBS_METRICS_PER_JOB", "maybe"),
        ("CRONBOARD_ENV_SECRET_NAMESPACES", "DB_PASS"),
        ("CRONBOARD_ENV_SECRET_NAMESPACES", "DB_PASS:Not A Namespace"),
    ],
)
def test_bad_environment_value_names_the_variable_without_a_traceback(name, value, tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", name: value}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert name in result.stderr
    assert "Traceback" not in result.stderr


def test_a_memory_cap_needs_the_process_executor(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "JOBS_EXECUTOR": "thread",
        "JOBS_RUN_MEMORY_MB": "512",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert (
        "JOBS_RUN_MEMORY_MB caps the memory of a run's child process: it needs JOBS_EXECUTOR=process"
        in result.stderr
    )
    assert "Traceback" not in result.stderr


def test_sqlite_file_database_uses_wal_with_a_bounded_log(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    code = (
        "import django; django.setup(); from django.db import connection; c = connection.cursor();"
        "print(*(c.execute(f'PRAGMA {p}').fetchone()[0] for p in ('journal_mode', 'synchronous', 'journal_size_limit')))"
    )
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    # synchronous 1 = NORMAL; the log is cut back to 64 MB when it restarts.
    assert result.stdout.split() == ["wal", "1", str(64 * 1024 * 1024)]
