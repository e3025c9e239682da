"""Facts about a collection's index, kept per process until the index changes.

Which words a collection holds, how many passages each chunk's document has:
such facts change only when the collection's index does, and every change of
the index bumps the collection's ``index_version`` (the retrieval cache's key
relies on the same). An :class:`IndexMemo` keeps them for the latest index of
each collection seen, so most questions read none of them again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections_app.models import Collection

V = TypeVar("V")


def index_key(collection: Collection) -> Hashable:
    """What names ``collection``'s index as it is now (a new key after any change of it)."""
    return (collection.created_at, collection.index_version)


class IndexMemo(Generic[V]):
    """Values by key, per collection, for the index they were read from.

    At most ``limit`` keys per collection: past it the collection's values start
    afresh. Thread-safe (gunicorn threads share one).
    """

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._held: dict[int, tuple[Hashable, dict[str, V]]] = {}

    def get(self, *, collection_id: int, index: Hashable, keys: Iterable[str]) -> dict[str, V]:
        """The values held for ``keys`` (those known) while the index is ``index``."""
        with self._lock:
            held_for, held = self._held.get(collection_id, (None, {}))
            if held_for != index:
                return {}
            return {key: held[key] for key in keys if key in held}

    def put(self, *, collection_id: int, index: Hashable, values: Mapping[str, V]) -> None:
        """Keep ``values``, read from the index ``index``."""
        with self._lock:
            held_for, held = self._held.get(collection_id, (None, {}))
            if held_for != index or len(held) + len(values) > self.limit:
                held = {}
                self._held[collection_id] = (index, held)
            held.update(values)

    def read_through(
        self,
        *,
        collection_id: int,
        index: Hashable,
        keys: Sequence[str],
        read: Callable[[list[str]], Mapping[str, V]],
    ) -> dict[str, V]:
        """The values for ``keys``: those held, and ``read(missing)`` for the rest, kept."""
        values = self.get(collection_id=collection_id, index=index, keys=keys)
        missing = [key for key in dict.fromkeys(keys) if key not in values]
        if missing:
            fresh = read(missing)
            values.update(fresh)
            self.put(collection_id=collection_id, index=index, values=fresh)
        return values
