"""The shape of jobs/ as its imports draw it (docs/architecture.md, "Layers").
The layers and the forbidden directions are import-linter's contracts in
pyproject.toml, which the test command runs beside ruff; this file checks
what import-linter has no contract for: no two modules of jobs/ import each
other, directly or round a loop, and no module grows past the size a reader
takes in (cron.py and the migrations excepted)."""

from pathlib import Path

import grimp
import pytest

JOBS = Path(__file__).resolve().parent.parent / "jobs"
MAX_LINES = 600
LONGER_ALLOWED = {"jobs/cron.py"}  # the cron engine: one grammar, one module (docs/cron.md)


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module in `graph`
    (module → the modules it imports), each sorted, by Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        # Iterative: a deep chain of imports must not hit the recursion limit.
        work = [(node, iter(sorted(graph.get(node, ()))))]
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        while work:
            current, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[current] = min(low[current], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[current])
                if low[current] == index[current]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == current:
                            break
                    if len(group) > 1:
                        circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


def test_import_circles_are_found_round_a_loop_and_not_along_a_chain():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert import_circles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}) == [["a", "b"], ["c", "d"]]


@pytest.fixture(scope="module")
def imports() -> dict[str, set[str]]:
    """Each module of jobs/ (migrations aside) → the modules of jobs/ it
    imports, at module level or inside a function alike (a lazy import is
    still a tie); imports only for type checkers are left out."""
    graph = grimp.build_graph("jobs", exclude_type_checking_imports=True)
    modules = {m for m in graph.modules if not m.startswith("jobs.migrations")}
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def test_no_two_modules_of_jobs_import_each_other(imports):
    assert import_circles(imports) == []


def test_no_module_of_jobs_is_longer_than_a_reader_takes_in():
    too_long = {}
    for path in sorted(JOBS.rglob("*.py")):
        name = path.relative_to(JOBS.parent).as_posix()
        if "/migrations/" in name or name in LONGER_ALLOWED:
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            too_long[name] = lines
    assert too_long == {}
