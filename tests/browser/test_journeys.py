"""What a person does in the browser, end to end, in headless Chromium against the live server."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from collections_app.models import Chunk, Source
from collections_app.services import collection_create, collection_ingest
from query_app.models import QueryRun
from tests.support.documents import INJECTION, INSTALL, REFUNDS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

JOB_TIMEOUT_MS = 180_000  # the first job loads the embedding model


def test_upload_watch_progress_ask_follow_citation_and_read_the_trace(
    page, live_server, login, worker, screenshot, tmp_path
):
    (tmp_path / "install.md").write_text(INSTALL)
    (tmp_path / "refunds.md").write_text(REFUNDS)
    login(page)
    expect(page.get_by_text("No collections yet")).to_be_visible()
    screenshot(page, "collections-empty")

    page.get_by_role("link", name="Create your first collection").click()
    page.get_by_label("Name").fill("Handbook")
    page.get_by_role("button", name="Create").click()
    expect(page.get_by_role("heading", name="Handbook", level=1)).to_be_visible()

    page.set_input_files("input[type=file]", [tmp_path / "install.md", tmp_path / "refunds.md"])
    page.get_by_role("button", name="Upload and ingest").click()
    expect(page.get_by_text("Ingesting 2 documents in the background")).to_be_visible()
    panel = page.locator("article.job").first
    expect(panel.locator(".job-head .badge")).to_have_text("Succeeded", timeout=JOB_TIMEOUT_MS)
    expect(panel.locator("progress")).to_have_attribute("value", "100")
    expect(panel.locator(".job-sources li")).to_have_count(2)
    expect(panel.locator(".job-sources .badge.ingested")).to_have_count(2)
    expect(page.locator("#sources .badge.ready")).to_have_count(2)
    screenshot(page, "collection")

    page.get_by_role("link", name="Ask this collection").click()
    page.get_by_label("Question").fill("How much free disk space does the installer need?")
    page.get_by_role("button", name="Ask").click()
    answer = page.locator("#answer-area article.answer-card")
    expect(answer.locator(".badge.mode")).to_contain_text("Extractive answer")
    expect(answer.locator(".answer")).to_contain_text("2 GB")

    retrieve = answer.locator("details.stage-retrieve")
    expect(retrieve.locator(".body")).to_be_hidden()
    retrieve.locator("summary").click()
    expect(retrieve).to_have_attribute("open", "")
    expect(retrieve.locator(".body")).to_be_visible()
    expect(retrieve.locator(".body")).to_contain_text("candidate_k")

    answer.locator("a.cite").first.click()
    passage = answer.locator(".passage-slot aside.passage")
    expect(passage).to_be_visible()
    expect(passage).to_contain_text("score")
    screenshot(page, "ask")

    run = QueryRun.objects.get()
    cited = run.citations[0]
    passage.get_by_role("link", name="Open it in the document, highlighted").click()
    mark = page.locator("mark#cited")
    expect(mark).to_be_visible()
    expect(mark).to_be_in_viewport()
    source = Source.objects.get(pk=cited["source_id"])
    # The document highlights the cited sentence, inside the cited passage.
    (span,) = cited["spans"]
    assert mark.text_content() == source.text[span["char_start"] : span["char_end"]]
    assert cited["char_start"] <= span["char_start"] < span["char_end"] <= cited["char_end"]
    screenshot(page, "source")

    page.get_by_role("link", name="History").click()
    page.get_by_role("link", name="How much free disk space does the installer need?").click()
    expect(page.locator("details.stage-retrieve")).to_have_count(1)
    screenshot(page, "history-answer")

    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_role("link", name="Ask", exact=True).click()
    screenshot(page, "ask-phone")


def test_drop_an_injected_document_approve_it_and_get_answers_from_it(
    page, live_server, login, worker, screenshot, user
):
    collection_create(name="Handbook", slug="handbook", user=user)
    login(page)
    page.goto(f"{live_server.url}/collections/handbook/")

    # Drag-and-drop: the dropped file goes through the same form as a chosen one.
    page.locator("[data-dropzone]").evaluate(
        """(zone, text) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([text], "release.md", {type: "text/markdown"}));
            zone.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer, bubbles: true}));
        }""",
        INJECTION,
    )
    panel = page.locator("article.job").first
    expect(panel.locator(".job-head .badge")).to_have_text("Succeeded", timeout=JOB_TIMEOUT_MS)
    row = panel.locator(".job-sources li.quarantined")
    expect(row).to_contain_text("held for review")
    expect(page.locator(".topbar .count")).to_have_text("1")

    page.get_by_role("link", name="Review it in the quarantine").click()
    item = page.locator("article.qitem").first
    expect(item.locator("mark.signal").first).to_contain_text("Ignore all previous instructions")
    expect(item).to_contain_text('<script>alert("q-xss")</script>')  # shown as text
    screenshot(page, "quarantine")
    item.get_by_role("button", name="Approve and index").click()
    expect(page.get_by_text("1 item(s) approved and indexed")).to_be_visible()
    expect(page.locator(".topbar .count")).to_have_text("")
    assert Chunk.objects.filter(source__location="upload:release.md").exists()

    page.get_by_role("link", name="Ask", exact=True).click()
    page.get_by_label("Question").fill("Which version adds dark mode to the dashboard?")
    page.get_by_role("button", name="Ask").click()
    answer = page.locator("#answer-area article.answer-card")
    expect(answer.locator(".answer")).to_contain_text("dark mode")
    expect(answer.locator(".citations")).to_contain_text("Release notes")


def test_the_basic_flow_works_without_javascript(browser, live_server, user, tmp_path, screenshot):
    (tmp_path / "install.md").write_text(INSTALL)
    collection = collection_create(name="Handbook", slug="handbook", user=user)
    collection_ingest(collection=collection, locations=[str(tmp_path / "install.md")])
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/ask/")
        page.get_by_label("Username").fill("alice")
        page.get_by_label("Password").fill("pw-alice")
        page.get_by_role("button", name="Log in").click()
        page.get_by_label("Question").fill("Which error code means the download was corrupted?")
        page.get_by_role("button", name="Ask").click()
        answer = page.locator("article.answer-card")
        expect(answer.locator(".answer")).to_contain_text("ERR-4471")

        answer.locator("a.cite").first.click()
        expect(page.get_by_role("heading", name="Passage [1]")).to_be_visible()
        page.get_by_role("link", name="Open it in the document, highlighted").click()
        expect(page.locator("mark#cited")).to_contain_text("ERR-4471")
        screenshot(page, "source-no-js")
    finally:
        context.close()


def test_the_ask_page_stays_light(page, live_server, login, user):
    collection_create(name="Handbook", slug="handbook", user=user)
    login(page)
    sizes: dict[str, int] = {}
    page.on(
        "response",
        lambda response: sizes.__setitem__(response.url, len(response.body() or b"")),
    )

    page.goto(f"{live_server.url}/ask/")
    page.wait_for_load_state("networkidle")

    assert any(url.endswith("htmx.min.js") for url in sizes), json.dumps(sizes)
    assert sum(sizes.values()) <= 200 * 1024, json.dumps(sizes)
