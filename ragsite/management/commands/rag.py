"""``python manage.py rag <action>``: ingest, query, retrieve, eval, demo.

Each app contributes its actions through a ``cli`` module exposing
``ACTIONS: dict[str, tuple[help, add_arguments, handle]]``; this command only
composes them.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

CLI_MODULES = ("collections_app.cli", "query_app.cli", "eval_app.cli", "ragsite.demo")


def _actions() -> dict[str, Any]:
    actions: dict[str, Any] = {}
    for name in CLI_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        actions.update(getattr(module, "ACTIONS", {}))
    return actions


class Command(BaseCommand):
    help = "ragsite: ingest documents, ask questions, evaluate profiles."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        for name, (help_text, add_arguments, _handle) in _actions().items():
            action_parser = sub.add_parser(name, help=help_text, description=help_text)
            add_arguments(action_parser)

    def handle(self, *args: Any, **options: Any) -> None:
        _help, _add, handle = _actions()[options["action"]]
        handle(self, **options)
