"""Production hardening: `check --deploy` on production settings, security
headers, login throttling, demo mode, settings read strictly."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from jobs import refusals, services
from jobs.forms import JobForm
from jobs.models import Run

BASE_DIR = Path(__file__).resolve().parent.parent


def manage(*args, env_overrides: dict, tmp_path) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CRONBOARD_", "SECURE_", "DEBUG", "SECRET_KEY", "DEMO_MODE"))
    }
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'deploy.sqlite3'}",
        DJANGO_SETTINGS_MODULE="config.settings",
        **env_overrides,
    )
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "cronboard.example.com",
    "CRONBOARD_HTTPS": "true",
    "CRONBOARD_BEHIND_PROXY": "true",
}


def test_check_deploy_passes_with_production_settings(tmp_path):
    result = manage(
        "check", "--deploy", "--fail-level", "WARNING", env_overrides=PRODUCTION, tmp_path=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_fails_without_https(tmp_path):
    # The check really looks: the local defaults are not production-ready.
    env = {**PRODUCTION, "CRONBOARD_HTTPS": "false"}
    result = manage("check", "--deploy", "--fail-level", "WARNING", env_overrides=env, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "security.W012" in result.stderr + result.stdout  # SESSION_COOKIE_SECURE


@pytest.mark.parametrize(
    "name", ["CRONBOARD_HTTPS", "DEMO_MODE", "DEBUG", "SECURE_HSTS_SECONDS", "LOGIN_FAILURE_LIMIT"]
)
def test_a_bad_setting_value_names_the_variable(tmp_path, name):
    result = manage("check", env_overrides={name: "sometimes"}, tmp_path=tmp_path)
    assert result.returncode != 0
    assert "Configuration error" in result.stderr and name in result.stderr


def test_local_defaults_work_over_plain_http(settings):
    # The test run uses the defaults: no TLS-only cookies, no redirect.
    assert not settings.SESSION_COOKIE_SECURE and not settings.CSRF_COOKIE_SECURE
    assert not settings.SECURE_SSL_REDIRECT and settings.SECURE_HSTS_SECONDS == 0


# -- headers --------------------------------------------------------------------------------


def test_pages_send_a_strict_content_security_policy(staff_client):
    response = staff_client.get("/profile/")
    policy = response["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["default-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_base_template_works_under_the_policy(staff_client):
    html = staff_client.get("/profile/").content.decode()
    # htmx would inject an indicator <style>, which the policy blocks.
    assert (
        '<meta name="htmx-config" content=\'{"includeIndicatorStyles": false, '
        '"attributesToSettle": ["class", "width", "height"]}\'>' in html
    )
    assert re.search(r'<script src="[^"]*htmx[^"]*\.js"', html)
    assert not re.search(r"<script(?![^>]*\ssrc=)[^>]*>", html), "inline script"
    assert not re.search(r"<style|\sstyle=|\son[a-z]+=", html), "inline style or handler"


# -- login throttling -------------------------------------------------------------------------------


@pytest.fixture
def person(db):
    return get_user_model().objects.create_user("alice", "alice@example.com", "right-password-1")


def login(username, password, ip="10.1.1.1"):
    return Client().post("/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_logins_are_throttled_per_user(person, settings):
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        assert login("alice", f"wrong-{attempt}", ip=f"10.0.0.{attempt + 1}").status_code == 200
    assert login("alice", "wrong-again", ip="10.0.0.99").status_code == 429
    # Even the right password from a fresh address is refused for now.
    refused = login("alice", "right-password-1", ip="10.9.9.9")
    assert refused.status_code == 429
    assert "Too many sign-in attempts" in refused.content.decode()


def test_logins_are_throttled_per_address(person, settings):
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        login(f"nobody-{attempt}", "guess", ip="10.2.2.2")
    assert login("alice", "right-password-1", ip="10.2.2.2").status_code == 429
    assert login("alice", "right-password-1", ip="10.3.3.3").status_code == 302


def test_a_good_login_below_the_limit_works_and_resets(person, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        login("alice", "wrong")
    assert login("alice", "right-password-1").status_code == 302
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        login("alice", "wrong")
    assert login("alice", "right-password-1").status_code == 302


def test_client_address_behind_a_proxy_is_the_one_it_appended(rf, settings):
    from jobs.web.security import client_ip

    request = rf.get("/", REMOTE_ADDR="172.16.0.2", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9")
    settings.CRONBOARD_PROXY_COUNT = 0
    assert client_ip(request) == "172.16.0.2"
    settings.CRONBOARD_PROXY_COUNT = 1
    assert client_ip(request) == "203.0.113.9"  # not the forged 6.6.6.6


# -- demo mode ----------------------------------------------------------------------------------------


def test_demo_mode_shows_a_banner(staff_client, settings):
    assert 'id="demo-banner"' not in staff_client.get("/profile/").content.decode()
    settings.DEMO_MODE = True
    assert 'id="demo-banner"' in staff_client.get("/profile/").content.decode()


def test_demo_mode_blocks_run_now_in_the_service(make_job, settings, staff_user):
    settings.DEMO_MODE = True
    with pytest.raises(refusals.DemoModeError):
        services.run_now(job=make_job(), user=staff_user)
    assert not Run.objects.exists()


def test_demo_mode_blocks_http_jobs_in_the_form(settings, staff_user):
    settings.DEMO_MODE = True
    form = JobForm(
        {"name": "h", "kind": "http", "cron_expression": "0 * * * * *", "url": "https://example.com"},
        user=staff_user,
    )
    assert not form.is_valid()
    assert ("demo_mode", "kind") in [(error["code"], error["field"]) for error in form.error_list()]


def test_demo_mode_blocks_http_jobs_over_the_api(staff_api, settings):
    settings.DEMO_MODE = True
    response = staff_api.post(
        "/api/jobs",
        {
            "name": "h",
            "kind": "http",
            "cron_expression": "0 * * * * *",
            "properties": {"url": "https://example.com"},
        },
    )
    assert response.status_code == 403 and response.json()["code"] == "demo_mode"


def test_the_health_check_is_not_redirected_to_https(settings, db):
    settings.SECURE_SSL_REDIRECT = True
    client = Client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/profile/").status_code == 301


def test_every_template_that_loads_htmx_turns_off_its_inline_styles():
    # htmx injects a <style> unless told not to, and the policy blocks it
    # (the browser logs a violation and the indicators lose their styling).
    templates = BASE_DIR / "templates"
    missing = [
        str(path.relative_to(templates))
        for path in templates.rglob("*.html")
        if "htmx_script" in path.read_text() and '"includeIndicatorStyles": false' not in path.read_text()
    ]
    assert missing == []
