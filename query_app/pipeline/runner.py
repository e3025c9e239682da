"""The runner: a loop over the stages a profile lists.

``pipeline_run`` is a generator of events (a trace step as each stage ends,
the assembled citations, answer tokens, then the finished ``RagAnswer``), so
the browser can render progress; ``pipeline_answer`` runs it to the end.
Every stage appends exactly one ``TraceStep``, also when it is skipped, with
the reason in its details. The leading stages whose output depends only on
the question, the options and the index (transform → retrieve → fuse) are
served together from the retrieval cache.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from typing import Any

from query_app.chat import ChatClient
from query_app.pipeline.cache import (
    cached_candidate,
    retrieval_cache_candidates,
    retrieval_cache_get,
    retrieval_cache_key,
    retrieval_cache_set,
)
from query_app.pipeline.graph import graph_run
from query_app.pipeline.stages import STAGES, PipelineState, Stage, StageCheck
from query_app.pipeline.stages.base import counted_chat
from query_app.pipeline.types import (
    AnswerEvent,
    PipelineEvent,
    RagAnswer,
    RagQuery,
    StepEvent,
    TraceStep,
    timed_step,
)

logger = logging.getLogger(__name__)


def pipeline_stages(names: tuple[str, ...]) -> list[Stage]:
    """Fresh stages for ``names`` (UnknownStage, listing the known ones, for a bad name)."""
    return [STAGES.get(name)() for name in names]


def pipeline_check(query: RagQuery, *, chat: ChatClient | None) -> None:
    """Every stage checks its options before anything runs (missing models, embedders)."""
    check = StageCheck(
        options=query.options,
        collection=query.collection,
        chat_configured=chat is not None,
        allow_fallback=query.allow_fallback,
        retrieval_only=query.retrieval_only,
    )
    for stage in pipeline_stages(query.stages):
        stage.check(check)


def pipeline_answer(query: RagQuery, *, chat: ChatClient | None) -> RagAnswer:
    """Run every stage and return the answer (no streaming)."""
    for event in pipeline_run(query, chat=chat):
        if isinstance(event, AnswerEvent):
            return event.answer
    raise AssertionError("the pipeline ended without an answer")


def pipeline_run(query: RagQuery, *, chat: ChatClient | None) -> Iterator[PipelineEvent]:
    """Run the stages, yielding events; the last event is an AnswerEvent."""
    if query.options.corrective.graph:
        # The corrective and adaptive profiles walk a graph with bounded loops.
        yield from graph_run(query, chat=chat)
        return
    stages = pipeline_stages(query.stages)
    state = PipelineState(query=query, chat=counted_chat(chat))
    trace: list[TraceStep] = []

    def traced(step: TraceStep) -> StepEvent:
        # Trace warnings are for the person reading the answer, and most are
        # expected (no chat model configured, only common terms): the log gets
        # them at info level. Real failures are logged where they happen.
        for warning in step.warnings:
            logger.info("%s stage: %s", step.stage, warning)
        trace.append(step)
        return StepEvent(step)

    cached = _cached_prefix(stages)
    if cached and query.options.cache.enabled:
        state = yield from _run_cached(stages[:cached], state, traced)
        stages = stages[cached:]
    for stage in stages:
        state, step = yield from stage.run(state)
        yield traced(step)
        yield from stage.events_after(state)
    yield AnswerEvent(state.answer(trace))


def _cached_prefix(stages: list[Stage]) -> int:
    """How many leading stages the retrieval cache may serve."""
    count = 0
    for stage in stages:
        if not stage.cacheable:
            break
        count += 1
    return count


def _run_cached(
    stages: list[Stage], state: PipelineState, traced: Callable[[TraceStep], StepEvent]
) -> Generator[PipelineEvent, None, PipelineState]:
    """Serve ``stages`` from the retrieval cache, or run them and keep their result there."""
    with timed_step("transform") as lookup:
        key = retrieval_cache_key(state.query)
        hit = retrieval_cache_get(key)
        # The entry holds no texts: they are read back by primary key.
        candidates = (
            retrieval_cache_candidates(state.query.collection.pk, hit["candidates"])
            if hit is not None
            else None
        )
    if hit is not None and candidates is not None:
        steps = [TraceStep.from_dict(s) for s in hit["steps"]]
        for step in steps:
            # The lookup is all the work these stages did this time.
            step.duration_ms = lookup.duration_ms if step is steps[0] else 0.0
            step.details["cache"] = "hit"
            step.details["model_calls"] = 0
            yield traced(step)
            if step.details.get("corrected"):
                # The answer reads the question as retrieval did (spelling corrected).
                state = state.with_(standalone=str(step.details["corrected"]))
        return state.with_(candidates=tuple(candidates))
    steps = []
    for stage in stages:
        state, step = yield from stage.run(state)
        step.details["cache"] = "miss"
        steps.append(step)
        yield traced(step)
        yield from stage.events_after(state)
    retrieval_cache_set(
        key,
        {
            "steps": [_cached_step(s) for s in steps],
            "candidates": [cached_candidate(c) for c in state.candidates],
        },
        ttl_s=state.options.cache.ttl_s,
    )
    return state


def _cached_step(step: TraceStep) -> dict[str, Any]:
    """A step as the cache keeps it (without the cache marker of this run)."""
    data = step.as_dict()
    data["details"] = {k: v for k, v in step.details.items() if k != "cache"}
    return data
