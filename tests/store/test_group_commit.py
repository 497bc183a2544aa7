"""Group commit (``service.store.group_commit``) against a real Redis: appends that arrive
together share one script call, and each is answered as if it had gone alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.errors import Conflict, IdempotencyMismatch
from service.store.group_commit import QueuedAppend
from service.store.parts.appends import LogTarget
from service.store.records import AppendOutcome, Entry
from service.store.redis_store import SelectorStore
from tests.support.store import digest, meta, state_of

pytestmark = pytest.mark.asyncio


def count_calls(store: SelectorStore) -> list[int]:
    """Spy on the store's real batch call: the size of each batch it sends."""
    sizes: list[int] = []
    send = store.log.appends._append_together

    async def counted(target: LogTarget, batch: list[QueuedAppend]) -> list[Any]:
        sizes.append(len(batch))
        return await send(target, batch)

    store.log.appends._group._send = counted
    return sizes


async def test_concurrent_appends_share_calls_and_keep_their_own_positions(store):
    await store.registry.create(meta(), state_of(0))
    sizes = count_calls(store)
    payloads = [f"row {i}".encode() for i in range(40)]
    outcomes = await asyncio.gather(
        *(
            store.log.append("s1", Entry(p, i % 3 + 1, digest(p), f"k{i}"))
            for i, p in enumerate(payloads)
        )
    )
    assert sum(sizes) == 40 and len(sizes) < 40 and max(sizes) > 1, sizes
    # Every append is in the log once, in the order it was submitted, at the position its
    # predecessors' items put it.
    entries = await store.log.pending("s1", "0-0", 100)
    assert [e.payload for e in entries] == payloads
    assert [e.log_id for e in entries] == [o.log_id for o in outcomes]
    firsts = [sum(j % 3 + 1 for j in range(i)) for i in range(40)]
    assert [o.first for o in outcomes] == firsts == [e.first for e in entries]
    assert not any(o.duplicate for o in outcomes)


async def test_a_key_repeated_within_one_batch_is_a_duplicate_of_its_first_use(
    store: SelectorStore,
) -> None:
    await store.registry.create(meta(), state_of(0))
    sizes = count_calls(store)
    first, again, other = await asyncio.gather(
        store.log.append("s1", Entry(b"same", 1, digest(b"same"), "k")),
        store.log.append("s1", Entry(b"same", 1, digest(b"same"), "k")),
        store.log.append("s1", Entry(b"else", 1, digest(b"else"), "k")),
        return_exceptions=True,
    )
    # gather submits all three before the first call goes out: one call carries them all.
    assert sizes == [3]
    assert isinstance(first, AppendOutcome) and isinstance(again, AppendOutcome)
    assert not first.duplicate
    assert again.duplicate and again.log_id == first.log_id
    assert isinstance(other, IdempotencyMismatch)
    assert len(await store.log.pending("s1", "0-0", 10)) == 1


async def test_a_refused_append_does_not_disturb_the_others_of_its_batch(
    store: SelectorStore,
) -> None:
    await store.registry.create(meta(feature_names=None), state_of(0))
    results = await asyncio.gather(
        store.log.append("s1", Entry(b"a", 1, digest(b"a"), None, names=["x"])),
        store.log.append("s1", Entry(b"b", 1, digest(b"b"), None, names=["x"])),  # x is taken
        store.log.append("s1", Entry(b"c", 1, digest(b"c"), None, names=["y"])),
        return_exceptions=True,
    )
    assert isinstance(results[1], Conflict) and "'x' is already used" in str(results[1])
    assert [e.payload for e in await store.log.pending("s1", "0-0", 10)] == [b"a", b"c"]
    assert isinstance(results[2], AppendOutcome) and results[2].first == 1


async def test_an_append_cancelled_before_its_call_goes_out_is_never_written(store):
    await store.registry.create(meta(), state_of(0))
    in_flight = asyncio.create_task(
        store.log.append("s1", Entry(b"sent", 1, digest(b"sent"), None))
    )
    # Let the first append's call go out (its batch taken, nothing left queued).
    group, s1 = store.log.appends._group, LogTarget("selector", "s1")
    while s1 not in group._flushing or group._queued.get(s1):
        await asyncio.sleep(0)
    left = asyncio.create_task(store.log.append("s1", Entry(b"left", 1, digest(b"left"), None)))
    while not group._queued.get(s1):
        await asyncio.sleep(0)
    left.cancel()
    await in_flight
    with pytest.raises(asyncio.CancelledError):
        await left
    await asyncio.sleep(0.05)
    assert [e.payload for e in await store.log.pending("s1", "0-0", 10)] == [b"sent"]
    # And the selector takes appends as before.
    await store.log.append("s1", Entry(b"next", 1, digest(b"next"), None))
    assert len(await store.log.pending("s1", "0-0", 10)) == 2
