"""Pivoted selection (capability ``SelectsColumns``): h features that together span the data.

IQRP (Maung & Schweitzer, NIPS 2013, Figures 3-6) gives the exact order of Businger-Golub
pivoted QR in few passes over the columns a method offers: an iqrp selector's stored blocks
(read from Redis only when a pass does not skip them) or the columns of an FSDS sketch.
"""

from __future__ import annotations

import asyncio

from service.algorithms import require_capability
from service.algorithms.base import AnyMethod, SelectsColumns
from service.algorithms.pivoted_qr import IQRPResult, iqrp
from service.applier import resolved_params
from service.cache import LRU
from service.errors import Conflict
from service.selectors.reading import StateReader, seen
from service.selectors.results import PassAccount, RankedFeature, TopOut
from service.store.records import SelectorMeta
from service.wire.kinds import ChunkFormat


def selecting(meta: SelectorMeta, method: AnyMethod) -> SelectsColumns:
    """The method as ``SelectsColumns``, or a 422 naming the methods that are."""
    return require_capability(
        method,
        SelectsColumns,
        "strategy=diverse needs a method that selects columns by pivoted QR",
        meta.name,
    )


def pass_account(result: IQRPResult, blocks_total: int) -> PassAccount:
    """What IQRP's passes cost (section 4.3): passes, IO-passes, reads and flops."""
    return PassAccount(
        l=result.l,
        passes=result.passes,
        io_passes=result.io_passes,
        columns_read=result.columns_read,
        blocks_read=result.blocks_read,
        blocks_total=blocks_total,
        flops=result.flops,
        flops_per_kmn=result.flops_per_kmn,
    )


class Pivoted:
    def __init__(self, reader: StateReader, cache_size: int = 32) -> None:
        self.reader = reader
        self._answers: LRU[tuple[str, str, int, int | None], TopOut] = LRU(cache_size)

    async def top(
        self,
        meta: SelectorMeta,
        method: SelectsColumns,
        kind: ChunkFormat,
        h: int,
        candidates: int | None,
    ) -> TopOut:
        """IQRP's selection of h columns, pivots ``|R_jj|`` as scores, with the pass account.

        ``candidates`` is IQRP's l (default h). Answers are cached per version.
        """
        head = await self.reader.head(meta.name)
        key = (meta.name, head.state_key, h, candidates)
        cached = self._answers.get(key)
        if cached is not None:
            return cached
        head, state = await self.reader.state(meta.name, method.pivot_fields)
        read_segment = self.reader.segment_reader(meta.name)
        try:
            source = method.pivot_source(state, resolved_params(meta), read_segment)
        except Conflict as exc:
            raise Conflict(f"selector '{meta.name}': {exc.detail}") from None
        result = await asyncio.to_thread(iqrp, source, h, candidates)
        names = await self.reader.item_names(meta, kind, result.indices)
        counts = seen(kind, head)
        answer = TopOut(
            name=meta.name,
            method=meta.method,
            version=head.version,
            rows_seen=counts.rows_seen,
            features_seen=counts.features_seen,
            features=[
                RankedFeature(rank=rank, index=index, name=name, score=score)
                for rank, (index, name, score) in enumerate(
                    zip(result.indices, names, result.pivots, strict=True), start=1
                )
            ],
            strategy="pivoted-qr",
            account=pass_account(result, len(source.block_bounds)),
        )
        self._answers.put((meta.name, head.state_key, h, candidates), answer)
        return answer
