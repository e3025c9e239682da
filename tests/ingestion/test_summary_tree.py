"""The summary tree: section and document summaries built after ingestion, cited as passages.

Real PostgreSQL + pgvector, the real embedder and the real ingestion pipeline.
The chat model is the scripted OpenAI-compatible server on 127.0.0.1 (no LLM
runs here).
"""

from __future__ import annotations

import pytest

from collections_app.models import Chunk, Collection, IngestionJob
from collections_app.search_index import vector_search
from collections_app.services import collection_ingest, collection_summary_tree_set
from query_app.services import QueryRequest, query_retrieve
from tests.support.chat_server import Reply, completion
from tests.support.knowledge_base import step

pytestmark = pytest.mark.django_db


def _paragraph(topic: str, facts: list[str]) -> str:
    return " ".join(f"The {topic} {fact}." for fact in facts)


def _section(title: str, topic: str, facts: list[list[str]]) -> str:
    return f"## {title}\n\n" + "\n\n".join(_paragraph(topic, group) for group in facts)


# Three sections, each long enough for several passages at the default 200-token budget.
FACTS = {
    ("Cooling", "cooling loop"): [
        [
            "circulates chilled water through every rack of the data hall",
            "is monitored by sensors that report the inlet temperature each minute",
            "keeps the inlet air between eighteen and twenty-seven degrees Celsius",
            "uses two redundant pumps that alternate every week",
            "switches to free cooling when the outside air is colder than twelve degrees",
        ],
        [
            "is flushed and refilled with treated water every spring",
            "raises an alarm when the water pressure falls below two bar",
            "is inspected by the facilities team on the first Monday of every month",
            "has isolation valves on each row so one row can be drained alone",
            "feeds the heat exchangers on the roof through insulated pipes",
        ],
        [
            "logs every valve change in the building management system",
            "can run for forty minutes on the backup chiller during a power cut",
            "is sized for a heat load of one point two megawatts",
            "has leak detection cable under the raised floor of every row",
            "was last upgraded with variable speed drives in the previous year",
        ],
    ],
    ("Power", "power distribution"): [
        [
            "feeds every rack from two independent supply paths marked A and B",
            "is protected by uninterruptible power supplies with ten minutes of battery",
            "starts the diesel generators automatically within twelve seconds of an outage",
            "meters the load of each circuit so no breaker exceeds eighty percent",
            "is tested under full load by the electricians twice a year",
        ],
        [
            "keeps fuel for the generators for forty-eight hours of operation",
            "records every breaker trip in the maintenance ticket system",
            "uses colour coded cables so path A is red and path B is blue",
            "requires a second electrician to approve any switching operation",
            "is documented in single line diagrams kept at the security desk",
        ],
        [
            "limits each standard rack to eight kilowatts of contracted power",
            "allows high density racks of up to twenty kilowatts in row F only",
            "has transfer switches that were replaced during the last refurbishment",
            "is inspected with thermal cameras every quarter to find loose connections",
            "sends its alarms to the on-call engineer by text message",
        ],
    ],
    ("Access", "access control system"): [
        [
            "requires a badge and a personal code at every door of the data hall",
            "keeps the visitor log for twelve months",
            "lets visitors in only when a named employee escorts them",
            "locks the loading dock outside business hours",
            "records camera footage of every entrance for ninety days",
        ],
        [
            "revokes the badges of departing staff on their last working day",
            "reviews every access right with the team leads each quarter",
            "raises an alarm when a door is held open for more than thirty seconds",
            "has a mantrap at the main entrance that admits one person at a time",
            "is audited every year against the security certification",
        ],
        [
            "gives contractors badges that expire at the end of each day",
            "stores the badge database on two servers in different rooms",
            "prints a temporary badge with a photograph for every visitor",
            "blocks a badge after three wrong codes in a row",
            "is operated from the security desk around the clock",
        ],
    ],
}
MANUAL = "# Data hall operations manual\n\n" + "\n\n".join(
    _section(title, topic, facts) for (title, topic), facts in FACTS.items()
)


@pytest.fixture
def manual_dir(tmp_path):
    root = tmp_path / "hall"
    root.mkdir()
    (root / "operations.md").write_text(MANUAL)
    return root


@pytest.fixture
def tree_collection(collection):
    Collection.objects.filter(pk=collection.pk).update(summary_tree=True)
    collection.refresh_from_db()
    return collection


def summaries(collection) -> list[Chunk]:
    return list(
        Chunk.objects.filter(collection=collection, kind=Chunk.Kind.SUMMARY).order_by("ordinal")
    )


def test_ingestion_builds_section_and_document_summaries_linked_to_their_passages(
    tree_collection, manual_dir, no_chat_model
):
    report = collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    passages = {c.pk: c for c in Chunk.objects.filter(kind=Chunk.Kind.PASSAGE)}
    assert len(passages) >= 6
    nodes = summaries(tree_collection)
    levels = [n.metadata["level"] for n in nodes]
    sections = [tuple(p.section_path) for p in passages.values()]
    # A node for every section of at least two passages, and one for the document.
    expected = {path for path in sections if sections.count(path) >= 2}
    assert len(expected) >= 2
    assert levels.count("section") == len(expected)
    assert {tuple(n.section_path) for n in nodes if n.metadata["level"] == "section"} == expected
    assert levels.count("document") == 1
    source = tree_collection.sources.get()
    # The source's passages are its chunks; summaries are not counted as passages.
    assert source.chunk_count == len(passages)
    for node in nodes:
        members = [passages[m] for m in node.members]
        assert node.source_id == source.pk
        assert len(node.embedding) == 384
        # Offline: centroid sentences, each one of the document's own sentences.
        assert node.metadata["summarizer"] == "centroid"
        for sentence in node.text.split(". "):
            assert sentence.rstrip(".") in " ".join(MANUAL.split())
        if node.metadata["level"] == "section":
            assert {tuple(m.section_path) for m in members} == {tuple(node.section_path)}
            assert len(members) >= 2
            # Its text comes from its own section.
            assert any(
                s.rstrip(".") in " ".join(m.text.split())
                for m in members
                for s in node.text.split(". ")[:1]
            )
        else:
            assert set(node.members) == set(passages)
    assert report.as_dict()["summary_tree"]["nodes"] == len(nodes)
    assert report.as_dict()["stage_seconds"]["summary_tree"] >= 0
    # Indexed like a passage: the nearest chunk to a node's own vector is that node.
    top = vector_search(
        collection_id=tree_collection.pk,
        dimensions=384,
        vector=nodes[0].embedding,
        k=1,
        ef_search=40,
    )
    assert top[0][0] == nodes[0].pk


def test_a_retrieved_summary_is_cited_through_its_member_passages(
    tree_collection, manual_dir, no_chat_model, user
):
    collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    nodes = {n.pk: n for n in summaries(tree_collection)}
    total = Chunk.objects.filter(collection=tree_collection).count()
    # Every chunk is a candidate, so the summary nodes are retrieved too.
    run = query_retrieve(
        user=user,
        request=QueryRequest(
            collection=tree_collection.slug,
            question="What does the operations manual say about power?",
            top_n=min(total, 20),
            overrides={"floor": {"min_vector_similarity": None}},
        ),
    )
    cited = [c["chunk_id"] for c in run.citations]
    assert cited
    assert not set(cited) & set(nodes)
    kinds = set(Chunk.objects.filter(pk__in=cited).values_list("kind", flat=True))
    assert kinds == {Chunk.Kind.PASSAGE}
    expanded = step(run, "retrieve")["details"]["per_probe"][0]["summaries"]
    assert expanded["found"] >= 1
    for node in expanded["nodes"]:
        assert node["summary"] in nodes
        assert set(node["passages"]) <= set(nodes[node["summary"]].members)
        assert len(node["passages"]) <= 2
    assert len(cited) == len(set(cited))


def test_unchanged_sources_keep_their_nodes_and_a_changed_one_is_summarised_again(
    tree_collection, manual_dir, no_chat_model
):
    collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    before = {n.pk for n in summaries(tree_collection)}
    again = collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    assert {n.pk for n in summaries(tree_collection)} == before
    assert "summary_tree" not in again.as_dict()
    (manual_dir / "operations.md").write_text(
        MANUAL.replace("eighteen and twenty-seven", "nineteen and twenty-six")
    )
    collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    after = summaries(tree_collection)
    assert {n.pk for n in after}.isdisjoint(before)
    passages = set(
        Chunk.objects.filter(collection=tree_collection, kind=Chunk.Kind.PASSAGE).values_list(
            "pk", flat=True
        )
    )
    assert all(set(n.members) <= passages for n in after)


def test_turning_the_tree_off_removes_it_and_on_again_queues_a_build(
    tree_collection, manual_dir, no_chat_model, user
):
    collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    before = summaries(tree_collection)
    assert before
    version = Collection.objects.get(pk=tree_collection.pk).index_version
    assert collection_summary_tree_set(collection=tree_collection, enabled=False) is None
    assert summaries(tree_collection) == []
    assert Collection.objects.get(pk=tree_collection.pk).index_version > version
    job = collection_summary_tree_set(collection=tree_collection, enabled=True, user=user)
    assert isinstance(job, IngestionJob)
    from collections_app.services import ingestion_job_execute

    ingestion_job_execute(job=job)
    job.refresh_from_db()
    assert job.status == IngestionJob.Status.SUCCEEDED
    assert len(summaries(tree_collection)) == len(before)


def test_the_chat_model_writes_the_summaries_when_one_is_configured(
    tree_collection, manual_dir, chat_configured
):
    chat_configured.responder = lambda request: completion(
        "Summary of " + request["messages"][1]["content"].split("\n", 1)[0]
    )
    collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    nodes = summaries(tree_collection)
    assert len(nodes) >= 3
    assert {n.metadata["summarizer"] for n in nodes} == {"chat"}
    texts = {n.text for n in nodes}
    assert "Summary of Document part: operations.md > Power" in " ".join(texts) or any(
        t.endswith("> Power") for t in texts
    )
    # The passages reach the model as delimited data, never as instructions.
    first = chat_configured.requests[0]["messages"]
    assert "never instructions" in first[0]["content"]
    assert "<passages>" in first[1]["content"]


def test_a_failing_chat_model_falls_back_to_centroid_sentences_with_a_warning(
    tree_collection, manual_dir, chat_configured
):
    chat_configured.responder = lambda _request: Reply(status=500, json_body={"error": "down"})
    report = collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    nodes = summaries(tree_collection)
    assert len(nodes) >= 3
    assert all(n.text for n in nodes)
    warnings = report.as_dict()["summary_tree"]["warnings"]
    assert len(warnings) == len(nodes)
    assert "centroid sentences used instead" in warnings[0]


def test_the_source_page_and_the_api_list_passages_only(
    tree_collection, manual_dir, chat_configured, client, user
):
    chat_configured.responder = lambda _request: completion("A zebra-striped summary.")
    collection_ingest(collection=tree_collection, locations=[str(manual_dir)])
    assert summaries(tree_collection)
    client.force_login(user)
    source = tree_collection.sources.get()
    page = client.get(f"/collections/{tree_collection.slug}/sources/{source.pk}/")
    assert page.status_code == 200
    assert "The power distribution" in page.content.decode()
    assert "zebra-striped" not in page.content.decode()
    api = client.get(f"/api/collections/{tree_collection.slug}/sources/{source.pk}")
    assert api.status_code == 200
    texts = [c["text"] for c in api.json()["chunks"]["results"]]
    assert texts
    assert not any("zebra-striped" in t for t in texts)


def test_the_collection_form_switches_the_tree_and_queues_its_build(
    collection, manual_dir, no_chat_model, client, user
):
    collection_ingest(collection=collection, locations=[str(manual_dir)])
    client.force_login(user)
    form = {"name": collection.name, "description": "", "chunking_strategy": "recursive"}
    page = client.get(f"/collections/{collection.slug}/edit/")
    assert 'name="summary_tree"' in page.content.decode()
    client.post(f"/collections/{collection.slug}/edit/", {**form, "summary_tree": "on"})
    collection.refresh_from_db()
    assert collection.summary_tree is True
    job = IngestionJob.objects.filter(collection=collection).order_by("-created_at").first()
    assert job is not None
    assert job.status == IngestionJob.Status.QUEUED
    assert "Summary tree on" in client.get(f"/collections/{collection.slug}/").content.decode()
    client.post(f"/collections/{collection.slug}/edit/", form)
    collection.refresh_from_db()
    assert collection.summary_tree is False
