"""The mutation-testing set-up agrees with itself: every module mutmut
mutates has its test files in tests/mutmut_plugin.py, and they exist."""

import tomllib
from pathlib import Path

import pytest

from tests import mutmut_plugin

ROOT = Path(__file__).resolve().parent.parent


def test_every_mutated_module_names_test_files_that_exist():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    assert sorted(config["only_mutate"]) == sorted(mutmut_plugin.TESTS_BY_MODULE)
    for module, files in mutmut_plugin.TESTS_BY_MODULE.items():
        assert (ROOT / module).is_file(), module
        assert files and all((ROOT / f).is_file() for f in files), (module, files)


def test_modules_pick_their_own_test_files_and_an_unknown_module_is_refused():
    assert mutmut_plugin.selected_files("jobs/fence.py") == {
        "tests/test_fence.py",
        "tests/test_fence_edges.py",
    }
    assert "tests/test_scheduler.py" not in mutmut_plugin.selected_files("jobs/cron.py, jobs/fence.py")
    with pytest.raises(pytest.UsageError, match="jobs/nope.py"):
        mutmut_plugin.selected_files("jobs/nope.py")
