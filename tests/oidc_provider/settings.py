"""Settings of the test provider. Everything comes from the environment that
tests/fixtures/oidc.py gives the process: OIDC_PROVIDER_STATE (the JSON state
file), OIDC_PROVIDER_DIR (its database and keys) and OIDC_PROVIDER_ISSUER."""

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKDIR = Path(os.environ["OIDC_PROVIDER_DIR"])
STATE_FILE = Path(os.environ["OIDC_PROVIDER_STATE"])
ISSUER = os.environ["OIDC_PROVIDER_ISSUER"]

SECRET_KEY = "test-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
ROOT_URLCONF = "tests.oidc_provider.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
]
MIDDLEWARE = [
    "tests.oidc_provider.misbehave.StateMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [HERE / "templates"],
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": WORKDIR / "provider.sqlite3"}}
# Cronboard and the provider both answer on 127.0.0.1: cookies ignore the
# port, so the provider's session cookie needs a name of its own.
SESSION_COOKIE_NAME = "provider_session"
CSRF_COOKIE_NAME = "provider_csrftoken"
LOGIN_URL = "/accounts/login/"
AUTHENTICATION_BACKENDS = ["tests.oidc_provider.misbehave.StateBackend"]

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": (WORKDIR / "signing-key.pem").read_text(),
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
    "PKCE_REQUIRED": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "OAUTH2_VALIDATOR_CLASS": "tests.oidc_provider.misbehave.Validator",
    "SCOPES": {"openid": "OpenID Connect", "profile": "Profile", "email": "Email", "groups": "Groups"},
}
