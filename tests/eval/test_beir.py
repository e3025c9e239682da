"""BEIR import on a tiny BEIR-layout sample written by the test."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eval_app.datasets import (
    DatasetError,
    beir_load,
    beir_materialise,
    beir_ref,
    dataset_check,
    dataset_corpus_paths,
    ref_matches,
)

CORPUS = [
    {"_id": "d1", "title": "Vitamin D and bones", "text": "Vitamin D improves bone density."},
    {"_id": "d2", "title": "", "text": "Coffee intake was not associated with mortality."},
    {"_id": "d3", "title": "Sleep", "text": "Short sleep raises the risk of colds."},
    {"_id": "PMC/4", "title": "Odd id", "text": "An identifier with a slash."},
    {"_id": "d5", "title": "", "text": ""},
]
QUERIES = [
    {"_id": "q1", "text": "Vitamin D strengthens bones."},
    {"_id": "q2", "text": "Coffee shortens life.", "final_decision": "no", "long_answer": "No."},
    {"_id": "q3", "text": "Only judged not relevant."},
    {"_id": "q4", "text": "Never judged."},
    {"_id": "q5", "text": "Slashes in ids."},
]
QRELS = [
    ("q1", "d1", 2),
    ("q1", "d3", 1),
    ("q2", "d2", 1),
    ("q3", "d3", 0),
    ("q5", "PMC/4", 1),
]


def write_beir(directory: Path, qrels: list[tuple[str, str, int]] = QRELS) -> Path:
    (directory / "qrels").mkdir(parents=True)
    with (directory / "corpus.jsonl").open("w") as handle:
        handle.writelines(json.dumps(doc) + "\n" for doc in CORPUS)
    with (directory / "queries.jsonl").open("w") as handle:
        handle.writelines(json.dumps(query) + "\n" for query in QUERIES)
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (directory / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")
    return directory


def test_each_judged_query_becomes_a_case_with_graded_refs(tmp_path):
    dataset = beir_load(write_beir(tmp_path / "tiny"))
    assert dataset.format == "beir"
    # q3 has only a score-0 judgment and q4 none: neither can be scored.
    assert [case.id for case in dataset.cases] == ["q1", "q2", "q5"]
    q1 = dataset.case("q1")
    assert q1.question == "Vitamin D strengthens bones."
    assert q1.grades == {"d1.txt": 2, "d3.txt": 1}
    assert not q1.should_refuse
    # Extra query fields are kept; a long answer becomes the reference answer.
    q2 = dataset.case("q2")
    assert q2.extra["final_decision"] == "no"
    assert q2.reference_answer == "No."
    assert dataset.case("q5").grades == {"PMC%2F4.txt": 1}


def test_limit_queries_keeps_the_first_judged_queries(tmp_path):
    dataset = beir_load(write_beir(tmp_path / "tiny"), limit_queries=2)
    assert [case.id for case in dataset.cases] == ["q1", "q2"]
    full = beir_load(tmp_path / "tiny")
    assert dataset.content_hash != full.content_hash


def test_materialised_documents_carry_the_title_first_and_match_the_refs(tmp_path):
    directory = write_beir(tmp_path / "tiny")
    dataset = beir_load(directory)
    out = tmp_path / "docs"
    paths = beir_materialise(dataset, directory, out)
    # d5 has neither title nor text: nothing could retrieve it, so it is not written.
    assert [path.name for path in paths] == ["d1.txt", "d2.txt", "d3.txt", "PMC%2F4.txt"]
    assert (
        out / "d1.txt"
    ).read_text() == "Vitamin D and bones\n\nVitamin D improves bone density.\n"
    assert (out / "d2.txt").read_text() == "Coffee intake was not associated with mortality.\n"
    for case in dataset.cases:
        for ref in case.relevant:
            assert [p for p in paths if ref_matches(ref.source, str(p))] == [out / ref.source]


def test_materialising_again_rewrites_nothing(tmp_path):
    directory = write_beir(tmp_path / "tiny")
    dataset = beir_load(directory)
    out = tmp_path / "docs"
    paths = beir_materialise(dataset, directory, out)
    # Date every file back to a known instant: a rewrite would move it to now.
    for path in paths:
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    (out / "d1.txt").write_text("edited by hand\n")
    beir_materialise(dataset, directory, out)
    assert (out / "d1.txt").read_text().startswith("Vitamin D and bones")
    untouched = [path for path in paths if path.name != "d1.txt"]
    assert all(path.stat().st_mtime_ns == 1_000_000_000 for path in untouched)


def test_a_judgment_naming_a_missing_document_is_an_error(tmp_path):
    directory = write_beir(tmp_path / "tiny", qrels=[*QRELS, ("q2", "d404", 1)])
    with pytest.raises(DatasetError, match=r"case 'q2', field 'relevant': the ref 'd404\.txt'"):
        beir_load(directory)
    assert len(dataset_check(beir_load(directory, check_corpus=False))) == 1


def test_an_unknown_split_lists_the_known_ones(tmp_path):
    directory = write_beir(tmp_path / "tiny")
    with pytest.raises(DatasetError, match=r"no qrels for split 'dev' \(splits: test\)"):
        beir_load(directory, split="dev")


def test_broken_lines_are_reported_with_their_line(tmp_path):
    directory = write_beir(tmp_path / "tiny")
    with (directory / "qrels" / "test.tsv").open("a") as handle:
        handle.write("q1\td2\tvery\n")
    with (directory / "queries.jsonl").open("a") as handle:
        handle.write("{not json\n")
    with pytest.raises(DatasetError) as caught:
        beir_load(directory)
    lines = {(problem.path.name, problem.line) for problem in caught.value.problems}
    assert lines == {("test.tsv", 7), ("queries.jsonl", 6)}


def test_a_beir_corpus_is_ingested_through_its_materialised_files(tmp_path):
    dataset = beir_load(write_beir(tmp_path / "tiny"))
    with pytest.raises(DatasetError, match="beir_materialise"):
        dataset_corpus_paths(dataset)


def test_file_names_never_hide_a_document():
    assert beir_ref("12345") == "12345.txt"
    assert beir_ref(".profile") == "%2Eprofile.txt"
    assert beir_ref("a b/c") == "a%20b%2Fc.txt"
