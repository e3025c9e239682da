"""The schema of a query's ``overrides``, built from the options tree, and its check.

``overrides`` names options nested (``{"rerank": {"top_n": 3}}``) or dotted
(``{"rerank.top_n": 3}``); both spellings of every option of
``query_app.pipeline.options.QueryOptions`` are declared, with its JSON type,
the names its registry knows and the range ``options_validate`` allows.
``overrides_check`` holds a request to those types, names and ranges, so what
the schema declares is what the API takes (the command line, whose values are
text, is coerced by the options tree instead). Unknown names are left to the
answering service, whose error lists the known ones.
"""

from __future__ import annotations

import importlib
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import fields, is_dataclass
from typing import Any

from rest_framework.exceptions import ValidationError

from query_app.pipeline.options import MAX_EF_SEARCH, QueryLimits, QueryOptions

# The ranges options_validate (query_app/pipeline/profiles.py) allows, by option;
# top_n and candidate_k are the deployment's (QueryLimits, from settings).
RANGES: dict[str, tuple[float, float]] = {
    "transform.variants": (1, 10),
    "retrieval.ef_search": (1, MAX_EF_SEARCH),
    "retrieval.rrf_k": (1, 10_000),
    "retrieval.vector_weight": (0.0, 100.0),
    "retrieval.keyword_weight": (0.0, 100.0),
    "retrieval.unit_similarity": (0.0, 1.0),
    "retrieval.document_similarity": (0.0, 1.0),
    "retrieval.keyword_share": (0.0, 1.0),
    "retrieval.document_prior": (0.0, 1.0),
    "retrieval.keyword_document_prior": (0.0, 10.0),
    "retrieval.missing_code_weight": (0.0, 1.0),
    "retrieval.per_document": (0, 1000),
    "retrieval.per_document_pool": (1, 20),
    "retrieval.bm25_k1": (0.0, 10.0),
    "retrieval.bm25_b": (0.0, 1.0),
    "retrieval.keyword_pool": (100, 1_000_000),
    "retrieval.summary_members": (1, 20),
    "fusion.mmr_lambda": (0.0, 1.0),
    "rerank.batch_size": (1, 1024),
    "rerank.max_length": (16, 8192),
    "floor.min_vector_similarity": (-1.0, 1.0),
    "floor.min_keyword_coverage": (0.0, 1.0),
    "context.max_tokens": (50, 1_000_000),
    "context.chars_per_token": (0.5, 20.0),
    "context.window": (0, 20),
    "context.expand_max_tokens": (10, 100_000),
    "generation.max_sentences": (1, 50),
    "generation.max_output_tokens": (1, 100_000),
    "generation.temperature": (0.0, 2.0),
    "generation.min_sentence_similarity": (-1.0, 1.0),
    "generation.decline_unaddressed": (0.0, 1.0),
    "generation.min_question_coverage": (0.0, 1.0),
    "groundedness.min_support": (0.0, 1.0),
    "cache.ttl_s": (0, 7 * 24 * 3600),
    "corrective.upper": (0.0, 1.0),
    "corrective.lower": (0.0, 1.0),
    "corrective.gate_strong": (0.0, 1.0),
    "corrective.gate_weak": (0.0, 1.0),
    "web.max_results": (1, 20),
    "web.max_pages": (1, 10),
    "web.passages_per_page": (1, 10),
    "web.passage_chars": (100, 5000),
}

# Options naming a component: where its names come from ("module:ATTRIBUTE").
NAMES: dict[str, str] = {
    "transform.kind": "query_app.pipeline.transforms:TRANSFORMS",
    "retrieval.mode": "query_app.pipeline.retrieval:RETRIEVAL_MODES",
    "retrieval.keyword_ranking": "query_app.pipeline.keyword:KEYWORD_RANKINGS",
    "retrieval.fusion": "query_app.pipeline.options:HYBRID_FUSIONS",
    "rerank.kind": "query_app.pipeline.rerankers:RERANKERS",
    "context.ordering": "query_app.pipeline.assembly:ORDERINGS",
    "context.expand": "query_app.pipeline.context_window:EXPANSIONS",
    "generation.generator": "query_app.pipeline.generation:GENERATORS",
    "groundedness.checker": "query_app.pipeline.groundedness:CHECKERS",
    "corrective.grader": "query_app.pipeline.stages.evaluate:GRADERS",
    "web.provider": "query_app.pipeline.web:WEB_PROVIDERS",
}

INT32_MAX = 2**31 - 1
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _names(option: str) -> list[str] | None:
    where = NAMES.get(option)
    if where is None:
        return None
    module, attribute = where.split(":")
    try:
        known = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError):
        return None
    return sorted(known)


def _leaves(cls: type = QueryOptions, prefix: str = "") -> Iterator[tuple[str, type, bool]]:
    """Every option of the tree: dotted name, Python type, whether it may be null."""
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        hint = hints[f.name]
        if isinstance(hint, type) and is_dataclass(hint):
            yield from _leaves(hint, f"{prefix}{f.name}.")
            continue
        allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        target = next(t for t in allowed if t is not type(None))
        yield f"{prefix}{f.name}", target, type(None) in allowed


def leaf_schema(name: str, target: type, nullable: bool) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": JSON_TYPES[target]}
    if nullable:
        schema["nullable"] = True
    if target in (int, float):
        limits = QueryLimits.from_settings()
        ranges = {
            **RANGES,
            "rerank.top_n": (1, limits.max_top_n),
            "retrieval.candidate_k": (1, limits.max_candidate_k),
        }
        low, high = ranges.get(name, (-INT32_MAX, INT32_MAX) if target is int else (None, None))
        if low is not None:
            schema["minimum"], schema["maximum"] = low, high
    names = _names(name)
    if names is not None and target is str:
        schema["enum"] = names
    return schema


def overrides_schema() -> dict[str, Any]:
    """``overrides`` as an OpenAPI object: every option nested by stage, and dotted."""
    blocks: dict[str, dict[str, Any]] = {}
    dotted: dict[str, Any] = {}
    for name, target, nullable in _leaves():
        schema = leaf_schema(name, target, nullable)
        block, _, leaf = name.partition(".")
        blocks.setdefault(
            block, {"type": "object", "additionalProperties": False, "properties": {}}
        )
        blocks[block]["properties"][leaf] = schema
        dotted[name] = schema
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {**blocks, **dotted},
        "description": "Per-request options, nested by stage or dotted "
        '(`{"retrieval": {"mode": "hybrid"}}` or `{"retrieval.mode": "hybrid"}`). Some '
        "combinations are refused with 400 naming the option: an option only "
        "administrators may set, or one needing a model this deployment lacks.",
    }


def overrides_check(overrides: Mapping[str, Any]) -> None:
    """Raise a 400 naming the option whose value is not of its declared type, name or range."""
    known = {name: (target, nullable) for name, target, nullable in _leaves()}
    for name, value in _flatten(overrides):
        if name not in known:
            continue  # the answering service names the unknown option and the known ones
        target, nullable = known[name]
        problem = _problem(name, value, target, nullable)
        if problem:
            raise ValidationError({"overrides": [f"option {name!r} {problem}"]})


def _flatten(layer: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in layer.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and "." not in name:
            yield from _flatten(value, f"{name}.")
        else:
            yield name, value


CHECKS: dict[type, Callable[[Any], bool]] = {
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    str: lambda v: isinstance(v, str),
}


def _problem(name: str, value: Any, target: type, nullable: bool) -> str:
    if value is None:
        return "" if nullable else "may not be null"
    if not CHECKS[target](value):
        return f"must be a JSON {JSON_TYPES[target]}"
    schema = leaf_schema(name, target, nullable)
    if "minimum" in schema and not schema["minimum"] <= value <= schema["maximum"]:
        return f"must be between {schema['minimum']:g} and {schema['maximum']:g}"
    if "enum" in schema and value not in schema["enum"]:
        return f"must be one of {', '.join(schema['enum'])}"
    return ""
