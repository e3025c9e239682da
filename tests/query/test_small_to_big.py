"""Small-to-big context: the generator reads the window or section around a passage.

Real PostgreSQL + pgvector and the real embedder. The chat model is the scripted
OpenAI-compatible server on 127.0.0.1 (no LLM runs here); it records what the
generator was given.
"""

from __future__ import annotations

import re

import pytest

from collections_app.models import Chunk
from query_app.exceptions import InvalidOption
from query_app.services import QueryRequest, query_answer
from tests.support.chat_server import completion
from tests.support.factories import Doc, indexed_collection
from tests.support.knowledge_base import step

# The question matches the middle passage; the fact it asks for (the retention
# period) is only stated by the passage after it.
MANUAL = Doc(
    location="/manual/falcon.md",
    title="Falcon appliance manual",
    chunks=[
        "The Falcon appliance ships with two power supplies and a rack kit.",
        "Nightly snapshots of the Falcon appliance are configured on the Snapshots page.",
        "They are kept for fourteen days and then deleted automatically.",
        "The fan speed of the appliance adapts to the room temperature.",
        "Firmware updates are published every quarter on the vendor portal.",
    ],
)
QUESTION = "How are nightly snapshots of the Falcon appliance configured?"
SECTIONS = [["Hardware"], ["Snapshots"], ["Snapshots"], ["Snapshots"], ["Firmware"]]


@pytest.fixture
def manual(db, reader):
    collection = indexed_collection([MANUAL], slug="manual", members={reader: "read"})
    for chunk in Chunk.objects.filter(collection=collection):
        chunk.section_path = SECTIONS[chunk.ordinal]
        chunk.save(update_fields=["section_path"])
    return collection


def ask(reader, **context):
    return query_answer(
        user=reader,
        request=QueryRequest(
            collection="manual",
            question=QUESTION,
            top_n=1,
            overrides={"context": context, "floor": {"min_vector_similarity": None}},
        ),
    )


def prompt_passages(server) -> list[str]:
    user = server.requests[-1]["messages"][1]["content"]
    return re.findall(r"<passage [^>]*>\n(.*?)\n</passage>", user, re.DOTALL)


def test_the_default_gives_the_generator_the_passage_alone(manual, reader, chat_configured):
    chat_configured.responder = lambda _r: completion("They are set on the Snapshots page [1].")
    run = ask(reader)
    assert prompt_passages(chat_configured) == [MANUAL.chunks[1]]
    assert "expand" not in step(run, "assemble")["details"]


def test_a_window_gives_the_neighbours_and_keeps_the_citation_on_the_passage(
    manual, reader, chat_configured
):
    chat_configured.responder = lambda _r: completion(
        "Snapshots are configured on the Snapshots page and kept for fourteen days [1]."
    )
    run = ask(reader, expand="window", window=1)
    source_text = manual.sources.get().text
    window = "\n\n".join(MANUAL.chunks[0:3])
    assert prompt_passages(chat_configured) == [window]
    citation = run.citations[0]
    middle = Chunk.objects.get(collection=manual, ordinal=1)
    assert citation["chunk_id"] == middle.pk
    assert (citation["char_start"], citation["char_end"]) == (middle.char_start, middle.char_end)
    assert citation["snippet"] == MANUAL.chunks[1]
    # The highlight stays inside the cited passage, whatever sentence of the window matched.
    for span in citation["spans"]:
        assert middle.char_start <= span["char_start"] < span["char_end"] <= middle.char_end
        assert source_text[span["char_start"] : span["char_end"]] == span["text"]
        assert MANUAL.chunks[1][span["start"] : span["end"]] == span["text"]
    expand = step(run, "assemble")["details"]["expand"]
    assert expand["kind"] == "window"
    assert expand["expanded"] == 1
    assert expand["passages"] == [
        {
            "marker": 1,
            "chunk": middle.pk,
            "kind": "window",
            "ordinals": [0, 2],
            "chars": [0, len(window)],
        }
    ]


def test_a_section_stops_at_the_section_boundary(manual, reader, chat_configured):
    chat_configured.responder = lambda _r: completion("Kept for fourteen days [1].")
    run = ask(reader, expand="section")
    assert prompt_passages(chat_configured) == ["\n\n".join(MANUAL.chunks[1:4])]
    assert step(run, "assemble")["details"]["expand"]["passages"][0]["ordinals"] == [1, 3]


def test_the_extractive_answerer_reads_the_window(manual, reader, no_chat_model):
    alone = ask(reader)
    widened = ask(reader, expand="window", window=1)
    assert widened.citations[0]["chunk_id"] == alone.citations[0]["chunk_id"]
    # Every sentence of the window is a candidate quote, not only the passage's own.
    assert step(alone, "generate")["details"]["candidates"] == 1
    assert step(widened, "generate")["details"]["candidates"] == 3
    assert widened.mode == "extractive"
    middle = Chunk.objects.get(collection=manual, ordinal=1)
    for span in widened.citations[0]["spans"]:
        assert middle.char_start <= span["char_start"] < span["char_end"] <= middle.char_end


def test_a_window_over_the_budget_falls_back_to_the_passage(manual, reader, chat_configured):
    chat_configured.responder = lambda _r: completion("On the Snapshots page [1].")
    run = ask(reader, expand="window", window=2, max_tokens=60)
    assert prompt_passages(chat_configured) == [MANUAL.chunks[1]]
    expand = step(run, "assemble")["details"]["expand"]
    assert (expand["expanded"], expand["alone_by_budget"]) == (0, 1)


def test_a_window_grows_only_up_to_its_token_cap(manual, reader, chat_configured):
    chat_configured.responder = lambda _r: completion("On the Snapshots page [1].")
    # Room for the passage and the one after it (both ~70 characters), not more.
    cap = (len(MANUAL.chunks[1]) + len(MANUAL.chunks[2]) + 10) // 4
    run = ask(reader, expand="window", window=3, expand_max_tokens=cap)
    passages = step(run, "assemble")["details"]["expand"]["passages"]
    first, last = passages[0]["ordinals"]
    assert last - first == 1
    assert prompt_passages(chat_configured)[0].count("\n\n") == 1


def test_an_unknown_expansion_is_refused_with_the_known_ones(manual, reader):
    with pytest.raises(InvalidOption, match="chunk, window, section"):
        ask(reader, expand="paragraph")
