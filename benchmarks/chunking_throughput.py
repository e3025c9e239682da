"""How long chunking takes next to embedding the same text.

Builds a ~2 MB documentation text from what is installed (the long
descriptions of the virtualenv's packages, then the standard library's module
docstrings), chunks it with every strategy, embeds an evenly spaced sample of
the recursive chunks with the default model to estimate what embedding all of
them costs, and prints the figures. Semantic chunking embeds every sentence, so
it is measured on a slice and compared with embedding that slice's chunks.

    .venv/bin/python benchmarks/chunking_throughput.py [--mb 2] [--sample 128]
"""

from __future__ import annotations

import argparse
import ast
import sysconfig
import time
from importlib import metadata
from pathlib import Path

from _django import django_setup


def documentation_text(target_chars: int) -> str:
    """Package long descriptions, then stdlib docstrings, until ``target_chars``."""
    parts: list[str] = []
    size = 0
    for dist in sorted(metadata.distributions(), key=lambda d: d.metadata["Name"] or ""):
        body = dist.metadata.get_payload() or ""  # type: ignore[attr-defined]
        if len(body) > 2000:
            parts.append(f"# {dist.metadata['Name']}\n\n{body.strip()}")
            size += len(parts[-1])
        if size >= target_chars:
            return "\n\n".join(parts)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        docs = [ast.get_docstring(tree)] + [
            ast.get_docstring(node)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.ClassDef)
        ]
        body = "\n\n".join(d for d in docs if d)
        if body:
            parts.append(f"# {path.stem}\n\n{body}")
            size += len(parts[-1])
        if size >= target_chars:
            break
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=2.0, help="size of the text in MB")
    parser.add_argument("--sample", type=int, default=128, help="chunks embedded for the estimate")
    parser.add_argument("--semantic-kb", type=int, default=100, help="slice for semantic, in kB")
    args = parser.parse_args()

    django_setup()
    from collections_app.embedding import get_embedder
    from collections_app.ingestion.chunking import CHUNKERS, get_chunker
    from collections_app.ingestion.types import LoadedDocument

    embedder = get_embedder()
    text = documentation_text(int(args.mb * 1_000_000))
    doc = LoadedDocument(text=text, kind="markdown", mime="text/markdown")
    print(f"text: {len(text) / 1e6:.2f} M characters")

    # CPU seconds (all threads) as well as wall-clock seconds: on a shared
    # machine the wall clock mostly measures the neighbours.
    results = {}
    for name in CHUNKERS:
        if name == "semantic":
            continue
        chunker = get_chunker(name, embedder=embedder)
        started, cpu = time.perf_counter(), time.process_time()
        drafts = chunker.chunk(doc)
        results[name] = (time.perf_counter() - started, time.process_time() - cpu, drafts)

    drafts = results["recursive"][2]
    step = max(1, len(drafts) // args.sample)
    sample = [d.text for d in drafts[::step]][: args.sample]
    embedder.encode(sample[:8])  # warm up
    started, cpu = time.perf_counter(), time.process_time()
    embedder.encode(sample)
    per_chunk = (time.perf_counter() - started) / len(sample)
    per_chunk_cpu = (time.process_time() - cpu) / len(sample)
    print(f"embedding: {1 / per_chunk:.1f} chunks/s on this machine")

    for name, (seconds, cpu_seconds, chunks) in results.items():
        embed_estimate = per_chunk * len(chunks)
        embed_cpu = per_chunk_cpu * len(chunks)
        tokens = sum(d.token_count for d in chunks) / max(len(chunks), 1)
        print(
            f"{name:<11} {seconds:6.2f} s ({cpu_seconds:5.2f} s CPU)  "
            f"{len(text) / seconds / 1e6:5.2f} MB/s  "
            f"{len(chunks):5d} chunks of {tokens:5.1f} tokens  "
            f"embedding them ~{embed_estimate:6.0f} s ({embed_cpu:6.0f} s CPU)  "
            f"chunking/embedding {seconds / embed_estimate:5.1%} ({cpu_seconds / embed_cpu:5.1%} CPU)"
        )

    piece = text[: args.semantic_kb * 1000]
    chunker = get_chunker("semantic", embedder=embedder)
    started = time.perf_counter()
    chunks = chunker.chunk(LoadedDocument(text=piece, kind="markdown", mime="text/markdown"))
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    embedder.encode([d.text for d in chunks])
    embed_seconds = time.perf_counter() - started
    print(
        f"semantic    {seconds:6.2f} s on {len(piece) / 1e3:.0f} kB, {len(chunks)} chunks; "
        f"embedding them {embed_seconds:.1f} s  chunking/embedding {seconds / embed_seconds:6.1%}"
    )


if __name__ == "__main__":
    main()
