"""Shared fixtures. Area-specific fixtures live in tests/fixtures/<area>.py and
are listed in pytest_plugins below."""

import importlib
import os

import pytest

pytest_plugins = [
    "tests.fixtures.core",
    "tests.fixtures.processes",  # before the fixtures that import it
    "tests.fixtures.postgres",
    "tests.fixtures.ldap",
    "tests.fixtures.cluster",
    "tests.fixtures.browser",
    "tests.fixtures.console_pages",
    "tests.fixtures.smtp",
    "tests.fixtures.api",
    "tests.fixtures.databases",
    "tests.fixtures.sql_databases",
    "tests.fixtures.webhook",
    "tests.fixtures.oidc",
    "tests.fixtures.prometheus",
]


# The files that take longest, longest first: beside the rest of the suite
# on a 2-core machine the first four take three to five minutes each, the
# others up to two. scripts/test.sh hands whole files to the workers in
# collection order (`--dist loadfile --no-loadscope-reorder`), so these start
# first instead of one of them starting last and running alone while the
# other workers idle. Only the order of the files depends on this list: a
# file missing from it (or renamed) merely starts later.
LONGEST_FIRST = (
    "test_console_walk_browser.py",
    "test_console_pages_browser.py",
    "test_cluster_processes.py",
    "test_cluster_clock.py",
    "test_api_schemathesis.py",
    "test_api_schemathesis_postgres.py",
    "test_api_schemathesis_coverage.py",
    "test_scheduler_process.py",
    "test_fire_guarantee_process.py",
    "test_alert_kinds.py",
    "test_executor_process.py",
    "test_alert_channels_restart.py",
    "test_console_browser.py",
    "test_health_scheduler.py",
    "test_workflows_cluster.py",
    "test_overlap_cluster.py",
)


def pytest_collection_modifyitems(config, items):
    """Order the files: LONGEST_FIRST, then files with slow or browser tests
    (they wait on processes, servers and clocks), then the rest; each file's
    tests keep their order."""

    by_file: dict = {}
    for item in items:
        by_file.setdefault(item.path, []).append(item)

    def weight(path):
        if path.name in LONGEST_FIRST:
            return (0, LONGEST_FIRST.index(path.name))
        waits = any(item.get_closest_marker(m) for item in by_file[path] for m in ("slow", "browser"))
        return (1 if waits else 2, 0)

    order = sorted(by_file, key=lambda path: (weight(path), str(path)))
    items[:] = [item for path in order for item in by_file[path]]


def pytest_configure(config):
    # A PBKDF2 hash costs about a second on a 2-core machine and hundreds of
    # fixtures create users: tests hash with MD5. The real hashers stay listed
    # so a password hashed by a server process under test still verifies.
    from django.conf import settings

    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.MD5PasswordHasher",
        *settings.PASSWORD_HASHERS,
    ]
    # Without SECRET_KEY or var/secret_key (a fresh clone) the settings draw a
    # key for this process; the test session is one process, and nothing it
    # encrypts outlives it, so that key serves as a real one here.
    if settings.SECRET_KEY_SOURCE == "process":
        settings.SECRET_KEY_SOURCE = "test session"
    # The .mo files are build output (scripts/test.sh compiles them too); a
    # bare `pytest` after editing a .po must not test a stale catalog.
    from jobs.management.commands.compilecatalogs import compile_catalogs

    compile_catalogs()


@pytest.fixture(autouse=True)
def _english_after_each_test():
    # LocaleMiddleware leaves the language of a request active in the thread;
    # a test that asked for zh-CN must not hand Chinese to the next one.
    yield
    from django.utils import translation

    translation.deactivate()


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    # Tests never depend on a collectstatic manifest left by a local run.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(autouse=True)
def _migration_rows(request, _django_db_marker):
    """Every database test starts with the rows the data migration writes
    (the built-in Retention job, the default settings), as a migrated
    database has them. A transactional test (a browser's live server, …)
    ends by emptying the tables, and with the suite spread over workers
    (pytest-xdist) any file's tests may come after such a test."""
    if (
        request.node.get_closest_marker("django_db") is None
        and "_django_db_helper" not in request.fixturenames
    ):
        return
    request.getfixturevalue("_django_db_helper")
    from django.apps import apps

    importlib.import_module("jobs.migrations.0002_builtin_rows").seed(apps, None)


@pytest.fixture(autouse=True)
def _fresh_setting_cache():
    # jobs.config caches a few settings per process; every test starts from its own database.
    from jobs import config

    config._CACHE.clear()
    yield
    config._CACHE.clear()


@pytest.fixture(autouse=True)
def _thread_executor(settings):
    """In-process tests run handlers in threads (JOBS_EXECUTOR=thread): their
    handlers are closures over test state (gates, call lists) and their
    database is in memory, neither of which a child process can share. The
    process executor is covered by tests/test_executor*.py with real child
    processes, and every test that starts `runscheduler` as a process runs
    it with the default executor (process) unless it says otherwise.
    CRONBOARD_TEST_EXECUTOR=process runs the in-process tests with child
    processes anyway (docs/development.md says which fail then, and why)."""
    settings.JOBS_EXECUTOR = os.environ.get("CRONBOARD_TEST_EXECUTOR", "thread")
