"""Shared fixtures. Area-specific fixtures live in tests/fixtures/<area>.py and
are listed in pytest_plugins below."""

import pytest

pytest_plugins = [
    "tests.fixtures.core",
    "tests.fixtures.postgres",
    "tests.fixtures.browser",
    "tests.fixtures.smtp",
    "tests.fixtures.api",
]


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    # Tests never depend on a collectstatic manifest left by a local run.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
