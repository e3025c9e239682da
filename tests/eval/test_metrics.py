"""Metrics against values computed by hand (the computation is in the comments)."""

from __future__ import annotations

import math

import pytest

from eval_app.metrics import (
    MetricInputError,
    bootstrap_ci,
    dedupe,
    expected_substring_match,
    hit_rate_at_k,
    mrr,
    ndcg_at_k,
    paired_difference_ci,
    percentile,
    precision_at_k,
    recall_at_k,
    refusal_correct,
)

# A ranked list with a duplicate (two chunks of "a") and graded judgments:
# "a" perfect (3), "c" highly relevant (2), "b" relevant (1), "d" judged not relevant (0).
RANKED = ["a", "x", "b", "a", "y", "c"]
GRADES = {"a": 3, "b": 1, "c": 2, "d": 0}


def test_duplicates_are_removed_keeping_the_first_rank():
    # The second "a" (rank 4) goes; everything after it moves up one place.
    assert dedupe(RANKED) == ["a", "x", "b", "y", "c"]


def test_recall_and_precision_count_distinct_sources():
    # Distinct top 3 = [a, x, b]: hits a, b = 2; relevant (grade >= 1) = {a, b, c} = 3.
    assert recall_at_k(RANKED, GRADES, 3) == pytest.approx(2 / 3)
    assert precision_at_k(RANKED, GRADES, 3) == pytest.approx(2 / 3)
    # Distinct top 5 = [a, x, b, y, c]: hits 3 of 3 relevant; precision 3 / 5.
    assert recall_at_k(RANKED, GRADES, 5) == pytest.approx(1.0)
    assert precision_at_k(RANKED, GRADES, 5) == pytest.approx(0.6)


def test_many_chunks_of_one_source_do_not_fill_the_top_k():
    # Without dedupe the top 2 would be [a, a]: recall 1/2. With it, [a, b]: recall 2/2.
    ranked = ["a", "a", "a", "b"]
    grades = {"a": 1, "b": 1}
    assert recall_at_k(ranked, grades, 2) == pytest.approx(1.0)
    assert precision_at_k(ranked, grades, 2) == pytest.approx(1.0)


def test_a_grade_zero_judgment_is_not_relevant():
    # "d" is judged but grade 0: finding only it is a miss.
    assert hit_rate_at_k(["d", "x"], GRADES, 2) == 0.0
    assert mrr(["d", "x"], GRADES) == 0.0


def test_graded_ndcg_matches_the_hand_computation():
    # Distinct top 3 = [a, x, b] with grades [3, 0, 1]:
    #   DCG  = (2^3-1)/log2(2) + 0/log2(3) + (2^1-1)/log2(4) = 7 + 0 + 0.5 = 7.5
    # Ideal = judged grades sorted [3, 2, 1] (the grade-0 "d" adds nothing):
    #   IDCG = 7/1 + 3/log2(3) + 1/2 = 7 + 1.8927893 + 0.5 = 9.3927893
    #   nDCG@3 = 7.5 / 9.3927893 = 0.798485
    expected = 7.5 / (7 + 3 / math.log2(3) + 0.5)
    assert ndcg_at_k(RANKED, GRADES, 3) == pytest.approx(expected)
    assert ndcg_at_k(RANKED, GRADES, 3) == pytest.approx(0.798485, abs=1e-6)


def test_ideal_dcg_includes_relevant_sources_never_retrieved():
    # Only "c" (grade 1) retrieved at rank 1: DCG = 1. The ideal first place holds
    # "a" (grade 3): IDCG@1 = 7. nDCG@1 = 1/7.
    assert ndcg_at_k(["c"], {"a": 3, "c": 1}, 1) == pytest.approx(1 / 7)


def test_ties_are_scored_in_the_order_received():
    # Two passages the retriever scored equally arrive as [b, a] or [a, b]; the metric
    # does not reorder them. With a=3, b=1:
    #   [a, b]: DCG = 7 + 1/log2(3) = IDCG  -> 1.0
    #   [b, a]: DCG = 1 + 7/log2(3) = 5.4165; IDCG = 7.6309 -> 0.70981
    grades = {"a": 3, "b": 1}
    assert ndcg_at_k(["a", "b"], grades, 2) == pytest.approx(1.0)
    assert ndcg_at_k(["b", "a"], grades, 2) == pytest.approx(
        (1 + 7 / math.log2(3)) / (7 + 1 / math.log2(3))
    )
    assert ndcg_at_k(["b", "a"], grades, 2) == pytest.approx(0.70981, abs=1e-5)


def test_k_larger_than_the_list():
    # One source retrieved, two relevant, k = 10:
    #   recall 1/2; precision divides by k: 1/10; hit 1.
    #   nDCG: DCG = 1; IDCG = 1 + 1/log2(3) = 1.63093 -> 0.61315
    ranked = ["a"]
    grades = {"a": 1, "b": 1}
    assert recall_at_k(ranked, grades, 10) == pytest.approx(0.5)
    assert precision_at_k(ranked, grades, 10) == pytest.approx(0.1)
    assert hit_rate_at_k(ranked, grades, 10) == 1.0
    assert ndcg_at_k(ranked, grades, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))


def test_reciprocal_rank_of_the_first_relevant_source():
    # Distinct list [x, y, b]: first relevant at rank 3 -> 1/3; cut at k=2 -> 0.
    assert mrr(["x", "x", "y", "b"], {"b": 1}) == pytest.approx(1 / 3)
    assert mrr(["x", "x", "y", "b"], {"b": 1}, k=2) == 0.0
    assert mrr(["x", "y"], {"b": 1}) == 0.0


def test_an_empty_ranking_scores_zero():
    assert recall_at_k([], {"a": 1}, 5) == 0.0
    assert precision_at_k([], {"a": 1}, 5) == 0.0
    assert ndcg_at_k([], {"a": 1}, 5) == 0.0


@pytest.mark.parametrize("grades", [{}, {"a": 0}])
def test_a_case_without_relevant_sources_has_no_retrieval_score(grades):
    assert recall_at_k(["a"], grades, 5) is None
    assert precision_at_k(["a"], grades, 5) is None
    assert hit_rate_at_k(["a"], grades, 5) is None
    assert mrr(["a"], grades) is None
    assert ndcg_at_k(["a"], grades, 5) is None


def test_k_below_one_is_refused():
    with pytest.raises(MetricInputError, match="k must be at least 1"):
        recall_at_k(["a"], {"a": 1}, 0)


def test_expected_substrings_match_ignoring_case_and_line_breaks():
    answer = "The console listens on PORT\n   8743 by default."
    # "port 8743" matches across the line break; "8744" does not occur: 1 of 2.
    assert expected_substring_match(answer, ["port 8743", "8744"]) == pytest.approx(0.5)
    assert expected_substring_match(answer, ["Console"]) == 1.0
    assert expected_substring_match(answer, []) is None


def test_refusal_is_correct_only_when_it_was_wanted():
    assert refusal_correct(refused=True, should_refuse=True)
    assert refusal_correct(refused=False, should_refuse=False)
    assert not refusal_correct(refused=True, should_refuse=False)
    assert not refusal_correct(refused=False, should_refuse=True)


def test_percentiles_interpolate_between_ranks():
    # Sorted [1, 2, 3, 4]: p50 at index 1.5 -> 2.5; p95 at index 2.85 -> 3 + 0.85 = 3.85.
    latencies = [4.0, 1.0, 3.0, 2.0]
    assert percentile(latencies, 50) == pytest.approx(2.5)
    assert percentile(latencies, 95) == pytest.approx(3.85)
    with pytest.raises(MetricInputError):
        percentile([], 50)


SCORES = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 0.75, 1.0, 0.25, 1.0, 0.0]


def test_bootstrap_interval_is_reproducible_with_a_seed():
    # Latency-like continuous values, so that another seed visibly moves the bounds.
    values = [0.31, 0.12, 0.95, 0.47, 0.66, 0.08, 0.73, 0.29, 0.51, 0.88]
    first = bootstrap_ci(values, seed=7)
    assert bootstrap_ci(values, seed=7) == first
    assert bootstrap_ci(values, seed=8) != first
    assert bootstrap_ci(values, seed=8)[0] == first[0]  # the mean itself never moves


def test_bootstrap_interval_contains_the_mean():
    mean, low, high = bootstrap_ci(SCORES)
    assert mean == pytest.approx(sum(SCORES) / len(SCORES))
    assert low < mean < high
    # A wider confidence level gives a wider interval.
    _, low99, high99 = bootstrap_ci(SCORES, confidence=0.99)
    assert low99 <= low and high99 >= high


def test_bootstrap_of_constant_values_has_no_width():
    assert bootstrap_ci([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)


def test_paired_difference_has_the_sign_of_the_better_side():
    better = [min(1.0, s + 0.25) for s in SCORES]
    mean, low, high = paired_difference_ci(better, SCORES, seed=3)
    assert mean > 0 and low > 0 and high >= mean
    mean_rev, low_rev, high_rev = paired_difference_ci(SCORES, better, seed=3)
    assert mean_rev == pytest.approx(-mean)
    assert high_rev < 0 and low_rev <= mean_rev


def test_paired_difference_of_identical_runs_is_zero():
    assert paired_difference_ci(SCORES, SCORES) == (0.0, 0.0, 0.0)


def test_paired_difference_needs_the_same_cases():
    with pytest.raises(MetricInputError, match="same cases"):
        paired_difference_ci([1.0, 0.0], [1.0])
