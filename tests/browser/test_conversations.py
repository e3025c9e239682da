"""A conversation in headless Chromium: ask, follow up twice, read the rewrite, find it in history."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from collections_app.services import collection_create, collection_ingest
from query_app.models import Conversation
from tests.support.documents import INSTALL, REFUNDS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DISK = "How much free disk space does the installer need?"
FOLLOW_UP = "What if it stops with an error?"


def test_ask_follow_up_in_the_conversation_and_find_it_in_history(
    page, live_server, login, screenshot, user, tmp_path
):
    (tmp_path / "install.md").write_text(INSTALL)
    (tmp_path / "refunds.md").write_text(REFUNDS)
    collection = collection_create(name="Handbook", slug="handbook", user=user)
    collection_ingest(
        collection=collection,
        locations=[str(tmp_path / "install.md"), str(tmp_path / "refunds.md")],
    )
    login(page)

    page.goto(f"{live_server.url}/ask/?collection=handbook")
    page.get_by_label("Question").fill(DISK)
    page.get_by_role("button", name="Ask").click()
    first = page.locator("#answer-area article.answer-card")
    expect(first.locator(".answer")).to_contain_text("2 GB")

    first.get_by_role("link", name="Ask a follow-up").click()
    conversation = Conversation.objects.get()
    page.wait_for_url(f"{live_server.url}/conversations/{conversation.pk}/#follow-up")
    expect(page.get_by_role("heading", name=DISK, level=1)).to_be_visible()
    box = page.get_by_label("Follow-up question")
    expect(box).to_be_focused()
    box.fill(FOLLOW_UP)
    page.get_by_role("button", name="Ask", exact=True).click()

    new = page.locator("#answer-area article.answer-card")
    expect(new.locator(".question")).to_have_text(FOLLOW_UP)
    expect(new.locator(".standalone")).to_contain_text("read as")
    expect(new.locator(".standalone")).to_contain_text("installer")
    expect(new.locator(".answer")).to_contain_text("ERR-4471")
    expect(box).to_have_value("")
    condense = new.locator("details.stage-condense")
    condense.locator("summary").click()
    expect(condense.locator(".body")).to_contain_text("standalone")
    screenshot(page, "conversation")

    # A second follow-up lands after the first one; both stay on the page.
    box.fill("And how much space?")
    page.get_by_role("button", name="Ask", exact=True).click()
    expect(page.locator("#answer-area article.answer-card")).to_have_count(2)
    expect(
        page.locator("#answer-area article.answer-card").nth(1).locator(".question")
    ).to_have_text("And how much space?")
    assert conversation.turns.count() == 3

    page.reload()
    expect(page.locator("ol.turns article.answer-card")).to_have_count(3)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="History").click()
    card = page.locator(f"#conversation-{conversation.pk}")
    expect(card).to_contain_text("3 questions")
    expect(card.get_by_role("link", name=FOLLOW_UP)).to_be_visible()
    screenshot(page, "history-conversations")

    page.set_viewport_size({"width": 390, "height": 844})
    card.locator("a.run-q").click()
    expect(page.get_by_label("Follow-up question")).to_be_visible()
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    screenshot(page, "conversation-phone")
    assert overflow <= 0
