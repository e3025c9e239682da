"""Validate stage: named validators look at a loaded document before it is indexed.

``validate_document`` runs them all and turns their signals into a verdict: any strong
signal → ``rejected``, only weak ones → ``suspicious``, none → ``clean``. Errors (empty
or unreadable text, limits) make the source fail whatever the verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from ..limits import IngestionLimits
from ..types import IngestionError, LoadedDocument, Signal, ValidationResult
from .injection import STRONG, WEAK, check_injection
from .integrity import check_integrity

Validator = Callable[[LoadedDocument, IngestionLimits], tuple[list[Signal], list[str]]]
"""``validator(doc, limits) -> (signals, errors)``."""

Verdict = Literal["clean", "suspicious", "rejected"]

VALIDATORS: dict[str, Validator] = {
    "content-integrity": check_integrity,
    "prompt-injection": check_injection,
}


class UnknownValidator(IngestionError):
    """No validator has that name; the message lists the known ones."""


def get_validator(name: str) -> Validator:
    """The validator registered as ``name``; an unknown name raises, listing the known ones."""
    try:
        return VALIDATORS[name]
    except KeyError:
        known = ", ".join(sorted(VALIDATORS))
        raise UnknownValidator(f"unknown validator {name!r}; known: {known}") from None


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
        validator = get_validator(name)
        if name == "prompt-injection" and len(doc.text) > limits.max_text_chars:
            # The source fails on its size anyway; scanning it would only cost time.
            continue
        found_signals, found_errors = validator(doc, limits)
        signals += found_signals
        errors += found_errors
    verdict = verdict_for(signals)
    return ValidationResult(verdict=verdict, signals=signals, errors=errors)


__all__ = [
    "VALIDATORS",
    "UnknownValidator",
    "Validator",
    "get_validator",
    "validate_document",
    "verdict_for",
]
