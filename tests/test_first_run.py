"""A fresh clone: importing the settings writes nothing; `manage.py bootstrap`
writes the secret key file; serving without a key is refused; a SQLite
database in a missing folder is reported by `manage.py check`."""

import os
import shutil
import stat
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from jobs.checks import sqlite_folder_errors
from jobs.management.commands.bootstrap import DEMO_JOBS
from jobs.models import Job

REPO = Path(__file__).resolve().parent.parent

SHOW = "from django.conf import settings; settings.SECRET_KEY; print(settings.SECRET_KEY_SOURCE)"


def clone_config(tmp_path: Path) -> Path:
    """A checkout with nothing generated yet: config/ copied; jobs/ and the
    packages still come from the repository."""
    root = tmp_path / "clone"
    shutil.copytree(REPO / "config", root / "config", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def python(root: Path, code: str, **env) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "CRONBOARD_REQUIRE_SECRET_KEY")}
    environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        PYTHONPATH=str(REPO),
        DATABASE_URL=f"sqlite:///{root / 'db.sqlite3'}",
        **env,
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=environ, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_importing_the_settings_writes_nothing(tmp_path):
    root = clone_config(tmp_path)
    before = sorted(p.relative_to(root) for p in root.rglob("*") if "__pycache__" not in p.parts)
    result = python(root, SHOW)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["process"]
    after = sorted(p.relative_to(root) for p in root.rglob("*") if "__pycache__" not in p.parts)
    assert after == before  # no var/, no var/secret_key, no staticfiles/


@pytest.mark.slow
def test_the_key_comes_from_the_environment_else_the_file(tmp_path):
    root = clone_config(tmp_path)
    (root / "var").mkdir()
    (root / "var" / "secret_key").write_text("from-the-file\n")
    code = SHOW + "; print(settings.SECRET_KEY)"
    assert python(root, code).stdout.split() == ["file", "from-the-file"]
    assert python(root, code, SECRET_KEY="from-env").stdout.split() == ["environment", "from-env"]


@pytest.mark.slow
def test_serving_without_a_key_is_refused_with_what_to_do(tmp_path):
    root = clone_config(tmp_path)
    result = python(root, "import config.wsgi")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: No SECRET_KEY")
    assert "manage.py bootstrap" in last
    assert python(root, "import config.wsgi", SECRET_KEY="k" * 50).returncode == 0


@pytest.mark.slow
def test_production_still_requires_the_variable(tmp_path):
    root = clone_config(tmp_path)
    result = python(root, SHOW, CRONBOARD_REQUIRE_SECRET_KEY="true")
    assert "SECRET_KEY must be set in production" in result.stderr


@pytest.fixture
def key_file(settings, tmp_path):
    settings.SECRET_KEY_FILE = tmp_path / "var" / "secret_key"
    settings.SECRET_KEY_SOURCE = "process"
    return settings.SECRET_KEY_FILE


def bootstrap() -> str:
    out = StringIO()
    call_command("bootstrap", "--no-demo", stdout=out)
    return out.getvalue()


def test_bootstrap_writes_a_secret_key_readable_by_its_owner_only(db, key_file):
    output = bootstrap()
    assert f"Wrote a new secret key to {key_file}." in output
    assert len(key_file.read_text()) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_bootstrap_keeps_an_existing_key(db, key_file):
    key_file.parent.mkdir()
    key_file.write_text("keep-me")
    assert "secret key" not in bootstrap()
    assert key_file.read_text() == "keep-me"


def test_bootstrap_writes_no_file_when_the_key_is_in_the_environment(db, key_file, settings):
    settings.SECRET_KEY_SOURCE = "environment"
    bootstrap()
    assert not key_file.parent.exists()


def test_bootstrap_in_demo_mode_seeds_every_demo_job(db, key_file, settings):
    settings.DEMO_MODE = True
    out = StringIO()
    call_command("bootstrap", stdout=out)
    assert f"Seeded {len(DEMO_JOBS)} demo jobs." in out.getvalue()
    seeded = set(Job.objects.filter(builtin=False).values_list("name", flat=True))
    assert seeded == {spec["name"] for spec in DEMO_JOBS}


def test_a_sqlite_database_in_a_missing_folder_is_reported(tmp_path):
    missing = tmp_path / "nowhere" / "db.sqlite3"
    database = {"ENGINE": "django.db.backends.sqlite3", "NAME": str(missing)}
    [error] = sqlite_folder_errors(database)
    assert error.id == "cronboard.E001"
    assert str(missing.parent) in error.msg
    missing.parent.mkdir()
    assert sqlite_folder_errors(database) == []
    assert sqlite_folder_errors({**database, "NAME": ":memory:"}) == []


def test_alert_channels_are_not_encrypted_with_a_key_of_this_process_only(settings):
    from django.core.exceptions import ImproperlyConfigured

    from jobs import channels

    settings.SECRET_KEY_SOURCE = "process"
    with pytest.raises(ImproperlyConfigured, match="manage.py bootstrap"):
        channels.encrypt("json://hooks.example.com/x")
    settings.SECRET_KEY_SOURCE = "file"
    assert channels.decrypt(channels.encrypt("json://hooks.example.com/x")) == "json://hooks.example.com/x"


def test_a_demo_job_s_name_does_not_say_its_state(db, key_file, settings):
    """A name is kept when the job is resumed ("… (paused)" then read wrong,
    in the list and in its alerts); the state has a column of its own."""
    settings.DEMO_MODE = True
    call_command("bootstrap", stdout=StringIO())
    for job in Job.objects.filter(builtin=False):
        assert job.get_state_display().lower() not in job.name.lower(), job.name
