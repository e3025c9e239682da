"""Profiles and options: presets, settings overlay, per-request overrides, clear errors."""

from __future__ import annotations

import pytest

from query_app.exceptions import (
    InvalidOption,
    TopNOutOfRange,
    UnknownOption,
    UnknownProfile,
    UnknownReranker,
    UnknownTransform,
)
from query_app.pipeline.options import QueryLimits
from query_app.pipeline.profiles import options_resolve, profile_options


def test_fast_is_the_default_profile_hybrid_by_evidence_without_rerank(rag_settings):
    name, options = options_resolve()
    assert name == "fast"
    assert (options.retrieval.mode, options.retrieval.fusion) == ("hybrid", "adaptive")
    assert options.retrieval.per_document == 2
    assert options.rerank.kind == "none"
    assert options.candidate_k == options.rerank.top_n
    assert options.groundedness.enabled is False


def test_balanced_and_quality_presets(rag_settings):
    _, balanced = options_resolve(profile="balanced")
    _, quality = options_resolve(profile="quality")
    assert (balanced.retrieval.mode, balanced.candidate_k, balanced.rerank.kind) == (
        "hybrid",
        50,
        "cross-encoder",
    )
    assert balanced.rerank.top_n == 5
    assert (quality.retrieval.mode, quality.candidate_k, quality.groundedness.enabled) == (
        "hybrid",
        100,
        True,
    )


def test_every_profile_has_a_relevance_floor(rag_settings):
    for name in ("fast", "balanced", "quality"):
        floor = profile_options(name).floor
        assert floor.min_vector_similarity is not None
        assert floor.min_keyword_coverage is not None


def test_unknown_profile_lists_the_known_ones(rag_settings):
    with pytest.raises(UnknownProfile) as err:
        options_resolve(profile="turbo")
    message = str(err.value)
    assert "'turbo'" in message
    for known in ("adaptive", "balanced", "corrective", "fast", "quality"):
        assert known in message
    assert "not available yet" not in message
    assert err.value.known == ["adaptive", "balanced", "corrective", "fast", "quality"]


def test_corrective_and_adaptive_profiles_walk_their_graphs(rag_settings):
    for name in ("corrective", "adaptive"):
        resolved, options = options_resolve(profile=name)
        assert resolved == name
        assert options.corrective.graph == name
        assert options.corrective.max_iterations == 3
        assert options.groundedness.enabled is True


def test_settings_override_any_value_and_requests_override_settings(rag_set):
    rag_set("query.retrieval.rrf_k", 30)
    rag_set("profiles.balanced", {"rerank": {"top_n": 8}})
    _, fast = options_resolve(profile="fast")
    _, balanced = options_resolve(profile="balanced")
    assert fast.retrieval.rrf_k == 30
    assert balanced.retrieval.rrf_k == 30
    assert balanced.rerank.top_n == 8
    assert fast.rerank.top_n == 5
    _, request = options_resolve(
        profile="balanced", overrides={"retrieval": {"rrf_k": 10}, "rerank.top_n": 3}
    )
    assert request.retrieval.rrf_k == 10
    assert request.rerank.top_n == 3


def test_top_n_argument_sets_the_final_passage_count(rag_settings):
    _, options = options_resolve(top_n=2)
    assert options.rerank.top_n == 2
    assert options.candidate_k == 2


def test_resolving_a_profile_is_cached_per_process_and_dropped_on_settings_change(rag_set):
    first = profile_options("balanced")
    assert profile_options("balanced") is first
    rag_set("query.context.max_tokens", 1234)
    changed = profile_options("balanced")
    assert changed is not first
    assert changed.context.max_tokens == 1234


def test_unknown_option_names_the_known_keys(rag_settings):
    with pytest.raises(UnknownOption) as err:
        options_resolve(overrides={"rerank": {"topn": 3}})
    assert "'rerank.topn'" in str(err.value)
    assert "top_n" in str(err.value)


def test_unknown_option_in_settings_is_reported_with_its_origin(rag_set):
    rag_set("query.retreival", {"mode": "hybrid"})
    with pytest.raises(UnknownOption, match=r'settings.RAG\["query"\]'):
        options_resolve(profile="fast")


@pytest.mark.parametrize("top_n", [0, 51, -3])
def test_top_n_out_of_range_is_refused(rag_settings, top_n):
    with pytest.raises(TopNOutOfRange, match="between 1 and 50"):
        options_resolve(top_n=top_n)


def test_top_n_limit_comes_from_settings(rag_settings):
    with pytest.raises(TopNOutOfRange, match="between 1 and 3"):
        options_resolve(top_n=4, limits=QueryLimits(max_top_n=3))


def test_unknown_reranker_and_transform_list_the_known_names(rag_settings):
    with pytest.raises(UnknownReranker) as err:
        options_resolve(overrides={"rerank": {"kind": "colbert"}})
    assert err.value.known == ["cross-encoder", "llm", "none"]
    with pytest.raises(UnknownTransform, match="multi-query, none, rag-fusion"):
        options_resolve(overrides={"transform": {"kind": "step-back"}})


def test_wrongly_typed_values_are_refused_with_the_option_name(rag_settings):
    with pytest.raises(InvalidOption, match=r"'rerank\.top_n' must be an integer"):
        options_resolve(overrides={"rerank": {"top_n": "many"}})
    with pytest.raises(InvalidOption, match=r"'fusion\.mmr_lambda' must be between 0 and 1"):
        options_resolve(overrides={"fusion": {"mmr_lambda": 1.5}})


def test_string_values_from_forms_and_cli_are_coerced(rag_settings):
    _, options = options_resolve(overrides={"fusion.mmr": "true", "rerank.top_n": "4"})
    assert options.fusion.mmr is True
    assert options.rerank.top_n == 4
