"""The pending set: what lets the sweeper find work without reading every selector.

Every append marks its selector (``keys.pending_key``); sweeps after the first read the marks
and remove those of selectors with nothing left to apply. The first sweep of a process reads
every selector, which is what finds the entries of a crash from before the marks existed.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

import numpy as np
import pytest

from service.store.codec import encode_matrix
from service.store.keys import pending_key
from service.store.records import Entry
from service.store.redis_store import SelectorStore
from tests.support.api import create_selector, wait_for

pytestmark = pytest.mark.asyncio

PENDING = pending_key("sift")


ROW = encode_matrix(np.array([[1.0, 2.0, 3.0]]))


def digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


async def rows_seen(http: Any, name: str) -> int:
    return int((await http.get(f"/v1/selectors/{name}")).json()["rows_seen"])


async def test_an_entry_appended_behind_the_back_is_applied_and_its_mark_removed(
    app_factory: Any, store: SelectorStore, redis_client: Any
) -> None:
    async with app_factory(sweep_interval_seconds=0.05) as (_, http):
        for i in range(30):
            await create_selector(http, f"idle{i}", 3)
        await create_selector(http, "busy", 3)
        await wait_for(lambda: _no_marks(redis_client))  # creating marks nothing for long
        # An entry nobody waits for and no applier of this process was told about.
        await store.log.append("busy", Entry(ROW, 1, digest(b"1"), None))

        async def applied() -> bool:
            return await rows_seen(http, "busy") == 1

        await wait_for(applied, timeout=3)
        # Once applied, the next sweep finds nothing pending there and removes the mark.
        await wait_for(lambda: _no_marks(redis_client), timeout=3)
        assert all([await rows_seen(http, f"idle{i}") == 0 for i in range(30)])


async def _marked(redis_client: Any, name: str) -> bool:
    return await redis_client.zscore(PENDING, name) is not None


async def _no_marks(redis_client: Any) -> bool:
    return int(await redis_client.zcard(PENDING)) == 0


async def test_a_mark_set_again_after_it_was_read_is_kept(
    app_factory: Any, store: SelectorStore, redis_client: Any
) -> None:
    async with app_factory(sweep_interval_seconds=3600) as (_, http):
        await create_selector(http, "s", 3)
        await store.log.append("s", Entry(ROW, 1, digest(b"a"), None))
        # (In a cluster the mark follows the append, in the background.)
        await wait_for(lambda: _marked(redis_client, "s"))
        read_score = await redis_client.zscore(PENDING, "s")
        await redis_client.zadd(PENDING, {"s": read_score + 5})  # a later append marked it
        removed = await store.run("unmark_pending", [PENDING], ["s", f"{read_score:.0f}"])
        assert removed == 0 and await redis_client.zscore(PENDING, "s") == read_score + 5
        removed = await store.run("unmark_pending", [PENDING], ["s", f"{read_score + 5:.0f}"])
        assert removed == 1 and await redis_client.zscore(PENDING, "s") is None


async def test_only_the_first_sweep_reads_every_selector(
    app_factory: Any, store: SelectorStore, redis_client: Any
) -> None:
    async with app_factory(sweep_interval_seconds=0.05) as (_, http):
        await create_selector(http, "unmarked", 3)
        await wait_for(lambda: _no_marks(redis_client))
        # An entry whose mark was lost (a crash between append and mark, in a cluster): the
        # running process's sweeps, which read marks, do not see it ...
        await store.log.append("unmarked", Entry(ROW, 1, digest(b"u"), None))
        await wait_for(lambda: _marked(redis_client, "unmarked"))
        await redis_client.zrem(PENDING, "unmarked")
        await asyncio.sleep(0.5)  # ten sweeps
        assert await rows_seen(http, "unmarked") == 0
    # A new process's first sweep reads every selector and applies it.
    async with app_factory(sweep_interval_seconds=0.05) as (_, http):

        async def applied() -> bool:
            return await rows_seen(http, "unmarked") == 1

        await wait_for(applied, timeout=3)
