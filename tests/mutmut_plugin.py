"""A pytest plugin loaded only under mutation testing (pyproject.toml,
[tool.mutmut] pytest_add_cli_args: ``-p tests.mutmut_plugin``).

mutmut runs the suite once to learn which tests call which function, then
forks a worker per mutant from that warm process. The cron engine caches
parsed expressions and zones (lru_cache), so without this a test whose
expression an earlier test had parsed would neither be recorded as covering
the parser nor exercise a mutated parser: every test starts cold instead.

No test asserts a speed (bench commands measure it), so mutmut's
trampolines, which slow every call, cannot fail its first, unmutated run."""

import pytest


@pytest.fixture(autouse=True)
def _cold_cron_caches():
    from jobs import cron

    for cached in (cron._normalize_text, cron._compile, cron._load_zone):
        cached.cache_clear()
