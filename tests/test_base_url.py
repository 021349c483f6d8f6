"""CRONBOARD_BASE_URL, the address links in alerts lead to: scripts/run.sh
derives it from BIND unless the operator set it, and the settings page warns
when the console was opened at another address."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from jobs import links

REPO = Path(__file__).resolve().parent.parent
RUN_SH = REPO / "scripts" / "run.sh"


def run_bash(script: str, *, cwd: Path = REPO, **env) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "CRONBOARD_BASE_URL"}
    result = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env={**clean, **env}, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def this_host() -> str:
    return run_bash("hostname -f 2>/dev/null || hostname")


@pytest.mark.parametrize(
    ("bind", "expected"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("192.0.2.10:9000", "http://192.0.2.10:9000"),
        ("cron.example.com:8080", "http://cron.example.com:8080"),
        ("localhost", "http://localhost:8000"),
        ("[::1]:8001", "http://[::1]:8001"),
        ("[2001:db8::5]:80", "http://[2001:db8::5]:80"),
        ("unix:/run/cronboard.sock", ""),
        ("fd://3", ""),
    ],
)
def test_a_bind_gives_the_address_it_listens_at(bind, expected):
    assert run_bash(f'source scripts/base_url.sh; base_url_for_bind "{bind}"') == expected


@pytest.mark.parametrize("bind", ["0.0.0.0:8000", "[::]:8000", "0:8000", ":8000"])
def test_a_bind_to_every_interface_gives_this_hosts_name(bind):
    assert run_bash(f'source scripts/base_url.sh; base_url_for_bind "{bind}"') == f"http://{this_host()}:8000"


def run_sh_derivation(tmp_path: Path, *, env_file: str | None = None, **env) -> str:
    """The lines of scripts/run.sh from BIND= to gunicorn's start, run on
    their own in a copy of the repository's layout: what they export."""
    text = RUN_SH.read_text()
    start = text.index("BIND=${BIND")
    end = text.index(".venv/bin/gunicorn")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "base_url.sh").write_text((REPO / "scripts" / "base_url.sh").read_text())
    if env_file is not None:
        (tmp_path / ".env").write_text(env_file)
    script = "set -euo pipefail\n" + text[start:end] + '\nprintf "%s" "${CRONBOARD_BASE_URL:-}"\n'
    return run_bash(script, cwd=tmp_path, **env)


def test_run_sh_exports_the_address_it_binds_to(tmp_path):
    assert run_sh_derivation(tmp_path, BIND="127.0.0.1:9100") == "http://127.0.0.1:9100"


def test_run_sh_exports_its_default_bind_without_one(tmp_path):
    assert run_sh_derivation(tmp_path) == "http://127.0.0.1:8000"


def test_run_sh_keeps_a_base_url_set_in_the_environment(tmp_path):
    assert (
        run_sh_derivation(tmp_path, BIND="0.0.0.0:9100", CRONBOARD_BASE_URL="https://cron.example.com")
        == "https://cron.example.com"
    )


def test_run_sh_leaves_a_base_url_set_in_dot_env_to_the_settings(tmp_path):
    env_file = "DEBUG=false\nexport CRONBOARD_BASE_URL=https://cron.example.com\n"
    assert run_sh_derivation(tmp_path, env_file=env_file, BIND="0.0.0.0:9100") == ""


def test_run_sh_leaves_a_unix_socket_bind_to_the_settings_default(tmp_path):
    assert run_sh_derivation(tmp_path, BIND="unix:/tmp/cronboard.sock") == ""


@pytest.mark.slow
@pytest.mark.parametrize("value", ["cron.example.com", "ftp://cron.example.com", "http://"])
def test_a_base_url_that_is_not_an_http_address_stops_start_up(value, tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "CRONBOARD_BASE_URL": value}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "CRONBOARD_BASE_URL must be an http:// or https:// address" in result.stderr
    assert "Traceback" not in result.stderr


# -- the settings page's warning -----------------------------------------------------------


@pytest.mark.parametrize(
    ("base_url", "opened_at", "shown"),
    [
        ("http://localhost:8000", "http://localhost:8000/", None),
        ("http://LOCALHOST:8000/", "http://localhost:8000/settings/", None),
        ("https://cron.example.com", "https://cron.example.com:443/", None),
        ("https://cron.example.com/cron", "https://cron.example.com/cron/settings/", None),
        ("http://localhost:8000", "http://10.0.0.5:8000/", "http://10.0.0.5:8000"),
        ("http://localhost:8000", "http://localhost:9000/", "http://localhost:9000"),
        ("http://cron.example.com", "https://cron.example.com/", "https://cron.example.com"),
        ("http://localhost:8000", "http://[::1]:8000/", "http://[::1]:8000"),
    ],
)
def test_base_url_mismatch_compares_scheme_host_and_port(settings, base_url, opened_at, shown):
    settings.CRONBOARD_BASE_URL = base_url
    assert links.base_url_mismatch(opened_at) == shown


def warning(html: str) -> str | None:
    found = re.search(r'<p class="flash warning base-url-warning"[^>]*>(.*?)</p>', html, re.S)
    return found and re.sub(r"<[^>]+>", "", found.group(1))


@pytest.mark.django_db
def test_the_settings_page_warns_when_opened_elsewhere(settings, staff_client):
    settings.CRONBOARD_BASE_URL = "http://localhost:8000"
    settings.ALLOWED_HOSTS = ["cron.internal"]
    html = staff_client.get(reverse("jobs:settings"), HTTP_HOST="cron.internal:8080").content.decode()
    text = warning(html)
    assert text is not None, html
    assert "http://localhost:8000" in text and "http://cron.internal:8080" in text
    assert "CRONBOARD_BASE_URL" in text


@pytest.mark.django_db
def test_the_settings_page_says_nothing_when_the_addresses_agree(settings, staff_client):
    settings.CRONBOARD_BASE_URL = "https://cron.internal"
    settings.ALLOWED_HOSTS = ["cron.internal"]
    response = staff_client.get(reverse("jobs:settings"), HTTP_HOST="cron.internal", secure=True)
    assert response.status_code == 200
    assert warning(response.content.decode()) is None


def test_the_scripts_name_only_tests_that_exist():
    """scripts/base_url.sh named tests/test_run_script.py, which never existed."""
    named = {
        (script.name, name)
        for script in (REPO / "scripts").glob("*.sh")
        for name in re.findall(r"tests/test_\w+\.py", script.read_text())
    }
    assert ("base_url.sh", "tests/test_base_url.py") in named
    assert [pair for pair in named if not (REPO / pair[1]).exists()] == []
