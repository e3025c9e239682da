"""The golden dataset YAML loader: valid files, every kind of mistake, the shipped set."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from eval_app.datasets import (
    DatasetError,
    dataset_check,
    dataset_corpus_paths,
    dataset_load,
    ref_matches,
)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "install.md").write_text("# Install\nThe console listens on port 8743.\n")
    (docs / "guide" / "preinstall.md").write_text("# Before installing\nCheck the RAM.\n")
    (docs / "faq.md").write_text("# FAQ\nPayment terms are 30 days.\n")
    (docs / "prices.csv").write_text("sku,price\nSKU-1,10\n")
    (docs / ".swap.md").write_text("editor leftovers\n")
    return tmp_path


def write(directory: Path, text: str, name: str = "dataset.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


VALID = """
    name: tiny
    description: A tiny dataset.
    corpus: docs/
    cases:
      - id: port
        question: Which port does the console use?
        relevant:
          - guide/install.md
          - source: faq.md
            grade: 0
        expected: [8743, "console"]
        reference_answer: Port 8743.
        tags: [lookup]
      - id: refuse-weather
        question: What is the weather tomorrow?
        should_refuse: true
        tags: [refuse]
"""


def test_a_valid_dataset_loads_with_grades_and_defaults(corpus):
    dataset = dataset_load(write(corpus, VALID))
    assert dataset.name == "tiny"
    assert [case.id for case in dataset.cases] == ["port", "refuse-weather"]
    port = dataset.case("port")
    # Plain-string refs get grade 1; an unquoted number stays the text written.
    assert port.grades == {"guide/install.md": 1, "faq.md": 0}
    assert port.relevant_sources == ("guide/install.md",)
    assert port.expected == ("8743", "console")
    refusal = dataset.case("refuse-weather")
    assert refusal.should_refuse and refusal.relevant == () and refusal.expected == ()
    assert dataset.tags == ["lookup", "refuse"]


def test_the_corpus_resolves_to_absolute_files_without_hidden_ones(corpus):
    dataset = dataset_load(write(corpus, VALID))
    names = [path.relative_to(corpus / "docs").as_posix() for path in dataset_corpus_paths(dataset)]
    assert names == ["faq.md", "guide/install.md", "guide/preinstall.md", "prices.csv"]
    assert all(path.is_absolute() for path in dataset_corpus_paths(dataset))


def test_globs_and_the_whole_folder_exclude_the_dataset_file(corpus):
    text = VALID.replace("corpus: docs/", 'corpus: [".", "docs/**/*.csv"]')
    dataset = dataset_load(write(corpus, text))
    paths = dataset_corpus_paths(dataset)
    assert corpus / "dataset.yaml" not in paths
    assert (corpus / "docs" / "prices.csv").resolve() in paths


def test_content_hash_follows_the_corpus_files(corpus):
    path = write(corpus, VALID)
    first = dataset_load(path).content_hash
    assert dataset_load(path).content_hash == first
    (corpus / "docs" / "faq.md").write_text("# FAQ\nPayment terms are 45 days.\n")
    changed = dataset_load(path).content_hash
    assert changed != first
    (corpus / "docs" / "prices.csv").rename(corpus / "docs" / "prices-2024.csv")
    assert dataset_load(path).content_hash not in {first, changed}


def test_refs_match_at_a_path_boundary():
    assert ref_matches("guide/install.md", "/srv/docs/guide/install.md")
    assert ref_matches("install.md", "/srv/docs/guide/install.md")
    assert not ref_matches("install.md", "/srv/docs/guide/preinstall.md")
    assert ref_matches("./guide\\install.md", "C:\\docs\\guide\\install.md")


def test_ranked_locations_become_the_case_refs(corpus):
    case = dataset_load(write(corpus, VALID)).case("port")
    ranked = case.ranked_refs(["/x/docs/guide/install.md", "/x/docs/guide/preinstall.md"])
    assert ranked == ["guide/install.md", "/x/docs/guide/preinstall.md"]


def test_malformed_yaml_names_the_line(corpus):
    path = write(
        corpus,
        """
        name: broken
        corpus: docs/
        cases:
          - id: port
            question: "Which port?
            relevant: [guide/install.md]
        """,
    )
    with pytest.raises(DatasetError) as caught:
        dataset_load(path)
    message = str(caught.value)
    assert str(path) in message
    assert "malformed YAML" in message
    # The quote opened on line 5 is never closed; the parser notices at the end (line 7).
    assert "opened on line 5" in message and "line 7" in message


def test_bad_indentation_names_the_line_and_column(corpus):
    path = write(
        corpus,
        """
        corpus: docs/
        cases:
          - id: port
            question: Which port?
             relevant: [guide/install.md]
        """,
    )
    with pytest.raises(DatasetError, match=r"line 5, column 14: malformed YAML"):
        dataset_load(path)


def test_a_missing_field_is_named_with_its_case_and_line(corpus):
    path = write(
        corpus,
        """
        corpus: docs/
        cases:
          - id: port
            question: Which port?
            relevant: [guide/install.md]
          - id: no-question
            relevant: [faq.md]
        """,
    )
    with pytest.raises(DatasetError) as caught:
        dataset_load(path)
    (problem,) = caught.value.problems
    assert (problem.line, problem.case_id, problem.field) == (6, "no-question", "question")
    assert str(caught.value) == (
        f"{path}, line 6: case 'no-question', field 'question': missing required field 'question'"
    )


def test_an_unknown_key_lists_the_allowed_ones(corpus):
    path = write(
        corpus,
        """
        corpus: docs/
        cases:
          - id: port
            questoin: Which port?
            relevant: [guide/install.md]
        """,
    )
    with pytest.raises(DatasetError) as caught:
        dataset_load(path)
    message = str(caught.value)
    assert "line 4" in message and "unknown key 'questoin'" in message
    assert "allowed keys: id, question, relevant, expected, reference_answer, tags" in message
    assert "missing required field 'question'" in message


def test_every_problem_is_reported_at_once_in_line_order(corpus):
    path = write(
        corpus,
        """
        corpus: docs/
        colour: blue
        cases:
          - id: a
            question: One?
            relevant: [{source: faq.md, grade: 5}]
          - id: a
            question: Two?
            relevant: [faq.md]
          - id: c
            question: Three?
            should_refuse: true
            relevant: [faq.md]
          - id: d
            question: Four?
            should_refuse: maybe
          - id: e
            question: Five?
        """,
    )
    with pytest.raises(DatasetError) as caught:
        dataset_load(path)
    found = [(p.line, p.case_id, p.field) for p in caught.value.problems]
    assert found == [
        (2, None, "colour"),  # unknown top-level key
        (6, "a", "relevant"),  # grade 5 is outside 0-3
        (7, "a", "id"),  # duplicate id
        (13, "c", "relevant"),  # a refusal with relevant sources
        (16, "d", "should_refuse"),  # not a boolean
        (17, "e", "relevant"),  # answerable but nothing relevant
    ]
    assert str(caught.value).startswith("6 problems:")


def test_a_ref_to_a_source_not_in_the_corpus_names_the_case_and_the_ref(corpus):
    path = write(
        corpus,
        """
        corpus: docs/
        cases:
          - id: port
            question: Which port?
            relevant: [guide/install.md, guide/upgrade.md]
        """,
    )
    with pytest.raises(DatasetError) as caught:
        dataset_load(path)
    assert str(caught.value) == (
        f"{path}, line 5: case 'port', field 'relevant': "
        "the ref 'guide/upgrade.md' matches no corpus file"
    )


def test_check_reports_corpus_problems_without_raising(corpus):
    (corpus / "docs" / "more").mkdir()
    (corpus / "docs" / "more" / "faq.md").write_text("Another FAQ.\n")
    path = write(
        corpus,
        """
        corpus: [docs/, missing.md, "*.pdf"]
        cases:
          - id: port
            question: Which port?
            relevant: [stall.md, faq.md, more/faq.md]
        """,
    )
    dataset = dataset_load(path, check_corpus=False)
    messages = [problem.message for problem in dataset_check(dataset)]
    assert messages[0].startswith("'missing.md' does not exist")
    assert messages[1].startswith("the glob '*.pdf' matches no file")
    # "stall.md" is not a path-boundary suffix of "install.md".
    assert messages[2] == "the ref 'stall.md' matches no corpus file"
    assert messages[3].startswith("the ref 'faq.md' matches 2 corpus files")
    assert len(messages) == 4  # "more/faq.md" names one file: fine
    with pytest.raises(DatasetError, match=r"'missing\.md' does not exist"):
        dataset_corpus_paths(dataset)


def test_an_unreadable_dataset_file_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="cannot be read"):
        dataset_load(tmp_path / "nowhere.yaml")
    with pytest.raises(DatasetError, match="the file is empty"):
        dataset_load(write(tmp_path, "# only a comment\n"))
    with pytest.raises(DatasetError, match="the top level must be a mapping"):
        dataset_load(write(tmp_path, "- just\n- a list\n"))
