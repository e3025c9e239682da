"""The graph runner's bounds: every walk ends, within its caps, with an answer or a decline.

The property test drives the corrective and adaptive graphs with scripted nodes
that return random verdicts, fail, or use up the time limit (a scripted clock),
over hundreds of seeded runs. No database: the scripted nodes stand in for the
stages, the runner and its edge tables are the real ones.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from query_app.exceptions import InvalidOption, UnknownStage
from query_app.pipeline.generation import GenerationResult
from query_app.pipeline.graph import ANY, END, GRAPHS, Graph, graph_run
from query_app.pipeline.options import options_build
from query_app.pipeline.stages.base import PipelineState, Stage
from query_app.pipeline.types import AnswerEvent, RagAnswer, RagQuery, StepEvent, TraceStep

OUTCOMES = {
    "triage": ["chit-chat", "unsafe", "simple", "complex"],
    "route": ["none", "single", "iterative"],
    "evaluate": ["correct", "ambiguous", "incorrect"],
    "groundedness": ["grounded", "ungrounded"],
}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ScriptedStage(Stage):
    """A node that picks a random outcome, sometimes fails, sometimes takes a long time."""

    rng: random.Random = field(default_factory=lambda: random.Random(0))
    clock: Clock = field(default_factory=Clock)
    failure_rate: float = 0.0
    slow_rate: float = 0.0
    stage_name: str = ""

    def run(self, state: PipelineState) -> Any:  # type: ignore[override]
        yield from ()
        if self.rng.random() < self.failure_rate:
            raise RuntimeError(f"{self.node} broke")
        if self.rng.random() < self.slow_rate:
            self.clock.now += 1000.0  # past any time limit
        step = TraceStep(stage=self.stage_name, node=self.node, iteration=state.iteration)
        base = self.node.split(":")[-1]
        choices = OUTCOMES.get(base)
        if choices:
            outcome = self.rng.choice(choices)
            step.details["outcome"] = outcome
            if base == "groundedness":
                step.details["grounded"] = outcome == "grounded"
        if base in ("generate", "respond"):
            mode: Any = self.rng.choice(["extractive", "not-found"])
            state = state.with_(generation=GenerationResult(text="answer", mode=mode))
        return state, step


def query(options: dict[str, Any], profile: str = "corrective") -> RagQuery:
    layer = {"corrective": {"graph": profile, **options}}
    return RagQuery(question="q", collection=None, options=options_build([layer]), profile=profile)


def walk(
    graph: Graph,
    q: RagQuery,
    make: Callable[[str, str], Stage],
    clock: Clock,
) -> tuple[RagAnswer, list[TraceStep]]:
    stages = {node: make(node, stage) for node, stage in graph.nodes.items()}
    events = list(graph_run(q, chat=None, graph=graph, stages=stages, clock=clock))
    assert isinstance(events[-1], AnswerEvent)
    assert all(isinstance(e, StepEvent) for e in events[:-1])
    answer = events[-1].answer
    return answer, answer.trace


@pytest.mark.parametrize("graph_name", ["corrective", "adaptive"])
def test_random_walks_end_within_their_bounds_with_an_answer_or_a_decline(graph_name):
    graph = GRAPHS.get(graph_name)
    rng = random.Random(20261130)
    endings: dict[str, int] = {"answer": 0, "decline": 0, "low_confidence": 0, "failed": 0}
    for _ in range(400):
        budget = rng.randint(0, 10)
        cap = rng.choice([0, rng.randint(5, 60)])
        clock = Clock()
        failure, slow = rng.choice([0.0, 0.02, 0.1]), rng.choice([0.0, 0.01, 0.05])

        def make(
            node: str,
            stage: str,
            clock: Clock = clock,
            failure: float = failure,
            slow: float = slow,
        ) -> Stage:
            return ScriptedStage(
                node=node,
                rng=rng,
                clock=clock,
                failure_rate=failure,
                slow_rate=slow,
                stage_name=stage,
            )

        q = query({"max_iterations": budget, "max_transitions": cap, "timeout_s": 60})
        answer, trace = walk(graph, q, make, clock)
        end = trace[-1]
        assert (end.stage, end.node) == ("graph", END)
        limit = end.details["max_transitions"]
        assert limit == (cap or 7 * (budget + 2) + 10)
        assert end.details["transitions"] <= limit
        assert len(end.details["path"]) == end.details["transitions"]
        assert end.details["iterations"] <= budget
        assert max(s.iteration for s in trace) <= budget
        # Graph nodes, at most one failed step, and the best-effort assemble + generate.
        assert len(trace) <= limit + len(graph.finish) + 2
        assert answer.mode in ("extractive", "not-found", "retrieval-only", "llm")
        if end.details["low_confidence"]:
            assert end.details["reason"]
            assert any("low confidence" in w for w in end.warnings)
            endings["low_confidence"] += 1
        if any("failed" in w for s in trace for w in s.warnings):
            endings["failed"] += 1
        endings["decline" if answer.mode == "not-found" else "answer"] += 1
    # The seeds reach every kind of ending (the test can fail, not pass on nothing).
    assert all(count > 0 for count in endings.values()), endings


def test_a_loop_that_never_succeeds_ends_at_the_budget_low_confidence():
    graph = GRAPHS.get("corrective")
    clock = Clock()

    class Stubborn(ScriptedStage):
        def run(self, state: PipelineState) -> Any:  # type: ignore[override]
            yield from ()
            step = TraceStep(stage=self.stage_name, node=self.node, iteration=state.iteration)
            outcome = {"triage": "simple", "evaluate": "incorrect"}.get(self.node, "")
            if outcome:
                step.details["outcome"] = outcome
            if self.node == "generate":
                state = state.with_(generation=GenerationResult(text="best", mode="extractive"))
            return state, step

    answer, trace = walk(
        graph,
        query({"max_iterations": 2}),
        lambda node, stage: Stubborn(node=node, stage_name=stage),
        clock,
    )
    end = trace[-1]
    assert [s.node for s in trace if s.node == "rewrite"] == ["rewrite", "rewrite"]
    assert [s.iteration for s in trace if s.node == "rewrite"] == [1, 2]
    assert end.details["low_confidence"] is True
    assert end.details["reason"] == "iteration budget spent (2 rewrites)"
    assert answer.text == "best"
    assert [s.node for s in trace[-4:-1]] == ["assemble", "generate", "groundedness"]


def test_a_cycle_without_a_loop_node_is_stopped_by_the_transition_cap():
    graph = Graph(
        name="cycle",
        start="a",
        nodes={"a": "retrieve", "b": "fuse", "assemble": "assemble", "generate": "generate"},
        edges={("a", ANY): "b", ("b", ANY): "a"},
    )
    clock = Clock()
    answer, trace = walk(
        graph,
        query({"max_transitions": 9}),
        lambda node, stage: ScriptedStage(node=node, stage_name=stage, rng=random.Random(1)),
        clock,
    )
    end = trace[-1]
    assert end.details["transitions"] == 9
    assert end.details["reason"] == "transition cap reached (9 node runs)"
    assert [s.details.get("best_effort") for s in trace[-3:-1]] == [True, True]
    assert answer.mode in ("extractive", "not-found")


def test_a_failing_node_is_traced_and_the_answer_declines_when_nothing_was_found():
    graph = GRAPHS.get("corrective")

    class Broken(ScriptedStage):
        def run(self, state: PipelineState) -> Any:  # type: ignore[override]
            if self.node in ("retrieve", "generate"):
                raise ConnectionError("database went away")
            return (yield from super().run(state))

    answer, trace = walk(
        graph,
        query({}),
        lambda node, stage: Broken(node=node, stage_name=stage, rng=random.Random(3)),
        Clock(),
    )
    failed = [s for s in trace if s.details.get("outcome") == "failed"]
    assert failed and "database went away" in failed[0].warnings[0]
    assert answer.mode == "not-found"
    assert any("best-effort generate failed" in w for s in trace for w in s.warnings)


@pytest.mark.parametrize(
    ("layer", "message"),
    [
        ({"max_iterations": 11}, "'corrective.max_iterations' must be between 0 and 10, got 11"),
        ({"max_iterations": -1}, "'corrective.max_iterations' must be between 0 and 10"),
        ({"max_transitions": 3}, "'corrective.max_transitions' must be 0"),
        ({"max_transitions": 501}, "between 5 and 500, got 501"),
        ({"timeout_s": 0}, "'corrective.timeout_s' must be above 0"),
        ({"graph": "zigzag"}, "unknown graph 'zigzag' in option 'corrective.graph'; known "),
        ({"grader": "oracle"}, "'corrective.grader' must be one of auto, offline, llm"),
        ({"lower": 0.8, "upper": 0.5}, "'corrective.lower' (0.8) must not be above"),
        ({"upper": 1.5}, "option 'corrective.upper' must be between 0 and 1"),
    ],
)
def test_bad_corrective_settings_fail_with_a_clear_message(rag_set, layer, message):
    from query_app.pipeline.profiles import options_resolve

    rag_set("profiles.corrective", {"corrective": layer})
    with pytest.raises(InvalidOption) as err:
        options_resolve(profile="corrective")
    assert message in str(err.value)


def test_an_edge_to_an_unknown_node_names_the_known_ones():
    graph = Graph(name="bad", start="a", nodes={"a": "retrieve"}, edges={("a", ANY): "rewrte"})
    with pytest.raises(UnknownStage) as err:
        graph.validate()
    assert "unknown stage 'rewrte'; known stages: a, end" in str(err.value)
    unknown_stage = Graph(name="bad", start="a", nodes={"a": "retreive"}, edges={})
    with pytest.raises(UnknownStage, match="unknown stage 'retreive'"):
        unknown_stage.validate()
