"""How the hybrid mode combines its legs: rank fusion and relative-score fusion."""

from __future__ import annotations

import pytest

from query_app.pipeline.leg_fusion import (
    keyword_evidence,
    relative_score_fusion,
    rrf_scores,
    weighted_rrf_scores,
)


def test_rrf_scores_sum_reciprocal_ranks():
    scores = rrf_scores([["a", "b", "c"], ["c", "a"]], k=60)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == pytest.approx(1 / 62)


def test_weighted_rrf_scales_each_keyword_hit_by_its_evidence():
    hits = {"vector": [("a", 0.9), ("b", 0.8)], "keyword": [("b", 7.0), ("c", 3.0)]}
    scores = weighted_rrf_scores(
        hits,
        k=60,
        weights={"vector": 1.0, "keyword": 2.0},
        evidence={"keyword": {"b": 0.5, "c": 0.1}},
    )
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["b"] == pytest.approx(1 / 62 + 2.0 * 0.5 / 61)
    assert scores["c"] == pytest.approx(2.0 * 0.1 / 62)


def test_keyword_evidence_is_the_best_coverage_among_the_first_hits():
    assert keyword_evidence([0.2, 0.6, 0.4], exact=False) == pytest.approx(0.6)
    # Only the first ten hits count; codes or quoted phrases are full evidence.
    assert keyword_evidence([0.1] * 10 + [0.9], exact=False) == pytest.approx(0.1)
    assert keyword_evidence([0.1], exact=True) == 1.0
    assert keyword_evidence([], exact=False) == 0.0


def test_relative_score_fusion_mixes_each_legs_score_relative_to_its_best_hit():
    hits = {"vector": [("a", 0.8), ("b", 0.4)], "keyword": [("b", 10.0), ("c", 5.0)]}
    scores = relative_score_fusion(hits, keyword_share=0.25)
    assert scores["a"] == pytest.approx(0.75 * 1.0)
    assert scores["b"] == pytest.approx(0.75 * 0.5 + 0.25 * 1.0)
    # The vector leg did not return c: it counts the lowest similarity that leg read.
    assert scores["c"] == pytest.approx(0.75 * 0.5 + 0.25 * 0.5)


def test_a_clear_margin_in_one_leg_outweighs_a_first_place_in_the_other():
    # b is the keyword leg's first by a tenfold margin and a hair behind a in
    # the vector leg, fourth of four there. Rank fusion sees only the places,
    # and puts a first; by score, b comes first.
    hits = {
        "vector": [("a", 0.61), ("c", 0.60), ("d", 0.595), ("b", 0.59)],
        "keyword": [("b", 20.0), ("c", 2.0), ("a", 1.0)],
    }
    ranked = rrf_scores([[c for c, _ in leg] for leg in hits.values()], k=60)
    by_score = relative_score_fusion(hits, keyword_share=0.5)
    assert max(ranked, key=lambda c: ranked[c]) == "a"
    assert max(by_score, key=lambda c: by_score[c]) == "b"


def test_relative_score_fusion_with_one_leg_empty_keeps_the_other_legs_order():
    only_vector = relative_score_fusion(
        {"vector": [("a", 0.7), ("b", 0.5)], "keyword": []}, keyword_share=0.5
    )
    assert sorted(only_vector, key=lambda c: -only_vector[c]) == ["a", "b"]
    only_keyword = relative_score_fusion(
        {"vector": [], "keyword": [("x", 3.0), ("y", 1.0)]}, keyword_share=0.5
    )
    assert only_keyword == pytest.approx({"x": 0.5, "y": 0.5 / 3})
