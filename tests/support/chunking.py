"""The documents and helpers the chunking tests share (tests/ingestion/test_chunking*.py).

GUIDE is a Markdown guide with nested sections, a table, a code fence and a list;
``long_document`` has sections whose paragraphs, lines and words each exceed a
small budget.
"""

from __future__ import annotations

from collections_app.ingestion.chunking import CHUNKERS
from collections_app.ingestion.types import ChunkDraft, LoadedDocument, PageSpan

STRATEGIES = sorted(CHUNKERS)


GUIDE = """# Guide

This guide explains how to install and run the application. Read it from start to end.

## Install

Installing takes a few minutes. You need an internet connection for the first run only.

### Linux

Download the archive and unpack it into your home directory. Run the installer script.
The script asks for your password once. It then copies the files into place.

| Distribution | Package | Minimum version |
| ---          | ---     | ---             |
| Debian       | deb     | 12              |
| Fedora       | rpm     | 39              |
| Arch         | pkg     | rolling         |

```bash
# this comment is code, not a heading
./install.sh --prefix ~/.local
./install.sh --check
```

- Make sure that ~/.local/bin is on your PATH.
- Log out and in again so that the desktop finds the new entry.
- Remove the archive afterwards to save space.

### Windows

Run the setup program and accept the licence. Windows may ask you to confirm twice.

## Run

Start the application from the menu. The first start builds an index and takes longer.
"""


def markdown_doc(text: str, pages: list[PageSpan] | None = None) -> LoadedDocument:
    """``text`` as a loaded Markdown document, with the given pages."""
    return LoadedDocument(text=text, kind="markdown", mime="text/markdown", pages=pages or [])


def source_span(doc: LoadedDocument, draft: ChunkDraft) -> str:
    """The document text between the chunk's offsets."""
    return doc.text[draft.char_start : draft.char_end]


def long_document() -> str:
    """Sections whose paragraphs, lines and words are each over a small budget."""
    sentences = " ".join(
        f"Sentence number {n} describes one step of the procedure in some detail."
        for n in range(60)
    )
    no_punctuation = " ".join(f"word{n}" for n in range(400))
    code = "\n".join(
        f"    result_{n} = compute(value_{n}, factor={n})  # step {n}" for n in range(80)
    )
    return (
        f"# Manual\n\n{sentences}\n\n## Data\n\n{no_punctuation}\n\n"
        f"## Code\n\n```python\n{code}\n```\n\n"
        f"## Identifiers\n\n{'x' * 3000} {'ab' * 700} {'-'.join(['part'] * 150)}\n"
    )
