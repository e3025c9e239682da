"""Tiny models built by the tests themselves (nothing is downloaded).

2-layer BERTs with small vocabularies written here: enough to exercise code
paths that depend on a model's shape (dimensions, tokens, a one-logit head),
not on its quality.

- ``build_tiny_sentence_transformer``: an embedder with ``dimensions``-sized vectors.
- ``build_tiny_cross_encoder`` (+ ``export_onnx``): a reranker. No cross-encoder
  ships on PyPI; its judgments are arbitrary but deterministic, which is all the
  reranking tests need: they check that the final order is the model's order,
  not the retrieval order.
"""

from __future__ import annotations

import re
import string
import warnings
from pathlib import Path

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *string.ascii_lowercase,
    *string.digits,
    *[f"##{c}" for c in string.ascii_lowercase + string.digits],
    *".,;:!?-'\"()[]/",
    "the",
    "and",
    "of",
    "to",
    "is",
    "a",
    "in",
]


def _tokenizer(directory: Path):  # type: ignore[no-untyped-def]
    from transformers import BertTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(VOCAB) + "\n")
    return BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)


def build_tiny_sentence_transformer(
    directory: Path, *, dimensions: int = 32, seed: int = 0
) -> Path:
    """Save a tiny sentence-transformers model with ``dimensions``-sized embeddings."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel

    torch.manual_seed(seed)
    tokenizer = _tokenizer(directory / "src")
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=dimensions,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=dimensions * 2,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(directory / "src")
    tokenizer.save_pretrained(directory / "src")
    transformer = models.Transformer(str(directory / "src"), max_seq_length=128)
    pooling = models.Pooling(dimensions, pooling_mode="mean")
    model = SentenceTransformer(modules=[transformer, pooling], device="cpu")
    out = directory / "model"
    model.save(str(out))
    return out


SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_cross_encoder(directory: Path, *, texts: list[str], seed: int = 7) -> Path:
    """Save a sentence-transformers-loadable cross-encoder to ``directory``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    words = sorted({w for t in texts for w in re.findall(r"[a-z0-9]+", t.lower())})
    vocab_file = directory / "vocab.txt"
    vocab_file.write_text("\n".join(SPECIAL + words) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=str(vocab_file), do_lower_case=True)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(SPECIAL) + len(words),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=256,
        num_labels=1,
        # Wide initial weights so that scores differ visibly between passages.
        initializer_range=0.5,
    )
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def export_onnx(directory: Path) -> Path:
    """Export the model in ``directory`` to ``directory/model.onnx`` (dynamic batch and length)."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    model = BertForSequenceClassification.from_pretrained(directory).eval()
    tokenizer = AutoTokenizer.from_pretrained(directory)
    sample = tokenizer(["a question"], ["a passage"], return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    target = directory / "model.onnx"
    with warnings.catch_warnings():
        # The tracer's notes about the legacy exporter and Python booleans.
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            tuple(sample[n] for n in names),
            str(target),
            input_names=names,
            output_names=["logits"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in names},
            dynamo=False,
        )
    return target
