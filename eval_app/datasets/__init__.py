"""Golden evaluation datasets: the YAML format, its loader and the BEIR import.

The format is documented in ``eval_app/datasets/golden_yaml.py`` and
``docs/golden-datasets.md``. Typical use::

    dataset = dataset_load(Path("eval/golden/dataset.yaml"))
    paths = dataset_corpus_paths(dataset)   # files to ingest
    for case in dataset.cases:
        ranked = case.ranked_refs(retrieved_locations)
        recall_at_k(ranked, case.grades, 5)
"""

from eval_app.datasets.beir import beir_load, beir_materialise, beir_ref
from eval_app.datasets.checks import dataset_check
from eval_app.datasets.corpus_files import dataset_corpus_paths
from eval_app.datasets.golden_yaml import dataset_load
from eval_app.datasets.types import (
    CorpusEntry,
    DatasetError,
    DatasetProblem,
    GoldenCase,
    GoldenDataset,
    RelevantRef,
    ref_matches,
    refs_for_locations,
)

__all__ = [
    "CorpusEntry",
    "DatasetError",
    "DatasetProblem",
    "GoldenCase",
    "GoldenDataset",
    "RelevantRef",
    "beir_load",
    "beir_materialise",
    "beir_ref",
    "dataset_check",
    "dataset_corpus_paths",
    "dataset_load",
    "ref_matches",
    "refs_for_locations",
]
