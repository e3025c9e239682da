"""Deployment: the docker-compose environment passes ``check --deploy``; bin/start refuses
the published development SECRET_KEY where it would protect something (issue 13, item 12).

Both run the real programs in subprocesses with the environment a deployment gives them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragsite.settings import DEV_SECRET_KEY

ROOT = Path(__file__).resolve().parents[2]
# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?message}, as compose expands them.
COMPOSE_VARIABLE = re.compile(r"\$\{(\w+)(?:(:?-)([^}]*)|(:?\?)[^}]*)?\}")


def compose_environment(given: dict[str, str]) -> dict[str, str]:
    """The web service's environment as ``docker compose`` gives it, for the .env ``given``."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    environment = compose["services"]["web"]["environment"]

    def expand(match: re.Match[str]) -> str:
        name, dash, default, question = match.groups()
        if name in given and (given[name] or dash != ":-"):
            return given[name]
        if question:
            raise AssertionError(f"docker-compose.yml needs {name} in .env")
        return default or ""

    return {key: COMPOSE_VARIABLE.sub(expand, str(value)) for key, value in environment.items()}


# What a deployment's process inherits besides its own settings; nothing of this test
# run (the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE, say) leaks into the check.
INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "XDG_RUNTIME_DIR")


def check_deploy(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {key: os.environ[key] for key in INHERITED if key in os.environ}
    env.update(environment)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_compose_environment_passes_check_deploy_without_a_warning():
    environment = compose_environment(
        {"SECRET_KEY": "k3Y-" + "x7Qm9vT2pL8rW4nZ6bJ1cF5hD0sG3aE_uYiOoKjHgMfNdBrVtCxZlPqWe"}
    )
    # Only the environment decides: none of these is on by default.
    assert environment["SECURE_SSL_REDIRECT"] == "true"
    result = check_deploy(environment)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr


def test_without_the_compose_environment_check_deploy_names_what_is_missing():
    """The defaults are for plain http on loopback; --deploy says so (the check can fail)."""
    result = check_deploy({"SECRET_KEY": DEV_SECRET_KEY, "DATABASE_URL": "postgres://x@db/x"})
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stdout + result.stderr


def start(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in {"DEBUG", "SECRET_KEY"}}
    env.update(environment)
    return subprocess.run(
        ["bash", str(ROOT / "bin" / "start")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "environment",
    [
        {"RAGSITE_HOST": "127.0.0.1"},  # DEBUG off
        {"RAGSITE_HOST": "0.0.0.0", "DEBUG": "1"},
        {"RAGSITE_HOST": "192.168.1.20", "DEBUG": "0"},
    ],
)
def test_bin_start_refuses_the_published_secret_key_off_debug_or_off_loopback(environment):
    result = start({"SECRET_KEY": DEV_SECRET_KEY, **environment})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "refusing to start with the development SECRET_KEY" in result.stderr
    # Refused before anything started: no virtualenv check, no database, no server.
    assert "ragsite: http://" not in result.stdout
