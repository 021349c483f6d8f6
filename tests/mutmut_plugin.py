"""A pytest plugin loaded only under mutation testing (pyproject.toml,
[tool.mutmut] pytest_add_cli_args: ``-p tests.mutmut_plugin``).

mutmut runs the suite once to learn which tests call which function, then
forks a worker per mutant from that warm process. The cron engine caches
parsed expressions and zones (lru_cache), so without this a test whose
expression an earlier test had parsed would neither be recorded as covering
the parser nor exercise a mutated parser: every test starts cold instead.

It also sets CRONBOARD_MUTATION_TESTING, which turns off the speed bounds
of tests/test_cron.py (assert_quick): mutmut's trampolines slow every call,
and a speed bound missed in its first, unmutated run stops the whole run."""

import os

import pytest

os.environ["CRONBOARD_MUTATION_TESTING"] = "1"


@pytest.fixture(autouse=True)
def _cold_cron_caches():
    from jobs import cron

    for cached in (cron._normalize_text, cron._compile, cron._load_zone):
        cached.cache_clear()
