"""What a golden dataset is once loaded: cases, graded relevance and their problems.

Both loaders (the YAML golden format and the BEIR import) produce these objects, so
the evaluation harness never cares where a dataset came from. This module is the
package's floor: it imports nothing from ``eval_app.datasets``; resolving and checking
a dataset's corpus live in ``corpus_files`` and ``checks``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

# Relevance grades follow the TREC convention: 0 judged not relevant, 1 relevant,
# 2 highly relevant, 3 perfect. Only grades >= 1 count as relevant for recall,
# precision, hit rate and MRR; nDCG uses every grade as gain 2**grade - 1.
MIN_GRADE = 0
MAX_GRADE = 3
DEFAULT_GRADE = 1

DatasetFormat = Literal["golden-yaml", "beir"]


@dataclass(frozen=True)
class DatasetProblem:
    """One thing wrong with a dataset, located as precisely as the input allows."""

    path: Path
    message: str
    line: int | None = None  # 1-based
    column: int | None = None  # 1-based
    case_id: str | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = str(self.path)
        if self.line is not None:
            where += f", line {self.line}"
            if self.column is not None:
                where += f", column {self.column}"
        subject = []
        if self.case_id is not None:
            subject.append(f"case {self.case_id!r}")
        if self.field is not None:
            subject.append(f"field {self.field!r}")
        prefix = f"{where}: " + (", ".join(subject) + ": " if subject else "")
        return prefix + self.message


class DatasetError(Exception):
    """A dataset cannot be used; the message lists every problem with file and line."""

    def __init__(self, problems: Sequence[DatasetProblem]) -> None:
        self.problems: list[DatasetProblem] = list(problems)
        if len(self.problems) == 1:
            message = str(self.problems[0])
        else:
            lines = [f"{len(self.problems)} problems:"]
            lines.extend(f"  - {problem}" for problem in self.problems)
            message = "\n".join(lines)
        super().__init__(message)


def ref_matches(ref: str, location: str) -> bool:
    """Whether a dataset source ref designates an ingested source location.

    A ref matches when it is the location itself or a suffix of it that starts at
    a path boundary: ``guide/install.md`` matches ``/srv/corpus/guide/install.md``
    but ``install.md`` does not match ``/srv/corpus/preinstall.md``. Backslashes
    count as slashes so refs written on one system match locations from another.
    """
    ref_norm = _normalise_ref(ref)
    loc_norm = location.replace("\\", "/")
    if not ref_norm:
        return False
    return loc_norm == ref_norm or loc_norm.endswith("/" + ref_norm)


def _normalise_ref(ref: str) -> str:
    norm = ref.strip().replace("\\", "/")
    while norm.startswith("./"):
        norm = norm[2:]
    return norm


def refs_for_locations(locations: Sequence[str], refs: Sequence[str]) -> list[str]:
    """Translate retrieved source locations (in rank order) into dataset refs.

    Each location becomes the ref it matches (the longest one when several do), or
    stays itself when it matches none, so the result can be handed straight to the
    metrics in ``eval_app.metrics``; duplicates are kept (the metrics dedupe).
    """
    ordered = sorted(refs, key=lambda r: len(_normalise_ref(r)), reverse=True)
    translated: list[str] = []
    for location in locations:
        translated.append(next((ref for ref in ordered if ref_matches(ref, location)), location))
    return translated


@dataclass(frozen=True)
class RelevantRef:
    """A source judged for one case: a suffix of its location and a grade 0-3."""

    source: str
    grade: int = DEFAULT_GRADE
    line: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class GoldenCase:
    """One question with what a good answer retrieves and says.

    ``expected`` substrings are matched case-insensitively against the answer;
    ``should_refuse`` cases have no relevant sources and are right when the system
    declines to answer.
    """

    id: str
    question: str
    relevant: tuple[RelevantRef, ...] = ()
    expected: tuple[str, ...] = ()
    reference_answer: str = ""
    tags: tuple[str, ...] = ()
    should_refuse: bool = False
    # Extra per-case data an importer carried over (e.g. PubMedQA's final_decision).
    extra: Mapping[str, object] = field(default_factory=dict, compare=False)
    line: int | None = field(default=None, compare=False)

    @property
    def grades(self) -> dict[str, int]:
        """Every judged ref with its grade, the shape the metrics take."""
        return {ref.source: ref.grade for ref in self.relevant}

    @property
    def relevant_sources(self) -> tuple[str, ...]:
        """The refs that count as relevant (grade >= 1), in dataset order."""
        return tuple(ref.source for ref in self.relevant if ref.grade >= 1)

    def ranked_refs(self, locations: Sequence[str]) -> list[str]:
        """Retrieved source locations in rank order, as this case's refs (see
        :func:`refs_for_locations`)."""
        return refs_for_locations(locations, [ref.source for ref in self.relevant])


@dataclass(frozen=True)
class CorpusEntry:
    """One ``corpus`` item as written: a file, a directory or a glob."""

    pattern: str
    line: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class GoldenDataset:
    """A loaded dataset: its cases, where its corpus lives and a content hash.

    ``content_hash`` is a SHA-256 over the dataset file and every corpus file (name
    and bytes), so a stored evaluation run can tell whether it was made on exactly
    the same data.
    """

    name: str
    description: str
    path: Path  # the YAML file, or the BEIR directory
    format: DatasetFormat
    base_dir: Path  # corpus entries are relative to this directory
    corpus: tuple[CorpusEntry, ...]
    cases: tuple[GoldenCase, ...]
    content_hash: str
    # What evaluation does with corpus files the injection validator holds back:
    # "hold" (they stay out of the index, as for any upload) or "approve" (a
    # reviewer's approval is recorded, so cases can test that the answer resists
    # the instructions planted in them).
    quarantine: str = "hold"

    def case(self, case_id: str) -> GoldenCase:
        """The case with that id; ``KeyError`` lists a few known ids otherwise."""
        for case in self.cases:
            if case.id == case_id:
                return case
        known = ", ".join(c.id for c in self.cases[:10])
        raise KeyError(f"no case {case_id!r} in dataset {self.name!r} (known: {known}, ...)")

    @property
    def tags(self) -> list[str]:
        """Every tag used by a case, sorted."""
        return sorted({tag for case in self.cases for tag in case.tags})
