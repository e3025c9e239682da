"""The WSGI application; with warm-up on, each server process loads its models first.

gunicorn (without ``--preload``, as ``bin/start`` and the Docker image run it)
imports this module in every worker after the fork, before the worker accepts
requests, so the first question finds the views imported and the models loaded
(ragsite/warmup.py).
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")
application = get_wsgi_application()

from ragsite.warmup import warmup_enabled, web_warm  # noqa: E402  (needs Django set up)

if warmup_enabled():
    web_warm()
