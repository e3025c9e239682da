"""A dataset's corpus files: resolving its entries to files, checking refs and hashing."""

from __future__ import annotations

import glob
import hashlib
from collections.abc import Iterable
from pathlib import Path

from eval_app.datasets.types import DatasetError, DatasetProblem, GoldenDataset, ref_matches

_GLOB_CHARS = frozenset("*?[")
_HASH_BLOCK = 1 << 20


def _is_hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _expand_directory(directory: Path) -> list[Path]:
    # Hidden files and folders (.git, .DS_Store, editor swap files) are never corpus.
    return [
        path
        for path in directory.rglob("*")
        if path.is_file() and not _is_hidden(path.relative_to(directory))
    ]


def corpus_resolve(dataset: GoldenDataset) -> tuple[list[Path], list[DatasetProblem]]:
    """Expand every corpus entry of ``dataset`` to absolute file paths.

    A directory contributes all its files (recursively, hidden ones skipped), a glob
    its matching files (``**`` recurses), a plain path that one file. The dataset
    file itself is never part of its corpus. Entries that resolve to nothing are
    returned as problems rather than ignored: a typo would otherwise silently
    shrink the corpus.
    """
    problems: list[DatasetProblem] = []
    found: set[Path] = set()
    own_file = dataset.path.resolve()
    for entry in dataset.corpus:
        pattern = entry.pattern
        matches: list[Path]
        if _GLOB_CHARS & set(pattern):
            if Path(pattern).is_absolute():
                full = pattern
            else:
                full = str(Path(glob.escape(str(dataset.base_dir))) / pattern)
            matches = [Path(p) for p in glob.glob(full, recursive=True) if Path(p).is_file()]
            if not matches:
                problems.append(
                    DatasetProblem(
                        path=dataset.path,
                        line=entry.line,
                        field="corpus",
                        message=f"the glob {pattern!r} matches no file "
                        f"(relative to {dataset.base_dir})",
                    )
                )
        else:
            target = dataset.base_dir / pattern
            if target.is_dir():
                matches = _expand_directory(target)
                if not matches:
                    problems.append(
                        DatasetProblem(
                            path=dataset.path,
                            line=entry.line,
                            field="corpus",
                            message=f"the directory {pattern!r} holds no file",
                        )
                    )
            elif target.is_file():
                matches = [target]
            else:
                matches = []
                problems.append(
                    DatasetProblem(
                        path=dataset.path,
                        line=entry.line,
                        field="corpus",
                        message=f"{pattern!r} does not exist (relative to {dataset.base_dir})",
                    )
                )
        found.update(path.resolve() for path in matches)
    found.discard(own_file)
    return sorted(found), problems


def dataset_corpus_paths(dataset: GoldenDataset) -> list[Path]:
    """The corpus as sorted, absolute file paths; raises ``DatasetError`` when an entry
    resolves to nothing. A BEIR dataset's corpus is written out by ``beir_materialise``
    first."""
    if dataset.format == "beir":
        raise DatasetError(
            [
                DatasetProblem(
                    path=dataset.path,
                    message="a BEIR corpus is corpus.jsonl; write its documents out "
                    "with beir_materialise() and ingest the files it returns",
                )
            ]
        )
    paths, problems = corpus_resolve(dataset)
    if problems:
        raise DatasetError(problems)
    return paths


def corpus_refs_check(dataset: GoldenDataset) -> list[DatasetProblem]:
    """A YAML dataset's problems against its corpus files, without raising.

    Corpus entries that resolve to nothing, and refs that match no corpus file or
    more than one (an ambiguous ref would make recall count one document for two).
    """
    paths, problems = corpus_resolve(dataset)
    locations = [path.as_posix() for path in paths]
    for case in dataset.cases:
        for ref in case.relevant:
            matched = [loc for loc in locations if ref_matches(ref.source, loc)]
            if len(matched) == 1:
                continue
            if matched:
                shown = ", ".join(_short(loc, dataset.base_dir) for loc in matched[:5])
                message = (
                    f"the ref {ref.source!r} matches {len(matched)} corpus files ({shown}); "
                    "write a longer suffix so it names one"
                )
            else:
                message = f"the ref {ref.source!r} matches no corpus file"
            problems.append(
                DatasetProblem(
                    path=dataset.path,
                    line=ref.line,
                    case_id=case.id,
                    field="relevant",
                    message=message,
                )
            )
    return problems


def _short(location: str, base_dir: Path) -> str:
    try:
        return Path(location).relative_to(base_dir.resolve()).as_posix()
    except ValueError:
        return location


def content_hash(head: bytes, files: Iterable[Path], *, base_dir: Path) -> str:
    """SHA-256 over ``head`` (the dataset's own bytes) and each file's relative name
    and contents, in sorted order, so renaming a corpus file changes the hash too."""
    digest = hashlib.sha256()
    digest.update(hashlib.sha256(head).digest())
    base = base_dir.resolve()
    for path in sorted(files):
        try:
            name = path.resolve().relative_to(base).as_posix()
        except ValueError:
            name = path.resolve().as_posix()
        digest.update(name.encode("utf-8") + b"\0")
        file_digest = hashlib.sha256()
        with path.open("rb") as handle:
            while block := handle.read(_HASH_BLOCK):
                file_digest.update(block)
        digest.update(file_digest.digest())
    return digest.hexdigest()
