"""Evaluation metrics: pure functions over ranked source refs, answers and samples.

Conventions shared by the retrieval metrics:

- ``ranked`` is the list of retrieved source refs in rank order (see
  ``GoldenCase.ranked_refs``). Several chunks of one source make it appear several
  times; it is **deduplicated keeping its first occurrence**, so ``k`` counts distinct
  sources and a source is credited at its best rank only once.
- ``relevant`` maps each judged ref to its grade, 0-3. A grade >= 1 counts as
  relevant for recall, precision, hit rate and MRR; nDCG uses the grade itself.
- **Ties**: ranked lists are used exactly as given. When two passages scored the same,
  their order is the order the retriever returned them in; no metric reorders or
  averages over tied permutations, so a tie costs whatever rank it was given.
- A case with no relevant ref (an unanswerable question) has no retrieval score: the
  functions return ``None`` and aggregates skip it, as trec_eval does.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence

import numpy as np


class MetricInputError(ValueError):
    """A metric was given input it is not defined on (k < 1, no values, ...)."""


Grades = Mapping[str, int]

# Resampled values held in memory at once by the bootstrap (8 MB of float64).
_BOOTSTRAP_BATCH_CELLS = 1_000_000


def dedupe(ranked: Sequence[str]) -> list[str]:
    """``ranked`` with repeats removed, keeping each ref at its first (best) rank."""
    return list(dict.fromkeys(ranked))


def _check_k(k: int) -> None:
    if k < 1:
        raise MetricInputError(f"k must be at least 1, got {k}")


def _relevant_set(relevant: Grades) -> set[str]:
    return {ref for ref, grade in relevant.items() if grade >= 1}


def _hits_at_k(ranked: Sequence[str], relevant: Grades, k: int) -> int | None:
    _check_k(k)
    wanted = _relevant_set(relevant)
    if not wanted:
        return None
    return sum(1 for ref in dedupe(ranked)[:k] if ref in wanted)


def recall_at_k(ranked: Sequence[str], relevant: Grades, k: int) -> float | None:
    """Share of the relevant sources found among the first ``k`` distinct sources."""
    hits = _hits_at_k(ranked, relevant, k)
    if hits is None:
        return None
    return hits / len(_relevant_set(relevant))


def precision_at_k(ranked: Sequence[str], relevant: Grades, k: int) -> float | None:
    """Relevant sources among the first ``k`` distinct ones, divided by ``k``.

    The divisor is ``k`` even when fewer than ``k`` sources were retrieved (the
    trec_eval convention), so a short list is not rewarded for returning little.
    """
    hits = _hits_at_k(ranked, relevant, k)
    if hits is None:
        return None
    return hits / k


def hit_rate_at_k(ranked: Sequence[str], relevant: Grades, k: int) -> float | None:
    """1.0 when at least one relevant source is among the first ``k``, else 0.0."""
    hits = _hits_at_k(ranked, relevant, k)
    if hits is None:
        return None
    return 1.0 if hits else 0.0


def mrr(ranked: Sequence[str], relevant: Grades, *, k: int | None = None) -> float | None:
    """Reciprocal rank (1-based, after dedupe) of the first relevant source; 0.0 when
    none is found within the first ``k`` (the whole list when ``k`` is None)."""
    if k is not None:
        _check_k(k)
    wanted = _relevant_set(relevant)
    if not wanted:
        return None
    distinct = dedupe(ranked)
    for rank, ref in enumerate(distinct[:k] if k is not None else distinct, start=1):
        if ref in wanted:
            return 1.0 / rank
    return 0.0


def _dcg(grades: Sequence[int]) -> float:
    # Rank r (1-based) is discounted by log2(r + 1): 1, 0.631, 0.5, 0.431, ...
    return sum((2.0**grade - 1.0) / math.log2(rank + 1) for rank, grade in enumerate(grades, 1))


def ndcg_at_k(ranked: Sequence[str], relevant: Grades, k: int) -> float | None:
    """Normalised discounted cumulative gain over the first ``k`` distinct sources.

    Gain of a source is ``2**grade - 1`` (unjudged sources have grade 0), discounted
    by ``log2(rank + 1)``; the ideal DCG sorts all graded judgments best first and
    cuts at ``k``. Ranked lists are used as given (see the module notes on ties).
    """
    _check_k(k)
    if not _relevant_set(relevant):
        return None
    gains = [max(relevant.get(ref, 0), 0) for ref in dedupe(ranked)[:k]]
    ideal = sorted((grade for grade in relevant.values() if grade > 0), reverse=True)[:k]
    return _dcg(gains) / _dcg(ideal)


def _normalise_text(text: str) -> str:
    # NFKC folds look-alikes (non-breaking spaces, ligatures) and collapsing
    # whitespace lets a substring match across the line breaks PDFs insert.
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def expected_substring_match(answer: str, expected: Sequence[str]) -> float | None:
    """Share of the ``expected`` substrings that occur in ``answer``.

    Matching ignores case, Unicode compatibility forms and runs of whitespace.
    Returns ``None`` when nothing is expected; 1.0 means every substring was found.
    """
    wanted = [needle for needle in (_normalise_text(e) for e in expected) if needle]
    if not wanted:
        return None
    haystack = _normalise_text(answer)
    return sum(1 for needle in wanted if needle in haystack) / len(wanted)


def refusal_correct(*, refused: bool, should_refuse: bool) -> bool:
    """Whether the system's decision to refuse (or answer) was the right one."""
    return refused == should_refuse


def _as_array(values: Sequence[float], what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise MetricInputError(f"{what} needs at least one value")
    if not np.all(np.isfinite(array)):
        raise MetricInputError(f"{what} got a value that is not a finite number")
    return array


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of ``values``, interpolating linearly between
    the closest ranks (numpy's default), e.g. ``percentile(latencies, 95)``."""
    if not 0 <= p <= 100:
        raise MetricInputError(f"p must be between 0 and 100, got {p}")
    return float(np.percentile(_as_array(values, "percentile"), p))


def _bootstrap(
    array: np.ndarray, *, iterations: int, confidence: float, seed: int
) -> tuple[float, float, float]:
    if iterations < 1:
        raise MetricInputError(f"iterations must be at least 1, got {iterations}")
    if not 0 < confidence < 1:
        raise MetricInputError(f"confidence must be between 0 and 1, got {confidence}")
    rng = np.random.default_rng(seed)
    # One row of resampled indices per replicate: each draws len(array) items with
    # replacement, so paired callers resample whole cases together. Rows are drawn
    # in batches to bound memory on large datasets (thousands of BEIR queries).
    rows_per_batch = max(1, _BOOTSTRAP_BATCH_CELLS // array.size)
    means = np.empty(iterations)
    for start in range(0, iterations, rows_per_batch):
        stop = min(iterations, start + rows_per_batch)
        indices = rng.integers(0, array.size, size=(stop - start, array.size))
        means[start:stop] = array[indices].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(array.mean()), float(low), float(high)


def bootstrap_ci(
    values: Sequence[float],
    *,
    iterations: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean of ``values`` with a percentile-bootstrap confidence interval.

    Returns ``(mean, low, high)``. The same ``seed`` gives the same interval, so a
    stored run can be recomputed exactly. Skip ``None`` scores before calling.
    """
    return _bootstrap(
        _as_array(values, "bootstrap_ci"), iterations=iterations, confidence=confidence, seed=seed
    )


def paired_difference_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    iterations: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean per-case difference ``a - b`` with a paired bootstrap interval.

    ``a[i]`` and ``b[i]`` must score the same case (two profiles, or two runs); cases
    are resampled together, so the interval reflects how consistently one beats the
    other rather than the spread of case difficulty. An interval that excludes 0
    means the difference is unlikely to be noise. Returns ``(mean_diff, low, high)``.
    """
    first = _as_array(a, "paired_difference_ci")
    second = _as_array(b, "paired_difference_ci")
    if first.size != second.size:
        raise MetricInputError(
            f"paired values must score the same cases: {first.size} vs {second.size} values"
        )
    return _bootstrap(first - second, iterations=iterations, confidence=confidence, seed=seed)
