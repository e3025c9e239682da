"""``retrieval.unit_similarity``: the vector leg's hits reordered by their nearest sentence,
on real PostgreSQL + pgvector with the real embedding model.

The passage that answers the question says so in one sentence among many about
other things; the other passages are about the question's subject as a whole.
The passage's own vector is pulled away by its other sentences, its answering
sentence's vector is not.
"""

from __future__ import annotations

import pytest

from collections_app.models import Chunk
from query_app.exceptions import InvalidOption
from query_app.services import QueryRequest, query_retrieve
from tests.support.factories import Doc, indexed_collection

QUESTION = "Which enzyme breaks down lactose in the small intestine?"
ANSWER = (
    "The harbour opened in 1862 and was rebuilt after the storm of 1901. "
    "Its lighthouse keeper kept a daily weather log for forty years. "
    "Fishing boats still land their catch at the north quay every morning. "
    "Lactase is the enzyme that breaks down lactose in the small intestine. "
    "The town's museum shows the old nets, anchors and ship models."
)
SUBJECT = [
    "Digestion: the pancreas releases its juices into the gut after a meal.",
    "Lactose intolerance causes bloating after dairy; many adults digest milk poorly.",
    "Enzymes are proteins that speed up chemical reactions in the body.",
    "Sugars such as sucrose and maltose are broken down before they are absorbed.",
]


@pytest.fixture
def sentences(db, reader):
    docs = [Doc(location=f"/subject-{n}.md", chunks=[text]) for n, text in enumerate(SUBJECT)]
    return indexed_collection(
        [*docs, Doc(location="/harbour.md", chunks=[ANSWER])],
        slug="sentences",
        members={reader: "read"},
    )


def _ask(reader, **retrieval):
    run = query_retrieve(
        user=reader,
        request=QueryRequest(
            collection="sentences",
            question=QUESTION,
            overrides={"retrieval": {"mode": "vector", "per_document": 0, **retrieval}},
            top_n=5,
        ),
    )
    retrieve = next(s for s in run.trace if s["stage"] == "retrieve")
    return [c["source"] for c in run.citations], retrieve["details"]["per_probe"][0]["vector"]


def test_off_by_default_the_passage_ranks_by_its_own_vector(sentences, reader):
    order, vector = _ask(reader)
    assert "unit_similarity" not in vector
    assert order[0] != "/harbour.md"
    # Nothing was embedded for the option that is off.
    assert not Chunk.objects.filter(collection=sentences, unit_vectors__isnull=False).exists()


def test_the_passage_whose_one_sentence_answers_rises_to_the_top(sentences, reader):
    off, _ = _ask(reader)
    on, vector = _ask(reader, unit_similarity=0.5)
    assert vector["unit_similarity"] == 0.5
    assert on[0] == "/harbour.md"
    assert off.index("/harbour.md") > 0
    # The former first passage, whose own sentence is its whole text, comes next.
    assert on[1] == off[0]
    assert sorted(on) == sorted(off)
    # The units were embedded once and stored with their passages for the next question.
    assert Chunk.objects.filter(collection=sentences, unit_vectors__isnull=False).count() == 5


def test_the_whole_weight_ranks_by_the_nearest_sentence_alone(sentences, reader):
    order, _ = _ask(reader, unit_similarity=1.0)
    assert order[0] == "/harbour.md"


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_a_weight_outside_zero_to_one_is_refused(sentences, reader, value):
    with pytest.raises(InvalidOption, match="unit_similarity"):
        _ask(reader, unit_similarity=value)
