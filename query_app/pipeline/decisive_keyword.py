"""A decisive keyword hit (``retrieval.decisive_keyword``, off by default).

Rank fusion sees only that a chunk is first in the keyword leg, not that it
scores twice the runner-up; when the vector leg misses it, RRF can bury the one
chunk that holds the question's rare words. With the option on, such a hit is
moved up to ``decisive_keyword_rank`` of the fused order (never down), and the
fusion's trace says when it fired. Measured off vs on: one golden case gained,
no question of the public sets changed (docs/answering.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from query_app.pipeline.options import RetrievalOptions


def decisive_keyword_hit(
    keyword_hits: Sequence[tuple[str, float]],
    coverage: Mapping[str, float],
    *,
    ratio: float,
    min_coverage: float,
) -> dict[str, Any]:
    """Whether the keyword leg's top hit is decisive: at least ``ratio`` times the
    second's score, and at least ``min_coverage`` of the question's words held.

    Returns the hit's id, its margin over the second hit (None when there is no
    scored second hit) and its coverage, with ``fires``.
    """
    if not keyword_hits:
        return {"fires": False}
    top, top_score = keyword_hits[0]
    second = keyword_hits[1][1] if len(keyword_hits) > 1 else 0.0
    margin = top_score / second if second > 0 else None
    held = coverage.get(top, 0.0)
    fires = top_score > 0 and (margin is None or margin >= ratio) and held >= min_coverage
    return {
        "fires": fires,
        "chunk_id": top,
        "ratio": None if margin is None else round(margin, 3),
        "coverage": round(held, 4),
    }


def decisive_keyword_promote(
    order: list[str],
    scores: dict[str, float],
    *,
    keyword_hits: Sequence[tuple[str, float]],
    coverage: Mapping[str, float],
    options: RetrievalOptions,
) -> dict[str, Any]:
    """Move a decisive keyword hit up to ``decisive_keyword_rank`` in place; its trace entry.

    ``order`` and ``scores`` are changed together: the promoted chunk's score
    lies between its new neighbours', so a later merge by score keeps the order.
    """
    verdict = decisive_keyword_hit(
        keyword_hits,
        coverage,
        ratio=options.decisive_keyword_ratio,
        min_coverage=options.decisive_keyword_coverage,
    )
    if not verdict["fires"]:
        return verdict
    chunk_id = verdict["chunk_id"]
    target = max(1, options.decisive_keyword_rank)
    before = order.index(chunk_id) + 1 if chunk_id in order else None
    verdict.update({"fused_rank": before, "rank": before})
    if before is not None and before <= target:
        return verdict
    if before is not None:
        order.remove(chunk_id)
    else:
        order.pop()  # past the depth read: it takes the last place's slot
    index = min(target, len(order) + 1) - 1
    below = scores[order[index]] if index < len(order) else 0.0
    above = scores[order[index - 1]] if index > 0 else below + 1e-6
    scores.pop(chunk_id, None)
    order.insert(index, chunk_id)
    scores[chunk_id] = (above + below) / 2
    kept = set(order)
    for cid in [cid for cid in scores if cid not in kept]:
        del scores[cid]
    verdict["rank"] = index + 1
    return verdict
