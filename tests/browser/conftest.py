"""End-to-end fixtures: Debian's Chromium driven by Playwright, a live server, a Celery worker.

Jobs run on a real Celery worker in a thread of the test process (in-memory
broker), so the pages poll a job that is genuinely running in the background.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache import cache

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests
# make between browser steps are ordinary synchronous ones.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
SCREENSHOTS = Path(settings.BASE_DIR) / "test-artifacts" / "screenshots"


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.fail(
            "Debian's chromium is missing at /usr/bin/chromium; install it with "
            "`apt-get install -y chromium` (.ci/run does this)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(20_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot():  # type: ignore[no-untyped-def]
    """``screenshot(page, "name")`` saves test-artifacts/screenshots/name.png (full page)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str) -> Path:  # type: ignore[no-untyped-def]
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def worker(transactional_db, settings, tmp_path) -> Iterator[object]:
    """A real Celery worker thread consuming an in-memory broker for this test."""
    from celery.contrib.testing.worker import start_worker

    from ragsite.celery import app

    settings.MEDIA_ROOT = tmp_path / "media"
    saved = (app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_always_eager)
    app.conf.broker_url = "memory://"
    app.conf.broker_transport_options = {}
    app.conf.task_always_eager = False
    _reset_broker_pools(app)
    cache.clear()
    try:
        with start_worker(app, perform_ping_check=False, shutdown_timeout=60) as running:
            yield running
    finally:
        app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_always_eager = saved
        _reset_broker_pools(app)
        cache.clear()


def _reset_broker_pools(app) -> None:  # type: ignore[no-untyped-def]
    """Forget the app's cached connection pools so producers use the current broker URL.

    The pools are not closed: kombu keeps producer pools in a process-wide
    registry and hands the same one out again for the same broker.
    """
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def login(live_server, user):  # type: ignore[no-untyped-def]
    """``login(page)``: alice logs in through the login form."""

    def do(page) -> None:  # type: ignore[no-untyped-def]
        page.goto(f"{live_server.url}/collections/")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill("pw-alice")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(f"{live_server.url}/collections/")

    return do
