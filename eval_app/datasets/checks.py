"""A loaded dataset's problems against its corpus, whatever its format."""

from __future__ import annotations

from eval_app.datasets.beir import beir_check
from eval_app.datasets.corpus_files import corpus_refs_check
from eval_app.datasets.types import DatasetProblem, GoldenDataset


def dataset_check(dataset: GoldenDataset) -> list[DatasetProblem]:
    """Every problem of the dataset against its corpus, without raising.

    For a YAML dataset: corpus entries that resolve to nothing, and refs that match
    no corpus file or more than one. For a BEIR dataset: refs naming no document of
    corpus.jsonl.
    """
    if dataset.format == "beir":
        return beir_check(dataset)
    return corpus_refs_check(dataset)
