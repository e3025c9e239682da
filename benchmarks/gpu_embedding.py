#!/usr/bin/env python
"""Embedding on a CUDA GPU: passages/s against the model's forward-pass limit.

On passages of ``--tokens`` tokens (made here from the model's own vocabulary,
so nothing is read from disk), prints:

- forward limit: all-MiniLM-L6-v2 in fp16, inputs already tokenized and on the
  GPU, the model alone (what no encode can beat);
- sentence-transformers' encode (fp16 model, batch 256): tokenizes, then runs,
  one batch after the other;
- the default embedder on CUDA (fp16, length batches, tokenizing on its own
  thread feeding the model), and the same without the thread;

each as passages/s and as a share of the limit (the target is >= 0.5), and
the cosine of the embedder's fp16 vectors to fp32 on the CPU.

Usage: .venv/bin/python benchmarks/gpu_embedding.py [--count 20000] [--tokens 200]
``--device cpu --count 64`` runs the same steps on the CPU (a check of the script,
not a measurement).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from _django import django_setup


def passages(tokenizer: object, *, count: int, tokens: int, seed: int = 0) -> list[str]:
    """``count`` texts of ``tokens`` word pieces each, from whole words of the vocabulary."""
    vocab = tokenizer.get_vocab()  # type: ignore[attr-defined]
    words = sorted(w for w in vocab if w.isalpha() and len(w) >= 3 and not w.startswith("##"))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        text = " ".join(rng.choice(words, size=tokens + 20))
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)  # type: ignore[operator]
        out.append(text[: encoded["offset_mapping"][tokens - 1][1]])
    return out


def rate(count: int, run: Callable[[], object], sync: Callable[[], None]) -> float:
    sync()
    started = time.perf_counter()
    run()
    sync()
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--forward-batch", type=int, default=512)
    args = parser.parse_args()
    django_setup()
    import torch
    from sentence_transformers import SentenceTransformer

    from collections_app.embedding import SentenceTransformerEmbedder
    from collections_app.embedding.onnx_int8 import default_tokenizer_folder

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: the GPU figure needs a machine with one")
    cuda = args.device.startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    folder = str(default_tokenizer_folder())
    library = SentenceTransformer(folder, device=args.device)
    if cuda:
        library.half()
    texts = passages(library.tokenizer, count=args.count, tokens=args.tokens)
    print(
        f"{args.count} passages of {args.tokens} tokens on {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if cuda else ""),
        flush=True,
    )

    # Forward limit: tokenized beforehand, already on the device.
    batches = []
    for start in range(0, len(texts), args.forward_batch):
        features = library.tokenizer(
            texts[start : start + args.forward_batch],
            padding=True,
            truncation=True,
            max_length=library.max_seq_length,
            return_tensors="pt",
        )
        batches.append({k: v.to(args.device) for k, v in features.items()})

    def forward() -> None:
        with torch.inference_mode():
            for features in batches:
                library.forward(dict(features))

    forward()  # warm-up: kernels, allocator
    limit = rate(len(texts), forward, sync)

    def library_encode() -> None:
        library.encode(texts, batch_size=256, convert_to_numpy=True, show_progress_bar=False)

    library_encode()
    library_rate = rate(len(texts), library_encode, sync)

    rows = [
        ("forward limit (pre-tokenized, fp16)", limit),
        ("sentence-transformers encode", library_rate),
    ]
    for parallel in (True, False):
        embedder = SentenceTransformerEmbedder(
            model=folder, device=args.device, parallel_tokenize=parallel
        )
        embedder.encode(texts[:2048])
        label = "embedder, tokenizer thread" if parallel else "embedder, tokenizing inline"
        rows.append((label, rate(len(texts), lambda e=embedder: e.encode(texts), sync)))
        if parallel:
            sample = texts[:64]
            reference = SentenceTransformerEmbedder(model=folder, device="cpu").encode(sample)
            cosine = float(np.min(np.sum(embedder.encode(sample) * reference, axis=1)))

    print(f"\n{'':40} {'passages/s':>11} {'of limit':>9}")
    for label, value in rows:
        print(f"{label:40} {value:11.0f} {value / limit:9.2f}")
    sampled = min(64, len(texts))
    print(f"\nembedder vectors vs fp32 on the CPU: min cosine {cosine:.5f} ({sampled} passages)")


if __name__ == "__main__":
    main()
