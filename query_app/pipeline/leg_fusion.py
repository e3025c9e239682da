"""How the hybrid mode combines its two legs' rankings for one probe.

- ``rrf``: Reciprocal Rank Fusion, ``Σ 1/(k + rank)``, every leg alike.
- ``evidence``: weighted RRF, each keyword hit scaled by its own coverage.
- ``adaptive``: weighted RRF, the keyword leg scaled by its evidence for the
  question (:func:`keyword_evidence`).
- ``scores``: each leg's scores relative to its best hit, mixed with the keyword
  leg's share scaled by that same evidence (:func:`relative_score_fusion`). Rank
  fusion sees only that a hit comes first, not by how much; relative scores keep
  the margin, so a leg sure of its first hit outweighs one that is not.

The probe fusion of several questions (rag-fusion) reads :func:`rrf_scores` too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def rrf_scores(rankings: Sequence[Sequence[str]], *, k: int) -> dict[str, float]:
    """Reciprocal Rank Fusion: each list adds 1/(k + rank) to the items it ranks."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return scores


def weighted_rrf_scores(
    hits: Mapping[str, Sequence[tuple[str, float]]],
    *,
    k: int,
    weights: Mapping[str, float],
    evidence: Mapping[str, Mapping[str, float]],
) -> dict[str, float]:
    """Weighted Reciprocal Rank Fusion: leg ``L`` adds ``w_L x e / (k + rank)``.

    ``e`` is the hit's own evidence in that leg when the leg reports one (the
    keyword leg: the IDF-weighted share of the question's words the chunk
    holds, 0-1), else 1. A keyword hit that matches only a small, common part
    of the question therefore barely moves the vector leg's order, while one
    that holds the question's rare words counts fully.
    """
    scores: dict[str, float] = {}
    for leg, ranking in hits.items():
        weight = weights.get(leg, 1.0)
        leg_evidence = evidence.get(leg)
        for rank, (item, _score) in enumerate(ranking, start=1):
            share = 1.0 if leg_evidence is None else min(1.0, max(0.0, leg_evidence.get(item, 0.0)))
            scores[item] = scores.get(item, 0.0) + weight * share / (k + rank)
    return scores


# Query-dependent fusion ("adaptive", the default): the keyword leg's weight for
# one question is keyword_weight x E, where E is the keyword leg's own evidence
# for that question: the best IDF-weighted coverage of the question's words
# among its first KEYWORD_EVIDENCE_TOP hits (1 when the question holds codes or
# quoted phrases and the first hit contains them). Calibrated on SciFact
# and the FAQ-shaped set (docs/answering.md): E squared gained less on SciFact.
KEYWORD_EVIDENCE_TOP = 10


def keyword_evidence(coverages: Sequence[float], *, exact: bool) -> float:
    """The keyword leg's evidence for one question (0-1) from its hits' coverages, in rank order.

    One weight for every hit of the question, unlike ``evidence`` fusion's
    per-hit coverage, which favours long chunks (they hold more of the
    question's words) over the short answer the question is about.
    """
    if exact:
        return 1.0
    return min(1.0, max(coverages[:KEYWORD_EVIDENCE_TOP], default=0.0))


def relative_score_fusion(
    hits: Mapping[str, Sequence[tuple[str, float]]], *, keyword_share: float
) -> dict[str, float]:
    """``(1 - s) x v / v1 + s x b / b1`` for every hit of either leg.

    ``v`` is a hit's vector similarity and ``v1`` the best one; ``b`` its keyword
    score and ``b1`` the best; ``s`` the keyword leg's ``keyword_share`` (0-1).
    A hit the vector leg did not return counts the lowest similarity it read (its
    own is lower still); one the keyword leg did not return counts 0. A leg whose
    best score is not positive adds nothing.
    """
    vector = list(hits.get("vector", ()))
    keyword = list(hits.get("keyword", ()))
    share = min(1.0, max(0.0, keyword_share))
    scores: dict[str, float] = {}
    v_best = max((score for _, score in vector), default=0.0)
    if v_best > 0:
        v_floor = max(0.0, min(score for _, score in vector)) / v_best
        for item, score in vector:
            scores[item] = (1.0 - share) * max(0.0, score) / v_best
    else:
        v_floor = 0.0
    b_best = max((score for _, score in keyword), default=0.0)
    for item, score in keyword:
        relative = max(0.0, score) / b_best if b_best > 0 else 0.0
        if item not in scores:
            scores[item] = (1.0 - share) * v_floor
        scores[item] += share * relative
    return scores
