"""Tiny models built by the tests themselves (nothing is downloaded).

A 2-layer BERT with a small word-piece vocabulary is enough to exercise code
paths that depend on a model's shape (dimensions, tokens), not on its quality.
"""

from __future__ import annotations

import string
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
