"""Celery application; configuration comes from Django settings (CELERY_*)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import before_task_publish, celeryd_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")

app = Celery("ragsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

BROKER_FOLDER_OPTIONS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")


@celeryd_init.connect
@before_task_publish.connect
def embedded_broker_folders_create(**_: Any) -> None:
    """Create the embedded filesystem broker's folders, which kombu expects to exist.

    Done when a worker starts and before a task is published, so neither the worker
    nor a producer (a web request, ``rag ingest --async``) meets a missing folder,
    and importing the settings creates nothing. Other brokers need nothing.
    """
    if not str(app.conf.broker_url or "").startswith("filesystem"):
        return
    options = app.conf.broker_transport_options or {}
    for key in BROKER_FOLDER_OPTIONS:
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
