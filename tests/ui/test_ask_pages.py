"""The ask page, its streamed variant, cited passages and the trace."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.test import Client

from collections_app.models import Source
from query_app.models import QueryRun
from tests.support.chat_server import streamed
from tests.support.documents import HOSTILE, upload
from tests.support.tiny_models import build_tiny_cross_encoder

pytestmark = pytest.mark.django_db

DISK = "How much free disk space does the installer need?"


def ask(client, question=DISK, **extra):  # type: ignore[no-untyped-def]
    data = {"collection": "handbook", "profile": "fast", "question": question, **extra}
    return client.post("/ask/", data)


def events_of(response) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    body = b"".join(response.streaming_content).decode()
    found = []
    for block in body.split("\n\n"):
        name = re.search(r"^event: (.+)$", block, re.M)
        data = re.search(r"^data: (.+)$", block, re.M)
        if name and data:
            found.append((name.group(1), json.loads(data.group(1))))
    return found


def test_ask_page_offers_readable_collections_and_profiles(alice, collection):
    page = alice.get("/ask/?collection=handbook").content.decode()

    assert '<option value="handbook" selected>Handbook</option>' in page
    for profile in ("fast", "balanced", "quality"):
        assert f'<option value="{profile}"' in page
    assert 'name="retrieval_only"' in page


def test_ask_page_without_collections_says_what_to_do(alice):
    page = alice.get("/ask/").content.decode()

    assert "There is nothing to ask yet" in page
    assert 'href="/collections/new/"' in page


def test_an_answer_has_linked_markers_sources_and_a_trace(alice, ingested):
    page = ask(alice).content.decode()

    run = QueryRun.objects.get()
    assert run.mode == "extractive"
    assert "Extractive answer" in page
    assert f'href="/history/{run.pk}/passages/1/"' in page
    assert f'hx-get="/history/{run.pk}/passages/1/"' in page
    assert 'class="cite"' in page
    assert "2 GB" in page
    for stage in ("transform", "retrieve", "fuse", "rerank", "assemble", "generate"):
        assert f'<details class="stage-{stage}">' in page
    retrieve = page.split('<details class="stage-retrieve">')[1].split("</details>")[0]
    assert "candidates" in retrieve and "mode hybrid" in retrieve


def test_htmx_asks_get_only_the_answer_fragment(alice, ingested):
    response = alice.post(
        "/ask/",
        {"collection": "handbook", "profile": "fast", "question": DISK},
        HTTP_HX_REQUEST="true",
    )

    body = response.content.decode()
    assert "<html" not in body
    assert body.strip().startswith('<article class="card answer-card"')


@pytest.mark.parametrize("question", ["", "   \n "])
def test_an_empty_question_is_a_message_not_an_error_page(alice, ingested, question):
    response = ask(alice, question=question)

    assert response.status_code == 200
    assert "The question is empty." in response.content.decode()
    assert not QueryRun.objects.exists()


def test_an_over_long_question_is_a_message(alice, ingested):
    response = ask(alice, question="why " * 1000)

    assert response.status_code == 200
    assert "the limit is 2000" in response.content.decode()


def test_an_unknown_profile_lists_the_known_ones(alice, ingested):
    response = ask(alice, profile="turbo")

    text = html.unescape(response.content.decode())
    assert "Unknown profile 'turbo'" in text
    assert "fast" in text.split("Unknown profile 'turbo'")[1]


def test_the_profile_picker_says_what_each_profile_runs_here(alice, collection, rag_set):
    rag_set("query.rerank.model", "")
    page = html.unescape(alice.get("/ask/?collection=handbook").content.decode())

    assert '<option value="fast" selected>fast — hybrid search</option>' in page
    assert (
        '<option value="balanced">balanced — hybrid search; '
        "cross-encoder reranker not configured, skipped</option>"
    ) in page
    assert (
        '<option value="quality">quality — hybrid search, groundedness check; '
        "cross-encoder reranker not configured, skipped</option>"
    ) in page
    notes = page.split('class="profile-notes')[1].split("</ul>")[0]
    assert (
        "adaptive, balanced, corrective, quality: cross-encoder reranker not configured, skipped."
        in notes
    )
    assert "To enable it, set the cross-encoder on the Models page" in notes


def test_the_profile_picker_names_a_configured_reranker_without_notes(
    alice, collection, rag_set, tmp_path
):
    model = build_tiny_cross_encoder(tmp_path / "ce", texts=["disk space", "refunds"])
    rag_set("query.rerank.model", str(model))
    page = html.unescape(alice.get("/ask/?collection=handbook").content.decode())

    assert (
        '<option value="balanced">balanced — hybrid search, cross-encoder reranking</option>'
        in (page)
    )
    assert "profile-notes" not in page


def test_the_profile_picker_marks_a_required_missing_reranker_unavailable(
    alice, collection, rag_set
):
    rag_set("query.rerank.model", "")
    rag_set("query.rerank.required", True)
    page = html.unescape(alice.get("/ask/?collection=handbook").content.decode())

    assert '<option value="balanced">balanced — not available here: the cross-encoder' in page
    assert '<option value="fast" selected>fast — hybrid search</option>' in page


def test_balanced_on_a_fresh_install_answers_and_warns_that_it_skipped_the_reranker(
    alice, ingested, rag_set
):
    rag_set("query.rerank.model", "")
    page = html.unescape(ask(alice, profile="balanced").content.decode())

    run = QueryRun.objects.get()
    assert run.profile == "balanced" and run.mode == "extractive"
    assert "2 GB" in run.answer
    assert "message error" not in page
    warnings = page.split('<ul class="warnings small">')[1].split("</ul>")[0]
    assert "the cross-encoder reranker is not configured here" in warnings
    assert "to enable it, set the cross-encoder on the Models page" in warnings
    rerank = page.split('<details class="stage-rerank">')[1].split("</details>")[0]
    assert "cross-encoder skipped" in rerank
    assert "cross-encoder reranker not configured, skipped" in rerank


def test_rerank_required_keeps_the_strict_error_as_a_message(alice, ingested, rag_set):
    rag_set("query.rerank.model", "")
    rag_set("query.rerank.required", True)
    response = ask(alice, profile="balanced")

    assert response.status_code == 200
    text = html.unescape(response.content.decode())
    assert "message error" in text
    assert "RAG_RERANK_MODEL" in text
    assert not QueryRun.objects.exists()


def test_asking_a_collection_one_may_not_read_is_not_found(bob, ingested):
    assert ask(bob).status_code == 404
    stream = bob.post("/ask/stream/", {"collection": "handbook", "question": DISK})
    assert stream.status_code == 404
    assert not QueryRun.objects.exists()


def test_retrieve_only_shows_passages_without_an_answer(alice, ingested):
    page = ask(alice, retrieval_only="on").content.decode()

    run = QueryRun.objects.get()
    assert run.mode == "retrieval-only" and run.answer == ""
    assert "Generation was skipped on purpose" in page
    assert f"/history/{run.pk}/passages/1/" in page
    generate = page.split('<details class="stage-generate">')[1].split("</details>")[0]
    assert "skipped" in generate


def test_a_cited_passage_opens_in_place_and_links_to_the_highlighted_source(alice, ingested):
    ask(alice)
    run = QueryRun.objects.get()
    first = run.citations[0]

    fragment = alice.get(f"/history/{run.pk}/passages/1/", HTTP_HX_REQUEST="true")

    body = fragment.content.decode()
    assert body.strip().startswith("<aside")
    # The preview marks the cited sentence itself, with some text around it.
    (span,) = first["spans"]
    preview = body.split('<mark id="cited-sentence"')[1].split(">", 1)[1].split("</mark>")[0]
    assert html.unescape(preview) == span["text"]
    assert f"score {first['score']:.3f}" in body
    source = Source.objects.get(pk=first["source_id"])
    link = (
        f"/collections/handbook/sources/{source.pk}/?chunk={first['chunk_id']}"
        f"&amp;start={span['char_start']}&amp;end={span['char_end']}#cited"
    )
    assert f'href="{link}"' in body
    page = alice.get(html.unescape(link).split("#")[0]).content.decode()
    marked = page.split('<mark id="cited"')[1].split(">", 1)[1].split("</mark>")[0]
    # Only the sentence is highlighted in the document, not the whole passage.
    assert html.unescape(marked) == source.text[span["char_start"] : span["char_end"]]
    assert html.unescape(marked) == span["text"]

    full = alice.get(f"/history/{run.pk}/passages/1/")
    assert b"<html" in full.content and b"Passage [1]" in full.content
    assert alice.get(f"/history/{run.pk}/passages/99/").status_code == 404


def test_a_question_with_markup_is_escaped_everywhere(alice, ingested):
    question = '<script>alert("q-xss")</script> disk space for the installer?'

    pages = [ask(alice, question=question).content]
    run = QueryRun.objects.get()
    pages += [
        alice.get("/history/").content,
        alice.get(f"/history/{run.pk}/").content,
        alice.get(f"/history/{run.pk}/passages/1/").content,
    ]
    stream = alice.post(
        "/ask/stream/", {"collection": "handbook", "profile": "fast", "question": question}
    )
    pages.append(json.dumps([e for e in events_of(stream)]).encode())
    done = next(
        data
        for name, data in events_of(
            alice.post("/ask/stream/", {"collection": "handbook", "question": question})
        )
        if name == "done"
    )
    pages.append(done["html"].encode())

    for content in pages:
        assert b'<script>alert("q-xss")' not in content
    assert b"&lt;script&gt;alert(&quot;q-xss&quot;)&lt;/script&gt;" in pages[0]


def test_markup_inside_a_document_is_escaped_in_answer_snippet_and_trace(
    alice, collection, celery_eager, django_capture_on_commit_callbacks
):
    page = alice.get("/collections/handbook/").content.decode()
    key = re.search(r'name="request_key" value="([^"]+)"', page).group(1)
    with django_capture_on_commit_callbacks(execute=True):
        alice.post(
            "/collections/handbook/upload/",
            {"files": [upload("widget.md", HOSTILE)], "request_key": key},
        )

    answer = ask(alice, question="What does the widget ship with?").content
    run = QueryRun.objects.get()
    assert any("<script>" in c["snippet"] for c in run.citations)
    passage = alice.get(f"/history/{run.pk}/passages/1/").content
    reopened = alice.get(f"/history/{run.pk}/").content

    for content in (answer, passage, reopened):
        assert b'<script>alert("doc-xss")' not in content
        assert b"<b onmouseover" not in content
    assert b"&lt;script&gt;alert(&quot;doc-xss&quot;)" in passage


def test_the_stream_reports_stages_then_the_rendered_answer(alice, ingested):
    response = alice.post(
        "/ask/stream/", {"collection": "handbook", "profile": "fast", "question": DISK}
    )

    assert response["Content-Type"].startswith("text/event-stream")
    events = events_of(response)
    names = [name for name, _ in events]
    stages = [data["stage"] for name, data in events if name == "step"]
    assert stages[:7] == [
        "transform",
        "retrieve",
        "fuse",
        "rerank",
        "bridge",
        "assemble",
        "generate",
    ]
    assert names.index("context") < names.index("done")
    done = events[-1][1]
    run = QueryRun.objects.get()
    assert done["url"] == f"/history/{run.pk}/"
    assert "Extractive answer" in done["html"]
    assert f"/history/{run.pk}/passages/1/" in done["html"]


def test_the_ask_page_carries_each_profiles_stages_for_its_progress_list(alice, collection):
    page = alice.get("/ask/?collection=handbook").content.decode()

    script = re.search(r'<script id="profile-stages" type="application/json">(.+?)</script>', page)
    assert script is not None
    stages = json.loads(script.group(1))
    assert set(stages) == {"fast", "balanced", "quality", "corrective", "adaptive"}
    assert stages["balanced"] == [
        "transform",
        "retrieve",
        "fuse",
        "rerank",
        "bridge",
        "assemble",
        "generate",
        "groundedness",
    ]


def test_each_streamed_step_says_what_it_did_was_skipped_and_warned(alice, ingested, rag_set):
    rag_set("query.rerank.model", "")
    events = events_of(
        alice.post(
            "/ask/stream/", {"collection": "handbook", "profile": "balanced", "question": DISK}
        )
    )

    steps = {data["stage"]: data for name, data in events if name == "step"}
    run = QueryRun.objects.get()
    retrieve = next(s for s in run.trace if s["stage"] == "retrieve")
    assert steps["retrieve"]["summary"][0] == f"{retrieve['details']['candidates']} candidates"
    assert steps["retrieve"]["skipped"] is False and steps["retrieve"]["warnings"] == []
    assert "cross-encoder skipped" in steps["rerank"]["summary"]
    (warning,) = steps["rerank"]["warnings"]
    assert warning.startswith("the cross-encoder reranker is not configured here")
    assert steps["groundedness"]["skipped"] is True
    assert steps["groundedness"]["summary"] == ["skipped: disabled by the profile"]


def test_an_empty_question_in_the_stream_is_an_error_event(alice, ingested):
    response = alice.post("/ask/stream/", {"collection": "handbook", "question": " "})

    assert events_of(response) == [("error", {"message": "The question is empty."})]


def test_with_a_chat_model_the_answer_streams_token_by_token(alice, ingested, chat_configured):
    """The chat model is a scripted OpenAI-compatible server on 127.0.0.1 (no LLM runs here)."""
    chat_configured.script(streamed(["The installer ", "needs 2 GB ", "of free disk space [1]."]))

    events = events_of(
        alice.post("/ask/stream/", {"collection": "handbook", "profile": "fast", "question": DISK})
    )

    tokens = [data["text"] for name, data in events if name == "token" and data["text"]]
    assert len(tokens) >= 3
    assert "".join(tokens).startswith("The installer needs 2 GB")
    run = QueryRun.objects.get()
    assert run.mode == "llm"
    done = events[-1][1]["html"]
    assert "Extractive" not in done
    assert f'href="/history/{run.pk}/passages/1/"' in done


def test_asking_without_a_csrf_token_is_rejected(user, ingested):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    for url in ("/ask/", "/ask/stream/"):
        response = client.post(url, {"collection": "handbook", "question": DISK})
        assert response.status_code == 403
    assert not QueryRun.objects.exists()


def test_the_trace_details_show_ranked_candidates_and_what_was_kept(alice, ingested):
    page = ask(alice).content.decode()

    run = QueryRun.objects.get()
    first = run.citations[0]["chunk_id"]
    fuse = page.split('<details class="stage-fuse">')[1].split("</details>")[0]
    assert '<th scope="col">legs.vector</th>' in fuse
    assert "rank 1 · score" in fuse
    assert '<th scope="col">fused_score</th>' in fuse
    cited_row = fuse.split(f"<td>{first[:12]}…</td>")[1].split("</tr>")[0]
    assert "<td>[1]</td>" in cited_row
    rerank = page.split('<details class="stage-rerank">')[1].split("</details>")[0]
    assert '<th scope="col">rerank_score</th>' in rerank
    assemble = page.split('<details class="stage-assemble">')[1].split("</details>")[0]
    assert "dropped_by_budget" in assemble


def test_an_unanswerable_question_gets_not_found_with_a_next_step(alice, ingested):
    page = ask(alice, question="Who painted the ceiling of the Sistine Chapel?").content.decode()

    run = QueryRun.objects.get()
    assert run.mode == "not-found"
    assert "Try other words, another profile, or" in page
    assert 'href="/collections/handbook/"' in page
    assert 'class="cite"' not in page
