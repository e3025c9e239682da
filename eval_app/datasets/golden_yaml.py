"""The golden dataset YAML format and its loader.

A golden dataset is one YAML file::

    name: acme-docs                 # optional; defaults to the file name
    description: Questions about the Acme manuals.
    corpus:                         # a path, or a list of paths, directories or globs,
      - corpus/                     #   relative to this file; a directory means every
      - extra/*.pdf                 #   file under it (hidden files skipped), ** recurses
    cases:
      - id: install-port            # unique
        question: Which port does the server listen on by default?
        relevant:                   # source refs: suffixes of the ingested locations
          - guides/install.md       #   (grade 1 when written as a plain string)
          - source: faq.md
            grade: 3                #   0 not relevant .. 3 perfect
        expected: ["8743"]          # substrings a right answer contains (any case)
        reference_answer: The server listens on port 8743.
        tags: [lookup]
      - id: no-such-thing
        question: What is the CEO's home address?
        should_refuse: true         # then `relevant` must be empty
        tags: [refuse]

Only ``id`` and ``question`` are required; ``relevant``, ``expected`` and ``tags``
default to empty lists, ``reference_answer`` to "", ``should_refuse`` to false. A case
that should be answered needs at least one relevant ref of grade >= 1. A ref matches a
source when it equals the source's location or is a suffix of it starting at a "/"
(``install.md`` matches ``/srv/docs/guides/install.md``, not ``.../preinstall.md``),
and must match exactly one corpus file.

Every problem is reported with the file, the line and the field, all at once.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from eval_app.datasets.corpus_files import content_hash, corpus_refs_check, corpus_resolve
from eval_app.datasets.types import (
    DEFAULT_GRADE,
    MAX_GRADE,
    MIN_GRADE,
    CorpusEntry,
    DatasetError,
    DatasetProblem,
    GoldenCase,
    GoldenDataset,
    RelevantRef,
)
from eval_app.datasets.yaml_nodes import NULL_TAG, NodeReader, node_line

TOP_LEVEL_KEYS = ("name", "description", "corpus", "quarantine", "cases")
QUARANTINE_CHOICES = ("hold", "approve")
CASE_KEYS = (
    "id",
    "question",
    "relevant",
    "expected",
    "reference_answer",
    "tags",
    "should_refuse",
)
REQUIRED_CASE_KEYS = ("id", "question")
RELEVANT_KEYS = ("source", "grade")


class _GoldenReader(NodeReader):
    """Reads the golden dataset format from the node tree."""

    def grade(self, node: Node, *, case_id: str | None) -> int | None:
        value = (
            self.loader.construct_object(node, deep=True) if isinstance(node, ScalarNode) else None
        )
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not (MIN_GRADE <= value <= MAX_GRADE)
        ):
            self.problem(
                node,
                f"grade must be a whole number from {MIN_GRADE} to {MAX_GRADE}",
                case_id=case_id,
                field="relevant",
            )
            return None
        return value

    def relevant(self, node: Node, *, case_id: str | None) -> list[RelevantRef]:
        if isinstance(node, ScalarNode) and node.tag == NULL_TAG:
            return []
        if not isinstance(node, SequenceNode):
            self.problem(
                node,
                "must be a list of source refs (text, or {source: ..., grade: 0-3})",
                case_id=case_id,
                field="relevant",
            )
            return []
        refs: list[RelevantRef] = []
        seen: dict[str, int] = {}
        for item in node.value:
            source: str | None
            grade: int | None = DEFAULT_GRADE
            if isinstance(item, MappingNode):
                fields = self.mapping(item, RELEVANT_KEYS, what="a relevant ref", case_id=case_id)
                if "source" not in fields:
                    self.problem(
                        item, "a relevant ref needs a 'source'", case_id=case_id, field="relevant"
                    )
                    continue
                source = self.text(fields["source"].value, field="relevant", case_id=case_id)
                if "grade" in fields:
                    grade = self.grade(fields["grade"].value, case_id=case_id)
            else:
                source = self.text(item, field="relevant", case_id=case_id)
            if source is None or grade is None:
                continue
            if source in seen:
                self.problem(
                    item,
                    f"the ref {source!r} is listed twice (first on line {seen[source]})",
                    case_id=case_id,
                    field="relevant",
                )
                continue
            seen[source] = node_line(item)
            refs.append(RelevantRef(source=source, grade=grade, line=node_line(item)))
        return refs

    def case(self, node: Node, index: int) -> GoldenCase | None:
        if not isinstance(node, MappingNode):
            self.problem(node, f"case #{index + 1} must be a mapping of fields", field="cases")
            return None
        case_id = _raw_case_id(node)
        fields = self.mapping(node, CASE_KEYS, what="a case", case_id=case_id)
        for key in REQUIRED_CASE_KEYS:
            if key not in fields:
                self.problem(node, f"missing required field {key!r}", case_id=case_id, field=key)
        ok = True

        def get_text(key: str, *, required: bool) -> str:
            nonlocal ok
            if key not in fields:
                return ""
            value = self.text(fields[key].value, field=key, case_id=case_id, required=required)
            ok = ok and value is not None
            return value or ""

        the_id = get_text("id", required=True)
        question = get_text("question", required=True)
        reference_answer = get_text("reference_answer", required=False)
        before = len(self.problems)
        relevant = (
            self.relevant(fields["relevant"].value, case_id=case_id) if "relevant" in fields else []
        )
        # A ref already reported as broken must not also count as "no relevant source".
        ok = ok and len(self.problems) == before
        expected = (
            self.text_list(fields["expected"].value, field="expected", case_id=case_id)
            if "expected" in fields
            else []
        )
        tags = (
            self.text_list(fields["tags"].value, field="tags", case_id=case_id)
            if "tags" in fields
            else []
        )
        should_refuse: bool | None = False
        if "should_refuse" in fields:
            should_refuse = self.boolean(
                fields["should_refuse"].value, field="should_refuse", case_id=case_id
            )
        if should_refuse and relevant:
            self.problem(
                fields["relevant"].value,
                "a case with should_refuse: true must have no relevant sources",
                case_id=case_id,
                field="relevant",
            )
        elif should_refuse is False and not any(ref.grade >= 1 for ref in relevant) and ok:
            where = fields["relevant"].value if "relevant" in fields else node
            self.problem(
                where,
                "a case to be answered needs at least one relevant source of grade >= 1 "
                "(or should_refuse: true)",
                case_id=case_id,
                field="relevant",
            )
        if not ok or should_refuse is None or not the_id or not question:
            return None
        return GoldenCase(
            id=the_id,
            question=question,
            relevant=tuple(relevant),
            expected=tuple(expected),
            reference_answer=reference_answer,
            tags=tuple(tags),
            should_refuse=should_refuse,
            line=node_line(node),
        )

    def corpus(self, node: Node) -> list[CorpusEntry]:
        items = [node] if isinstance(node, ScalarNode) else None
        if isinstance(node, SequenceNode):
            items = list(node.value)
        if items is None:
            self.problem(node, "must be a path, or a list of paths or globs", field="corpus")
            return []
        entries = []
        for item in items:
            value = self.text(item, field="corpus")
            if value is not None:
                entries.append(CorpusEntry(pattern=value, line=node_line(item)))
        if not items:
            self.problem(node, "must name at least one file, directory or glob", field="corpus")
        return entries


def _raw_case_id(node: Node) -> str | None:
    """The id a case node declares, before any validation (to name it in problems)."""
    if not isinstance(node, MappingNode):
        return None
    for key, value in node.value:
        if isinstance(key, ScalarNode) and key.value == "id" and isinstance(value, ScalarNode):
            return value.value.strip() or None
    return None


def _compose(path: Path, loader: yaml.SafeLoader) -> Node | None:
    """The root node of the single document in the file; YAML syntax errors become a
    ``DatasetError`` at the parser's line and column."""
    try:
        return loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        detail = str(exc.problem or "")
        if exc.context:
            context = str(exc.context)
            # An unclosed quote or bracket is reported where the file ends; the line
            # where it was opened is the one to look at.
            if exc.context_mark and mark and exc.context_mark.line != mark.line:
                context += f" (opened on line {exc.context_mark.line + 1})"
            detail = f"{context}: {detail}" if detail else context
        raise DatasetError(
            [
                DatasetProblem(
                    path=path,
                    message=f"malformed YAML: {detail}",
                    line=mark.line + 1 if mark else None,
                    column=mark.column + 1 if mark else None,
                )
            ]
        ) from exc
    except yaml.YAMLError as exc:
        raise DatasetError([DatasetProblem(path=path, message=f"malformed YAML: {exc}")]) from exc


def dataset_load(path: Path, *, check_corpus: bool = True) -> GoldenDataset:
    """Read and validate a golden dataset YAML file.

    Raises ``DatasetError`` listing every problem (file, line, case id and field):
    malformed YAML, unknown keys, missing or mistyped fields, duplicate case ids and,
    when ``check_corpus`` is true, corpus entries that resolve to nothing and refs
    that match no corpus file (``dataset_check`` reports those without raising).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise DatasetError(
            [DatasetProblem(path=path, message=f"cannot be read: {exc.strerror or exc}")]
        ) from exc
    except UnicodeDecodeError as exc:
        raise DatasetError(
            [DatasetProblem(path=path, message=f"is not UTF-8 text (byte {exc.start})")]
        ) from exc

    loader = yaml.SafeLoader(text)
    try:
        root = _compose(path, loader)
        reader = _GoldenReader(path, loader)
        dataset = _read_dataset(reader, root, path, raw)
    finally:
        loader.dispose()
    if check_corpus:
        problems = corpus_refs_check(dataset)
        if problems:
            raise DatasetError(problems)
    return dataset


def _read_dataset(
    reader: _GoldenReader, root: Node | None, path: Path, raw: bytes
) -> GoldenDataset:
    """Build the dataset from the root node; raises ``DatasetError`` with every problem."""
    if root is None:
        raise DatasetError([DatasetProblem(path=path, message="the file is empty")])
    if not isinstance(root, MappingNode):
        reader.problem(root, f"the top level must be a mapping with {', '.join(TOP_LEVEL_KEYS)}")
        raise DatasetError(reader.problems)
    fields = reader.mapping(root, TOP_LEVEL_KEYS, what="the dataset")
    name = path.stem
    if "name" in fields:
        name = reader.text(fields["name"].value, field="name") or name
    description = ""
    if "description" in fields:
        description = (
            reader.text(fields["description"].value, field="description", required=False) or ""
        )
    quarantine = "hold"
    if "quarantine" in fields:
        quarantine = reader.text(fields["quarantine"].value, field="quarantine") or "hold"
        if quarantine not in QUARANTINE_CHOICES:
            reader.problem(
                fields["quarantine"].value,
                f"unknown value {quarantine!r}: use one of {', '.join(QUARANTINE_CHOICES)}",
                field="quarantine",
            )
    corpus: list[CorpusEntry] = []
    if "corpus" in fields:
        corpus = reader.corpus(fields["corpus"].value)
    else:
        reader.problem(root, "missing required field 'corpus'", field="corpus")
    cases: list[GoldenCase] = []
    if "cases" not in fields:
        reader.problem(root, "missing required field 'cases'", field="cases")
    elif not isinstance(fields["cases"].value, SequenceNode) or not fields["cases"].value.value:
        reader.problem(fields["cases"].value, "must be a non-empty list of cases", field="cases")
    else:
        first_line: dict[str, int] = {}
        for index, node in enumerate(fields["cases"].value.value):
            case_id = _raw_case_id(node)
            if case_id is not None and case_id in first_line:
                reader.problem(
                    node,
                    f"duplicate case id (first used on line {first_line[case_id]})",
                    case_id=case_id,
                    field="id",
                )
            elif case_id is not None:
                first_line[case_id] = node_line(node)
            case = reader.case(node, index)
            if case is not None:
                cases.append(case)
    if reader.problems:
        raise DatasetError(sorted(reader.problems, key=lambda p: p.line or 0))

    dataset = GoldenDataset(
        name=name,
        description=description,
        path=path,
        format="golden-yaml",
        base_dir=path.parent.resolve(),
        corpus=tuple(corpus),
        cases=tuple(cases),
        content_hash="",
        quarantine=quarantine,
    )
    files, _problems = corpus_resolve(dataset)
    # The hash covers what resolves; unresolvable entries are the check's business.
    digest = content_hash(raw, files, base_dir=dataset.base_dir)
    return replace(dataset, content_hash=digest)
