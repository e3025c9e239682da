"""Profiles: named presets over the one options tree.

Resolution order (later wins): the preset, ``settings.RAG["query"]`` (applies
to every profile), ``settings.RAG["profiles"][<name>]`` (one profile), then the
request's own overrides. Preset + settings are resolved once per process and
cached; the cache is dropped when settings change (tests, reloads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver

from query_app.exceptions import InvalidOption, OptionNotAllowed, TopNOutOfRange, UnknownProfile
from query_app.pipeline.graph import GRAPH_STAGES
from query_app.pipeline.options import (
    HYBRID_FUSIONS,
    MAX_EF_SEARCH,
    QueryLimits,
    QueryOptions,
    expand_dotted,
    options_build,
)
from query_app.pipeline.types import STAGES
from ragsite.registry import Registry


@dataclass(frozen=True)
class Profile:
    """A named preset: the stages it runs, in order, and its options over the defaults."""

    options: dict[str, Any] = field(default_factory=dict)
    stages: tuple[str, ...] = STAGES


def _unknown_profile(name: str, known: list[str]) -> UnknownProfile:
    note = ", ".join(PLANNED_PROFILES) + ": not available yet" if PLANNED_PROFILES else ""
    return UnknownProfile(name, known, note=note)


# Profiles that are part of the product but not built yet; naming one gives a
# precise error instead of "unknown". (adaptive and corrective are built.)
PLANNED_PROFILES: tuple[str, ...] = ()

PROFILES: Registry[Profile] = Registry("profile", unknown=_unknown_profile)
# Hybrid (fused by the keyword leg's evidence), CandidateK = TopN, no rerank: needs
# nothing but the embedder (docs/answering.md, "Retrieval quality").
PROFILES.add("fast", Profile({"retrieval": {"mode": "hybrid"}}))
PROFILES.add(
    "balanced",
    Profile(
        {
            "retrieval": {"mode": "hybrid", "candidate_k": 50},
            "rerank": {"kind": "cross-encoder", "top_n": 5},
        }
    ),
)
PROFILES.add(
    "quality",
    Profile(
        {
            "retrieval": {"mode": "hybrid", "candidate_k": 100},
            "rerank": {"kind": "cross-encoder", "top_n": 5},
            "groundedness": {"enabled": True},
        }
    ),
)
# Corrective: balanced's retrieval in a graph that grades the evidence, refines
# or rewrites the probe and retries within a budget (see docs/answering.md).
PROFILES.add(
    "corrective",
    Profile(
        {
            "retrieval": {"mode": "hybrid", "candidate_k": 50},
            "rerank": {"kind": "cross-encoder", "top_n": 5},
            "groundedness": {"enabled": True},
            "corrective": {"graph": "corrective"},
        },
        stages=GRAPH_STAGES,
    ),
)
# Adaptive: a complexity classifier routes each question to no retrieval, the
# balanced single shot, or the corrective loop.
PROFILES.add(
    "adaptive",
    Profile(
        {
            "retrieval": {"mode": "hybrid", "candidate_k": 50},
            "rerank": {"kind": "cross-encoder", "top_n": 5},
            "groundedness": {"enabled": True},
            "corrective": {"graph": "adaptive"},
        },
        stages=("route", "respond", *GRAPH_STAGES[1:]),
    ),
)


def profile_names() -> list[str]:
    """The profiles a request may name."""
    return PROFILES.names()


def profile_stages(name: str) -> tuple[str, ...]:
    """The stages profile ``name`` runs, in order."""
    return PROFILES.get(name).stages


def default_profile_name() -> str:
    from django.conf import settings

    return str(settings.RAG.get("profile") or "fast")


@lru_cache(maxsize=32)
def profile_options(name: str) -> QueryOptions:
    """The preset ``name`` overlaid with the settings (cached per process)."""
    from django.conf import settings

    preset = PROFILES.get(name)
    per_profile: Mapping[str, Any] = (settings.RAG.get("profiles") or {}).get(name, {})
    options = options_build(
        [preset.options, settings.RAG.get("query") or {}, per_profile],
        origin=[
            f"profile preset {name!r}",
            'settings.RAG["query"]',
            f'settings.RAG["profiles"][{name!r}]',
        ],
    )
    options_validate(options, QueryLimits.from_settings())
    if options.web.enabled:
        # Searching the web sends the question out: each request opts in, on a
        # collection that allows it, never every question of a deployment.
        raise InvalidOption(
            f"option 'web.enabled' cannot be set in settings (profile {name!r}); the web "
            "fallback is asked for per request (the ask page's checkbox, the API's web_fallback)"
        )
    return options


@receiver(setting_changed)
def _drop_cached_profiles(*, setting: str, **_: Any) -> None:
    if setting == "RAG":
        profile_options.cache_clear()


# Options a request may set only when an administrator asks: ``rerank.model`` names
# a directory on the server to load (and its error would tell whether a path exists);
# ``generation.system_prompt`` replaces the grounded prompt (the rules that keep
# passages as data and every claim cited). The deployment's models are set in settings
# or on the Model settings page.
ADMIN_ONLY_OPTIONS = frozenset({"rerank.model", "generation.system_prompt"})


def _leaf_names(layer: Mapping[str, Any], prefix: str = "") -> list[str]:
    names = []
    for key, value in layer.items():
        name = f"{prefix}{key}"
        names += _leaf_names(value, f"{name}.") if isinstance(value, Mapping) else [name]
    return names


def options_admin_only(overrides: Mapping[str, Any] | None) -> list[str]:
    """The options among ``overrides`` (nested or dotted) that only administrators may set."""
    names = _leaf_names(expand_dotted(overrides or {}))
    return sorted(name for name in names if name in ADMIN_ONLY_OPTIONS)


def options_resolve(
    *,
    profile: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    top_n: int | None = None,
    limits: QueryLimits | None = None,
    admin: bool = True,
) -> tuple[str, QueryOptions]:
    """The profile's name and its options with the request's overrides applied.

    Raises UnknownProfile, UnknownOption, InvalidOption (incl. TopNOutOfRange and,
    unless ``admin``, OptionNotAllowed for ADMIN_ONLY_OPTIONS) or one of the
    Unknown<Component> errors, each with a message for the user.
    """
    refused = [] if admin else options_admin_only(overrides)
    if refused:
        raise OptionNotAllowed(
            f"option {', '.join(map(repr, refused))} can be set by administrators only; "
            "the deployment's models are chosen on the Model settings page"
        )
    name = (profile or default_profile_name()).strip().lower()
    limits = limits or QueryLimits.from_settings()
    base = profile_options(name)
    layers: list[Mapping[str, Any]] = []
    if overrides:
        layers.append(overrides)
    if top_n is not None:
        layers.append({"rerank": {"top_n": top_n}})
    if not layers:
        return name, base
    options = options_build([base.as_dict(), *layers], origin=["profile", "request", "request"])
    options_validate(options, limits)
    return name, options


def options_validate(options: QueryOptions, limits: QueryLimits) -> None:
    """Check ranges and component names; raise the matching specific error."""
    from query_app.pipeline.assembly import ORDERINGS
    from query_app.pipeline.context_window import EXPANSIONS
    from query_app.pipeline.generation import GENERATORS
    from query_app.pipeline.groundedness import CHECKERS
    from query_app.pipeline.keyword import KEYWORD_RANKINGS
    from query_app.pipeline.rerankers import RERANKERS
    from query_app.pipeline.retrieval import RETRIEVAL_MODES
    from query_app.pipeline.transforms import TRANSFORMS

    o = options
    # Each registry raises its own Unknown<Component> error, listing the known names.
    TRANSFORMS.get(o.transform.kind)
    RETRIEVAL_MODES.get(o.retrieval.mode)
    KEYWORD_RANKINGS.get(o.retrieval.keyword_ranking)
    RERANKERS.get(o.rerank.kind)
    ORDERINGS.get(o.context.ordering)
    GENERATORS.get(o.generation.generator)
    CHECKERS.get(o.groundedness.checker)

    if not 1 <= o.rerank.top_n <= limits.max_top_n:
        raise TopNOutOfRange(
            f"top_n must be between 1 and {limits.max_top_n}, got {o.rerank.top_n}"
        )
    _check_range("retrieval.candidate_k", o.retrieval.candidate_k, 1, limits.max_candidate_k)
    if o.candidate_k > limits.max_candidate_k:
        raise InvalidOption(
            f"retrieval.candidate_k must be at most {limits.max_candidate_k}, got {o.candidate_k}"
        )
    _check_range("retrieval.ef_search", o.retrieval.ef_search, 1, MAX_EF_SEARCH)
    _check_range("retrieval.rrf_k", o.retrieval.rrf_k, 1, 10_000)
    _check_range("retrieval.vector_weight", o.retrieval.vector_weight, 0.0, 100.0)
    _check_range("retrieval.keyword_weight", o.retrieval.keyword_weight, 0.0, 100.0)
    _check_range("retrieval.unit_similarity", o.retrieval.unit_similarity, 0.0, 1.0)
    _check_range("retrieval.document_similarity", o.retrieval.document_similarity, 0.0, 1.0)
    _check_range("retrieval.keyword_share", o.retrieval.keyword_share, 0.0, 1.0)
    _check_range("retrieval.document_prior", o.retrieval.document_prior, 0.0, 1.0)
    _check_range("retrieval.keyword_document_prior", o.retrieval.keyword_document_prior, 0.0, 10.0)
    _check_range("retrieval.missing_code_weight", o.retrieval.missing_code_weight, 0.0, 1.0)
    _check_range("retrieval.per_document", o.retrieval.per_document, 0, 1000)
    _check_range("retrieval.per_document_pool", o.retrieval.per_document_pool, 1, 20)
    _check_range("retrieval.summary_members", o.retrieval.summary_members, 1, 20)
    if o.retrieval.fusion not in HYBRID_FUSIONS:
        raise InvalidOption(
            f"retrieval.fusion must be one of {', '.join(HYBRID_FUSIONS)}, "
            f"got {o.retrieval.fusion!r}"
        )
    _check_range("retrieval.bm25_k1", o.retrieval.bm25_k1, 0.0, 10.0)
    _check_range("retrieval.bm25_b", o.retrieval.bm25_b, 0.0, 1.0)
    _check_range("retrieval.keyword_pool", o.retrieval.keyword_pool, 100, 1_000_000)
    _check_range("transform.variants", o.transform.variants, 1, 10)
    _check_range("fusion.mmr_lambda", o.fusion.mmr_lambda, 0.0, 1.0)
    _check_range("rerank.batch_size", o.rerank.batch_size, 1, 1024)
    _check_range("rerank.max_length", o.rerank.max_length, 16, 8192)
    _check_range("floor.min_vector_similarity", o.floor.min_vector_similarity, -1.0, 1.0)
    _check_range("floor.min_unit_similarity", o.floor.min_unit_similarity, -1.0, 1.0)
    _check_range("floor.min_keyword_coverage", o.floor.min_keyword_coverage, 0.0, 1.0)
    _check_range("context.max_tokens", o.context.max_tokens, 50, 1_000_000)
    _check_range("context.chars_per_token", o.context.chars_per_token, 0.5, 20.0)
    if o.context.expand not in EXPANSIONS:
        raise InvalidOption(
            f"option 'context.expand' must be one of {', '.join(EXPANSIONS)}, "
            f"got {o.context.expand!r}"
        )
    _check_range("context.window", o.context.window, 0, 20)
    _check_range("context.expand_max_tokens", o.context.expand_max_tokens, 10, 100_000)
    _check_range("generation.max_sentences", o.generation.max_sentences, 1, 50)
    _check_range(
        "generation.min_sentence_similarity", o.generation.min_sentence_similarity, -1.0, 1.0
    )
    _check_range("generation.decline_unaddressed", o.generation.decline_unaddressed, 0.0, 1.0)
    _check_range("generation.min_question_coverage", o.generation.min_question_coverage, 0.0, 1.0)
    _check_range("generation.temperature", o.generation.temperature, 0.0, 2.0)
    _check_range("generation.max_output_tokens", o.generation.max_output_tokens, 1, 100_000)
    _check_range("groundedness.min_support", o.groundedness.min_support, 0.0, 1.0)
    _check_range("cache.ttl_s", o.cache.ttl_s, 0, 7 * 24 * 3600)
    _check_corrective(o)
    _check_web(o)


def _check_web(o: QueryOptions) -> None:
    from query_app.pipeline.web import WEB_PROVIDERS

    WEB_PROVIDERS.get(o.web.provider)  # UnknownWebSearchProvider lists the known ones
    _check_range("web.max_results", o.web.max_results, 1, 20)
    _check_range("web.max_pages", o.web.max_pages, 1, 10)
    _check_range("web.passages_per_page", o.web.passages_per_page, 1, 10)
    _check_range("web.passage_chars", o.web.passage_chars, 100, 5000)


def _check_corrective(o: QueryOptions) -> None:
    from query_app.pipeline.graph import GRAPHS, graph_validate_options
    from query_app.pipeline.stages.evaluate import GRADERS

    c = o.corrective
    graph_validate_options(c.max_iterations, c.max_transitions, c.timeout_s)
    if c.graph:
        GRAPHS.get(c.graph).validate()
    if c.grader not in GRADERS:
        raise InvalidOption(
            f"option 'corrective.grader' must be one of {', '.join(GRADERS)}, got {c.grader!r}"
        )
    for name in ("upper", "lower", "gate_strong", "gate_weak"):
        _check_range(f"corrective.{name}", getattr(c, name), 0.0, 1.0)
    if c.lower > c.upper:
        raise InvalidOption(
            f"option 'corrective.lower' ({c.lower:g}) must not be above 'corrective.upper' "
            f"({c.upper:g})"
        )


def _check_range(name: str, value: float | None, low: float, high: float) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidOption(f"option {name!r} must be between {low:g} and {high:g}, got {value}")
