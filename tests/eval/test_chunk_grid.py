"""The retrieval lab's chunk study: each chunk setting is ingested into its own collection.

A tiny BEIR-layout dataset written by the test goes through the real harness (real
embedder, real database); the collection of a setting holds chunks cut to it.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import sys
from pathlib import Path

import pytest

from collections_app.models import Chunk
from eval_app.harness import eval_run_create, eval_run_execute

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
SAMPLE_MAKE = BENCHMARKS.parent / "eval" / "scifact_sample" / "make.py"

SENTENCES = [
    "Vitamin D supplements raised bone mineral density in older women over two years.",
    "The trial enrolled four hundred participants from three hospitals in the north.",
    "Fractures were fewer in the treated group than among those given a placebo.",
    "Calcium intake was recorded with a food diary kept for one week each season.",
    "Side effects were rare and mostly mild stomach complaints during the first month.",
    "Sleep duration shorter than six hours doubled the risk of catching a cold.",
    "Volunteers were exposed to a rhinovirus after a week of wearing sleep trackers.",
    "Coffee drinking was not associated with higher mortality in the cohort study.",
]


@pytest.fixture
def lab():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        yield importlib.import_module("retrieval_quality")
    finally:
        sys.path.remove(str(BENCHMARKS))


def write_dataset(directory: Path) -> Path:
    corpus = [
        {"_id": "bones", "title": "Vitamin D", "text": " ".join(SENTENCES[:5])},
        {"_id": "colds", "title": "Sleep", "text": " ".join(SENTENCES[5:7])},
        {"_id": "coffee", "title": "Coffee", "text": SENTENCES[7]},
    ]
    queries = [
        {"_id": "q1", "text": "Do vitamin D supplements prevent fractures?"},
        {"_id": "q2", "text": "Does short sleep make colds more likely?"},
    ]
    (directory / "qrels").mkdir(parents=True)
    (directory / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    (directory / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (directory / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\tbones\t1\nq2\tcolds\t1\n"
    )
    return directory


def test_chunk_settings_are_parsed_and_bad_ones_refused(lab):
    assert lab.chunk_settings_parse("200/0, 128/24,256") == [(200, 0), (128, 24), (256, 0)]
    for bad in ("128/128", "0/0", "big/4", ""):
        with pytest.raises(ValueError):
            lab.chunk_settings_parse(bad)


@pytest.mark.django_db(transaction=True)
def test_each_chunk_setting_is_ingested_into_its_own_collection(lab, tmp_path, settings):
    settings.VAR_DIR = tmp_path / "var"
    data = write_dataset(tmp_path / "tiny")
    defaults = settings.RAG["ingestion"]
    assert (
        lab.chunk_variant(
            data, tokens=defaults["chunk_tokens"], overlap=defaults["chunk_overlap_tokens"]
        )
        == data
    )

    runs = {}
    for tokens, overlap in ((40, 0), (40, 20)):
        variant = lab.chunk_variant(data, tokens=tokens, overlap=overlap)
        run = eval_run_execute(
            run=eval_run_create(
                dataset_path=variant,
                beir=True,
                compare=["fast"],
                offline=True,
                retrieval_only=True,
                k_values=[10],
            )
        )
        assert run.status == "succeeded", run.error
        assert run.collection.slug == f"eval-tiny-c{tokens}-o{overlap}-test"
        assert run.collection.chunking_options == {
            "chunk_tokens": tokens,
            "chunk_overlap_tokens": overlap,
        }
        runs[overlap] = run

    plain = list(Chunk.objects.filter(collection=runs[0].collection).order_by("char_start"))
    overlapping = Chunk.objects.filter(collection=runs[20].collection)
    assert plain and all(chunk.token_count <= 40 for chunk in plain)
    assert overlapping.count() > len(plain)
    # With overlap, a document's next chunk starts before the one before it ends.
    bones = list(overlapping.filter(source__location__endswith="bones.txt").order_by("ordinal"))
    assert len(bones) >= 2
    assert all(b.char_start < a.char_end for a, b in itertools.pairwise(bones))
    assert set(lab.case_scores(runs[20], "fast")) == {"q1", "q2"}


def test_a_sample_of_queries_keeps_their_judged_documents_and_seeded_others(tmp_path):
    """eval/scifact_sample/make.py --queries: the same seed, the same sample."""
    spec = importlib.util.spec_from_file_location("sample_make", SAMPLE_MAKE)
    assert spec is not None and spec.loader is not None
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    data = write_dataset(tmp_path / "tiny")
    first, second = tmp_path / "a", tmp_path / "b"
    counts = make.build(data, first, others=1, seed=0, queries=1)
    make.build(data, second, others=1, seed=0, queries=1)
    assert counts == {"documents": 2, "judged": 1, "queries": 1}
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    (query,) = [json.loads(line) for line in (first / "queries.jsonl").read_text().splitlines()]
    qrels = (first / "qrels" / "test.tsv").read_text().splitlines()
    assert len(qrels) == 2 and qrels[1].split("\t")[0] == query["_id"]
    kept = {json.loads(line)["_id"] for line in (first / "corpus.jsonl").read_text().splitlines()}
    assert qrels[1].split("\t")[1] in kept
