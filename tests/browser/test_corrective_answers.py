"""A corrective answer in the browser: the path it took, its low-confidence badge, the route."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from collections_app.services import (
    collection_create,
    collection_ingest,
    collection_web_fallback_set,
)
from tests.support.documents import INSTALL, REFUNDS
from tests.support.search_server import ScriptedSearchServer, html_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DISK = "How much free disk space does the installer need?"


def test_a_best_effort_corrective_answer_shows_its_path_and_badges(
    page, live_server, login, user, tmp_path, rag_set, no_chat_model, screenshot
):
    # Every grade is "incorrect": the answer is best-effort after two rewrites.
    rag_set(
        "profiles.corrective",
        {"corrective": {"upper": 0.99, "lower": 0.98, "gate_strong": 1.0, "max_iterations": 2}},
    )
    (tmp_path / "install.md").write_text(INSTALL)
    (tmp_path / "refunds.md").write_text(REFUNDS)
    collection = collection_create(name="Handbook", slug="handbook", user=user)
    collection_ingest(collection=collection, locations=[str(tmp_path)])
    login(page)

    page.goto(f"{live_server.url}/ask/?collection=handbook")
    page.get_by_label("Profile", exact=True).select_option("corrective")
    page.get_by_label("Question").fill(DISK)
    page.get_by_role("button", name="Ask").click()

    answer = page.locator("#answer-area article.answer-card")
    expect(answer.locator(".answer")).to_contain_text("2 GB")
    expect(answer.locator(".badge.low-confidence")).to_contain_text(
        "iteration budget spent (2 rewrites)"
    )
    timeline = answer.locator("ol.path-timeline li")
    expect(timeline.first).to_contain_text("triage")
    expect(answer.locator("ol.path-timeline li", has_text="rewrite")).to_have_count(2)
    expect(answer.locator("ol.path-timeline li", has_text="probe")).to_have_count(2)
    screenshot(page, "ask-corrective-low-confidence")

    page.get_by_label("Profile", exact=True).select_option("adaptive")
    page.get_by_label("Question").fill("thanks!")
    page.get_by_role("button", name="Ask").click()
    card = page.locator("#answer-area article.answer-card")
    expect(card.locator(".badge.route")).to_have_text("route: none")
    expect(card).to_contain_text("Ask me a question about the documents")
    expect(card.locator(".badge.mode")).to_have_text(
        "Small talk: answered without searching the documents"
    )
    expect(card).not_to_contain_text("add documents that cover it")
    screenshot(page, "ask-adaptive-chit-chat")


def test_the_web_box_follows_the_collection_and_profile_and_web_citations_link_out(
    page, live_server, login, user, tmp_path, rag_set, no_chat_model, screenshot
):
    # A scripted SearxNG-compatible server and a scripted site, on loopback
    # (no search engine runs here); only the site's host:port passes the address check.
    search, site = ScriptedSearchServer().start(), ScriptedSearchServer().start()
    try:
        site.pages = {
            "/mercury": html_page(
                "Mercury (element)",
                "<p>At sea level the boiling point of mercury is 356.7 degrees Celsius.</p>",
            )
        }
        search.results = [{"url": site.url("/mercury"), "title": "Mercury"}]
        rag_set(
            "web_search", {"url": search.base_url, "timeout_s": 5.0, "allow_hosts": [site.host]}
        )
        rag_set("profiles.corrective", {"corrective": {"max_iterations": 1}})
        (tmp_path / "install.md").write_text(INSTALL)
        collection = collection_create(name="Handbook", slug="handbook", user=user)
        collection_ingest(collection=collection, locations=[str(tmp_path)])
        collection_web_fallback_set(collection=collection, enabled=True)
        login(page)

        page.goto(f"{live_server.url}/ask/?collection=handbook")
        box = page.locator("[data-web-fallback]")
        expect(box).to_be_hidden()  # the default profile does not search the web
        page.get_by_label("Profile", exact=True).select_option("corrective")
        expect(box).to_be_visible()
        page.get_by_label("Search the web").check()
        page.get_by_label("Question").fill("What is the boiling point of mercury at sea level?")
        page.get_by_role("button", name="Ask").click()

        answer = page.locator("#answer-area article.answer-card")
        expect(answer.locator(".answer")).to_contain_text("356.7 degrees Celsius")
        expect(answer.locator(".citations .badge.web").first).to_have_text("web")
        expect(answer.locator(f'.citations a[href="{site.url("/mercury")}"]')).to_have_count(1)
        screenshot(page, "ask-corrective-web-fallback")

        page.get_by_label("Profile", exact=True).select_option("fast")
        expect(box).to_be_hidden()
    finally:
        search.stop()
        site.stop()
