"""One structured options block for the whole pipeline.

Profiles are presets over this tree; ``settings.RAG["query"]`` overrides any
value; per-request overrides win last. Every layer is a nested mapping (or
dotted keys such as ``{"rerank.top_n": 3}``) validated against the tree, so a
misspelt key fails loudly with the list of known keys instead of being ignored.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

from query_app.exceptions import InvalidOption, UnknownOption

# Relevance floors calibrated with benchmarks/relevance_floor.py for the default
# embedder (all-MiniLM-L6-v2); see docs/answering.md, "Relevance floor".
DEFAULT_MIN_VECTOR_SIMILARITY = 0.30
DEFAULT_MIN_KEYWORD_COVERAGE = 0.30
# A passage below the vector floor still counts when one of its sentences is this
# near the question on its own (a notes page mixing topics; see docs/answering.md).
DEFAULT_MIN_UNIT_SIMILARITY = 0.40


@dataclass(frozen=True)
class TransformOptions:
    kind: str = "none"  # none | multi-query | rag-fusion | hyde
    variants: int = 3  # paraphrases asked for by multi-query / rag-fusion
    # Misspelt words of the question corrected against the collection's words
    # (query_app/pipeline/spelling.py) before any probe is made.
    spelling: bool = True


# pgvector's upper bound on hnsw.ef_search: a larger value is an SQL error.
MAX_EF_SEARCH = 1000
# retrieval.fusion: how the hybrid mode combines its vector and keyword legs.
HYBRID_FUSIONS = ("rrf", "evidence", "adaptive", "scores")


@dataclass(frozen=True)
class RetrievalOptions:
    mode: str = "vector"  # vector | keyword | hybrid
    # Candidates per probe; None means "as many as rerank.top_n" (the fast cascade).
    candidate_k: int | None = None
    rrf_k: int = 60
    # How hybrid fuses its two legs: "adaptive" (weighted RRF whose keyword
    # weight is keyword_weight x the keyword leg's evidence for the question: the
    # best IDF-weighted coverage of its words among the first keyword hits),
    # "rrf" (equal weights, Σ 1/(k + rank)) or "evidence" (each keyword hit
    # counts keyword_weight x its own coverage, which favours long chunks).
    # "scores" mixes each leg's scores relative to its best hit instead of ranks:
    # (1 - s) x similarity / best similarity + s x BM25 / best BM25, where s is
    # keyword_share x that same evidence (query_app/pipeline/leg_fusion.py).
    fusion: str = "adaptive"
    vector_weight: float = 1.0
    keyword_weight: float = 1.0
    keyword_share: float = 0.5
    # Decisive keyword hit (hybrid only, off by default): when the keyword leg's
    # top hit scores at least ``decisive_keyword_ratio`` times its second and holds
    # at least ``decisive_keyword_coverage`` of the question's IDF-weighted words,
    # the fused ranking places it at ``decisive_keyword_rank`` or better (never
    # lower than the fusion put it). Rank fusion alone ignores that margin.
    decisive_keyword: bool = False
    decisive_keyword_ratio: float = 2.0
    decisive_keyword_coverage: float = 0.6
    decisive_keyword_rank: int = 2
    # At most this many chunks of one document ahead of a further chunk of any
    # document, which follow, demoted (0 = no limit). The legs then read
    # ``per_document_pool`` times deeper so that one long document's many chunks
    # cannot crowd the others out: with 2, any top-n of 20 or more holds the 10
    # best documents.
    per_document: int = 2
    per_document_pool: int = 4
    # A retrieved summary-tree node is replaced by up to this many of its member
    # passages, the nearest to the probe (query_app/pipeline/summary_nodes.py).
    summary_members: int = 2
    # The vector leg's hits reordered by (1 - w) x their similarity + w x that of
    # their nearest unit (sentence, list item, row; the vectors stored at
    # ingestion for extractive answers). 0 = off: at 0.3 full SciFact gains 0.010
    # nDCG@10 but the FAQ-shaped set loses 0.007 (docs/answering.md).
    unit_similarity: float = 0.0
    # The vector leg's hits scored (1 - w) x their similarity + w x that of their
    # document (the mean of its passages' vectors, kept per process;
    # query_app/pipeline/document_similarity.py). 0 = off. Lab, 2026-12-03: the
    # manual-shaped set 0.875 -> 0.909, FAQ-shaped 0.823 -> 0.830, SciFact 0.707 ->
    # 0.710, golden 0.902 -> 0.910 (docs/answering.md).
    document_similarity: float = 0.5
    # A passage's score corrected by ln(passages of its document), so that a long
    # document's many tries do not outrank a short answer by chance
    # (query_app/pipeline/document_prior.py): similarity - document_prior x ln n,
    # BM25 / (1 + keyword_document_prior x ln n). 0 = off. Lab, 2026-12-03: the
    # manual-shaped set 0.831 -> 0.875, the FAQ-shaped 0.809 -> 0.823, SciFact
    # 0.705 -> 0.707 (docs/answering.md).
    document_prior: float = 0.02
    keyword_document_prior: float = 0.2
    keyword_ranking: str = "bm25"  # bm25 | ts_rank_cd
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    # Upper bound on chunks the keyword leg scores per probe, so its cost stays
    # flat as collections grow (the rarest terms select the pool). SciFact
    # nDCG@10 is the same with 500 as with no bound (benchmarks/keyword_scifact.py).
    keyword_pool: int = 1000
    # Codes in the question (ERR-4471, v2.3.1, sha256) must appear in keyword hits.
    require_codes: bool = True
    # With require_codes: 0 leaves out a keyword hit lacking a code of the question;
    # above 0 keeps it with its score multiplied by this (behind those holding it).
    missing_code_weight: float = 0.0
    # Linear profiles: when the kept evidence defines a term of the question or names
    # the thing it describes, that name is searched next to the question once and the
    # rankings fused (query_app/pipeline/stages/bridge.py); never for retrieval only.
    bridge: bool = True
    # HNSW search breadth; None means max(40, 2 * candidate_k), at most
    # MAX_EF_SEARCH (pgvector refuses more).
    ef_search: int | None = None


@dataclass(frozen=True)
class FusionOptions:
    mmr: bool = False
    mmr_lambda: float = 0.7


@dataclass(frozen=True)
class RerankOptions:
    kind: str = "none"  # none | cross-encoder | llm
    top_n: int = 5
    # sentence-transformers CrossEncoder id/directory or a directory with model.onnx.
    model: str = ""
    # Candidates whose final score is below this are dropped (may decline the answer).
    min_score: float | None = None
    batch_size: int = 32
    max_length: int = 512
    # A reranker whose model is missing (no cross-encoder configured, no chat model
    # for ``llm``) is skipped with a trace warning; True makes that an error instead.
    required: bool = False


@dataclass(frozen=True)
class FloorOptions:
    """Relevance floor: decline when the best evidence is below it (see relevance_floor_check)."""

    min_vector_similarity: float | None = DEFAULT_MIN_VECTOR_SIMILARITY
    min_keyword_coverage: float | None = DEFAULT_MIN_KEYWORD_COVERAGE
    # None: the passage's cosine alone decides.
    min_unit_similarity: float | None = DEFAULT_MIN_UNIT_SIMILARITY

    @property
    def unit_floor(self) -> float | None:
        """What one unit must reach to let its passage in: ``min_unit_similarity``, and
        never less than a whole passage must (a stricter vector floor raises it too)."""
        if self.min_unit_similarity is None:
            return None
        return max(self.min_unit_similarity, self.min_vector_similarity or -1.0)


@dataclass(frozen=True)
class ContextOptions:
    max_tokens: int = 2000
    ordering: str = "edges"  # edges | linear
    # Token estimate for the chat model: ceil(characters / chars_per_token).
    chars_per_token: float = 4.0
    # Small-to-big (query_app/pipeline/context_window.py): what the generator reads
    # for each passage: "chunk" (the passage), "window" (with ``window`` neighbouring
    # passages on each side) or "section" (its section's passages around it), at most
    # ``expand_max_tokens`` each. Citations and highlights stay on the passage.
    expand: str = "chunk"
    window: int = 1
    expand_max_tokens: int = 600


@dataclass(frozen=True)
class GenerationOptions:
    generator: str = "auto"  # auto | llm | extractive
    max_sentences: int = 3  # extractive answers
    # Extractive answers quote a sentence only when its own cosine to the question
    # (read with its document's title) reaches this; None: no sentence floor.
    min_sentence_similarity: float | None = 0.25
    # An extractive answer to a fact question is declined when the question turns on
    # a word the collection never uses and every quoted sentence is nearer the question
    # without it by more than this (cosine; query_app/pipeline/unaddressed.py).
    # None: never declined for a word.
    decline_unaddressed: float | None = 0.03
    # An extractive answer is declined when the passages it would quote from hold less
    # than this share of the question's words, weighed by their rarity in the
    # collection (query_app/pipeline/coverage.py). None: never declined for it.
    min_question_coverage: float | None = 0.3
    temperature: float = 0.0
    max_output_tokens: int = 512
    # Replaces the built-in grounded system prompt when set.
    system_prompt: str = ""


@dataclass(frozen=True)
class GroundednessOptions:
    enabled: bool = False
    checker: str = "auto"  # auto | llm | heuristic
    # Share of a sentence's content words that must appear in its passages.
    min_support: float = 0.6


@dataclass(frozen=True)
class CorrectiveOptions:
    """The corrective and adaptive graphs (query_app/pipeline/graph.py)."""

    # Rewrites of the probe, whether for an "incorrect" verdict or an ungrounded answer.
    max_iterations: int = 3
    # Node runs in one answer; a second, independent bound (0 = derived: 7 x (budget + 2)).
    max_transitions: int = 0
    # Wall-clock bound of the graph; past it the best evidence so far is answered.
    timeout_s: float = 120.0
    # Offline grader: top relevance at or above ``upper`` is correct, at or below
    # ``lower`` incorrect, between them ambiguous.
    upper: float = 0.55
    lower: float = 0.30
    # Score gate: a top cosine at or above ``gate_strong`` is correct and one at or below
    # ``gate_weak`` incorrect without running the grader.
    gate_strong: float = 0.70
    gate_weak: float = 0.10
    # evaluate: offline | llm | auto (the chat model when configured, else offline).
    grader: str = "auto"
    # Graph of the profile (corrective | adaptive); a settings typo names the known ones.
    graph: str = ""


@dataclass(frozen=True)
class WebOptions:
    """Web fallback (query_app/pipeline/web/): searched once the corrective budget is spent.

    ``enabled`` is asked per request (the ask page's checkbox, the API's
    ``web_fallback``) on a collection that allows it; settings cannot turn it on
    for every question. The search server's address and the time and size limits
    are the deployment's (settings.RAG["web_search"]), never a request's.
    """

    enabled: bool = False
    provider: str = "searxng"
    # Search results read, and pages fetched among them (in the provider's order).
    max_results: int = 5
    max_pages: int = 3
    # Passages taken from one page (the ones sharing most words with the question).
    passages_per_page: int = 2
    passage_chars: int = 800


@dataclass(frozen=True)
class CacheOptions:
    enabled: bool = True
    ttl_s: int = 300


@dataclass(frozen=True)
class QueryOptions:
    """Every knob of the pipeline, one block per stage."""

    transform: TransformOptions = field(default_factory=TransformOptions)
    retrieval: RetrievalOptions = field(default_factory=RetrievalOptions)
    fusion: FusionOptions = field(default_factory=FusionOptions)
    rerank: RerankOptions = field(default_factory=RerankOptions)
    floor: FloorOptions = field(default_factory=FloorOptions)
    context: ContextOptions = field(default_factory=ContextOptions)
    generation: GenerationOptions = field(default_factory=GenerationOptions)
    groundedness: GroundednessOptions = field(default_factory=GroundednessOptions)
    cache: CacheOptions = field(default_factory=CacheOptions)
    corrective: CorrectiveOptions = field(default_factory=CorrectiveOptions)
    web: WebOptions = field(default_factory=WebOptions)

    @property
    def candidate_k(self) -> int:
        """Candidates per probe, never fewer than the final top_n."""
        k = self.retrieval.candidate_k
        return max(k if k is not None else self.rerank.top_n, self.rerank.top_n)

    @property
    def ef_search(self) -> int:
        ef = self.retrieval.ef_search
        return ef if ef is not None else min(MAX_EF_SEARCH, max(40, 2 * self.candidate_k))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class QueryLimits:
    """Deployment limits a request can never override (settings.RAG["query_limits"])."""

    max_question_chars: int = 2000
    max_top_n: int = 50
    max_candidate_k: int = 1000

    @classmethod
    def from_settings(cls) -> QueryLimits:
        from django.conf import settings

        block = settings.RAG.get("query_limits", {})
        known = {f.name for f in fields(cls)}
        return cls(**{k: int(v) for k, v in block.items() if k in known})


def expand_dotted(layer: Mapping[str, Any]) -> dict[str, Any]:
    """``{"rerank.top_n": 3}`` → ``{"rerank": {"top_n": 3}}`` (nested keys pass through)."""
    result: dict[str, Any] = {}
    for key, value in layer.items():
        parts = str(key).split(".")
        target = result
        for part in parts[:-1]:
            existing = target.get(part)
            if not isinstance(existing, dict):
                existing = {}
                target[part] = existing
            target = existing
        leaf = parts[-1]
        if isinstance(value, Mapping):
            current = target.get(leaf)
            merged = current if isinstance(current, dict) else {}
            target[leaf] = deep_merge(merged, expand_dotted(value))
        else:
            target[leaf] = value
    return result


def deep_merge(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def options_build(
    layers: list[Mapping[str, Any]], *, origin: list[str] | None = None
) -> QueryOptions:
    """Overlay ``layers`` (first = lowest) on the defaults and build a validated tree."""
    data: dict[str, Any] = asdict(QueryOptions())
    for index, layer in enumerate(layers):
        expanded = expand_dotted(layer)
        _check_keys(QueryOptions, expanded, prefix="", origin=(origin or [])[index : index + 1])
        data = deep_merge(data, expanded)
    return _build(QueryOptions, data, prefix="")


def _check_keys(cls: type, layer: Mapping[str, Any], *, prefix: str, origin: list[str]) -> None:
    known = {f.name: f for f in fields(cls)}
    hints = typing.get_type_hints(cls)
    for key, value in layer.items():
        if key not in known:
            where = f" in {origin[0]}" if origin else ""
            raise UnknownOption(
                f"unknown option {prefix + key!r}{where}; known options"
                f"{' of ' + prefix.rstrip('.') if prefix else ''}: {', '.join(sorted(known))}"
            )
        hint = hints[key]
        if isinstance(hint, type) and is_dataclass(hint):
            if not isinstance(value, Mapping):
                raise InvalidOption(f"option {prefix + key!r} must be a mapping of options")
            _check_keys(hint, value, prefix=f"{prefix}{key}.", origin=origin)


def _build(cls: type, data: Mapping[str, Any], *, prefix: str) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        hint = hints[f.name]
        value = data.get(f.name)
        name = prefix + f.name
        if isinstance(hint, type) and is_dataclass(hint):
            values[f.name] = _build(hint, value or {}, prefix=f"{name}.")
        else:
            values[f.name] = _coerce(name, value, hint)
    return cls(**values)


def _coerce(name: str, value: Any, hint: Any) -> Any:
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None:
        if type(None) in allowed:
            return None
        raise InvalidOption(f"option {name!r} may not be empty")
    target = next(t for t in allowed if t is not type(None))
    try:
        if target is bool:
            return _to_bool(value)
        if target is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if target is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if target is str:
            if not isinstance(value, str):
                raise ValueError
            return value
    except (TypeError, ValueError):
        pass
    else:
        return value
    raise InvalidOption(f"option {name!r} must be {_type_name(target)}, got {value!r}")


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off"}:
        return False
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(value)


def _type_name(target: Any) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(
        target, str(target)
    )
