"""What the validators share: the shape of a validator and the registry of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ragsite.registry import Registry

from ..limits import IngestionLimits
from ..types import IngestionError, LoadedDocument, Signal

Check = Callable[[LoadedDocument, IngestionLimits], tuple[list[Signal], list[str]]]
"""``check(doc, limits) -> (signals, errors)``."""


class UnknownValidator(IngestionError):
    """No validator has that name; the message lists the known ones."""


@dataclass(frozen=True)
class Validator:
    """One named look at a loaded document before it is indexed.

    ``check`` returns the signals it found and the errors that make the source
    fail. A validator that ``skips_oversized_text`` is not run over text longer
    than ``limits.max_text_chars``: such a source fails on its size anyway
    (content integrity reports it), and scanning it would only cost time.
    """

    check: Check
    skips_oversized_text: bool = False


def _unknown(name: str, known: list[str]) -> UnknownValidator:
    return UnknownValidator(f"unknown validator {name!r}; known: {', '.join(known)}")


VALIDATORS: Registry[Validator] = Registry("validator", unknown=_unknown)
"""Validators by name; each module registers its own where it defines it."""
