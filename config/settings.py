"""Cronboard settings, read from the environment (django-environ).

Every deployment switch is an environment variable; a bad value raises
ImproperlyConfigured naming the variable. Defaults are safe for local use.
"""

import importlib.util
import ipaddress
import math
import re
import socket
import warnings
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from config.logs import base_config, log_format

# The fence owns its default block list (and the names of its ranges), the
# command guard the form of command jobs' allow-lists.
from jobs import commandguard
from jobs.fence import DEFAULT_BLOCKED

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _typed(name, cast, default):
    try:
        return cast(name, default=default)
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from exc


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _bool(name, default):
    """Strict: a typo such as DEBUG=ture is an error, not a silent false."""
    raw = env.str(name, default=str(default)).strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def _int(name, default, *, minimum=None, maximum=None):
    value = _typed(name, env.int, default)
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {value}")
    return value


def _seconds(name, default, *, minimum):
    """A number of seconds, decimals allowed (environ's float drops letters
    silently: "2s" would read as 2, "abc" as an empty string)."""
    raw = env.str(name, default=str(default)).strip()
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number of seconds, got {raw!r}") from None
    if not (math.isfinite(value) and value >= minimum):
        raise ImproperlyConfigured(f"{name} must be at least {minimum:g} seconds, got {raw!r}")
    return value


DEBUG = _bool("DEBUG", False)

# Importing the settings writes nothing: `manage.py bootstrap` (which the run
# command calls) writes SECRET_KEY_FILE, and `collectstatic` fills STATIC_ROOT.
SECRET_KEY_FILE = BASE_DIR / "var" / "secret_key"
SECRET_KEY = env("SECRET_KEY", default="")
if SECRET_KEY:
    SECRET_KEY_SOURCE = "environment"
elif not DEBUG and _bool("CRONBOARD_REQUIRE_SECRET_KEY", False):
    raise ImproperlyConfigured("SECRET_KEY must be set in production")
elif SECRET_KEY_FILE.exists():
    # Local use: a per-checkout key, stable across restarts so sessions survive.
    SECRET_KEY = SECRET_KEY_FILE.read_text().strip()
    SECRET_KEY_SOURCE = "file"
else:
    # Neither (a fresh clone: `manage.py check`, migrate, the tests): a random
    # key for this process only. Commands that sign nothing work with it;
    # config/wsgi.py refuses to serve with it, since every gunicorn worker
    # would draw its own and sessions would not survive from one to the next.
    from django.core.management.utils import get_random_secret_key

    SECRET_KEY = get_random_secret_key()
    SECRET_KEY_SOURCE = "process"

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# The console's address as people reach it, for links in alerts. scripts/run.sh
# derives it from BIND when it is not set; the settings page warns when the
# page was opened at another address (jobs.links.base_url_mismatch).
CRONBOARD_BASE_URL = env("CRONBOARD_BASE_URL", default="http://localhost:8000").strip().rstrip("/")
if not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", CRONBOARD_BASE_URL, flags=re.IGNORECASE):
    raise ImproperlyConfigured(
        f"CRONBOARD_BASE_URL must be an http:// or https:// address such as https://cron.example.com, "
        f"got {CRONBOARD_BASE_URL!r}"
    )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "axes",
    # Two-factor sign-in for local accounts (jobs.twofactor): authenticator
    # apps (TOTP) and single-use recovery codes.
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "jobs",
]

# django-ninja's templates and static files (Swagger UI) for /api/docs, served
# from here, never a CDN. Its folders are listed below (TEMPLATES, STATICFILES_DIRS)
# instead of "ninja" in INSTALLED_APPS: Django imports every app at start-up,
# and importing ninja loads pydantic, which only the web server's API needs;
# the scheduler, its run processes and every command would pay for it
# (0.1-0.2 s of CPU at each start and about 12 MB each).
NINJA_DIR = Path(importlib.util.find_spec("ninja").origin).parent

MIDDLEWARE = [
    "config.health.HealthCheckMiddleware",  # first: no host check, no HTTPS redirect
    # Then /metrics, likewise (Prometheus scrapes by address); it counts the
    # other requests by view, each under the id the next one gives it.
    "jobs.web.metrics.MetricsMiddleware",
    "jobs.web.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # After the session, before CommonMiddleware (Django's order): the
    # language cookie, else Accept-Language. jobs.web.i18n then puts the signed-in
    # user's saved choice above both.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # request.user.is_verified(): whether this session passed the second step.
    "django_otp.middleware.OTPMiddleware",
    "jobs.web.i18n.UserPreferencesMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Sessions that still owe their second step (or must set one up) reach
    # only the pages that let them do so (jobs.twofactor).
    "jobs.web.middleware.TwoFactorMiddleware",
    "jobs.web.middleware.StorableQueryMiddleware",
    # Last, as django-axes asks: it turns a lockout signalled by the
    # authentication backend into the 429 response.
    "axes.middleware.AxesMiddleware",
]

# --- Sign-in --------------------------------------------------------------------
# Passwords Cronboard stores (the sign-in form, the admin's) are checked only
# while CRONBOARD_LOCAL_LOGIN is on; the form stays for a directory's
# (LDAP_SERVER_URI, below). Single sign-on through an OpenID Connect
# provider is on when OIDC_ISSUER is set (jobs.oidc; docs/operations.md).
CRONBOARD_LOCAL_LOGIN = _bool("CRONBOARD_LOCAL_LOGIN", True)
OIDC_ISSUER = env.str("OIDC_ISSUER", default="").strip().rstrip("/")
if OIDC_ISSUER and not re.fullmatch(r"https?://[^/?#\s]+(/[^?#\s]*)?", OIDC_ISSUER, flags=re.IGNORECASE):
    raise ImproperlyConfigured(
        f"OIDC_ISSUER must be the provider's http:// or https:// address, got {OIDC_ISSUER!r}"
    )
OIDC_CLIENT_ID = env.str("OIDC_CLIENT_ID", default="").strip()
OIDC_CLIENT_SECRET = env.str("OIDC_CLIENT_SECRET", default="")
OIDC_SCOPES = " ".join(env.str("OIDC_SCOPES", default="openid profile email").split())
OIDC_GROUPS_CLAIM = env.str("OIDC_GROUPS_CLAIM", default="groups").strip()
OIDC_USERNAME_CLAIM = env.str("OIDC_USERNAME_CLAIM", default="preferred_username").strip()
OIDC_PROVIDER_NAME = env.str("OIDC_PROVIDER_NAME", default="single sign-on").strip()
# How long a request to the provider (discovery, token, keys, userinfo) may take.
OIDC_TIMEOUT = _seconds("OIDC_TIMEOUT", 5, minimum=0.1)
if OIDC_ISSUER:
    for _name in ("OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET", "OIDC_GROUPS_CLAIM", "OIDC_USERNAME_CLAIM"):
        if not globals()[_name]:
            raise ImproperlyConfigured(f"{_name} must be set when OIDC_ISSUER is")
    if "openid" not in OIDC_SCOPES.split():
        raise ImproperlyConfigured(f"OIDC_SCOPES must include openid, got {OIDC_SCOPES!r}")

AUTHENTICATION_BACKENDS = [
    # First, so a throttled login is refused before a password is checked.
    "axes.backends.AxesStandaloneBackend",
    *(["django.contrib.auth.backends.ModelBackend"] if CRONBOARD_LOCAL_LOGIN else []),
    # Always listed: it signs in only from the provider's callback, and the
    # sessions it made stay readable if OIDC_ISSUER is unset later.
    "jobs.oidc.OIDCBackend",
]

# LDAP / Active Directory sign-in (django-auth-ldap, jobs.ldapauth): on when
# LDAP_SERVER_URI is set; local accounts keep signing in beside it
# (docs/operations.md, "LDAP and Active Directory").
LDAP_SERVER_URI = env.str("LDAP_SERVER_URI", default="").strip()
if LDAP_SERVER_URI:
    try:
        from config.ldapsettings import auth_ldap_settings
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"LDAP_SERVER_URI is set but LDAP sign-in is not installed ({exc}): "
            "pip install -r requirements-ldap.txt (it builds python-ldap: apt-get install gcc libldap2-dev libsasl2-dev)"
        ) from None

    vars().update(
        auth_ldap_settings(
            server_uri=LDAP_SERVER_URI,
            bind_dn=env.str("LDAP_BIND_DN", default=""),
            bind_password=env.str("LDAP_BIND_PASSWORD", default=""),
            user_search_base=env.str("LDAP_USER_SEARCH_BASE", default=""),
            user_filter=env.str("LDAP_USER_FILTER", default="(uid=%(user)s)"),
            group_search_base=env.str("LDAP_GROUP_SEARCH_BASE", default=""),
            group_type=env.str("LDAP_GROUP_TYPE", default="groupOfNames").strip(),
            group_filter=env.str("LDAP_GROUP_FILTER", default="").strip(),
            start_tls=_bool("LDAP_START_TLS", False),
            ca_file=env.str("LDAP_CA_FILE", default="").strip(),
            timeout=_seconds("LDAP_TIMEOUT", 5, minimum=0.5),
        )
    )
    AUTHENTICATION_BACKENDS.append("jobs.ldapauth.DirectoryBackend")

if not (CRONBOARD_LOCAL_LOGIN or OIDC_ISSUER or LDAP_SERVER_URI):
    raise ImproperlyConfigured(
        "CRONBOARD_LOCAL_LOGIN=false needs another way to sign in: set OIDC_ISSUER or LDAP_SERVER_URI"
    )

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates", NINJA_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "jobs.web.context_processors.cronboard",
            ],
            # The console's tag library lives in jobs.web, not in an app's
            # own templatetags package, so it is named here for {% load console %}.
            "libraries": {"console": "jobs.web.templatetags.console"},
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"

_default_db = f"sqlite:///{BASE_DIR / 'var' / 'cronboard.sqlite3'}"
try:
    DATABASES = {"default": env.db_url("DATABASE_URL", default=_default_db)}
except (ValueError, KeyError) as exc:
    raise ImproperlyConfigured(f"DATABASE_URL: {exc}") from exc

if DATABASES["default"].get("ENGINE") not in ("django.db.backends.sqlite3", "django.db.backends.postgresql"):
    raise ImproperlyConfigured(
        "DATABASE_URL must be a sqlite:/// or postgres:// URL "
        f"(got an engine of {DATABASES['default'].get('ENGINE')!r})"
    )

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Nothing is created here: var/ is in the repository (var/.gitkeep) and
    # the Dockerfile makes it; another folder that is missing is reported by
    # the check in jobs/checks.py instead of SQLite's "unable to open".
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            # WAL lets the console read while the scheduler writes; IMMEDIATE
            # takes the write lock up front so two writers queue on the busy
            # timeout instead of failing a lock upgrade. The log file is cut
            # back to 64 MB when it restarts (a big retention run or bulk
            # load would otherwise leave it at its largest size for good).
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA journal_size_limit=67108864;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
# Connections are kept between requests (each gunicorn worker keeps its own),
# on SQLite too: opening one there (the file, the PRAGMAs above, Django's
# SQL functions) took a fifth of the API's server time under Schemathesis.
DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
# After signing in: the page that asked for it (?next=), else the dashboard,
# as opening / does (README "Sign in").
LOGIN_REDIRECT_URL = "jobs:dashboard"
LOGOUT_REDIRECT_URL = "login"

# --- Security -----------------------------------------------------------------
# Local development runs over plain http on localhost, so everything that
# needs TLS hangs off one switch, off by default. Production sets
# CRONBOARD_HTTPS=true (and CRONBOARD_BEHIND_PROXY=true when a reverse proxy
# terminates TLS); `manage.py check --deploy` is then clean.

CRONBOARD_HTTPS = _bool("CRONBOARD_HTTPS", False)
CRONBOARD_BEHIND_PROXY = _bool("CRONBOARD_BEHIND_PROXY", False)
# How many proxies append to X-Forwarded-For in front of us; the client
# address is the entry that many places from the right.
CRONBOARD_PROXY_COUNT = _int("CRONBOARD_PROXY_COUNT", 1 if CRONBOARD_BEHIND_PROXY else 0, minimum=0)
if CRONBOARD_BEHIND_PROXY:
    # Only safe when the proxy sets (and overwrites) this header.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

SESSION_COOKIE_SECURE = CRONBOARD_HTTPS
CSRF_COOKIE_SECURE = CRONBOARD_HTTPS
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
SECURE_SSL_REDIRECT = _bool("SECURE_SSL_REDIRECT", CRONBOARD_HTTPS)
# /healthz never reaches the redirect: config.health answers it first.
SECURE_REDIRECT_EXEMPT = env.list("SECURE_REDIRECT_EXEMPT", default=[])
SECURE_HSTS_SECONDS = _int("SECURE_HSTS_SECONDS", 31_536_000 if CRONBOARD_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = _bool("SECURE_HSTS_PRELOAD", True)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (django-csp): same-origin scripts and styles only,
# no inline code. htmx works under it because base.html turns off its
# injected indicator <style> and its settling of the style attribute (the
# htmx-config meta tag) and every handler lives in a static file.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    },
}

# Directory and identity-provider groups mapped to roles at each sign-in
# through them (jobs.rolemapping): `GROUP → ROLE:NAMESPACE` per line or
# separated by `;`, NAMESPACE * for everywhere. A rule that cannot be read
# stops the start with a system check naming it (jobs.checks).
CRONBOARD_GROUP_ROLES = env.str("CRONBOARD_GROUP_ROLES", default="")

# Login throttling (django-axes): after LOGIN_FAILURE_LIMIT failures from one
# address, or against one username from anywhere, further attempts are
# refused (HTTP 429) for LOGIN_COOLOFF_MINUTES. A success clears the count.
AXES_FAILURE_LIMIT = _int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "jobs.web.security.client_ip"
AXES_VERBOSE = False
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_ALLOWED_CORS_ORIGINS = CRONBOARD_BASE_URL

# Two-factor sign-in (jobs.twofactor): who must use an authenticator app with
# a password sign-in. off: each user chooses, on their profile; admins: users
# who may administer (superusers, the admin role); everyone: every local
# account. Single sign-on users rely on their provider's second factor.
CRONBOARD_REQUIRE_2FA = env.str("CRONBOARD_REQUIRE_2FA", default="off").strip().lower()
if CRONBOARD_REQUIRE_2FA not in ("off", "admins", "everyone"):
    raise ImproperlyConfigured(
        f"CRONBOARD_REQUIRE_2FA must be off, admins or everyone, got {CRONBOARD_REQUIRE_2FA!r}"
    )
# The name authenticator apps show beside the account.
OTP_TOTP_ISSUER = env.str("CRONBOARD_2FA_ISSUER", default="Cronboard")

# The console's languages: English (the default, the source text) and
# Simplified Chinese (locale/zh_Hans, compiled by `manage.py compilecatalogs`).
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static", NINJA_DIR / "static"]
# Until collectstatic creates STATIC_ROOT, whitenoise warns that it is
# missing at every start; the storage below serves files as they are then.
warnings.filterwarnings("ignore", message=re.escape(f"No directory at: {STATIC_ROOT}"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
if DEBUG or not (STATIC_ROOT / "staticfiles.json").exists():
    # No collectstatic yet (a fresh checkout, the tests): serve files as they are.
    STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"

try:
    vars().update(env.email_url("EMAIL_URL", default="smtp://localhost:25"))
except (ValueError, KeyError) as exc:
    raise ImproperlyConfigured(f"EMAIL_URL: {exc}") from exc
# A dead mail server must never hang a sender forever.
EMAIL_TIMEOUT = _int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="cronboard@localhost")
# Alert channels (Apprise): seconds to connect, and again to read the answer.
ALERT_CHANNEL_TIMEOUT = _int("ALERT_CHANNEL_TIMEOUT", 10, minimum=1)
# Apprise schemes sent to without the fence (jobs.channels: every other scheme
# is fenced on its host, a fixed service, or refused): syslog, rsyslog with
# no host (this machine), a service Cronboard does not list. Email never.
ALERT_CHANNEL_UNFENCED_SCHEMES = [
    scheme.strip().lower()
    for scheme in env.list("ALERT_CHANNEL_UNFENCED_SCHEMES", default=[])
    if scheme.strip()
]
for _scheme in ALERT_CHANNEL_UNFENCED_SCHEMES:
    if not re.fullmatch(r"[a-z0-9]{1,32}", _scheme):
        raise ImproperlyConfigured(
            f"ALERT_CHANNEL_UNFENCED_SCHEMES: {_scheme!r} is not an Apprise scheme (a word such as syslog, "
            "without ://)"
        )
    if _scheme in ("mailto", "mailtos"):
        raise ImproperlyConfigured(
            "ALERT_CHANNEL_UNFENCED_SCHEMES: email goes through EMAIL_URL and the alert emails, not mailto://"
        )
# Dead man's switch: an external URL (healthchecks …) the scheduler GETs once
# a minute through the HTTP jobs' fence, so silence there means Cronboard is down.
CRONBOARD_HEARTBEAT_URL = env("CRONBOARD_HEARTBEAT_URL", default="").strip()

# CRONBOARD_LOG_FORMAT: plain (for people) or json (one object per line, with
# the request, job and run a line is about: config/logs.py).
try:
    CRONBOARD_LOG_FORMAT = log_format(env.str("CRONBOARD_LOG_FORMAT", default="plain"))
except ValueError as exc:
    raise ImproperlyConfigured(f"CRONBOARD_LOG_FORMAT {exc}") from exc
LOGGING = {
    **base_config(CRONBOARD_LOG_FORMAT),
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Alert channels read why a send failed from Apprise's warnings (jobs.channels).
        "apprise": {"level": "WARNING"},
    },
}

# --- Cronboard ---------------------------------------------------------------

# Set explicitly, it names this scheduler node; runscheduler requires it on
# PostgreSQL, where several nodes share the database and must not share an id.
JOBS_WORKER_ID_EXPLICIT = env("JOBS_WORKER_ID", default="").strip()
JOBS_WORKER_ID = JOBS_WORKER_ID_EXPLICIT or socket.gethostname()
if len(JOBS_WORKER_ID) > 190 or any(c.isspace() for c in JOBS_WORKER_ID):
    raise ImproperlyConfigured("JOBS_WORKER_ID must be at most 190 characters, without spaces")
JOBS_SCHEDULER_ENABLED = _bool("JOBS_SCHEDULER_ENABLED", True)
JOBS_MAX_CONCURRENT_RUNS = _int("JOBS_MAX_CONCURRENT_RUNS", 8, minimum=1)
# Where handlers run (jobs.engine.execution): "process", a child process per
# run that the scheduler can kill; "thread", a thread of the scheduler (its
# memory shared, nothing killed: for handlers that must share its memory).
JOBS_EXECUTOR = env.str("JOBS_EXECUTOR", default="process").strip().lower()
if JOBS_EXECUTOR not in ("process", "thread"):
    raise ImproperlyConfigured(f"JOBS_EXECUTOR must be process or thread, got {JOBS_EXECUTOR!r}")
# A run's address space in MB (RLIMIT_AS of its child process); 0: no cap.
JOBS_RUN_MEMORY_MB = _int("JOBS_RUN_MEMORY_MB", 0, minimum=0)
if JOBS_RUN_MEMORY_MB and JOBS_RUN_MEMORY_MB < 256:
    raise ImproperlyConfigured(
        f"JOBS_RUN_MEMORY_MB must be 0 (no cap) or at least 256 (a run process with Django loaded "
        f"reserves about 130 MB of address space before its handler starts, and each thread a handler "
        f"starts reserves more), got {JOBS_RUN_MEMORY_MB}"
    )
if JOBS_RUN_MEMORY_MB and JOBS_EXECUTOR != "process":
    raise ImproperlyConfigured(
        "JOBS_RUN_MEMORY_MB caps the memory of a run's child process: it needs JOBS_EXECUTOR=process"
    )
JOBS_SQL_ENABLED = _bool("JOBS_SQL_ENABLED", False)
# Credentials in a job's properties (jobs.secrets.is_credential_name) must be
# secret references, never typed in clear.
JOBS_REQUIRE_SECRET_REFERENCES = _bool("JOBS_REQUIRE_SECRET_REFERENCES", False)
# The namespaces whose jobs may use each environment secret ({{ env:NAME }},
# jobs.secrets.env_allows): "NAME:NAMESPACE" pairs, "NAME:*" for every one.
# Jobs outside any namespace and one-off tasks may use every one.
CRONBOARD_ENV_SECRET_NAMESPACES: dict[str, frozenset[str]] = {}
for _pair in env.list("CRONBOARD_ENV_SECRET_NAMESPACES", default=[]):
    _match = re.fullmatch(r"\s*([A-Za-z0-9_]{1,100}):(\*|[a-z0-9][a-z0-9_-]{0,99})\s*", _pair)
    if _match is None:
        raise ImproperlyConfigured(
            f"CRONBOARD_ENV_SECRET_NAMESPACES: {_pair.strip()!r} is not NAME:NAMESPACE "
            "(NAME as in {{ env:NAME }}, NAMESPACE a namespace or *)"
        )
    CRONBOARD_ENV_SECRET_NAMESPACES[_match[1]] = CRONBOARD_ENV_SECRET_NAMESPACES.get(
        _match[1], frozenset()
    ) | {_match[2]}
# The role a user created from now on holds everywhere (by the admin,
# createsuperuser, an SSO backend's first sign-in); empty: none until
# granted. Never admin: every new SSO user would administer the server.
# The names are jobs.models.Role's, which settings cannot import.
CRONBOARD_DEFAULT_ROLE = env.str("CRONBOARD_DEFAULT_ROLE", default="").strip().lower()
if CRONBOARD_DEFAULT_ROLE not in ("", "viewer", "operator", "editor"):
    raise ImproperlyConfigured(
        f"CRONBOARD_DEFAULT_ROLE must be viewer, operator, editor or empty, got {CRONBOARD_DEFAULT_ROLE!r}"
    )
# Command jobs (kind command) run programs on this host as the scheduler's OS
# user: off unless turned on; optionally limited to these programs.
JOBS_COMMAND_ENABLED = _bool("JOBS_COMMAND_ENABLED", False)
# Entries: a program, or a program and its argument patterns (jobs.commandguard).
try:
    JOBS_COMMAND_ALLOWED = commandguard.split_entries(env.str("JOBS_COMMAND_ALLOWED", default=""))
    for _entry in JOBS_COMMAND_ALLOWED:
        commandguard.parse_entry(_entry)
except ValueError as exc:
    raise ImproperlyConfigured(f"JOBS_COMMAND_ALLOWED: {exc}") from exc
# Names (shell patterns) a job's env may set; never those of commandguard.NEVER_ENV.
JOBS_COMMAND_ENV_ALLOWED = [p.strip() for p in env.list("JOBS_COMMAND_ENV_ALLOWED", default=[]) if p.strip()]
try:
    commandguard.check_env_patterns(JOBS_COMMAND_ENV_ALLOWED)
except ValueError as exc:
    raise ImproperlyConfigured(f"JOBS_COMMAND_ENV_ALLOWED: {exc}") from exc
JOBS_COMMAND_KILL_GRACE_SECONDS = _int("JOBS_COMMAND_KILL_GRACE_SECONDS", 5, minimum=0)
# Each command run in a cgroup of its own (jobs.handlers.cgroups): "auto" where
# the host allows it, "required" refuses to run without one, "off" never.
JOBS_COMMAND_CGROUP = env.str("JOBS_COMMAND_CGROUP", default="auto").strip().lower()
if JOBS_COMMAND_CGROUP not in ("auto", "required", "off"):
    raise ImproperlyConfigured(
        f"JOBS_COMMAND_CGROUP must be auto, required or off, got {JOBS_COMMAND_CGROUP!r}"
    )
JOBS_MAX_MESSAGE_CHARS = _int("JOBS_MAX_MESSAGE_CHARS", 262144)
# Workflows (jobs.workflows): how many jobs deep a chain of jobs that run
# after one another may go after its first job, and how many jobs may run
# after one job. Refused at save; the engine refuses a deeper run as well.
# A run's depth is a small integer column (Run.chain_depth).
JOBS_MAX_CHAIN_DEPTH = _int("JOBS_MAX_CHAIN_DEPTH", 32, minimum=1, maximum=1000)
JOBS_MAX_DOWNSTREAM = _int("JOBS_MAX_DOWNSTREAM", 100, minimum=1)
JOBS_MISFIRE_THRESHOLD = _int("JOBS_MISFIRE_THRESHOLD", 60, minimum=0)
JOBS_SHUTDOWN_GRACE = _int("JOBS_SHUTDOWN_GRACE", 30, minimum=0)
# How long before its time one scheduler (SQLite, not a cluster) plans a fire
# and holds a slot for it, so one pass plans the fires of this many
# milliseconds and each is handed to a worker at its time (jobs.engine.planning,
# Starter.hold); 0: each fire is planned when it is due.
JOBS_PLAN_AHEAD_MS = _int("JOBS_PLAN_AHEAD_MS", 50, minimum=0, maximum=1000)
# The leader lease (PostgreSQL): held for TTL seconds, renewed every RENEW
# seconds, so a standby takes over within TTL + RENEW of the leader's death.
JOBS_LEASE_TTL_SECONDS = _int("JOBS_LEASE_TTL_SECONDS", 30, minimum=2)
JOBS_LEASE_RENEW_SECONDS = _int("JOBS_LEASE_RENEW_SECONDS", 10, minimum=1)
if JOBS_LEASE_RENEW_SECONDS >= JOBS_LEASE_TTL_SECONDS:
    raise ImproperlyConfigured(
        f"JOBS_LEASE_RENEW_SECONDS ({JOBS_LEASE_RENEW_SECONDS}) must be less than "
        f"JOBS_LEASE_TTL_SECONDS ({JOBS_LEASE_TTL_SECONDS})"
    )
# The console's import (a web request, validated job by job while the
# worker waits): files beyond these go through `manage.py jobs import`.
JOBS_IMPORT_MAX_JOBS = _int("JOBS_IMPORT_MAX_JOBS", 500, minimum=1)
JOBS_IMPORT_MAX_BYTES = _int("JOBS_IMPORT_MAX_BYTES", 2 * 1024 * 1024, minimum=1)

# How far a scheduler node's clock may be from the database's (PostgreSQL)
# before it warns; at ten times this it plans and claims nothing until its
# clock comes back (jobs.engine.clock).
JOBS_MAX_CLOCK_SKEW = _seconds("JOBS_MAX_CLOCK_SKEW", 2.0, minimum=0.1)
JOBS_HANDLER_MODULES = env.list("JOBS_HANDLER_MODULES", default=[])
DEMO_MODE = _bool("DEMO_MODE", False)

# Prometheus metrics (docs/operations.md, "Metrics"). Each scheduler serves
# its own on JOBS_METRICS_BIND (host:port; empty: none); the web process at
# /metrics. Both answer only a bearer token equal to JOBS_METRICS_TOKEN or a
# client in JOBS_METRICS_ALLOW (networks); with neither set, nobody.
JOBS_METRICS_BIND = env.str("JOBS_METRICS_BIND", default="").strip()
_bind = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[^:\s\[\]]+):(\d{1,5})", JOBS_METRICS_BIND)
if JOBS_METRICS_BIND and not (_bind and 0 < int(_bind[2]) < 65536):
    raise ImproperlyConfigured(
        f"JOBS_METRICS_BIND must be host:port such as 127.0.0.1:9464, got {JOBS_METRICS_BIND!r}"
    )
JOBS_METRICS_TOKEN = env.str("JOBS_METRICS_TOKEN", default="").strip()
if JOBS_METRICS_TOKEN and len(JOBS_METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("JOBS_METRICS_TOKEN must be at least 16 characters")
JOBS_METRICS_ALLOW = [c.strip() for c in env.list("JOBS_METRICS_ALLOW", default=[]) if c.strip()]
for _cidr in JOBS_METRICS_ALLOW:
    try:
        ipaddress.ip_network(_cidr, strict=False)
    except ValueError as exc:
        raise ImproperlyConfigured(f"JOBS_METRICS_ALLOW: {_cidr!r} is not a network: {exc}") from exc
# A job label on the scheduler's counters, and per-job duration and lateness
# summaries: about 13 series per job, a cardinality the operator chooses.
JOBS_METRICS_PER_JOB = _bool("JOBS_METRICS_PER_JOB", False)
# Each engine step's CPU time (cronboard_scheduler_step_cpu_seconds_total):
# a reading of the thread's CPU time is a system call, one or two a step,
# fifteen steps a pass. For finding where a scheduler's CPU goes.
JOBS_METRICS_STEP_CPU = _bool("JOBS_METRICS_STEP_CPU", False)

JOBS_HTTP_BLOCKED_CIDRS = env.list("JOBS_HTTP_BLOCKED_CIDRS", default=list(DEFAULT_BLOCKED))
for _cidr in JOBS_HTTP_BLOCKED_CIDRS:
    try:
        ipaddress.ip_network(_cidr, strict=False)
    except ValueError as exc:
        raise ImproperlyConfigured(f"JOBS_HTTP_BLOCKED_CIDRS: {_cidr!r} is not a network: {exc}") from exc
JOBS_HTTP_ALLOWED_HOSTS = env.list("JOBS_HTTP_ALLOWED_HOSTS", default=[])

try:
    JOBS_SQL_DATABASE = (
        env.db_url("JOBS_SQL_DATABASE_URL") if env("JOBS_SQL_DATABASE_URL", default="") else None
    )
except (ValueError, KeyError) as exc:
    raise ImproperlyConfigured(f"JOBS_SQL_DATABASE_URL: {exc}") from exc
# What a read-only SQL job on SQLite may not read (jobs.handlers.sql refuses
# it through sqlite3's authorizer, views and subqueries included): glob
# patterns of tables, or of table.column, matched without regard to case.
# The default covers Cronboard's own database (its sessions, users and
# password hashes, sign-in records, API tokens, settings, secrets and alert channels,
# which hold channel secrets) and SQLite's raw page table. Setting the
# variable replaces the list; set it empty to deny nothing.
JOBS_SQL_SQLITE_DENY_TABLES = [
    p.strip().lower()
    for p in env.list(
        "JOBS_SQL_SQLITE_DENY_TABLES",
        default=[
            "django_session", "auth_*", "axes_*", "jobs_apitoken", "jobs_setting", "jobs_secret",
            "jobs_job.alert_channels", "jobs_alertchannel.url", "jobs_alertdelivery.channel", "sqlite_dbpage", "dbstat",
        ],
    )
    if p.strip()
]  # fmt: skip
for _pattern in JOBS_SQL_SQLITE_DENY_TABLES:
    if _pattern.count(".") > 1 or _pattern.startswith(".") or _pattern.endswith("."):
        raise ImproperlyConfigured(
            f"JOBS_SQL_SQLITE_DENY_TABLES: {_pattern!r} is not a table or table.column pattern"
        )
