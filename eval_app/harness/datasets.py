"""Finding and loading the dataset a run evaluates (golden YAML or BEIR directory)."""

from __future__ import annotations

import functools
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.conf import settings

from eval_app.datasets import (
    DatasetError,
    DatasetProblem,
    GoldenDataset,
    beir_load,
    dataset_corpus_paths,
    dataset_load,
)
from eval_app.datasets import beir_materialise as _beir_materialise


def datasets_dir() -> Path:
    """Where the browser looks for datasets to offer (``EVAL_DATASETS_DIR``, else eval/)."""
    configured = getattr(settings, "EVAL_DATASETS_DIR", None)
    return Path(configured) if configured else Path(settings.BASE_DIR) / "eval"


@dataclass(frozen=True)
class LoadedDataset:
    """A dataset with the files of its corpus, ready to ingest."""

    dataset: GoldenDataset
    files: list[Path]


def beir_corpus_dir(dataset: GoldenDataset) -> Path:
    """Where a BEIR corpus is written out as files (under the var directory)."""
    return Path(settings.VAR_DIR) / "beir" / Path(dataset.base_dir).name


def eval_dataset_load(*, path: Path, beir: bool = False, limit: int | None = None) -> LoadedDataset:
    """Load and check a dataset; raises ``DatasetError`` naming file, line and field.

    A BEIR directory's documents are written to files first (unchanged files are
    left alone, so re-runs ingest nothing new).
    """
    path = Path(path)
    if beir:
        dataset = beir_load(path, limit_queries=limit)
        files = _beir_materialise(dataset, path, beir_corpus_dir(dataset))
        return LoadedDataset(dataset=dataset, files=files)
    if limit is not None:
        raise DatasetError(
            [DatasetProblem(path=path, message="--limit applies to BEIR datasets only")]
        )
    dataset = dataset_load(path)
    return LoadedDataset(dataset=dataset, files=dataset_corpus_paths(dataset))


def known_datasets(directory: Path | None = None) -> list[Path]:
    """Golden YAML datasets under ``directory`` (default ``datasets_dir()``): YAML files
    with ``corpus`` and ``cases``."""
    directory = directory or datasets_dir()
    found: list[Path] = []
    if not directory.is_dir():
        return found
    for path in sorted([*directory.rglob("*.yaml"), *directory.rglob("*.yml")]):
        if any(part.startswith(".") for part in path.relative_to(directory).parts):
            continue
        try:
            with path.open(encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(data, dict) and "cases" in data and "corpus" in data:
            found.append(path)
    return found


@functools.cache
def code_version() -> str:
    """``git describe`` of the working tree when available, else the package version."""
    base = Path(settings.BASE_DIR)
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--tags"],
            cwd=base,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        described = ""
    if described:
        return described[:100]
    try:
        with (base / "pyproject.toml").open("rb") as handle:
            version = tomllib.load(handle)["project"]["version"]
        return f"ragsite {version}"
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
