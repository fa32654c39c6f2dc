"""The tests mirror the packages: unit tests in ``tests/<package>/test_<module>[_<aspect>].py`` next to
the module they test, user journeys in ``tests/e2e/``, helpers in ``tests/support/``; every module of
``trainer_core/`` is imported by a test or listed with its reason in ``tests/support/indirect_modules.py``;
no test names an issue number (the tests say what they check, not when it was asked); and the
pytest-xdist groups ``tests/conftest.py`` gives reach the scheduler."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.indirect_modules import INDIRECT

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
# folders of tests that mirror no package: journeys, helpers, repository-wide checks
NOT_MIRRORS = {"e2e", "support", "repo", "notebooks", "scripts"}


def _modules() -> set[str]:
    """Every module of trainer_core/ with code (packages whose __init__ holds only a docstring left out)."""
    found = set()
    for path in (REPO / "trainer_core").rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            body = ast.parse(path.read_text()).body
            if all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body):
                continue
            parts = parts[:-1]
        found.add(".".join(parts))
    return found


def _imported_by_tests() -> set[str]:
    names = set()
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
    # importing a.b.c runs the packages a and a.b
    return names | {name.rsplit(".", depth)[0] for name in names for depth in range(1, name.count(".") + 1)}


def test_every_module_is_imported_by_a_test_or_listed_with_its_reason():
    modules, imported = _modules(), _imported_by_tests()
    assert sorted(modules - imported - set(INDIRECT)) == []  # a new module: a test, or a line in INDIRECT
    assert sorted(set(INDIRECT) & imported) == []  # now imported: its line goes
    assert sorted(set(INDIRECT) - modules) == []  # gone or renamed


def test_unit_tests_sit_beside_the_module_they_test():
    misplaced = []
    for path in sorted(TESTS.rglob("test_*.py")):
        relative = path.relative_to(TESTS)
        if relative.parts[0] in NOT_MIRRORS or len(relative.parts) == 1 and (REPO / f"{path.stem[5:]}.py").is_file():
            continue
        package = REPO.joinpath(*relative.parts[:-1])
        stem = path.stem.removeprefix("test_")
        modules = {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir() if p.is_dir()}
        if not package.is_dir() or not any(stem == m or stem.startswith(f"{m}_") for m in modules):
            misplaced.append(str(relative))
    assert misplaced == []


def test_no_test_names_an_issue_number():
    pattern = re.compile(r"\bissues? ?#?\d", re.IGNORECASE)
    named = [
        f"{path.relative_to(TESTS)}:{number}"
        for path in TESTS.rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert named == []


@pytest.fixture(scope="module")
def module_scoped() -> str:
    """A module-scoped fixture: the tests that use one share their file's pytest-xdist group."""
    return "built once for the file"


def test_a_test_sharing_a_module_fixture_runs_in_its_files_xdist_group(module_scoped, request):
    """Under ``--dist loadgroup`` (the suite's default) the group that ``tests/conftest.py`` gives a
    test using a module-scoped fixture, its file, is in its node id: what pytest-xdist schedules by.
    A mark added after pytest-xdist read the marks is ignored, and each test process builds the
    file's app (and the trained run) again."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("checked in a pytest-xdist process under --dist loadgroup (the suite's default: -n auto)")
    assert request.node.nodeid.endswith("@" + request.node.nodeid.split("::")[0]), request.node.nodeid
