"""A pytest plugin loaded only under mutation testing (pyproject.toml,
[tool.mutmut] pytest_add_cli_args: ``-p tests.mutmut_plugin``).

mutmut runs the suite once to learn which tests call which function, then
forks a worker per mutant from that warm process. The cron engine caches
parsed expressions and zones (lru_cache), so without this a test whose
expression an earlier test had parsed would neither be recorded as covering
the parser nor exercise a mutated parser: every test starts cold instead.

Which tests judge which module: mutmut has one test selection for every
mutated module, so the engine's database tests would also run for every
cron mutant (the scheduler computes next fires through cron), each in a
fresh test database: hours for cron alone. This plugin therefore keeps
only the test files of the modules being mutated (TESTS_BY_MODULE, the one
list of them; pyproject.toml selects no files): those named in
MUTATION_MODULES (`scripts/mutation.sh --module M` sets it), or all four.

No test asserts a speed (bench commands measure it), so mutmut's
trampolines, which slow every call, cannot fail its first, unmutated run."""

import os
from pathlib import Path

import pytest

TESTS_BY_MODULE = {
    "jobs/cron.py": ["tests/test_cron.py", "tests/test_cron_details.py", "tests/test_cron_edges.py"],
    "jobs/fence.py": ["tests/test_fence.py", "tests/test_fence_edges.py"],
    "jobs/engine/planning.py": [
        "tests/test_engine_parts.py",  # each part alone
        "tests/test_scheduler.py",  # planning, misfire, overlap, the batched claim
        "tests/test_cluster.py",  # the epoch fence
        "tests/test_newrows.py",  # runs built without Model.__init__
        "tests/test_one_statement.py",  # the claim and the runs' insert as one statement
    ],
    "jobs/engine/outcomes.py": [
        "tests/test_engine_parts.py",
        "tests/test_scheduler.py",  # outcomes, retries, crashes, batched outcomes
        "tests/test_recovery.py",
        "tests/test_poison_outcomes.py",
        "tests/test_workflows.py",  # downstream runs
        "tests/test_alerts.py",  # alert transitions
        "tests/test_alert_kinds.py",
        "tests/test_one_statement.py",  # successes' run and job updates as one statement
    ],
}


def selected_files(modules: str) -> set[str]:
    """The test files of the comma-separated `modules` (paths as in TESTS_BY_MODULE)."""
    files = set()
    for module in filter(None, (m.strip() for m in modules.split(","))):
        if module not in TESTS_BY_MODULE:
            raise pytest.UsageError(
                f"MUTATION_MODULES: {module!r} is not one of {', '.join(sorted(TESTS_BY_MODULE))}"
            )
        files.update(TESTS_BY_MODULE[module])
    return files


def pytest_collection_modifyitems(config, items):
    keep = selected_files(os.environ.get("MUTATION_MODULES", "") or ",".join(TESTS_BY_MODULE))
    root = Path(config.rootpath)
    kept, dropped = [], []
    for item in items:
        (kept if Path(item.path).relative_to(root).as_posix() in keep else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(autouse=True)
def _cold_cron_caches():
    from jobs import cron

    for cached in (cron._normalize_text, cron._compile, cron._load_zone):
        cached.cache_clear()
