"""The ranges the schema declares for ``overrides`` are the ranges the answering service holds."""

from __future__ import annotations

import pytest

from query_app.exceptions import InvalidOption
from query_app.pipeline.options import QueryLimits, options_build
from query_app.pipeline.profiles import options_validate
from ragsite.api.options_schema import RANGES, leaf_schema, overrides_schema

# Held to each other as well as to their range (corrective.lower <= corrective.upper, ...).
HELD_TOGETHER = {
    "corrective.lower",
    "corrective.upper",
    "corrective.gate_strong",
    "corrective.gate_weak",
}


def _validate(name: str, value: float) -> None:
    options_validate(options_build([{name: value}]), QueryLimits.from_settings())


@pytest.mark.parametrize("name", sorted(RANGES))
def test_a_declared_range_is_the_services_range(name):
    low, high = RANGES[name]
    step = 1 if isinstance(low, int) and isinstance(high, int) else 0.001
    for outside in (low - step, high + step):
        with pytest.raises(InvalidOption):
            _validate(name, outside)
    if name not in HELD_TOGETHER:
        _validate(name, low)
        _validate(name, high)


def test_every_option_is_declared_nested_and_dotted():
    schema = overrides_schema()
    dotted = [name for name in schema["properties"] if "." in name]
    assert "retrieval.candidate_k" in dotted and "rerank.top_n" in dotted
    for name in dotted:
        block, leaf = name.split(".")
        assert schema["properties"][block]["properties"][leaf] == schema["properties"][name]
    assert leaf_schema("rerank.top_n", int, False) == {
        "type": "integer",
        "minimum": 1,
        "maximum": QueryLimits.from_settings().max_top_n,
    }
