"""The store primitives of export, import and the ranking history, against a real redis-server."""

from __future__ import annotations

import numpy as np
import pytest
import redis.asyncio as aioredis

from service.errors import Conflict, NotFound
from service.store.codec import decode_array, encode_array, encode_state
from service.store.monitoring_records import HistoryEntry, RankedList
from service.store.records import Checkpoint, Entry, Imported, SelectorMeta
from service.store.redis_store import SelectorStore

pytestmark = pytest.mark.asyncio


def meta(name: str) -> SelectorMeta:
    return SelectorMeta(name=name, method="iqrp", params={}, created_at=1.0, n_samples=2)


STATE = encode_state({"norms": np.arange(3.0), "seen": 3})
SEGMENTS = {"colblock:0": encode_array(np.ones((2, 2)))}


async def keys_of(client: aioredis.Redis, name: str) -> set[str]:
    return {k.decode() async for k in client.scan_iter(match=f"sift:{{{name}}}:*")}


async def test_create_at_a_head_with_segments_and_names(store: SelectorStore):
    head = await store.registry.create(
        meta("imp"),
        STATE,
        imported=Imported(7, 3, SEGMENTS, {0: "age", 2: "bmi"}),
    )
    assert (head.version, head.items_seen, head.cursor) == (7, 3, "0-0")
    # The imported state is the first checkpoint, at the archive's head.
    assert head.checkpoint is not None
    assert head.checkpoint == Checkpoint(head.checkpoint.key, 7, "0-0", 3)
    assert await store.registry.get_head("imp") == head
    snapshot = await store.checkpoints.snapshot("imp")
    # A snapshot is the checkpoint's version, read from the checkpoint.
    assert (snapshot.head.version, snapshot.head.cursor, snapshot.head.items_seen) == (7, "0-0", 3)
    assert snapshot.head.state_key == head.recovery_point.key
    assert snapshot.head.checkpoint == head.checkpoint
    assert snapshot.state == STATE
    # Readers read what the first version publishes (by default, the whole state).
    assert (await store.checkpoints.read_state_fields("imp", list(STATE)))[1] == STATE
    assert snapshot.item_names == {0: "age", 2: "bmi"}
    segments = await store.checkpoints.get_segments("imp", ["colblock:0"])
    np.testing.assert_array_equal(decode_array(segments["colblock:0"]), np.ones((2, 2)))
    # The next item appended is numbered after the imported ones, and names stay taken.
    outcome = await store.log.append("imp", Entry(b"payload", 1, "d", None, ["sbp"]))
    assert outcome.first == 3
    with pytest.raises(Conflict, match="already used"):
        await store.log.append("imp", Entry(b"payload", 1, "e", None, ["age"]))


async def test_an_import_over_a_taken_name_leaves_nothing_behind(
    store: SelectorStore, redis_client: aioredis.Redis
):
    await store.registry.create(meta("taken"), STATE)
    before = await keys_of(redis_client, "taken")
    with pytest.raises(Conflict, match="already exists"):
        await store.registry.create(
            meta("taken"), STATE, imported=Imported(2, 3, SEGMENTS, {0: "x"})
        )
    assert await keys_of(redis_client, "taken") == before  # no staged state, names, segments
    assert (await store.registry.get_head("taken")).version == 0


async def test_history_is_capped_and_never_written_for_a_gone_or_younger_selector(
    store: SelectorStore, redis_client: aioredis.Redis
):
    await store.registry.create(meta("h"), STATE, imported=Imported(version=5))

    def entry(version: int) -> HistoryEntry:
        return HistoryEntry(version, 10 * version, 1.5, [RankedList(None, [1, 0], [2.0, 1.0])])

    for version in (3, 4, 5):
        assert await store.history.record("h", entry(version), keep=2)
    # A selector at version 5 never records a later version: that commit belonged to another
    # incarnation of the name.
    assert not await store.history.record("h", entry(6), keep=2)
    assert [e.version for e in await store.history.read("h", 10)] == [5, 4]
    assert await store.history.read("h", 1) == [entry(5)]
    await store.registry.delete("h")
    assert not await store.history.record("h", entry(5), keep=2)
    assert await keys_of(redis_client, "h") == set()
    with pytest.raises(NotFound):
        await store.history.read("h", 1)
