"""The test suite's own imports: shared helpers live in tests/fixtures/ (and
tests/factories.py), and no file of tests/ imports a test module, whether by
an import statement, a pytest_plugins entry or importlib. A test module that
another one imports runs its module code twice under two names and ties the
two files together; what both need belongs in a fixture module."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def is_test_module(name: str) -> bool:
    """tests.test_x, tests.test_x.y, or test_x as a relative name."""
    parts = name.split(".")
    if parts[0] == "tests":
        parts = parts[1:]
    return bool(parts) and parts[0].startswith("test_")


def imported_test_modules(source: str) -> list[str]:
    """The test modules `source` imports, by name, sorted."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level and not module:  # from . import test_x
                found += [alias.name for alias in node.names if is_test_module(alias.name)]
            elif module == "tests":  # from tests import test_x
                found += [f"tests.{alias.name}" for alias in node.names if is_test_module(alias.name)]
            elif is_test_module(module):
                found.append(module)
        elif isinstance(node, ast.Call) and _calls(node, "import_module", "__import__"):
            found += [arg.value for arg in node.args[:1] if _text(arg) and is_test_module(arg.value)]
        elif isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytest_plugins" for target in node.targets
        ):
            found += [
                item.value for item in ast.walk(node.value) if _text(item) and is_test_module(item.value)
            ]
    return sorted(found)


def _calls(node: ast.Call, *names: str) -> bool:
    func = node.func
    return (isinstance(func, ast.Name) and func.id in names) or (
        isinstance(func, ast.Attribute) and func.attr in names
    )


def _text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def test_no_file_of_the_suite_imports_a_test_module():
    offenders = {
        str(path.relative_to(TESTS.parent)): names
        for path in sorted(TESTS.rglob("*.py"))
        if "artifacts" not in path.parts and (names := imported_test_modules(path.read_text()))
    }
    assert offenders == {}, "import these from tests/fixtures/ instead: " + repr(offenders)


def test_the_check_sees_every_way_of_importing_a_test_module():
    source = """
import tests.test_a
from tests.test_b import helper
from tests import test_c, fixtures
from .test_d import thing
from . import test_e
importlib.import_module("tests.test_f")
__import__("tests.test_g")
pytest_plugins = ["tests.fixtures.core", "tests.test_h"]

def later():
    from tests.test_i import inner
"""
    assert imported_test_modules(source) == [
        "test_d",
        "test_e",
        "tests.test_a",
        "tests.test_b",
        "tests.test_c",
        "tests.test_f",
        "tests.test_g",
        "tests.test_h",
        "tests.test_i",
    ]


def test_fixture_modules_and_plain_imports_pass_the_check():
    source = """
import importlib
import tests.hostile_handlers
from tests.fixtures.core import T0
from tests.factories import make_job
from tests import fixtures
importlib.import_module("jobs.migrations.0018_workflow_chains")
pytest_plugins = ["tests.fixtures.core"]
"""
    assert imported_test_modules(source) == []
