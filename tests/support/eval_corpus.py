"""A small golden dataset whose corpus holds a planted instruction, written by the tests.

Three ordinary documents answer the cases; ``release.md`` carries an instruction
to the model, so the ingestion before a run holds it in the quarantine, as the
evaluation corpora of real datasets do. Used by the evaluation-namespace tests
(tests/ui, tests/api) and the browser journeys of the evaluation pages.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.documents import PLAIN_INJECTION

EVAL_DOCS = {
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
    "release.md": PLAIN_INJECTION,
}

EVAL_DATASET_NAME = "planted-eval"

EVAL_DATASET = f"""
name: {EVAL_DATASET_NAME}
description: Three documents and one with a planted instruction.
corpus:
  - corpus/
cases:
  - id: steps
    question: How many steps does the lighthouse keeper climb to the lamp room?
    relevant: [lighthouse.md]
    expected: ["212"]
  - id: bake
    question: At what temperature are the sourdough loaves baked?
    relevant: [bakery.md]
    expected: ["240 degrees"]
  - id: varieties
    question: How many apple varieties does the orchard grow?
    relevant: [orchard.md]
    expected: ["37"]
  - id: worldcup
    question: Which country won the 1974 football world cup final?
    should_refuse: true
"""

# A second profile whose floor declines every answer: its cases fail at another
# stage than the first profile's, and its label is long.
STRICT_PROFILE = "fast:floor.min_vector_similarity=0.99"


def eval_dataset_write(root: Path) -> Path:
    """Write the dataset and its corpus under ``root``; the dataset file's path."""
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for name, text in EVAL_DOCS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    path = root / "dataset.yaml"
    path.write_text(EVAL_DATASET, encoding="utf-8")
    return path
