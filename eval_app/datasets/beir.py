"""Import of public benchmarks in the BEIR layout.

A BEIR directory holds ``corpus.jsonl`` (one ``{"_id", "title", "text"}`` object per
line), ``queries.jsonl`` (``{"_id", "text", ...}``) and ``qrels/<split>.tsv`` (a header
``query-id corpus-id score``, then one tab-separated judgment per line).

``beir_load`` turns it into a :class:`GoldenDataset`: one case per query that has at
least one judgment with score >= 1 (judgments of score 0 or less carry no gain and are
left out), its relevant refs being the judged documents as ``<_id>.txt`` with the
score as grade. Other query fields (PubMedQA's ``final_decision``, ``long_answer``)
are kept in ``case.extra``; ``long_answer``, when present, becomes the reference
answer. ``beir_materialise`` writes each document to ``<_id>.txt`` (title on the first
line) so the ordinary ingestion path ingests it and the refs suffix-match.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from eval_app.datasets.corpus_files import content_hash
from eval_app.datasets.types import (
    DatasetError,
    DatasetProblem,
    GoldenCase,
    GoldenDataset,
    RelevantRef,
)

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_DIR = "qrels"


def beir_ref(doc_id: str) -> str:
    """The file name (and so the dataset ref) of a BEIR document.

    Characters that are unsafe in a file name are percent-encoded, and a leading dot
    too, so that no document becomes a hidden file that directory listing skips.
    """
    name = quote(doc_id, safe="-_.~")
    if name.startswith("."):
        name = "%2E" + name[1:]
    return f"{name}.txt"


def _jsonl(path: Path, problems: list[DatasetProblem]) -> Iterator[tuple[int, dict[str, object]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(
                    DatasetProblem(
                        path=path, line=number, column=exc.colno, message=f"invalid JSON: {exc.msg}"
                    )
                )
                continue
            if not isinstance(record, dict) or not isinstance(record.get("_id"), str | int):
                problems.append(
                    DatasetProblem(path=path, line=number, field="_id", message="missing '_id'")
                )
                continue
            yield number, record


def _require(directory: Path, split: str) -> tuple[Path, Path, Path]:
    corpus = directory / CORPUS_FILE
    queries = directory / QUERIES_FILE
    qrels = directory / QRELS_DIR / f"{split}.tsv"
    missing = [p for p in (corpus, queries) if not p.is_file()]
    problems = [DatasetProblem(path=p, message="missing (not a BEIR directory?)") for p in missing]
    if not qrels.is_file():
        splits = sorted(p.stem for p in (directory / QRELS_DIR).glob("*.tsv"))
        known = ", ".join(splits) if splits else "none"
        problems.append(
            DatasetProblem(path=qrels, message=f"no qrels for split {split!r} (splits: {known})")
        )
    if problems:
        raise DatasetError(problems)
    return corpus, queries, qrels


def _read_qrels(path: Path, problems: list[DatasetProblem]) -> dict[str, dict[str, int]]:
    judgments: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if not row or not "".join(row).strip():
                continue
            if number == 1 and row[0].strip().lower() in {"query-id", "query_id", "qid"}:
                continue
            if len(row) != 3:
                problems.append(
                    DatasetProblem(
                        path=path,
                        line=number,
                        message=f"expected 3 tab-separated columns "
                        f"(query-id, corpus-id, score), got {len(row)}",
                    )
                )
                continue
            query_id, doc_id, score_text = (cell.strip() for cell in row)
            try:
                score = int(score_text)
            except ValueError:
                problems.append(
                    DatasetProblem(
                        path=path,
                        line=number,
                        field="score",
                        message=f"score {score_text!r} is not a whole number",
                    )
                )
                continue
            if score >= 1:
                judgments.setdefault(query_id, {})[doc_id] = score
    return judgments


def _corpus_ids(path: Path, problems: list[DatasetProblem]) -> set[str]:
    return {str(record["_id"]) for _number, record in _jsonl(path, problems)}


def beir_load(
    directory: Path,
    *,
    split: str = "test",
    limit_queries: int | None = None,
    check_corpus: bool = True,
) -> GoldenDataset:
    """Read a BEIR-layout directory as a dataset (see the module docstring).

    ``limit_queries`` keeps the first N judged queries in ``queries.jsonl`` order, a
    deterministic slice for quick runs; the corpus stays whole, since the other
    documents are the distractors. Raises ``DatasetError`` (file and line) for
    missing files, bad JSON or TSV lines and, when ``check_corpus`` is true,
    judgments naming documents absent from corpus.jsonl.
    """
    directory = Path(directory)
    corpus_path, queries_path, qrels_path = _require(directory, split)
    if limit_queries is not None and limit_queries < 1:
        raise DatasetError(
            [DatasetProblem(path=directory, message="limit_queries must be at least 1")]
        )
    problems: list[DatasetProblem] = []
    judgments = _read_qrels(qrels_path, problems)
    cases: list[GoldenCase] = []
    seen: set[str] = set()
    for number, record in _jsonl(queries_path, problems):
        query_id = str(record["_id"])
        if query_id in seen:
            problems.append(
                DatasetProblem(
                    path=queries_path, line=number, case_id=query_id, message="duplicate query id"
                )
            )
            continue
        seen.add(query_id)
        if query_id not in judgments:
            continue
        text = record.get("text")
        if not isinstance(text, str) or not text.strip():
            problems.append(
                DatasetProblem(
                    path=queries_path,
                    line=number,
                    case_id=query_id,
                    field="text",
                    message="a query needs a non-empty 'text'",
                )
            )
            continue
        if limit_queries is not None and len(cases) >= limit_queries:
            continue
        extra = {k: v for k, v in record.items() if k not in {"_id", "text"}}
        long_answer = extra.get("long_answer")
        cases.append(
            GoldenCase(
                id=query_id,
                question=text.strip(),
                relevant=tuple(
                    RelevantRef(source=beir_ref(doc_id), grade=grade)
                    for doc_id, grade in judgments[query_id].items()
                ),
                reference_answer=long_answer if isinstance(long_answer, str) else "",
                extra=extra,
                line=number,
            )
        )
    if not cases and not problems:
        problems.append(
            DatasetProblem(path=qrels_path, message=f"no query of {QUERIES_FILE} has a judgment")
        )
    if problems:
        raise DatasetError(problems)
    head = f"beir\0{split}\0{limit_queries}".encode()
    dataset = GoldenDataset(
        name=f"{directory.resolve().name}-{split}",
        description=f"BEIR dataset {directory.resolve().name}, split {split!r}",
        path=directory,
        format="beir",
        base_dir=directory.resolve(),
        corpus=(),
        cases=tuple(cases),
        content_hash=content_hash(
            head, [corpus_path, queries_path, qrels_path], base_dir=directory
        ),
    )
    if check_corpus:
        problems = beir_check(dataset)
        if problems:
            raise DatasetError(problems)
    return dataset


def beir_check(dataset: GoldenDataset) -> list[DatasetProblem]:
    """Refs of a BEIR dataset that name no document of its corpus.jsonl."""
    corpus_path = dataset.base_dir / CORPUS_FILE
    problems: list[DatasetProblem] = []
    known = {beir_ref(doc_id) for doc_id in _corpus_ids(corpus_path, problems)}
    for case in dataset.cases:
        for ref in case.relevant:
            if ref.source not in known:
                problems.append(
                    DatasetProblem(
                        path=dataset.base_dir / QRELS_DIR,
                        case_id=case.id,
                        field="relevant",
                        message=f"the ref {ref.source!r} names no document of {CORPUS_FILE}",
                    )
                )
    return problems


def beir_materialise(dataset: GoldenDataset, directory: Path, out_dir: Path) -> list[Path]:
    """Write every document of ``directory/corpus.jsonl`` to ``out_dir/<_id>.txt``.

    The title is the first line, then a blank line and the text. Files whose content
    is already right are left untouched, so a second call costs no re-ingestion;
    other files in ``out_dir`` are left alone. Documents with neither title nor text
    are skipped (nothing could retrieve them). Returns the written paths in corpus
    order. Raises ``DatasetError`` when a relevant ref of ``dataset`` got no file.
    """
    directory = Path(directory)
    out_dir = Path(out_dir)
    corpus_path = directory / CORPUS_FILE
    out_dir.mkdir(parents=True, exist_ok=True)
    problems: list[DatasetProblem] = []
    written: list[Path] = []
    names: dict[str, int] = {}
    for number, record in _jsonl(corpus_path, problems):
        name = beir_ref(str(record["_id"]))
        if name in names:
            problems.append(
                DatasetProblem(
                    path=corpus_path,
                    line=number,
                    message=f"duplicate document id {record['_id']!r} "
                    f"(first on line {names[name]})",
                )
            )
            continue
        names[name] = number
        title = str(record.get("title") or "").strip()
        text = str(record.get("text") or "").strip()
        body = f"{title}\n\n{text}" if title and text else title or text
        if not body:
            continue
        target = out_dir / name
        data = (body + "\n").encode("utf-8")
        if not (target.is_file() and target.read_bytes() == data):
            target.write_bytes(data)
        written.append(target)
    present = {path.name for path in written}
    for case in dataset.cases:
        problems.extend(
            DatasetProblem(
                path=corpus_path,
                case_id=case.id,
                field="relevant",
                message=f"the relevant document {ref.source!r} was not written "
                "(missing or empty in the corpus)",
            )
            for ref in case.relevant
            if ref.source not in present
        )
    if problems:
        raise DatasetError(problems)
    return written
