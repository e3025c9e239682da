"""Where tests live: every test under tests/, trees that never import each other.

A test tree is a folder of tests/ (tests/api, tests/query, ...). Its modules
import the application and tests.support, never another tree (nor a module of
their own tree: helpers belong in tests/support). tests/support imports no tree.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SUPPORT = "support"


# Not the project's own code: environments, data, build and run outputs.
SKIPPED_DIRS = {"var", "media", "test-artifacts", "node_modules", "__pycache__"}


def project_python_files() -> list[Path]:
    """Every .py file of the project, outside hidden folders (.venv, .git) and run outputs."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS]
        found += [Path(folder) / name for name in files if name.endswith(".py")]
    return found


def imported_modules(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of each import in ``source``, a module of ``package``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            # ``from tests import ui`` names the tree among the imported names.
            if name == "tests":
                found += [(node.lineno, f"tests.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, name))
    return found


def forbidden_imports(relative: Path, source: str) -> list[str]:
    """The imports of ``relative`` (a path from the repository root) that break the rule."""
    package = ".".join(relative.with_suffix("").parts[:-1])
    problems = []
    for line, module in imported_modules(source, package):
        parts = module.split(".")
        if parts[0] == "tests" and parts[1:2] != [SUPPORT]:
            problems.append(f"{relative}:{line} imports {module}")
    return problems


def test_every_test_file_lives_under_tests():
    outside = [
        str(path.relative_to(ROOT))
        for path in project_python_files()
        if (path.name.startswith("test_") or path.name == "conftest.py")
        and TESTS not in path.parents
        and path != ROOT / "conftest.py"
    ]
    assert outside == [], "tests belong under tests/ (see README, Tests)"


def test_test_trees_hold_only_tests():
    """Helpers and fixtures shared by name go to tests/support, not beside the tests."""
    strays = [
        str(path.relative_to(ROOT))
        for path in TESTS.rglob("*.py")
        if SUPPORT not in path.relative_to(TESTS).parts
        and not (path.name.startswith("test_") or path.name in {"conftest.py", "__init__.py"})
    ]
    assert strays == []


def test_test_trees_never_import_each_other():
    """Test modules import the application and tests.support; tests/support imports no tree."""
    problems = []
    for path in [*sorted(TESTS.rglob("*.py")), ROOT / "conftest.py"]:
        problems += forbidden_imports(path.relative_to(ROOT), path.read_text())
    assert problems == [], "move what they share into tests/support (see README, Tests)"


@pytest.mark.parametrize(
    ("source", "allowed"),
    [
        ("import tests.api.conftest", False),
        ("from tests.api.conftest import INSTALL", False),
        ("from tests import api", False),
        ("from tests.ui.conftest import upload", False),
        ("from .conftest import upload", False),
        ("from . import conftest", False),
        ("from tests.support.documents import INSTALL", True),
        ("from tests import support", True),
        ("from ..support import documents", True),
        ("from collections_app.services import collection_create", True),
    ],
)
def test_the_import_check_sees_every_form_of_import(source, allowed):
    relative = Path("tests/ui/test_sample.py")
    assert (forbidden_imports(relative, source) == []) is allowed
