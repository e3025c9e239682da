"""Validate stage: named validators look at a loaded document before it is indexed.

``validate_document`` runs them all and turns their signals into a verdict: any strong
signal → ``rejected``, only weak ones → ``suspicious``, none → ``clean``. Errors (empty
or unreadable text, limits) make the source fail whatever the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..limits import IngestionLimits
from ..types import LoadedDocument, Signal, ValidationResult
from .base import VALIDATORS, UnknownValidator, Validator

# Each validator module registers itself in VALIDATORS when imported.
from .injection import PROMPT_INJECTION, STRONG, WEAK
from .integrity import CONTENT_INTEGRITY

Verdict = Literal["clean", "suspicious", "rejected"]


def verdict_for(signals: Sequence[Signal]) -> Verdict:
    """``rejected`` on any strong signal, ``suspicious`` on a weak one, else ``clean``."""
    strongest = max((signal.weight for signal in signals), default=0.0)
    if strongest >= STRONG:
        return "rejected"
    if strongest >= WEAK:
        return "suspicious"
    return "clean"


def validate_document(
    doc: LoadedDocument,
    *,
    limits: IngestionLimits,
    validators: Sequence[str] | None = None,
) -> ValidationResult:
    """Validate stage: run the named validators (all by default) over ``doc``."""
    signals: list[Signal] = []
    errors: list[str] = []
    for name in validators if validators is not None else list(VALIDATORS):
        validator = VALIDATORS.get(name)
        if validator.skips_oversized_text and len(doc.text) > limits.max_text_chars:
            continue
        found_signals, found_errors = validator.check(doc, limits)
        signals += found_signals
        errors += found_errors
    verdict = verdict_for(signals)
    return ValidationResult(verdict=verdict, signals=signals, errors=errors)


__all__ = [
    "CONTENT_INTEGRITY",
    "PROMPT_INJECTION",
    "VALIDATORS",
    "UnknownValidator",
    "Validator",
    "validate_document",
    "verdict_for",
]
