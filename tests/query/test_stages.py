"""The stage contract and the one registry shape: plugging in without touching the runner."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from query_app.exceptions import ConfigurationError, UnknownReranker, UnknownStage
from query_app.models import QueryRun
from query_app.pipeline.options import RerankOptions
from query_app.pipeline.profiles import PROFILES, Profile, profile_stages
from query_app.pipeline.rerankers import RERANKERS, RerankResult
from query_app.pipeline.runner import pipeline_stages
from query_app.pipeline.stages import STAGES
from query_app.pipeline.types import STAGES as LINEAR_PATH
from query_app.pipeline.types import Candidate
from query_app.presentation import stage_summary
from query_app.services import QueryRequest, profile_needs, profile_resolve, query_answer
from ragsite.registry import Registry

ROOT = Path(__file__).resolve().parents[2]


class ReverseReranker:
    """A reranker written for this test: the retrieval order reversed."""

    uses_chat = False

    def check(self, options: RerankOptions) -> None:
        if options.batch_size == 7:  # stands for "its model is missing" in this test
            raise ConfigurationError("the reverse reranker's model is missing")

    def rerank(
        self, question: str, candidates: list[Candidate], *, options: RerankOptions, **_: object
    ) -> RerankResult:
        ranked = candidates[::-1]
        for position, cand in enumerate(ranked):
            cand.rerank_score = 1.0 - position / max(1, len(ranked))
        return RerankResult(candidates=ranked[: options.top_n], details={"method": "reversed"})


@pytest.fixture
def reverse_reranker():
    RERANKERS.add("reverse", ReverseReranker)
    yield
    RERANKERS._items.pop("reverse")


def test_a_registered_reranker_runs_with_nothing_else_changed(kb, reader, reverse_reranker):
    overrides = {
        "retrieval.candidate_k": 4,
        "rerank.kind": "reverse",
        "floor.min_vector_similarity": None,
    }
    plain = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question="How do I get a refund?",
            top_n=4,
            overrides={**overrides, "rerank.kind": "none"},
            retrieval_only=True,
        ),
    )
    reversed_run = query_answer(
        user=reader,
        request=QueryRequest(
            collection="kb",
            question="How do I get a refund?",
            top_n=4,
            overrides=overrides,
            retrieval_only=True,
        ),
    )
    plain_ids = [c["chunk_id"] for c in plain.citations]
    assert [c["chunk_id"] for c in reversed_run.citations] == plain_ids[::-1]
    rerank = next(s for s in reversed_run.trace if s["stage"] == "rerank")
    assert rerank["details"]["reranker"] == "reverse"
    assert rerank["details"]["method"] == "reversed"


def test_a_stage_check_fails_the_request_before_anything_runs(kb, reader, reverse_reranker):
    strict = {"rerank.kind": "reverse", "rerank.batch_size": 7, "rerank.required": True}
    with pytest.raises(ConfigurationError, match="reverse reranker's model is missing"):
        query_answer(
            user=reader,
            request=QueryRequest(
                collection="kb", question="How do I get a refund?", overrides=strict
            ),
        )
    assert not QueryRun.objects.exists()
    name, options = profile_resolve(profile="fast", overrides=strict)
    assert "model is missing" in str(profile_needs(profile=name, options=options).problem)


def test_a_missing_optional_part_is_run_without_and_reported_by_profile_needs(
    kb, reader, reverse_reranker
):
    lenient = {"rerank.kind": "reverse", "rerank.batch_size": 7}
    name, options = profile_resolve(profile="fast", overrides=lenient)
    needs = profile_needs(profile=name, options=options)
    assert needs.problem is None
    assert [(p.stage, p.short) for p in needs.runs_without] == [
        ("rerank", "reverse reranker not available, skipped")
    ]

    run = query_answer(
        user=reader,
        request=QueryRequest(collection="kb", question="How do I get a refund?", overrides=lenient),
    )
    rerank = next(s for s in run.trace if s["stage"] == "rerank")
    assert rerank["details"]["method"] == "truncate"
    assert "reverse reranker's model is missing" in rerank["details"]["skipped_reason"]
    assert "so this step kept the retrieval order" in rerank["warnings"][0]


def test_every_step_carries_its_node_and_iteration(kb, reader):
    run = query_answer(
        user=reader, request=QueryRequest(collection="kb", question="How do I get a refund?")
    )
    assert [(s["node"], s["iteration"]) for s in run.trace] == [(name, 0) for name in LINEAR_PATH]


def test_profiles_list_their_stages_and_an_unknown_stage_is_named():
    assert profile_stages("fast") == LINEAR_PATH
    assert [s.name for s in pipeline_stages(LINEAR_PATH)] == list(LINEAR_PATH)
    with pytest.raises(UnknownStage, match="unknown stage 'critic'; known stages: assemble"):
        pipeline_stages(("transform", "critic"))
    # condense is in no profile: the answering service adds it for follow-ups only;
    # the corrective and adaptive graphs add their own nodes.
    graph_nodes = {"triage", "route", "respond", "decompose", "hops", "evaluate", "refine"}
    graph_nodes |= {"rewrite", "web"}
    assert set(STAGES.names()) == {*LINEAR_PATH, "condense", *graph_nodes}
    assert isinstance(PROFILES.get("fast"), Profile)


def test_each_stage_summarises_its_own_details():
    assert stage_summary(
        "rerank", {"candidates": 50, "kept": 5, "reranker": "none", "decision": "answer"}
    ) == ["50 → 5 kept", "none", "answer"]
    assert stage_summary(
        "retrieve", {"candidates": 12, "mode": "hybrid", "candidate_k": 50, "cache": "hit"}
    ) == ["12 candidates", "mode hybrid", "k=50", "cached"]
    # A stage this version does not know (an older stored run) still gets a row.
    assert stage_summary("critique", {"rounds": 2, "label": "x"}) == ["rounds 2"]


def test_a_registry_names_the_known_components_and_refuses_a_second_registration():
    registry: Registry[int] = Registry("widget")
    registry.add("b", 2)
    registry.add("a", 1)
    assert registry.names() == ["a", "b"]
    assert "a" in registry and "c" not in registry
    with pytest.raises(LookupError, match="unknown widget 'c'; known widgets: a, b"):
        registry.get("c")
    with pytest.raises(ValueError, match="registered twice"):
        registry.add("a", 3)
    with pytest.raises(UnknownReranker, match="known rerankers: cross-encoder, llm, none"):
        RERANKERS.get("colbert")


def test_evaluation_uses_only_the_public_face_of_the_answering_app():
    """eval_app imports query_app's services, models, exceptions and chat client, never
    the pipeline's internals: what evaluation measures is what users get."""
    offenders = []
    for path in (ROOT / "eval_app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            offenders += [
                f"{path.relative_to(ROOT)}:{node.lineno} {name}"
                for name in names
                if name.startswith("query_app.pipeline")
            ]
    assert offenders == []
