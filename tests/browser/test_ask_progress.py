"""Asking in the browser: the profile picker says what runs here, and the answer shows its progress.

The chat model is the scripted OpenAI-compatible server on 127.0.0.1 (no LLM runs
here); its reply waits a moment before streaming, so the page is seen mid-answer.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from collections_app.services import collection_create, collection_ingest
from query_app.models import QueryRun
from tests.support.chat_server import Reply
from tests.support.documents import INSTALL, REFUNDS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DISK = "How much free disk space does the installer need?"

# Every change to the progress list, as the person saw it (stage, its classes, its text).
RECORD_PROGRESS = """() => {
    window.progressSeen = [];
    const area = document.getElementById("answer-area");
    new MutationObserver(() => {
        area.querySelectorAll(".progress-stages li").forEach((li) => {
            const seen = li.dataset.stage + "|" + li.className + "|" + li.textContent;
            if (!window.progressSeen.includes(seen)) { window.progressSeen.push(seen); }
        });
    }).observe(area, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


def test_balanced_on_a_fresh_install_shows_each_stage_as_it_finishes_then_the_answer(
    page, live_server, login, user, tmp_path, rag_set, chat_configured, screenshot
):
    rag_set("query.rerank.model", "")
    chat_configured.script(
        Reply(
            stream=["The installer needs ", "2 GB of free disk space [1]."],
            delay_s=1.5,
        )
    )
    (tmp_path / "install.md").write_text(INSTALL)
    (tmp_path / "refunds.md").write_text(REFUNDS)
    collection = collection_create(name="Handbook", slug="handbook", user=user)
    collection_ingest(collection=collection, locations=[str(tmp_path)])
    login(page)

    page.goto(f"{live_server.url}/ask/?collection=handbook")
    picker = page.get_by_label("Profile")
    expect(picker.locator("option[value=balanced]")).to_have_text(
        "balanced — hybrid search; cross-encoder reranker not configured, skipped"
    )
    expect(page.locator(".profile-notes")).to_contain_text(
        "To enable it, set the cross-encoder on the Models page"
    )
    picker.select_option("balanced")
    page.get_by_label("Question").fill(DISK)
    page.evaluate(RECORD_PROGRESS)
    page.get_by_role("button", name="Ask").click()

    progress = page.locator("#answer-area .progress-stages")
    rerank = progress.locator("li[data-stage=rerank]")
    expect(rerank).to_have_class("done")
    expect(rerank).to_contain_text("cross-encoder skipped")
    expect(rerank.locator(".warn")).to_contain_text("not configured here")
    screenshot(page, "ask-progress")

    answer = page.locator("#answer-area article.answer-card")
    expect(answer.locator(".answer")).to_contain_text("2 GB of free disk space")
    expect(answer.locator("ul.warnings")).to_contain_text(
        "to enable it, set the cross-encoder on the Models page"
    )
    screenshot(page, "ask-balanced-fresh-install")

    seen = page.evaluate("window.progressSeen")
    rows = [tuple(s.split("|", 2)) for s in seen]
    done = {stage: text for stage, classes, text in rows if "done" in classes.split()}
    run = QueryRun.objects.get()
    assert run.profile == "balanced" and run.mode == "llm"
    # Every stage of the run was ticked off on the page, in the run's order.
    assert list(done) == [step["stage"] for step in run.trace]
    candidates = next(s for s in run.trace if s["stage"] == "retrieve")["details"]["candidates"]
    assert done["retrieve"].startswith(f"✓retrieve{candidates} candidates")
    assert done["groundedness"].startswith("\N{EN DASH}groundednessskipped")
    # The answer was shown being written before it was done.
    running = {stage for stage, classes, _ in rows if "running" in classes.split()}
    assert {"transform", "generate"} <= running
