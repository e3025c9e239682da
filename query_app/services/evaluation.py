"""What evaluation (and any other caller outside the pipeline) may use: a profile's
options and needs, the groundedness judge on given passages, an answer's markers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from query_app.chat import ChatClient
from query_app.exceptions import ConfigurationError
from query_app.model_settings import options_with_saved_models
from query_app.pipeline.assembly import AssembledContext, Passage
from query_app.pipeline.groundedness import GroundednessResult as GroundednessVerdict
from query_app.pipeline.groundedness import check_groundedness
from query_app.pipeline.lexical import markers_in
from query_app.pipeline.options import QueryLimits, QueryOptions
from query_app.pipeline.profiles import options_resolve, profile_stages
from query_app.pipeline.prompts import passage_block
from query_app.pipeline.runner import pipeline_stages
from query_app.pipeline.stages import MissingPart, StageCheck
from query_app.pipeline.types import Candidate


def profile_resolve(
    *,
    profile: str | None,
    overrides: Mapping[str, Any] | None = None,
    limits: QueryLimits | None = None,
) -> tuple[str, QueryOptions]:
    """The profile's name and its options with ``overrides`` applied (raises QueryError).

    Models saved on the model settings page are included, as in ``query_prepare``.
    """
    name, options = options_resolve(profile=profile, overrides=overrides, limits=limits)
    return name, options_with_saved_models(options)


@dataclass
class ProfileNeeds:
    """What a profile's options need from this deployment, found without running anything."""

    # The first missing part (a model that is not configured), or None.
    problem: ConfigurationError | None
    # The parts that call the chat model, in words ("its 'llm' reranker").
    chat_uses: list[str]
    # Optional parts missing here that the profile runs without (each stage's
    # trace step then warns and says how to enable them).
    runs_without: list[MissingPart] = dataclasses.field(default_factory=list)


def profile_needs(
    *, profile: str, options: QueryOptions, chat_configured: bool = True
) -> ProfileNeeds:
    """Ask every stage of ``profile`` what ``options`` need: missing models, chat model use.

    ``chat_configured`` is what the stages assume about the chat model (by
    default that it is there: evaluation weighs ``chat_uses`` itself; the ask
    page passes the truth, so a part that needs it shows as run without).
    """
    check = StageCheck(options=options, chat_configured=chat_configured)
    problem: ConfigurationError | None = None
    uses: list[str] = []
    without: list[MissingPart] = []
    for stage in pipeline_stages(profile_stages(profile)):
        try:
            stage.check(check)
        except ConfigurationError as exc:
            problem = problem or exc
        else:
            without += stage.runs_without(check)
        use = stage.chat_use(options)
        if use:
            uses.append(use)
    return ProfileNeeds(problem=problem, chat_uses=uses, runs_without=without)


@dataclass(frozen=True)
class JudgedPassage:
    """A passage an answer cites, as the groundedness judge reads it."""

    marker: int
    text: str
    source: str = ""
    title: str = ""
    page: int | None = None


def groundedness_judge(
    *,
    answer: str,
    passages: list[JudgedPassage],
    checker: str,
    chat: ChatClient | None,
    min_support: float,
) -> GroundednessVerdict:
    """Judge ``answer`` against ``passages`` with the named checker, as the pipeline's stage does.

    The chat model reads each passage in the same delimited block the answer
    was written from.
    """
    context = AssembledContext(layout=[p.marker for p in passages])
    for p in passages:
        candidate = Candidate(
            chunk_id="",
            source_id=0,
            source_location=p.source,
            source_title=p.title,
            text=p.text,
            char_start=0,
            char_end=len(p.text),
            page=p.page,
        )
        block = passage_block(p.marker, candidate)
        context.passages.append(Passage(p.marker, candidate, p.text, block, 0))
    return check_groundedness(
        answer=answer, context=context, checker=checker, chat=chat, min_support=min_support
    )


def answer_markers(text: str) -> list[int]:
    """The ``[n]`` citation markers of an answer, in order of appearance."""
    return markers_in(text)
