"""Decisions on arrival (capability ``DecidesOnArrival``, OFS): what was decided for each
feature column, read back from the committed state where the method records it."""

from __future__ import annotations

import asyncio

from service.algorithms import require_capability
from service.algorithms.base import AnyMethod, DecidesOnArrival
from service.errors import InvalidInput
from service.selectors.reading import StateReader
from service.selectors.results import Decision, FeaturePage
from service.store.records import Head, SelectorMeta
from service.wire.kinds import ChunkFormat

#: Most decisions one ``GET .../features`` returns.
MAX_FEATURE_PAGE = 10_000


def deciding(meta: SelectorMeta, method: AnyMethod, what: str) -> DecidesOnArrival:
    """The method as ``DecidesOnArrival``, or a 422 naming the methods that are."""
    return require_capability(
        method,
        DecidesOnArrival,
        f"{what} of a selector that decides on every column as it arrives",
        meta.name,
    )


class Decisions:
    def __init__(self, reader: StateReader) -> None:
        self.reader = reader

    async def decided(
        self,
        meta: SelectorMeta,
        method: DecidesOnArrival,
        kind: ChunkFormat,
        first: int,
        count: int,
    ) -> tuple[Head, list[Decision]]:
        """Decisions on features ``first .. first + count - 1`` as the committed state has them."""
        head, arrays = await self.reader.arrays(meta.name, method.decision_fields)
        count = max(0, min(count, head.items_seen - first))
        if count == 0:  # a page past the features seen so far is empty, not an error
            return head, []
        decided = await asyncio.to_thread(method.decisions, arrays, first, count)
        names = await self.reader.item_names(meta, kind, [d.index for d in decided])
        return head, [
            Decision(
                index=d.index,
                name=name,
                kept=d.kept,
                leverage=d.leverage,
                probability=d.probability,
                scale=d.scale,
            )
            for d, name in zip(decided, names, strict=True)
        ]

    async def page(self, name: str, offset: int, limit: int) -> FeaturePage:
        """A page of decided features, in arrival order (also what a 202 answer can look up)."""
        selector = await self.reader.described(name)
        decides = deciding(selector.meta, selector.method, "GET .../features lists the decisions")
        if offset < 0 or not 1 <= limit <= MAX_FEATURE_PAGE:
            raise InvalidInput(
                f"expected offset >= 0 and limit in [1, {MAX_FEATURE_PAGE}]; "
                f"got offset={offset}, limit={limit}"
            )
        head, decisions = await self.decided(selector.meta, decides, selector.kind, offset, limit)
        return FeaturePage(
            name=name,
            version=head.version,
            features_seen=head.items_seen,
            offset=offset,
            features=decisions,
        )
