"""One shape for every pluggable kind: a named registry.

Transforms, retrieval modes, keyword rankings, rerankers, orderings, generators
and groundedness checkers on the answering side, loaders, validators and
chunkers on the ingestion side, and the answering stages themselves are all
registered the same way::

    RERANKERS: Registry[Reranker] = Registry("reranker", unknown=UnknownReranker)

    @RERANKERS.register("none")
    class NoReranker: ...

    RERANKERS.get("none")      # the component; an unknown name raises ``unknown``
    "none" in RERANKERS        # membership
    RERANKERS.names()          # sorted names, for messages and pickers

``unknown(name, known_names)`` builds the error an unknown name raises, so each
app keeps its own exception types and messages. Adding a component means
registering it where it is defined: nothing else names it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
C = TypeVar("C")


class UnknownName(LookupError):
    """The default error of a registry: no component has that name (the known ones are listed)."""


class Registry(Generic[T]):
    """Components of one kind by name, in registration order."""

    def __init__(
        self, kind: str, *, unknown: Callable[[str, list[str]], Exception] | None = None
    ) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._unknown = unknown or self._default_unknown

    def _default_unknown(self, name: str, known: list[str]) -> Exception:
        return UnknownName(f"unknown {self.kind} {name!r}; known {self.kind}s: {', '.join(known)}")

    def add(self, name: str, item: T) -> T:
        """Register ``item`` as ``name``; a name registered twice is a programming error."""
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = item
        return item

    def register(self, name: str) -> Callable[[C], C]:
        """Decorator form of :meth:`add` for a class or function defined in place."""

        def decorate(item: C) -> C:
            self.add(name, item)  # type: ignore[arg-type]
            return item

        return decorate

    def get(self, name: str) -> T:
        """The component called ``name``; ``unknown`` (listing the known names) otherwise."""
        try:
            return self._items[name]
        except KeyError:
            raise self._unknown(name, self.names()) from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._items)})"
