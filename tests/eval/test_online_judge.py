"""Evaluation with a chat model (not --offline): the judge reads the cited passages.

No chat model can run here, so a scripted OpenAI-compatible server on loopback
plays both parts: it answers questions from the passages it is sent, and, as
the judge, says "grounded" only when the answer's claim stands in the passages
of the judge's prompt, as a real model would.
"""

from __future__ import annotations

import json
import re

import pytest

from eval_app.harness import eval_run_create, eval_run_execute
from eval_app.models import EvalRun
from tests.support.chat_server import Reply, completion

pytestmark = pytest.mark.django_db

FACTS = {"212 steps": "lighthouse", "240 degrees": "sourdough"}


def _passages_of(prompt: str) -> str:
    match = re.search(r"<passages>(.*)</passages>", prompt, re.DOTALL)
    return match.group(1) if match else ""


def _scripted_model(request: dict) -> Reply:
    system = request["messages"][0]["content"]
    user = request["messages"][-1]["content"]
    passages = _passages_of(user)
    if system.startswith("You check whether an answer is supported"):
        answer = re.search(r"<answer>(.*)</answer>", user, re.DOTALL)
        claim = next((f for f in FACTS if answer and f in answer.group(1)), None)
        grounded = claim is not None and claim in passages
        verdict = {"grounded": grounded, "score": 1.0 if grounded else 0.0, "unsupported": []}
        return completion(json.dumps(verdict))
    # Answering: state the fact passage 1 (the best ranked) holds, citing it.
    first = re.search(r'<passage id="1"[^>]*>(.*?)</passage>', passages, re.DOTALL)
    fact = next((f for f in FACTS if first and f in first.group(1)), None)
    return completion(f"It is {fact} [1]." if fact else "The collection does not say.")


def test_the_online_judge_reads_the_passages_the_answer_cites(tiny_dataset, chat_configured):
    chat_configured.responder = _scripted_model
    run = eval_run_create(dataset_path=tiny_dataset, compare="fast", offline=False)
    run = eval_run_execute(run=run)

    assert run.status == EvalRun.Status.SUCCEEDED, run.error
    results = {r.case_id: r for r in run.results.filter(profile="fast")}
    for case_id, fact in (("steps", "212 steps"), ("bake", "240 degrees")):
        result = results[case_id]
        assert fact in result.answer
        assert result.groundedness["judge"] == "llm (evaluation judge)"
        assert result.groundedness["grounded"] is True, result.groundedness
        assert result.metrics["groundedness"] == 1.0

    judge_prompts = [
        r["messages"][-1]["content"]
        for r in chat_configured.requests
        if r["messages"][0]["content"].startswith("You check whether an answer is supported")
    ]
    assert judge_prompts, "the chat model was never asked to judge"
    # Every judged answer came with the text of the passage it cites.
    assert all("lamp room" in p or "rye flour" in p for p in judge_prompts)
