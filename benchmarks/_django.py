"""Django set up for the benchmark scripts, which run as ``python benchmarks/<name>.py``.

Each script calls ``django_setup(...)`` once its arguments are parsed, then imports
the apps. A script that names a database keeps its tables and embeddings apart from
the app's own; ``RAGSITE_DB_NAME`` in the environment still wins.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_setup(db_name: str | None = None) -> None:
    """Put the project on ``sys.path``, select its settings and database, and start Django."""
    if db_name is not None:
        os.environ.setdefault("RAGSITE_DB_NAME", db_name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
