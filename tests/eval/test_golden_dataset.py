"""The shipped golden dataset (eval/golden/) is complete and internally consistent."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from pypdf import PdfReader

from eval_app.datasets import (
    GoldenCase,
    dataset_check,
    dataset_corpus_paths,
    dataset_load,
    ref_matches,
)
from eval_app.metrics import expected_substring_match

GOLDEN = Path(__file__).resolve().parents[2] / "eval" / "golden" / "dataset.yaml"
REQUIRED_TAGS = {
    "lookup",
    "multi-part",
    "exact-code",
    "paraphrase",
    "typo",
    "table",
    "pdf",
    "refuse",
    "injection",
    "corrective",
    "multi-hop",
    "vocabulary-gap",
}
PLANTED = re.compile(r"ignore (all )?previous instructions|disregard all", re.IGNORECASE)


@pytest.fixture(scope="module")
def dataset():
    return dataset_load(GOLDEN)


@cache
def pages(path: Path) -> tuple[str, ...]:
    """The text of a corpus file, one entry per PDF page (one entry for other kinds)."""
    if path.suffix == ".pdf":
        return tuple(page.extract_text() for page in PdfReader(path).pages)
    if path.suffix == ".html":
        return (BeautifulSoup(path.read_bytes(), "lxml").get_text(" "),)
    return (path.read_text(encoding="utf-8"),)


def relevant_files(dataset, case: GoldenCase) -> list[Path]:
    return [
        path
        for ref in case.relevant
        if ref.grade >= 1
        for path in dataset_corpus_paths(dataset)
        if ref_matches(ref.source, path.as_posix())
    ]


def test_the_shipped_dataset_is_large_varied_and_resolves(dataset):
    files = dataset_corpus_paths(dataset)
    assert len(files) >= 30
    assert len(dataset.cases) >= 80
    kinds = Counter(path.suffix for path in files)
    assert kinds.keys() >= {".md", ".html", ".pdf", ".csv"}
    assert kinds[".pdf"] >= 3
    assert set(dataset.tags) >= REQUIRED_TAGS
    # Every ref names exactly one corpus file (dataset_load checked; say it here too).
    assert dataset_check(dataset) == []
    assert sum(path.stat().st_size for path in files) < 2 * 1024 * 1024


def test_refusals_have_no_relevant_sources_and_answers_have_some(dataset):
    refusals = [case for case in dataset.cases if case.should_refuse]
    assert len(refusals) >= 10
    assert all(case.relevant == () and "refuse" in case.tags for case in refusals)
    for case in dataset.cases:
        if not case.should_refuse:
            assert case.relevant_sources, case.id
            assert case.expected, case.id
            assert case.reference_answer, case.id


def test_expected_substrings_occur_in_a_relevant_document(dataset):
    missing = []
    for case in dataset.cases:
        texts = [" ".join(pages(path)) for path in relevant_files(dataset, case)]
        missing.extend(
            f"{case.id}: {needle!r}"
            for needle in case.expected
            if not any(expected_substring_match(text, [needle]) == 1.0 for text in texts)
        )
    assert missing == []


def test_pdfs_have_a_text_layer_and_some_answers_are_past_page_one(dataset):
    pdfs = [path for path in dataset_corpus_paths(dataset) if path.suffix == ".pdf"]
    assert all(all(text.strip() for text in pages(path)) for path in pdfs)
    assert any(len(pages(path)) >= 3 for path in pdfs)
    later_page_cases = []
    for case in dataset.cases:
        if "pdf" not in case.tags:
            continue
        for path in relevant_files(dataset, case):
            if path.suffix != ".pdf":
                continue
            first, *rest = pages(path)
            needles = list(case.expected)
            on_first = expected_substring_match(first, needles)
            on_later = expected_substring_match(" ".join(rest), needles)
            if on_first == 0.0 and on_later == 1.0:
                later_page_cases.append(case.id)
    assert len(later_page_cases) >= 5, later_page_cases


def test_injection_cases_point_at_documents_with_planted_instructions(dataset):
    planted = {
        path.name
        for case in dataset.cases
        if "injection" in case.tags
        for path in relevant_files(dataset, case)
        if PLANTED.search(path.read_text(encoding="utf-8", errors="replace"))
    }
    assert len(planted) >= 2, planted


def test_corrective_cases_need_a_second_document(dataset):
    corrective = [case for case in dataset.cases if "corrective" in case.tags]
    assert len(corrective) >= 5
    assert all(len(case.relevant_sources) >= 2 for case in corrective)


def test_multi_hop_and_vocabulary_gap_cases_for_the_corrective_profiles(dataset):
    multi_hop = [case for case in dataset.cases if "multi-hop" in case.tags]
    gap = [case for case in dataset.cases if "vocabulary-gap" in case.tags]
    assert len(multi_hop) >= 15 and len(gap) >= 15
    # A multi-hop answer needs two documents, each named by the case.
    assert all(len(case.relevant_sources) >= 2 for case in multi_hop)
    assert all(case.expected and not case.should_refuse for case in multi_hop + gap)
