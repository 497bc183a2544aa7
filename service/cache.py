"""The bounded cache most of the service's caches use: least recently used, bounded by count
(and, if asked, by the total weight of its values, e.g. their bytes).

Committed state is immutable per state key (each commit writes a fresh one), so everything
derived from it (decoded arrays, rankings, pivoted selections, projections, clusterings) can
be cached under a key that includes the state key, and never goes stale.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries, and at most ``max_weight`` in all if ``weigh`` is given (the
    newest entry stays even if it alone weighs more); reading one makes it the most recently
    used."""

    def __init__(
        self,
        size: int,
        *,
        max_weight: int | None = None,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"an LRU cache needs room for at least one entry; got {size}")
        if (max_weight is None) != (weigh is None):
            raise ValueError("max_weight and weigh go together")
        self.size = size
        self.max_weight = max_weight
        self._weigh = weigh
        self._weights: dict[K, int] = {}
        self.weight = 0
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self.pop(key)
        self._entries[key] = value
        if self._weigh is not None:
            self._weights[key] = self._weigh(value)
            self.weight += self._weights[key]
        while len(self._entries) > self.size or (
            self.max_weight is not None and self.weight > self.max_weight and len(self._entries) > 1
        ):
            oldest, _ = self._entries.popitem(last=False)
            self.weight -= self._weights.pop(oldest, 0)

    def pop(self, key: K) -> V | None:
        self.weight -= self._weights.pop(key, 0)
        return self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()
        self._weights.clear()
        self.weight = 0

    def keys(self) -> list[K]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
