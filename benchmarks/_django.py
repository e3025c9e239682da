"""Django set up for the benchmark scripts, which run as ``python benchmarks/<name>.py``.

Each script calls ``django_setup(...)`` once its arguments are parsed, then imports
the apps. A script that names a database keeps its tables and embeddings apart from
the app's own; ``RAGSITE_DB_NAME`` in the environment still wins.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
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


def isolated_django_setup(*, name: str, **env: str) -> Path:
    """Django on a server, database and broker of its own, in a temporary folder.

    For the scripts that start and stop processes (load, faults): nothing they do
    touches the app's data. ``env`` is set before Django starts; the folder goes
    when the script ends.
    """
    var = Path(tempfile.mkdtemp(prefix=f"ragsite-{name}-"))
    # Last of all (atexit runs in reverse): the folder goes even if a process left
    # something behind as it exited.
    atexit.register(shutil.rmtree, var, True)
    os.environ.update(RAGSITE_VAR_DIR=str(var), RAGSITE_DB_NAME=name, **env)
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ.pop("DATABASE_URL", None)
    django_setup()
    return var
