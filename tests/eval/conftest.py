"""Fixtures of the evaluation tests: a tiny corpus and dataset written by the tests.

The corpus is four short Markdown documents (one passage each) about unrelated
subjects, plus a "PDF" that is not one, so its ingestion fails. The real
embedder, the real database and the real query service answer every case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DOCS = {
    "lighthouse.md": (
        "# Keeper's log\n\nThe Brightwater lighthouse keeper climbs 212 steps to the lamp "
        "room every evening. The lamp is lit at dusk and put out at dawn.\n"
    ),
    "bakery.md": (
        "# Sourdough\n\nThe sourdough starter is fed with rye flour and water every morning. "
        "Loaves are baked at 240 degrees for forty minutes.\n"
    ),
    "orchard.md": (
        "# Apple orchard\n\nThe orchard grows 37 apple varieties. Harvest starts in September "
        "and the cider press opens in October.\n"
    ),
    "observatory.md": (
        "# Observatory\n\nThe observatory telescope has a mirror 2.4 metres wide. Public "
        "stargazing nights are held on the first Friday of each month.\n"
    ),
}

DATASET = """
name: tiny-eval
description: Four documents and a broken file.
corpus:
  - corpus/
cases:
  - id: steps
    question: How many steps does the lighthouse keeper climb to the lamp room?
    relevant:
      - source: lighthouse.md
        grade: 3
    expected: ["212"]
    tags: [lookup]
  - id: bake
    question: At what temperature are the sourdough loaves baked?
    relevant: [bakery.md]
    expected: ["240 degrees"]
    tags: [lookup]
  - id: manual
    question: What does the installation manual say about the voltage?
    relevant: [manual.pdf]
    expected: ["230 volts"]
    tags: [pdf]
  - id: worldcup
    question: Which country won the 1974 football world cup final?
    should_refuse: true
    tags: [refuse]
"""


@pytest.fixture
def tiny_dataset(tmp_path: Path) -> Path:
    """The tiny dataset YAML; its corpus holds four documents and one broken PDF."""
    root = tmp_path / "tiny"
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for name, text in DOCS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    # Claims to be a PDF, is not one: its ingestion fails, the run goes on.
    (corpus / "manual.pdf").write_bytes(b"%PDF-1.7\nthis is not really a PDF\n")
    path = root / "dataset.yaml"
    path.write_text(DATASET, encoding="utf-8")
    return path


WIDER_CASES = [
    ("lamp", "When is the lighthouse lamp lit?", "lighthouse.md", "dusk"),
    ("steps", "How many steps does the lighthouse keeper climb?", "lighthouse.md", "212"),
    ("feed", "What is the sourdough starter fed with?", "bakery.md", "rye flour"),
    ("bake", "At what temperature are the sourdough loaves baked?", "bakery.md", "240"),
    ("varieties", "How many apple varieties does the orchard grow?", "orchard.md", "37"),
    ("cider", "When does the orchard's cider press open?", "orchard.md", "October"),
    ("mirror", "How wide is the observatory telescope mirror?", "observatory.md", "2.4"),
    (
        "stargazing",
        "When are public stargazing nights at the observatory?",
        "observatory.md",
        "Friday",
    ),
]


@pytest.fixture
def wider_dataset(tiny_dataset: Path) -> Path:
    """The same corpus with eight answerable cases, two per document."""
    lines = ["name: wider-eval", "corpus: [corpus/]", "cases:"]
    for case_id, question, source, expected in WIDER_CASES:
        lines += [
            f"  - id: {case_id}",
            f'    question: "{question}"',
            f"    relevant: [{source}]",
            f'    expected: ["{expected}"]',
        ]
    path = tiny_dataset.parent / "wider.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user(
        username="maintainer", password="pw-maintainer", is_staff=True
    )
