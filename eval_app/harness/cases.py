"""One case through one profile: answer it, read its ranking, score it, classify a failure.

Each (case, profile) pair makes two calls to the query service, neither stored as
a query run:

- the **answer** call runs the profile exactly as configured (offline: extractive
  generator, heuristic judge) and gives the answer metrics, the latency, the
  model calls and the trace;
- the **ranking** call reads the same profile's ranking ``depth`` passages deep
  (retrieval only, top_n raised, no relevance floor, no context budget; see
  ``profiles.ranking_overrides``) and gives the retrieval metrics, which need more
  than the handful of passages an answer is built from.

A failed case is classified by the first stage that lost it (see ``classify``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User

from collections_app.models import Chunk, Collection
from eval_app.datasets import GoldenCase
from eval_app.harness.profiles import PlannedProfile
from eval_app.harness.types import ANSWER_METRICS
from eval_app.metrics import (
    expected_substring_match,
    hit_rate_at_k,
    mrr,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
    refusal_correct,
)
from eval_app.models import EvalCaseResult
from query_app.chat import ChatClient
from query_app.exceptions import QueryError
from query_app.models import QueryRun
from query_app.services import (
    JudgedPassage,
    QueryOptions,
    QueryRequest,
    answer_markers,
    groundedness_judge,
    query_answer,
)

Stage = EvalCaseResult.Stage
# Passages of the ranking stored with their snippet (the rest: source and score).
SNIPPET_RANKS = 20


@dataclass
class Judge:
    """How answers are judged when the pipeline did not check groundedness itself."""

    checker: str  # "heuristic" (offline) or "auto" (the chat model when configured)
    chat: ChatClient | None = None
    min_support: float = 0.6


@dataclass
class CaseOutcome:
    """Everything stored for one (case, profile) pair."""

    profile: str
    case: GoldenCase
    metrics: dict[str, float | None]
    retrieved: list[dict[str, Any]] = field(default_factory=list)
    answer: str = ""
    mode: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)
    refused: bool = False
    groundedness: dict[str, Any] | None = None
    failure_stage: str = ""
    failure_detail: str = ""
    latency_ms: float = 0.0
    model_calls: int = 0
    trace: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def retrieval_metrics(
    ranked: Sequence[str], grades: dict[str, int], k_values: Sequence[int]
) -> dict[str, float | None]:
    """recall, precision, hit rate and nDCG at each k, and MRR, for one ranking."""
    scores: dict[str, float | None] = {}
    for prefix, function in (
        ("recall", recall_at_k),
        ("precision", precision_at_k),
        ("hit_rate", hit_rate_at_k),
        ("ndcg", ndcg_at_k),
    ):
        for k in k_values:
            scores[f"{prefix}@{k}"] = function(ranked, grades, k)
    scores["mrr"] = mrr(ranked, grades)
    return scores


def citation_validity(answer: str, citations: Sequence[dict[str, Any]]) -> float:
    """1.0 when the answer cites at least one passage and every ``[n]`` is one of them.

    An answer without any marker is not valid: none of its claims points at evidence.
    """
    markers = answer_markers(answer)
    available = {int(c["marker"]) for c in citations}
    return 1.0 if markers and all(m in available for m in markers) else 0.0


def cited_passages(citations: Sequence[dict[str, Any]]) -> list[JudgedPassage]:
    """The passages an answer was built from, rebuilt from its citations' chunks."""
    ids = [c["chunk_id"] for c in citations]
    texts = dict(Chunk.objects.filter(pk__in=ids).values_list("id", "text"))
    passages = []
    for c in citations:
        full = texts.get(c["chunk_id"], c.get("snippet", ""))
        # A passage cut to fit the budget is a prefix of its chunk.
        text = full[: max(0, int(c["char_end"]) - int(c["char_start"]))] or full
        passages.append(
            JudgedPassage(
                marker=int(c["marker"]),
                text=text,
                source=c.get("source", ""),
                title=c.get("title", ""),
                page=c.get("page"),
            )
        )
    return passages


def judge_groundedness(run: QueryRun, judge: Judge) -> tuple[dict[str, Any] | None, float | None]:
    """The groundedness verdict for an answer and its 1/0 score; None when refused.

    The pipeline's own verdict is used when its groundedness stage ran; otherwise
    the harness judges (heuristic offline, the chat model when configured). The
    verdict's ``judge`` says which one ran.
    """
    if run.mode in (QueryRun.Mode.NOT_FOUND, QueryRun.Mode.RETRIEVAL_ONLY) or not run.answer:
        return None, None
    if run.groundedness:
        verdict = dict(run.groundedness)
        verdict["judge"] = f"{verdict.get('checker', 'heuristic')} (pipeline stage)"
        return verdict, 1.0 if verdict.get("grounded") else 0.0
    result = groundedness_judge(
        answer=run.answer,
        passages=cited_passages(run.citations),
        checker=judge.checker,
        chat=judge.chat,
        min_support=judge.min_support,
    )
    verdict = result.as_dict()
    verdict["judge"] = f"{result.checker} (evaluation judge)"
    verdict["model_calls"] = result.model_calls
    if result.warnings:
        verdict["warnings"] = list(result.warnings)
    return verdict, 1.0 if result.grounded else 0.0


def classify(
    *,
    case: GoldenCase,
    ranked_refs: Sequence[str],
    pool_size: int,
    kept_size: int,
    admitted_refs: Sequence[str],
    refused: bool,
    grounded: float | None,
    expected_match: float | None,
) -> tuple[str, str]:
    """The first stage that lost the case, with a sentence saying how ("" when it passed).

    Answerable case: no relevant source among the passages the answer was built from
    → not in the candidate pool / in the pool but ranked out of the top_n / declined
    by the relevance floor (wrong refusal) / dropped by the context budget; else the
    answer itself: not grounded, or missing expected content. Unanswerable case:
    answering is a wrong refusal decision.
    """
    if case.should_refuse:
        if refused:
            return "", ""
        return Stage.WRONG_REFUSAL, "answered a question the corpus cannot answer"
    wanted = set(case.relevant_sources)
    if not wanted & set(admitted_refs):
        if not wanted & set(ranked_refs[:pool_size]):
            return Stage.NOT_IN_POOL, f"no relevant source among the {pool_size} candidates"
        best = next(i for i, ref in enumerate(ranked_refs, start=1) if ref in wanted)
        if best > kept_size:
            return (
                Stage.RANKED_OUT,
                f"best relevant passage ranked {best}, below the top {kept_size} kept",
            )
        if refused:
            return Stage.WRONG_REFUSAL, "declined although a relevant passage was kept"
        return Stage.DROPPED_BY_BUDGET, "a relevant passage was kept but did not fit the budget"
    if refused:  # cannot happen with passages admitted; kept for safety
        return Stage.WRONG_REFUSAL, "declined although relevant passages were admitted"
    if grounded is not None and grounded < 1.0:
        return Stage.NOT_GROUNDED, "the judge found unsupported sentences"
    if expected_match is not None and expected_match < 1.0:
        return (
            Stage.ANSWER_INCOMPLETE,
            f"{round(expected_match * 100)}% of the expected content is in the answer",
        )
    return "", ""


def _ranking_entries(
    case: GoldenCase, citations: Sequence[dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    locations = [c["source"] for c in citations]
    refs = case.ranked_refs(locations)
    grades = case.grades
    entries = []
    for rank, (citation, ref) in enumerate(zip(citations, refs, strict=True), start=1):
        entry: dict[str, Any] = {
            "rank": rank,
            "source": citation["source"],
            "ref": ref if ref in grades else None,
            "grade": grades.get(ref, 0),
            "chunk_id": citation["chunk_id"],
            "score": citation.get("score"),
        }
        if rank <= SNIPPET_RANKS:
            entry["snippet"] = citation.get("snippet", "")
            entry["page"] = citation.get("page")
        entries.append(entry)
    return refs, entries


def case_evaluate(
    *,
    case: GoldenCase,
    planned: PlannedProfile,
    collection: Collection,
    principal: User,
    k_values: Sequence[int],
    judge: Judge,
    retrieval_only: bool = False,
) -> CaseOutcome:
    """Run ``case`` through ``planned`` and score it; a pipeline error is a failed case.

    ``retrieval_only`` skips the answer call: only the ranking is scored (the answer
    metrics are None), as public retrieval benchmarks do.
    """
    try:
        answer_run = None
        if not retrieval_only:
            answer_run = query_answer(
                user=principal,
                request=QueryRequest(
                    collection=collection,
                    question=case.question,
                    profile=planned.spec.name,
                    overrides=planned.answer_overrides,
                ),
                store=False,
            )
        ranking_run = query_answer(
            user=principal,
            request=QueryRequest(
                collection=collection,
                question=case.question,
                profile=planned.spec.name,
                overrides=planned.ranking_overrides,
                retrieval_only=True,
            ),
            store=False,
        )
    except QueryError as exc:
        return _errored(case, planned.label, str(exc), k_values)

    ranked, entries = _ranking_entries(case, ranking_run.citations)
    metrics = retrieval_metrics(ranked, case.grades, k_values)
    if answer_run is None:
        return _ranking_only(case, planned, ranked, entries, metrics, ranking_run)
    refused = answer_run.mode == QueryRun.Mode.NOT_FOUND
    expected = (
        None if case.should_refuse else expected_substring_match(answer_run.answer, case.expected)
    )
    verdict, grounded = judge_groundedness(answer_run, judge)
    metrics["expected_match"] = expected
    metrics["refusal_accuracy"] = (
        1.0 if refusal_correct(refused=refused, should_refuse=case.should_refuse) else 0.0
    )
    metrics["citation_validity"] = (
        None if refused else citation_validity(answer_run.answer, answer_run.citations)
    )
    metrics["groundedness"] = grounded

    options = planned.options
    pool_size = _pool_size(options, ranked)
    admitted = case.ranked_refs([c["source"] for c in answer_run.citations])
    stage, detail = classify(
        case=case,
        ranked_refs=ranked,
        pool_size=pool_size,
        kept_size=options.rerank.top_n,
        admitted_refs=admitted,
        refused=refused,
        grounded=grounded,
        expected_match=expected,
    )
    return CaseOutcome(
        profile=planned.label,
        case=case,
        metrics=metrics,
        retrieved=entries,
        answer=answer_run.answer,
        mode=answer_run.mode,
        citations=list(answer_run.citations),
        refused=refused,
        groundedness=verdict,
        failure_stage=stage,
        failure_detail=detail,
        latency_ms=float(answer_run.total_ms),
        model_calls=int(answer_run.model_calls),
        trace=list(answer_run.trace),
    )


def _pool_size(options: QueryOptions, ranked: list[str]) -> int:
    """How many of the ranked sources were candidates: the retrieved ``candidate_k``,
    or everything the reranker saw."""
    return options.candidate_k if options.rerank.kind == "none" else len(ranked)


def _ranking_only(
    case: GoldenCase,
    planned: PlannedProfile,
    ranked: list[str],
    entries: list[dict[str, Any]],
    metrics: dict[str, float | None],
    ranking_run: QueryRun,
) -> CaseOutcome:
    """A retrieval-only outcome: answer metrics not applicable; failures by ranking."""
    metrics.update(dict.fromkeys(ANSWER_METRICS))
    options = planned.options
    stage, detail = "", ""
    if not case.should_refuse:
        pool_size = _pool_size(options, ranked)
        kept = ranked[: options.rerank.top_n]
        stage, detail = classify(
            case=case,
            ranked_refs=ranked,
            pool_size=pool_size,
            kept_size=options.rerank.top_n,
            admitted_refs=kept,
            refused=False,
            grounded=None,
            expected_match=None,
        )
    return CaseOutcome(
        profile=planned.label,
        case=case,
        metrics=metrics,
        retrieved=entries,
        mode=QueryRun.Mode.RETRIEVAL_ONLY,
        failure_stage=stage,
        failure_detail=detail,
        latency_ms=float(ranking_run.total_ms),
        model_calls=int(ranking_run.model_calls),
        trace=list(ranking_run.trace),
    )


def _errored(case: GoldenCase, label: str, message: str, k_values: Sequence[int]) -> CaseOutcome:
    """An error counts as a failed case: nothing retrieved, nothing said, nothing decided."""
    metrics = retrieval_metrics([], case.grades, k_values)
    metrics["expected_match"] = (
        None if case.should_refuse else (expected_substring_match("", case.expected))
    )
    # Neither a right answer nor a right refusal.
    metrics["refusal_accuracy"] = 0.0
    metrics["citation_validity"] = None
    metrics["groundedness"] = None
    return CaseOutcome(
        profile=label,
        case=case,
        metrics=metrics,
        failure_stage=Stage.ERROR,
        failure_detail=message,
        error=message,
    )
