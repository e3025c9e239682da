"""Which profiles a run evaluates, with what options, and which of them can run here.

Everything is checked before any work starts: an unknown profile or option is an
error listing the known ones; a profile that needs a model this deployment lacks
(a cross-encoder, or the chat model in an offline run) is reported as unavailable
with the reason, or, when asked, run without the cross-encoder under a label that
says so. Nothing is substituted silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from eval_app.harness.types import EvalError, EvalSettings, ProfileSpec
from query_app.chat import ChatConfig
from query_app.exceptions import QueryError
from query_app.services import QueryLimits, QueryOptions, profile_needs, profile_resolve

# What --offline changes in every profile: no chat model for answers or judges.
OFFLINE_OVERRIDES: dict[str, Any] = {
    "generation.generator": "extractive",
    "groundedness.checker": "heuristic",
}
# Evaluation measures the work itself: a retrieval served from the cache would
# fake its latency (and two runs in a row would not be comparable). A profile runs
# as asked or is reported: the ask page skips a reranker that is not configured,
# evaluation never does (--without-cross-encoder runs it under a label instead).
EVAL_OVERRIDES: dict[str, Any] = {"cache.enabled": False, "rerank.required": True}


@dataclass
class PlannedProfile:
    """A profile that will run: its label, the options of its answers and of its ranking."""

    spec: ProfileSpec
    answer_overrides: dict[str, Any]
    ranking_overrides: dict[str, Any]
    options: QueryOptions
    # Why the options differ from what the spec asked for (e.g. no cross-encoder).
    substituted: str = ""

    @property
    def label(self) -> str:
        return self.spec.label

    def snapshot(self) -> dict[str, Any]:
        """What the run stores about this profile."""
        return {
            "profile": self.spec.name,
            "overrides": dict(self.spec.overrides),
            "answer_overrides": self.answer_overrides,
            "ranking_overrides": self.ranking_overrides,
            "options": self.options.as_dict(),
            "substituted": self.substituted,
        }


@dataclass
class ProfilePlan:
    """The profiles that will run, and those that cannot, with their reasons."""

    runnable: list[PlannedProfile] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        return [p.label for p in self.runnable]


def profile_spec_parse(text: str) -> ProfileSpec:
    """``NAME`` or ``NAME:OPTION=VALUE+OPTION=VALUE`` → ProfileSpec (values read as YAML)."""
    raw = text.strip()
    name, _, rest = raw.partition(":")
    name = name.strip().lower()
    if not name:
        raise EvalError(f"profile {text!r} has no name (write NAME or NAME:OPTION=VALUE)")
    overrides: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split("+"))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise EvalError(
                f"profile {text!r}: {part!r} is not OPTION=VALUE (e.g. balanced:rerank.kind=none)"
            )
        try:
            overrides[key.strip()] = yaml.safe_load(value.strip()) if value.strip() else ""
        except yaml.YAMLError as exc:
            raise EvalError(
                f"profile {text!r}: the value of {key.strip()!r} is unreadable"
            ) from exc
    return ProfileSpec(name=name, overrides=overrides)


def profile_specs_parse(text: str | Sequence[str]) -> list[ProfileSpec]:
    """A comma-separated list (or a sequence) of profile specs; duplicates are errors."""
    items = text.split(",") if isinstance(text, str) else list(text)
    specs = [profile_spec_parse(item) for item in items if item.strip()]
    if not specs:
        raise EvalError("name at least one profile to evaluate (e.g. --compare fast,balanced)")
    labels = [s.label for s in specs]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise EvalError(f"profile listed twice: {', '.join(duplicates)}")
    return specs


def ranking_overrides(options: QueryOptions, *, depth: int) -> dict[str, Any]:
    """Overrides that read the profile's own ranking ``depth`` passages deep.

    Same retrieval, fusion and reranker; top_n raised to ``depth`` (candidate_k at
    least that), no relevance floor or minimum score (they decide whether to
    answer, not the order), and a context budget large enough to keep them all.
    """
    return {
        "retrieval.candidate_k": max(options.candidate_k, depth),
        "rerank.top_n": depth,
        "rerank.min_score": None,
        "floor.min_vector_similarity": None,
        "floor.min_keyword_coverage": None,
        "context.max_tokens": 1_000_000,
        **EVAL_OVERRIDES,
    }


def profiles_plan(specs: Sequence[ProfileSpec], *, settings: EvalSettings) -> ProfilePlan:
    """Resolve every spec; raise on unknown names and options, sort out what can run.

    Raises the query app's ``UnknownProfile`` / ``UnknownOption`` / ``InvalidOption``
    (messages list the known names) before anything is ingested or answered.
    """
    limits = QueryLimits.from_settings()
    depth = min(settings.depth, limits.max_top_n)
    chat_configured = ChatConfig.from_settings() is not None
    plan = ProfilePlan()
    for spec in specs:
        answer = {**dict(spec.overrides), **EVAL_OVERRIDES}
        if settings.offline:
            answer.update(OFFLINE_OVERRIDES)
        name, options = profile_resolve(profile=spec.name, overrides=answer, limits=limits)
        substituted = ""
        problem = profile_needs(profile=name, options=options).problem
        if problem and problem.without and settings.without_cross_encoder:
            # The profile runs without the missing part, under a label that says so.
            spec = ProfileSpec(name=spec.name, overrides={**spec.overrides, **problem.without})
            answer.update(problem.without)
            name, options = profile_resolve(profile=spec.name, overrides=answer, limits=limits)
            substituted = problem.without_note
        elif problem:
            plan.unavailable[spec.label] = str(problem)
            continue
        chat_uses = profile_needs(profile=name, options=options).chat_uses
        if settings.offline and chat_configured and chat_uses:
            plan.unavailable[spec.label] = (
                f"{chat_uses[0]} needs the chat model, and an offline run makes no network call"
            )
            continue
        ranking = {**answer, **ranking_overrides(options, depth=depth)}
        try:
            profile_resolve(profile=spec.name, overrides=ranking, limits=limits)
        except QueryError as exc:  # e.g. candidate_k above the deployment's limit
            raise EvalError(f"profile {spec.label!r}: cannot read its ranking: {exc}") from exc
        plan.runnable.append(
            PlannedProfile(
                spec=spec,
                answer_overrides=answer,
                ranking_overrides=ranking,
                options=options,
                substituted=substituted,
            )
        )
    labels = plan.labels
    if len(set(labels)) != len(labels):
        raise EvalError(f"the same profile would run twice: {', '.join(labels)}")
    return plan
