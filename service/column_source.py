"""IQRP's column source over an ``iqrp`` selector's blocks in Redis.

IQRP runs in a worker thread (it is CPU work); each block it decides to read is fetched through
the service's own async Redis client, by handing the read to the event loop and waiting for it
in the thread. A block that a pass skips is never fetched: that is the point of IQRP's passes.
"""

from __future__ import annotations

import asyncio

import numpy as np

from service.algorithms.column_blocks import block_id
from service.store.codec import decode_array
from service.store.redis_store import SelectorStore

#: Longest wait for one block (a Redis read of at most 64 MiB).
READ_TIMEOUT_SECONDS = 120.0


class StoredColumns:
    """A ``service.algorithms.pivoted_qr.ColumnSource`` reading full blocks from Redis on demand.

    ``tail`` (the columns of the block being filled) comes with the state and is the last
    block. ``reads`` lists the blocks fetched, in order.
    """

    def __init__(
        self,
        store: SelectorStore,
        name: str,
        loop: asyncio.AbstractEventLoop,
        block_bounds: list[tuple[int, int]],
        full_blocks: int,
        tail: np.ndarray,
    ) -> None:
        self.store = store
        self.name = name
        self.loop = loop
        self.block_bounds = block_bounds
        self.full_blocks = full_blocks
        self.tail = tail
        self.n_rows = int(tail.shape[0])
        self.n_columns = block_bounds[-1][1] if block_bounds else 0
        self.reads: list[int] = []

    def read_block(self, block: int) -> np.ndarray:
        self.reads.append(block)
        if block >= self.full_blocks:  # the block being filled: it came with the state
            return self.tail

        async def fetch() -> bytes:
            return await self.store.get_segment(self.name, block_id(block))

        future = asyncio.run_coroutine_threadsafe(fetch(), self.loop)
        return decode_array(future.result(READ_TIMEOUT_SECONDS))
