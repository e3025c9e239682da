#!/usr/bin/env python
"""Embedding questions: PyTorch against the fp32 ONNX copy, in one run.

The golden dataset's questions (134) are encoded by the default embedder
(all-MiniLM-L6-v2 on the CPU) with small batches on PyTorch
(``onnx_small_batches=False``) and on the fp32 ONNX copy (the default), alone
and in batches of 4 and 16. The two take turns on every batch, the order
alternating, so a change in the machine's load falls on both alike. Prints,
per batch size: CPU-ms and wall-ms per question for each, the ratio, and the
largest difference between their vectors (max abs, min cosine). First, what
the ONNX copy costs once per process: exporting it (or reading the export
kept under ``var/models/``) and checking it.

Usage: nice .venv/bin/python benchmarks/question_embedding.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import yaml
from _django import django_setup

ROOT = Path(__file__).resolve().parents[1]
SIZES = (1, 4, 16)


def golden_questions() -> list[str]:
    data = yaml.safe_load((ROOT / "eval" / "golden" / "dataset.yaml").read_text())
    return [str(case["question"]) for case in data["cases"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="passes over the questions")
    args = parser.parse_args()
    django_setup(db_name="ragsite_bench_question_embedding")
    from django.conf import settings

    from collections_app.embedding import SentenceTransformerEmbedder
    from collections_app.embedding.onnx_int8 import default_tokenizer_folder

    folder = str(default_tokenizer_folder())
    questions = golden_questions()
    torch_only = SentenceTransformerEmbedder(model=folder, device="cpu", onnx_small_batches=False)
    onnx = SentenceTransformerEmbedder(model=folder, device="cpu", onnx_small_batches=True)
    cached = sorted((Path(settings.VAR_DIR) / "models").glob("st-fp32-*.onnx"))
    started, cpu = time.perf_counter(), time.process_time()
    onnx.encode(["warm up"])
    print(
        f"ONNX copy ready in {time.perf_counter() - started:.2f} s wall, "
        f"{time.process_time() - cpu:.2f} s CPU "
        f"({'read from var/models' if cached else 'exported'}); active: {onnx.onnx_active}"
    )
    torch_only.encode(["warm up"])
    tokens = [torch_only.count_tokens(q) + 2 for q in questions]
    print(
        f"{len(questions)} questions, {min(tokens)}-{max(tokens)} tokens "
        f"(mean {np.mean(tokens):.1f}, [CLS]/[SEP] included); {args.rounds} rounds\n"
    )
    methods = {"pytorch": torch_only.encode, "onnx fp32": onnx.encode}
    names = list(methods)
    print(
        f"{'batch':>5} {'method':10} {'CPU-ms/q':>9} {'wall-ms/q':>10} {'x pytorch':>10}"
        f" {'max |diff|':>11} {'min cos':>9}"
    )
    for size in SIZES:
        cpu_s = dict.fromkeys(names, 0.0)
        wall_s = dict.fromkeys(names, 0.0)
        vectors: dict[str, list[np.ndarray]] = {n: [] for n in names}
        turn = 0
        for _ in range(args.rounds):
            for start in range(0, len(questions), size):
                batch = questions[start : start + size]
                for name in names[turn % 2 :] + names[: turn % 2]:
                    wall, cpu = time.perf_counter(), time.process_time()
                    out = methods[name](batch)
                    cpu_s[name] += time.process_time() - cpu
                    wall_s[name] += time.perf_counter() - wall
                    vectors[name].append(out)
                turn += 1
        count = len(questions) * args.rounds
        a, b = (np.concatenate(vectors[n]) for n in names)
        gap = float(np.abs(a - b).max())
        cosine = float((a * b).sum(axis=1).min())
        base = cpu_s[names[0]]
        for name in names:
            print(
                f"{size:5d} {name:10} {cpu_s[name] / count * 1000:9.2f}"
                f" {wall_s[name] / count * 1000:10.2f} {base / cpu_s[name]:10.2f}"
                f" {gap:11.2e} {cosine:9.7f}"
            )


if __name__ == "__main__":
    main()
