"""The Content-Security-Policy in headless Chromium: every page works under it, no violation.

The policy allows scripts from the site itself and inline ones carrying the response's
nonce (plotly's figures), no eval; a violation shows in the console, which the test
reads on every page a signed-in user visits, the evaluation pages and API docs included.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from eval_app.harness import eval_run_create, eval_run_execute
from tests.support.eval_corpus import STRICT_PROFILE, eval_dataset_write

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def run(tmp_path, user):
    """A finished evaluation run (plotly figures); alice is staff so she may see it."""
    user.is_staff = True
    user.save(update_fields=["is_staff"])
    dataset = eval_dataset_write(tmp_path / "dataset")
    return eval_run_execute(
        run=eval_run_create(dataset_path=dataset, compare=f"fast,{STRICT_PROFILE}", offline=True)
    )


def test_no_page_breaks_the_content_security_policy(page, live_server, login, run, screenshot):
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text
            else None
        ),
    )
    login(page)
    for path in ("/collections/", "/ask/", "/history/", "/account/api-token/", "/eval/"):
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("load")
    # plotly drew the dashboard's figures: its inline scripts ran.
    expect(page.locator(".eval-figure .main-svg").first).to_be_visible()
    page.goto(f"{live_server.url}/eval/runs/{run.pk}/")
    expect(page.locator("#quality-latency .main-svg").first).to_be_visible()
    screenshot(page, "csp-eval-run")
    # htmx still swaps: the cases filter replaces the table in place.
    page.get_by_label("Outcome").select_option("passed")
    expect(page.locator("#cases")).to_contain_text("passed")
    page.goto(f"{live_server.url}/api/docs/")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    screenshot(page, "csp-api-docs")
    page.goto(f"{live_server.url}/accounts/password/")
    screenshot(page, "password-change")
    assert violations == []
