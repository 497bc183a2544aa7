"""Streams in the store, against one redis-server and a Redis Cluster (``[single]``,
``[cluster]``): a stream's log and its attachments in the stream's slot, each attached selector's
cursor in its own, every script within one slot.

What is checked here is the store's contract (ARCHITECTURE.md, "Streams"): an append answers
the selectors attached as of it; an attached selector takes its entries from the stream's log
and commits its cursor with its state; the log is trimmed only through the lowest checkpoint
cursor every attachment reported; a deleted (or recreated) stream feeds nobody; appends to an
attached selector, and deletions of a stream with selectors attached, are refused.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from service.errors import Conflict, IdempotencyMismatch, NotFound, StaleApplier
from service.store.codec import cut_fields, encode_matrix
from service.store.keys import StreamKeys, compare_stream_ids, log_id_belongs
from service.store.records import Entry, Lease, NextVersion, SelectorMeta, StreamMeta
from service.store.redis_store import SelectorStore
from tests.support.store import digest, published_of, state_of

pytestmark = pytest.mark.asyncio


def stream_meta(name: str = "st", incarnation: str = "5eed") -> StreamMeta:
    return StreamMeta(name=name, kind="rows", created_at=1.0, incarnation=incarnation, n_features=3)


def chunk(value: float, rows: int = 2) -> bytes:
    return encode_matrix(np.full((rows, 3), value))


async def attached_selector(
    store: SelectorStore, name: str, start: str = "start", stream: str = "st"
) -> SelectorMeta:
    """A selector attached to ``stream`` as the service attaches one: the attachment first
    (where it starts), then the selector created there."""
    described = await store.streams.get_stream(stream)
    incarnation = f"inc-{name}"
    attached = await store.streams.attach(stream, name, incarnation, start, described.incarnation)
    meta = SelectorMeta(
        name=name,
        method="fsds",
        params={},
        created_at=2.0,
        n_features=3,
        incarnation=incarnation,
        stream=stream,
        stream_incarnation=attached.stream_incarnation,
        stream_base=attached.items,
    )
    await store.registry.create(meta, state_of(0), published=published_of(0), attached=attached)
    return meta


async def push(store: SelectorStore, value: float, key: str | None = None, stream: str = "st"):
    described = await store.streams.get_stream(stream)
    payload = chunk(value)
    return await store.streams.append_to_stream(
        stream, Entry(payload, 2, digest(payload), key, incarnation=described.incarnation)
    )


async def apply_all(store: SelectorStore, meta: SelectorMeta) -> tuple[Lease, list[str]]:
    """Take every pending entry of ``meta`` under its lease and commit them one by one; the
    lease and the ids applied."""
    lease = await store.leases.acquire_lease(meta.name, 5000)
    assert lease is not None and lease.stream == meta.stream
    head = await store.registry.get_head(meta.name)
    applied = []
    while True:
        attempt, entries = await store.log.take(lease, head.cursor, 10)
        if not entries:
            break
        assert attempt == 1
        for entry in entries:
            assert entry.idem_record is None  # the stream's record is in another slot
            head = await store.commits.commit(
                lease,
                NextVersion(
                    head.version,
                    published_of(head.version + 1),
                    entry.log_id,
                    head.items_seen + entry.items,
                ),
                [],
                entries=1,
            )
            applied.append(entry.log_id)
    return lease, applied


async def test_a_stream_is_created_once_and_described(store: SelectorStore) -> None:
    await store.streams.create_stream(stream_meta())
    with pytest.raises(Conflict):
        await store.streams.create_stream(stream_meta(incarnation="other"))
    described = await store.streams.get_stream("st")
    assert described.kind == "rows" and described.size == 3 and described.incarnation == "5eed"
    head = await store.streams.stream_head("st")
    assert (head.entries, head.appended, head.last_id, head.length) == (0, 0, "0-0", 0)
    assert await store.streams.list_streams() == ["st"]
    with pytest.raises(NotFound):
        await store.streams.get_stream("nothing")


async def test_an_append_answers_the_selectors_that_will_apply_it(store: SelectorStore) -> None:
    await store.streams.create_stream(stream_meta())
    outcome, attached = await push(store, 1.0)
    assert attached == [] and not outcome.duplicate
    # The stream's log ids carry the stream's incarnation, as a selector's carry its own.
    assert log_id_belongs("5eed", outcome.log_id)
    a = await attached_selector(store, "a", "now")
    b = await attached_selector(store, "b", "start")
    second, attached = await push(store, 2.0, key="k")
    assert [x.selector for x in attached] == ["a", "b"]
    assert second.first == 2  # rows are numbered in the stream, as a selector numbers them
    # A repeated key answers the first append; another body under it is refused.
    again, _ = await push(store, 2.0, key="k")
    assert again.duplicate and again.log_id == second.log_id
    with pytest.raises(IdempotencyMismatch):
        await push(store, 3.0, key="k")
    # "now" starts after the first entry, "start" at the beginning of what the stream holds.
    _, applied_a = await apply_all(store, a)
    _, applied_b = await apply_all(store, b)
    assert applied_a == [second.log_id]
    assert applied_b == [outcome.log_id, second.log_id]
    assert (await store.registry.get_head("a")).items_seen == 2
    assert (await store.registry.get_head("b")).items_seen == 4
    assert await store.log.pending_count("a") == 0 and await store.log.pending_count("b") == 0
    await push(store, 4.0)
    assert await store.log.pending_count("a") == 1
    assert len(await store.log.pending("a", (await store.registry.get_head("a")).cursor, 5)) == 1
    assert await store.log.names_with_pending() == ["a", "b"]


async def test_appends_to_an_attached_selector_are_refused(store: SelectorStore) -> None:
    await store.streams.create_stream(stream_meta())
    await attached_selector(store, "a")
    payload = chunk(1.0)
    with pytest.raises(Conflict, match="attached to stream 'st'"):
        await store.log.append("a", Entry(payload, 2, digest(payload), None))


async def test_the_log_is_trimmed_only_past_every_selectors_checkpoint(
    store: SelectorStore,
) -> None:
    await store.streams.create_stream(stream_meta())
    fast = await attached_selector(store, "fast")
    slow = await attached_selector(store, "slow")
    ids = [(await push(store, float(i)))[0].log_id for i in range(4)]
    _lease, applied = await apply_all(store, fast)
    assert applied == ids
    # The fast selector's checkpoint covers everything; the slow one has applied nothing: the
    # log keeps every entry for it.
    assert await store.streams.release("st", "fast", fast.incarnation, ids[-1]) == "0-0"
    assert (await store.streams.stream_head("st")).length == 4
    # The slow selector takes and applies all of it afterwards, exactly once.
    _lease, applied = await apply_all(store, slow)
    assert applied == ids
    assert await store.streams.release("st", "slow", slow.incarnation, ids[1]) == ids[1]
    head = await store.streams.stream_head("st")
    assert head.length == 2 and head.trimmed == ids[1]
    # A report from another incarnation of the name (an old selector's), or one that goes back,
    # changes nothing.
    assert await store.streams.release("st", "slow", "someone-else", ids[3]) == ids[1]
    assert await store.streams.release("st", "slow", slow.incarnation, ids[0]) == ids[1]
    # A selector that detaches holds nothing back any more.
    await store.streams.detach_from_stream("st", "slow", slow.incarnation)
    assert (await store.streams.stream_head("st")).length == 0
    # "start" now means what the stream still holds: nothing before the trim point.
    late = await attached_selector(store, "late", "start")
    assert (await store.registry.get_head("late")).cursor == ids[3]
    assert late.stream_base == 8


async def test_a_stream_with_selectors_attached_is_not_deleted(store: SelectorStore) -> None:
    await store.streams.create_stream(stream_meta())
    a = await attached_selector(store, "a")
    with pytest.raises(Conflict) as refused:
        await store.streams.delete_stream("st")
    assert refused.value.extra == {"selectors": ["a"]}
    assert await store.streams.close_stream("st") == ["a"]
    with pytest.raises(Conflict, match="being deleted"):
        await push(store, 1.0)
    with pytest.raises(Conflict, match="being deleted"):
        await store.streams.attach("st", "b", "x", "now", "")
    await store.streams.detach_from_stream("st", "a", a.incarnation)
    assert await store.streams.delete_stream("st") is True
    assert await store.streams.list_streams() == []
    assert not await store.redis.exists(*_stream_keys("st"))


def _stream_keys(name: str) -> list[str]:
    k = StreamKeys("sift", name)
    return [k.meta, k.head, k.log, k.idems, k.attachments]


async def test_a_stream_created_again_feeds_no_selector_of_the_old_one(
    store: SelectorStore,
) -> None:
    await store.streams.create_stream(stream_meta())
    a = await attached_selector(store, "a")
    await push(store, 1.0)
    await store.streams.close_stream("st")
    await store.streams.detach_from_stream("st", "a", a.incarnation)
    await store.streams.delete_stream("st")
    await store.streams.create_stream(stream_meta(incarnation="new"))
    await push(store, 2.0)
    # "a" still claims the old stream (a crash between the slots): it is fed nothing.
    lease, applied = await apply_all(store, a)
    assert applied == []
    assert await store.log.pending("a", "0-0", 5) == []
    assert await store.log.pending_count("a") == 0
    assert await store.log.last_log_id("a") is None
    await store.leases.release_lease(lease)


async def test_detach_needs_a_current_checkpoint_and_fences_the_applier(
    store: SelectorStore,
) -> None:
    await store.streams.create_stream(stream_meta())
    a = await attached_selector(store, "a")
    await push(store, 1.0)
    lease, _applied = await apply_all(store, a)
    standalone = dataclasses.replace(a, stream=None, stream_incarnation="", stream_base=0)
    # Version 1 is committed, the checkpoint is still version 0: not yet.
    assert await store.streams.detach(a, standalone, {}) is False
    head = await store.registry.get_head("a")
    assert await store.checkpoints.checkpoint(
        lease, 1, head.cursor, head.items_seen, cut_fields(state_of(1))
    )
    assert await store.streams.detach(a, standalone, {0: "x0"}) is True
    assert (await store.registry.get_meta("a")).stream is None
    assert await store.registry.item_names("a", [0, 1]) == ["x0", None]
    # The applier that held the lease reads the stream no more, and cannot commit.
    with pytest.raises(StaleApplier):
        await store.log.take(lease, head.cursor, 5)
    with pytest.raises(StaleApplier):
        await store.commits.commit(
            lease, NextVersion(1, published_of(2), head.cursor, 2), [], entries=0
        )
    # Standalone now: pushed to directly, with log ids after its cursor.
    payload = chunk(5.0)
    outcome = await store.log.append("a", Entry(payload, 2, digest(payload), None))
    assert compare_stream_ids(outcome.log_id, head.cursor) > 0
    assert await store.log.pending_count("a") == 1
    with pytest.raises(Conflict, match="not attached"):
        await store.streams.detach(a, standalone, {})
