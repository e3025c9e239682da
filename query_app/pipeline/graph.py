"""The graph runner: the corrective and adaptive profiles walk their stages with loops.

A graph is declarative: its nodes are stages (by name in the stage registry), and
an edge table maps ``(node, outcome)`` to the next node, where the outcome is what
the node's trace step says in ``details["outcome"]`` ("next" when it says
nothing; ``"*"`` in the table matches any outcome). Entering a *loop node*
(``rewrite``) spends one unit of the iteration budget; with the budget spent the
edge goes to the loop node's ``exhausted`` target instead.

Two independent bounds make a runaway loop impossible: the iteration budget
(``corrective.max_iterations``) and a cap on transitions
(``corrective.max_transitions``, derived from the budget when 0), plus a wall-clock
limit (``corrective.timeout_s``). Reaching a bound, or a node failing, ends the
walk: the best evidence so far is assembled and answered (or the answer
declines), and the final ``graph`` step says ``low_confidence`` with the reason.
The graph never raises for a loop condition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from query_app.chat import ChatClient
from query_app.exceptions import InvalidOption, UnknownStage
from query_app.pipeline.generation import NOT_FOUND_ANSWER, GenerationResult
from query_app.pipeline.stages import STAGES, PipelineState, Stage
from query_app.pipeline.stages.base import counted_chat
from query_app.pipeline.types import (
    AnswerEvent,
    PipelineEvent,
    RagQuery,
    StepEvent,
    TraceStep,
)
from ragsite.registry import Registry

logger = logging.getLogger(__name__)

END = "end"
ANY = "*"
MAX_ITERATIONS = 10
MAX_TRANSITIONS = 500


@dataclass(frozen=True)
class Graph:
    """Nodes (node name → stage name), the edge table, and where a walk starts."""

    name: str
    start: str
    nodes: Mapping[str, str]
    edges: Mapping[tuple[str, str], str]
    # Loop nodes: entering one spends an iteration; with none left, go to the target.
    exhausted: Mapping[str, str] = field(default_factory=dict)
    # Nodes run after a bound was reached when nothing was generated yet.
    finish: tuple[str, ...] = ("assemble", "generate")
    # A node whose outcome makes up for a spent budget (the web fallback found
    # evidence): the answer is then not flagged low-confidence for the budget.
    recovers: Mapping[str, str] = field(default_factory=dict)

    def next_node(self, node: str, outcome: str) -> str:
        return self.edges.get((node, outcome)) or self.edges.get((node, ANY)) or END

    def stage_names(self) -> tuple[str, ...]:
        """The distinct stages the graph may run, in a stable order (for checks)."""
        return tuple(dict.fromkeys(self.nodes.values()))

    def validate(self) -> None:
        """Every edge names a known node; every node a registered stage."""
        known = set(self.nodes) | {END}
        for (source, _), target in self.edges.items():
            for name in (source, target):
                if name not in known:
                    raise UnknownStage(name, sorted(known))
        for target in self.exhausted.values():
            if target not in known:
                raise UnknownStage(target, sorted(known))
        for stage in self.nodes.values():
            STAGES.get(stage)


def _unknown_graph(name: str, known: list[str]) -> InvalidOption:
    return InvalidOption(
        f"unknown graph {name!r} in option 'corrective.graph'; known graphs: {', '.join(known)}"
    )


GRAPHS: Registry[Graph] = Registry("graph", unknown=_unknown_graph)

_RETRIEVAL_EDGES: dict[tuple[str, str], str] = {
    ("transform", ANY): "retrieve",
    # Multi-hop: the sub-questions are searched one by one, checked between hops.
    ("decompose", ANY): "hops",
    ("hops", ANY): "fuse",
    ("retrieve", ANY): "fuse",
    ("fuse", ANY): "rerank",
    ("rerank", ANY): "evaluate",
    ("evaluate", "correct"): "assemble",
    ("evaluate", "ambiguous"): "refine",
    ("evaluate", "incorrect"): "rewrite",
    # The evidence defines a term of the question: one bridge hop (bridging.py).
    ("evaluate", "bridge"): "rewrite",
    ("refine", ANY): "assemble",
    ("rewrite", ANY): "retrieve",
    # After the budget (loop nodes' ``exhausted`` target): the opt-in web fallback.
    ("web", ANY): "assemble",
    ("assemble", ANY): "generate",
    ("generate", ANY): "groundedness",
    ("groundedness", "ungrounded"): "rewrite",
    ("groundedness", ANY): END,
    ("respond", ANY): END,
}

# The stages the corrective and adaptive profiles list (profiles.py): every one is
# checked before anything runs, and the ask page lists them.
GRAPH_STAGES = (
    "triage",
    "decompose",
    "hops",
    "transform",
    "retrieve",
    "fuse",
    "rerank",
    "evaluate",
    "refine",
    "rewrite",
    "web",
    "assemble",
    "generate",
    "groundedness",
)

_NODES = {name: name for name in ("triage", "route", "respond", *GRAPH_STAGES[1:])}

GRAPHS.add(
    "corrective",
    Graph(
        name="corrective",
        start="triage",
        nodes={k: v for k, v in _NODES.items() if k != "route"},
        edges={
            ("triage", "chit-chat"): "respond",
            ("triage", "unsafe"): "respond",
            ("triage", "complex"): "decompose",
            ("triage", ANY): "transform",
            **_RETRIEVAL_EDGES,
        },
        exhausted={"rewrite": "web"},
        recovers={"web": "found"},
    ),
)

# Adaptive: the route node picks no retrieval, a single shot (the balanced path,
# checked offline, never a model call) or the iterative corrective path.
_SINGLE = {
    ("single:transform", ANY): "single:retrieve",
    ("single:retrieve", ANY): "single:fuse",
    ("single:fuse", ANY): "single:rerank",
    # A cheap offline check: evidence defining a term of the question (bridging.py)
    # leaves the single shot for the iterative path's bridge hop.
    ("single:rerank", ANY): "single:evaluate",
    ("single:evaluate", "bridge"): "rewrite",
    # Evidence that shares too few of the question's words (a vocabulary gap): one
    # rewritten search, fused with the first; partly relevant evidence: refined.
    ("single:evaluate", "retry"): "single:rewrite",
    ("single:rewrite", ANY): "single:retrieve",
    ("single:evaluate", "ambiguous"): "single:refine",
    ("single:refine", ANY): "single:assemble",
    ("single:evaluate", ANY): "single:assemble",
    ("single:assemble", ANY): "single:generate",
    ("single:generate", ANY): "single:groundedness",
    ("single:groundedness", ANY): END,
}
GRAPHS.add(
    "adaptive",
    Graph(
        name="adaptive",
        start="route",
        nodes={
            **{k: v for k, v in _NODES.items() if k != "triage"},
            **{
                f"single:{s}": s
                for s in (
                    "transform",
                    "retrieve",
                    "fuse",
                    "rerank",
                    "evaluate",
                    "refine",
                    "rewrite",
                    "assemble",
                    "generate",
                    "groundedness",
                )
            },
        },
        edges={
            ("route", "none"): "respond",
            ("route", "single"): "single:transform",
            ("route", "iterative"): "decompose",
            ("route", ANY): "single:transform",
            **_SINGLE,
            **_RETRIEVAL_EDGES,
        },
        exhausted={"rewrite": "web", "single:rewrite": "single:assemble"},
        recovers={"web": "found"},
    ),
)


@dataclass(frozen=True)
class Bounds:
    max_iterations: int
    max_transitions: int
    timeout_s: float

    @classmethod
    def of(cls, query: RagQuery) -> Bounds:
        o = query.options.corrective
        budget = o.max_iterations
        cap = o.max_transitions or 7 * (budget + 2) + 10
        return cls(max_iterations=budget, max_transitions=cap, timeout_s=o.timeout_s)


def graph_validate_options(max_iterations: int, max_transitions: int, timeout_s: float) -> None:
    """Ranges of the corrective block, each with a clear message."""
    if not 0 <= max_iterations <= MAX_ITERATIONS:
        raise InvalidOption(
            f"option 'corrective.max_iterations' must be between 0 and {MAX_ITERATIONS}, "
            f"got {max_iterations}"
        )
    if max_transitions and not 5 <= max_transitions <= MAX_TRANSITIONS:
        raise InvalidOption(
            "option 'corrective.max_transitions' must be 0 (derived from the budget) or "
            f"between 5 and {MAX_TRANSITIONS}, got {max_transitions}"
        )
    if not 0 < timeout_s <= 3600:
        raise InvalidOption(
            f"option 'corrective.timeout_s' must be above 0 and at most 3600, got {timeout_s:g}"
        )


def graph_for(query: RagQuery) -> Graph:
    name = query.options.corrective.graph or query.profile
    return GRAPHS.get(name)


def graph_run(
    query: RagQuery,
    *,
    chat: ChatClient | None,
    graph: Graph | None = None,
    stages: Mapping[str, Stage] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[PipelineEvent]:
    """Walk ``graph`` for ``query``, yielding events; the last one is the AnswerEvent.

    ``stages`` replaces the registry's stages by node name (the property test
    drives the graph with scripted nodes); ``clock`` measures the time limit.
    """
    graph = graph or graph_for(query)
    bounds = Bounds.of(query)
    nodes: dict[str, Stage] = {}
    for node, stage_name in graph.nodes.items():
        stage = (stages or {}).get(node) or STAGES.get(stage_name)()
        stage.node = node
        nodes[node] = stage
    state = PipelineState(query=query, chat=counted_chat(chat))
    trace: list[TraceStep] = []
    path: list[str] = []
    started = clock()
    transitions = 0
    stop_reason = recovered = ""
    node = graph.start

    warned: set[tuple[str, str]] = set()

    def traced(step: TraceStep) -> StepEvent:
        # A warning a loop repeats (a reranker missing here) is said once; later
        # steps count the repeats.
        fresh = [w for w in step.warnings if (step.stage, w) not in warned]
        if len(fresh) < len(step.warnings):
            step.details["repeated_warnings"] = len(step.warnings) - len(fresh)
            step.warnings = fresh
        warned.update((step.stage, w) for w in fresh)
        for warning in step.warnings:
            logger.info("%s node: %s", step.node, warning)
        trace.append(step)
        return StepEvent(step)

    if "condense" in query.stages:
        # A follow-up is made to stand alone first; every node reads the result.
        condense = STAGES.get("condense")()
        state, step = yield from condense.run(state)
        yield traced(step)

    while node != END:
        if transitions >= bounds.max_transitions:
            stop_reason = f"transition cap reached ({bounds.max_transitions} node runs)"
            break
        if clock() - started > bounds.timeout_s:
            stop_reason = f"time limit reached ({bounds.timeout_s:g} s)"
            break
        if node in graph.exhausted:
            if state.iteration >= bounds.max_iterations:
                # The budget is spent: answer with the best evidence so far.
                stop_reason = f"iteration budget spent ({bounds.max_iterations} rewrites)"
                # An answer already made is kept; else the best evidence is answered.
                node = END if state.generation is not None else graph.exhausted[node]
                continue
            state = state.with_(iteration=state.iteration + 1)
        transitions += 1
        path.append(node)
        stage = nodes[node]
        try:
            state, step = yield from stage.run(state)
        except Exception as exc:  # a failing node ends the walk, never the request
            logger.exception("graph %s: node %s failed", graph.name, node)
            step = TraceStep(stage=graph.nodes[node], node=node, iteration=state.iteration)
            step.details["outcome"] = "failed"
            step.warn(f"the {node} node failed ({type(exc).__name__}: {exc}); answered best-effort")
            yield traced(step)
            stop_reason = f"node {node} failed"
            break
        yield traced(step)
        yield from stage.events_after(state)
        if stop_reason and graph.recovers.get(node) == _outcome(step):
            recovered, stop_reason = f"{stop_reason}; the {node} node found evidence", ""
        node = graph.next_node(node, _outcome(step))

    if stop_reason and state.generation is None:
        state = yield from _finish(graph, nodes, state, traced)
    low_confidence = bool(stop_reason) and not _declined(state)
    end = TraceStep(stage="graph", node=END, iteration=state.iteration)
    end.details.update(
        {
            "graph": graph.name,
            "path": path,
            "transitions": transitions,
            "iterations": state.iteration,
            "max_iterations": bounds.max_iterations,
            "max_transitions": bounds.max_transitions,
            "low_confidence": low_confidence,
        }
    )
    if recovered and not stop_reason:
        end.details["recovered"] = recovered
    if stop_reason:
        end.details["reason"] = stop_reason
        if low_confidence:
            end.warn(f"{stop_reason}: best-effort answer, low confidence")
    yield traced(end)
    yield AnswerEvent(state.answer(trace))


def _outcome(step: TraceStep) -> str:
    """What the node's step decided: its ``outcome``, or ungrounded for a failed check."""
    outcome = step.details.get("outcome")
    if outcome:
        return str(outcome)
    if step.details.get("grounded") is False:
        return "ungrounded"
    return "next"


def _declined(state: PipelineState) -> bool:
    return state.generation is not None and state.generation.mode == "not-found"


def _finish(
    graph: Graph,
    nodes: Mapping[str, Stage],
    state: PipelineState,
    traced: Callable[[TraceStep], StepEvent],
) -> Generator[PipelineEvent, None, PipelineState]:
    """Best effort after a bound: assemble and answer the evidence so far, or decline."""
    for name in graph.finish:
        stage = nodes.get(name) or STAGES.get(name)()
        try:
            state, step = yield from stage.run(state)
        except Exception as exc:
            logger.exception("graph %s: best-effort %s failed", graph.name, name)
            step = TraceStep(
                stage=graph.nodes.get(name, name), node=name, iteration=state.iteration
            )
            step.warn(f"best-effort {name} failed ({type(exc).__name__}: {exc}); declined")
            yield traced(step)
            return state.with_(
                generation=GenerationResult(text=NOT_FOUND_ANSWER, mode="not-found"),
                citations=(),
            )
        step.details["best_effort"] = True
        yield traced(step)
        yield from stage.events_after(state)
    if state.generation is None:
        state = state.with_(generation=GenerationResult(text=NOT_FOUND_ANSWER, mode="not-found"))
    return state


def graph_summary(trace: list[TraceStep]) -> dict[str, Any]:
    """The end step's details (path, iterations, low_confidence), or {} for a linear run."""
    end = next((s for s in reversed(trace) if s.stage == "graph"), None)
    return dict(end.details) if end is not None else {}


def graph_flags(trace: list[dict[str, Any]]) -> dict[str, Any]:
    """For a stored run's payload: ``low_confidence`` and the adaptive ``route``.

    A linear run has neither flag set (False, None).
    """
    end = next((s for s in reversed(trace) if s.get("stage") == "graph"), None)
    routed = next((s for s in trace if s.get("stage") == "route"), None)
    responded = next((s for s in trace if s.get("stage") == "respond"), None)
    details = (end or {}).get("details") or {}
    return {
        # "chit-chat" or "declined" when the respond node answered without retrieval.
        "without_retrieval": ((responded or {}).get("details") or {}).get("decision"),
        "low_confidence": bool(details.get("low_confidence")),
        "low_confidence_reason": str(details.get("reason") or "")
        if details.get("low_confidence")
        else "",
        "route": ((routed or {}).get("details") or {}).get("route"),
    }
