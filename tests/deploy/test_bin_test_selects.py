"""bin/test's ``selects``: which trees a pytest command line runs (real bash), so that
chromium and Redis are installed exactly when the browser and Celery tests will run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _selects(tree: str, *args: str) -> bool:
    done = subprocess.run(
        ["bash", "-c", 'source bin/_selects.sh; selects "$@"', "selects", tree, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode == 0


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("-q",),
        ("tests",),
        (".",),
        ("tests/browser",),
        ("./tests/browser/test_journeys.py::test_ask",),
        ("-p", "no:cacheprovider"),
        ("-p", "no:cacheprovider", "-q"),
        ("-k", "docx", "tests/browser"),
        ("--ignore", "tests/query"),
        ("--ignore=tests/browser/test_journeys.py",),
    ],
)
def test_these_run_the_browser_tests(args):
    assert _selects("tests/browser", *args)


@pytest.mark.parametrize(
    "args",
    [
        ("tests/query",),
        ("-p", "no:cacheprovider", "tests/query"),
        ("-k", "tests/browser", "tests/api"),
        ("--ignore=tests/browser",),
        ("--ignore", "tests/browser"),
        ("--ignore", "./tests/browser/", "-q"),
        ("tests/query", "-m", "slow"),
    ],
)
def test_these_do_not(args):
    assert not _selects("tests/browser", *args)
