"""An administrator connects a local chat model in the browser, and the next answer uses it.

Headless Chromium against the live server. No chat model can run here: the
"local Ollama" is ``ScriptedChatServer``, a real OpenAI-compatible HTTP server
on 127.0.0.1 that also lists its models at ``/api/tags`` as Ollama does.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from query_app.models import ModelSettings, QueryRun
from tests.support.chat_server import completion, streamed
from tests.support.factories import indexed_collection

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "sk-browser-5e2b8a61d0"
ANSWER = "The installer needs 2 GB of free disk space [1]."


def test_admin_finds_a_local_server_tests_it_saves_and_the_next_answer_uses_it(
    page, live_server, django_user_model, chat_server, rag_set, screenshot
):
    for name in ("base_url", "model", "api_key"):
        rag_set(f"chat.{name}", "")
    root_url = chat_server.base_url.removesuffix("/v1")
    rag_set("chat.local_servers", [{"kind": "ollama", "url": root_url}])
    chat_server.models = ["llama3.2:1b"]
    admin = django_user_model.objects.create_superuser(username="root", password="pw-root")
    indexed_collection(
        [
            "The installer needs 2 GB of free disk space and 4 GB of memory.",
            "Refunds are possible within 30 days of purchase.",
        ],
        slug="handbook",
        members={admin: "admin"},
    )

    page.goto(f"{live_server.url}/accounts/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("pw-root")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Models").click()
    expect(page.get_by_role("heading", name="Model settings", level=1)).to_be_visible()
    expect(page.locator("[data-now=chat]")).to_contain_text("extractive")

    # The local server is found after the page has loaded, then fills in the form.
    page.get_by_role("link", name="Use llama3.2:1b").click()
    expect(page.get_by_label("Base URL")).to_have_value(f"{root_url}/v1")
    expect(page.get_by_label("Model", exact=True)).to_have_value("llama3.2:1b")
    expect(page.get_by_text("Filled in from the server found on this machine")).to_be_visible()

    chat_server.script(completion("pong"))
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-result")).to_contain_text("Connected. llama3.2:1b answered: pong")
    assert not ModelSettings.objects.exists()
    screenshot(page, "model-settings-tested")

    page.get_by_label("API key", exact=True).fill(SECRET)
    page.get_by_role("button", name="Save").first.click()
    expect(page.get_by_text("Model settings saved. The next answer uses them.")).to_be_visible()
    expect(page.locator("[data-now=chat]")).to_contain_text("written by llama3.2:1b")
    expect(page.get_by_label("API key", exact=True)).to_have_value("")
    assert SECRET not in page.content()
    screenshot(page, "model-settings-saved")

    chat_server.responder = lambda body: (
        streamed(["The installer needs 2 GB ", "of free disk space [1]."])
        if body.get("stream")
        else completion(ANSWER)
    )
    page.get_by_role("link", name="Ask").click()
    page.get_by_label("Question").fill("How much disk space does the installer need?")
    page.get_by_role("button", name="Ask").click()
    answer = page.locator("#answer-area article.answer-card")
    # The stored answer replaces the streamed one: it links to its permalink.
    expect(answer.get_by_role("link", name="Permalink")).to_be_visible()
    expect(answer.locator(".answer")).to_contain_text("2 GB of free disk space")
    run = QueryRun.objects.get()
    assert run.mode == "llm"
    assert chat_server.headers[-1]["Authorization"] == f"Bearer {SECRET}"

    # A deployment variable wins over the page, which says so on the field.
    rag_set("chat.model", "model-from-env")
    page.goto(f"{live_server.url}/settings/models/")
    expect(page.get_by_label("Model", exact=True)).to_be_disabled()
    expect(page.get_by_label("Model", exact=True)).to_have_value("model-from-env")
    expect(page.locator("[data-env=RAG_CHAT_MODEL]")).to_contain_text("wins over this page")
    expect(page.locator("[data-now=chat]")).to_contain_text("written by model-from-env")
    screenshot(page, "model-settings-env")

    page.set_viewport_size({"width": 390, "height": 844})
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the settings page scrolls sideways at 390 px ({width} px wide)"
    screenshot(page, "model-settings-phone")
