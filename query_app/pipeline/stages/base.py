"""The contract every answering stage keeps, and the state that flows between stages.

A stage has a name, a check of its options run before anything else (so a
missing model fails the request at once, not half-way through a streamed
answer), ``run(state)`` returning the new state and its trace step, and a
summary of its trace details for the collapsed trace row. The runner is a loop
over the stages a profile lists; the corrective graph walks the same stages
with loops, which is why the state counts iterations and every step carries
the node that ran it and the iteration it ran in.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from query_app.chat import ChatClient, CountingChatClient
from query_app.pipeline.assembly import AssembledContext
from query_app.pipeline.generation import GenerationResult
from query_app.pipeline.options import QueryOptions
from query_app.pipeline.types import (
    AnswerMode,
    Candidate,
    Citation,
    PipelineEvent,
    RagAnswer,
    RagQuery,
    TraceStep,
    timed_step,
)

# What a stage's run yields while it works (citations, answer tokens) and returns.
StageRun = Generator[PipelineEvent, None, "tuple[PipelineState, TraceStep]"]


@dataclass(frozen=True)
class StageCheck:
    """What a stage may look at before anything runs."""

    options: QueryOptions
    # The collection asked (None when only the options are checked, e.g. by evaluation).
    collection: Any = None
    chat_configured: bool = False
    allow_fallback: bool = True
    retrieval_only: bool = False


@dataclass(frozen=True)
class MissingPart:
    """An optional part a stage runs without because this deployment lacks it."""

    # The stage that runs without it.
    stage: str
    # A few words: "cross-encoder reranker not configured, skipped".
    short: str
    # How to enable it, in words ("" when nobody said).
    enable: str = ""


@dataclass(frozen=True)
class PipelineState:
    """Everything the stages have produced so far; each stage returns a new one."""

    query: RagQuery
    chat: CountingChatClient | None = None
    # How many times the run has looped back (0 on the linear path).
    iteration: int = 0
    # condense (follow-ups only): the question rewritten to stand alone, and by
    # whom (llm: the chat model; heuristic: the previous turn's terms carried).
    standalone: str = ""
    standalone_source: str = ""
    # transform: the texts retrieval searches with, and how their results combine.
    probes: tuple[str, ...] = ()
    probe_kind: str = "single"
    # retrieve: candidates per probe; fuse: one ranked list; rerank: the kept ones.
    per_probe: tuple[list[Candidate], ...] = ()
    candidates: tuple[Candidate, ...] = ()
    kept: tuple[Candidate, ...] = ()
    # assemble: the passages in the prompt, and their citations.
    context: AssembledContext | None = None
    citations: tuple[Citation, ...] = ()
    # generate / groundedness.
    generation: GenerationResult | None = None
    groundedness: dict[str, Any] | None = None
    # The corrective and adaptive graphs: what their nodes tell each other (the
    # triage label and reason, the latest verdict, the probes tried); never mutated.
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def options(self) -> QueryOptions:
        return self.query.options

    @property
    def search_question(self) -> str:
        """What retrieval and reranking read: a follow-up's standalone question, or the question."""
        return self.standalone or self.query.question

    @property
    def answer_question(self) -> str:
        """What the answer is written for: the same standalone question as retrieval.

        A follow-up's own words ("how do I fix it?") name no subject, so neither
        an answer sentence nor a chat model could be judged relevant to them;
        the run still shows the user's words.
        """
        return self.standalone or self.query.question

    @property
    def chat_calls(self) -> int:
        return self.chat.calls if self.chat is not None else 0

    def answer(self, trace: list[TraceStep]) -> RagAnswer:
        """The finished answer: what generation wrote (nothing for retrieval only), the trace."""
        mode: AnswerMode
        if self.generation is None:
            text, mode = "", "retrieval-only"
        else:
            text, mode = self.generation.text, self.generation.mode
        return RagAnswer(
            question=self.query.question,
            text=text,
            mode=mode,
            citations=list(self.citations),
            trace=trace,
            model_calls=self.chat_calls,
            groundedness=self.groundedness,
        )

    def with_(self, **changes: Any) -> PipelineState:
        """A copy with ``changes`` applied (stages never mutate the state they get)."""
        return dataclasses.replace(self, **changes)


@dataclass
class Stage:
    """Base of the answering stages; subclasses set ``name`` and implement ``execute``.

    ``execute(state, step)`` does the work, fills ``step`` (details, warnings)
    and returns the new state. A stage that streams (citations, answer tokens)
    overrides ``stream`` instead and yields its events. ``skip_reason`` names why
    a stage does nothing for this state; the runner then records a skipped step.
    """

    name: ClassVar[str]
    # The stage's output depends only on the question, its options and the
    # collection's index: it may be served from the retrieval cache.
    cacheable: ClassVar[bool] = False
    # Detail keys whose lists the trace shows as numbered lists, not comma-joined values.
    listed: ClassVar[frozenset[str]] = frozenset()
    node: str = field(default="")

    def check(self, check: StageCheck) -> None:
        """Raise a QueryError when these options cannot run here (nothing by default)."""
        return None

    def chat_use(self, options: QueryOptions) -> str:
        """What in ``options`` calls the chat model, in words ("" when nothing does)."""
        return ""

    def runs_without(self, check: StageCheck) -> list[MissingPart]:
        """Optional parts these options name that are missing here.

        The stage runs without them (its trace step warns and says how to enable
        them) instead of failing ``check``; the profile picker shows them.
        """
        return []

    def skip_reason(self, state: PipelineState) -> str:
        return ""

    def execute(self, state: PipelineState, step: TraceStep) -> PipelineState:
        raise NotImplementedError(f"stage {self.name!r} implements neither execute nor stream")

    def stream(
        self, state: PipelineState, step: TraceStep
    ) -> Generator[PipelineEvent, None, PipelineState]:
        yield from ()
        return self.execute(state, step)

    def run(self, state: PipelineState) -> StageRun:
        """Run the stage on ``state``: the new state and this run's trace step."""
        node = self.node or self.name
        reason = self.skip_reason(state)
        if reason:
            step = TraceStep(
                stage=self.name,
                skipped=True,
                details={"reason": reason},
                node=node,
                iteration=state.iteration,
            )
            return state, step
        with timed_step(self.name, node=node, iteration=state.iteration) as step:
            state = yield from self.stream(state, step)
        return state, step

    def events_after(self, state: PipelineState) -> list[PipelineEvent]:
        """Events the runner sends once this stage's step is traced (e.g. the citations)."""
        return []

    def summary(self, details: Mapping[str, Any]) -> list[str]:
        """The key facts of a finished step, for its collapsed trace row."""
        return [f"{k} {v}" for k, v in details.items() if isinstance(v, int | float)][:3]


def counted_chat(chat: ChatClient | None) -> CountingChatClient | None:
    return CountingChatClient(chat) if chat is not None else None
