"""Conversations in the browser: the follow-up link, the conversation page, history."""

from __future__ import annotations

import html
import json
import re

import pytest

from query_app.models import Conversation, QueryRun
from query_app.services import QueryRequest, query_answer

pytestmark = pytest.mark.django_db

DISK = "How much free disk space does the installer need?"
FOLLOW_UP = "What if it stops with an error?"


def events_of(response) -> list[tuple[str, dict]]:  # type: ignore[no-untyped-def]
    body = b"".join(response.streaming_content).decode()
    found = []
    for block in body.split("\n\n"):
        name = re.search(r"^event: (.+)$", block, re.M)
        data = re.search(r"^data: (.+)$", block, re.M)
        if name and data:
            found.append((name.group(1), json.loads(data.group(1))))
    return found


@pytest.fixture
def talk(ingested, user) -> tuple[QueryRun, QueryRun]:
    """alice's conversation: the disk-space question, then a follow-up."""
    first = query_answer(user=user, request=QueryRequest(collection="handbook", question=DISK))
    second = query_answer(
        user=user,
        request=QueryRequest(
            collection="handbook", question=FOLLOW_UP, conversation=first.conversation_id
        ),
    )
    return first, second


def test_the_answer_card_offers_a_follow_up_to_the_one_who_asked(alice, reader, ingested):
    page = alice.post(
        "/ask/", {"collection": "handbook", "profile": "fast", "question": DISK}
    ).content.decode()

    run = QueryRun.objects.get()
    link = f'href="/conversations/{run.conversation_id}/#follow-up"'
    assert link in page and "Ask a follow-up" in page
    # A colleague who may read the collection sees the answer, not a way into the conversation.
    shared = reader.get(f"/history/{run.pk}/").content.decode()
    assert DISK in shared and link not in shared


def test_the_conversation_page_shows_the_turns_in_order_and_a_follow_up_box(alice, talk):
    first, second = talk

    page = alice.get(f"/conversations/{first.conversation_id}/").content.decode()

    assert page.index(f'id="run-{first.pk}"') < page.index(f'id="run-{second.pk}"')
    assert f"<h1>{DISK}</h1>" in page
    assert "2 questions" in page
    assert f"Follow-up, read as: <q>{html.escape(second.standalone_question)}</q>" in page
    assert second.standalone_question.startswith(FOLLOW_UP) and "installer" in (
        second.standalone_question
    )
    assert f'action="/conversations/{first.conversation_id}/ask/"' in page
    assert f'name="conversation" value="{first.conversation_id}"' in page
    assert 'id="follow-up"' in page
    assert '<details class="stage-condense">' in page


def test_a_follow_up_posted_without_javascript_joins_the_conversation(alice, talk):
    first, _ = talk
    url = f"/conversations/{first.conversation_id}/"

    response = alice.post(f"{url}ask/", {"question": "And how much space?", "profile": "fast"})

    new = QueryRun.objects.latest("pk")
    assert response.status_code == 302
    assert response["Location"] == f"{url}#run-{new.pk}"
    assert new.conversation_id == first.conversation_id
    assert new.trace[0]["stage"] == "condense"
    page = alice.get(url).content.decode()
    assert "And how much space?" in page and "3 questions" in page


def test_an_empty_follow_up_is_a_message_on_the_page(alice, talk):
    first, _ = talk

    response = alice.post(f"/conversations/{first.conversation_id}/ask/", {"question": "  "})

    assert response.status_code == 200
    assert "The question is empty." in response.content.decode()
    assert QueryRun.objects.count() == 2


def test_the_streamed_follow_up_starts_with_the_rewrite(alice, talk):
    first, _ = talk

    events = events_of(
        alice.post(
            "/ask/stream/",
            {
                "collection": "handbook",
                "profile": "fast",
                "question": "And how much space?",
                "conversation": str(first.conversation_id),
            },
        )
    )

    steps = [data for name, data in events if name == "step"]
    assert steps[0]["stage"] == "condense"
    assert steps[0]["summary"][0].endswith("term(s) carried")
    done = next(data for name, data in events if name == "done")
    assert "And how much space?" in done["html"] and "Follow-up, read as" in done["html"]
    assert QueryRun.objects.latest("pk").conversation_id == first.conversation_id


def test_someone_elses_conversation_is_not_found(reader, talk):
    first, _ = talk
    url = f"/conversations/{first.conversation_id}/"
    ask = {"collection": "handbook", "question": "And?", "conversation": first.conversation_id}

    assert reader.get(url).status_code == 404
    assert reader.post(f"{url}ask/", {"question": "And?"}).status_code == 404
    assert reader.post("/ask/", ask).status_code == 404
    assert reader.post("/ask/stream/", ask).status_code == 404
    assert reader.post("/ask/", {**ask, "conversation": "x1"}).status_code == 404
    assert QueryRun.objects.count() == 2


def test_history_lists_conversations_with_their_questions(alice, talk):
    first, second = talk
    lone = query_answer(
        user=first.user,
        request=QueryRequest(collection="handbook", question="When are refunds possible?"),
    )

    page = alice.get("/history/").content.decode()

    # The last active conversation first; a conversation shows each of its questions.
    assert page.index("When are refunds possible?") < page.index(DISK)
    conversation = page.split(f'id="conversation-{first.conversation_id}"')[1]
    assert f'href="/conversations/{first.conversation_id}/"' in conversation
    assert "2 questions" in conversation
    assert f'href="/history/{second.pk}/">{FOLLOW_UP}</a>' in page
    assert f'href="/conversations/{lone.conversation_id}/"' in page
    assert Conversation.objects.count() == 2


def test_history_search_finds_a_conversation_by_a_later_question(alice, talk):
    query_answer(
        user=talk[0].user,
        request=QueryRequest(collection="handbook", question="When are refunds possible?"),
    )

    page = alice.get("/history/?q=stops with an error").content.decode()

    assert DISK in page and FOLLOW_UP in page
    assert "When are refunds possible?" not in page


def test_the_answer_card_says_which_misspelt_words_were_read_corrected(alice, ingested):
    page = alice.post(
        "/ask/",
        {
            "collection": "handbook",
            "profile": "fast",
            "question": DISK.replace("space", "spcae"),
        },
    ).content.decode()

    assert "Read with the spelling corrected: <q>spcae</q> → <q>space</q>" in page
