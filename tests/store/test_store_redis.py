"""SelectorStore against a real redis-server: selectors, ingest log, leases, commits, reads.

Checkpoints (the whole state, in pieces) and the replay primitives have their own file,
``test_checkpoints.py``; here a commit publishes what readers read and records what it applied.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from service.errors import (
    CodecError,
    Conflict,
    IdempotencyMismatch,
    InvalidInput,
    NotFound,
    SiftError,
    StaleApplier,
    Unavailable,
)
from service.store.codec import cut_fields, decode_state, encode_state
from service.store.connection import RedisClient, cluster_url
from service.store.keys import SelectorKeys, compare_stream_ids, next_stream_id
from service.store.monitoring_records import HistoryEntry, RankedList
from service.store.parts.leases import holder_died
from service.store.records import Checkpoint, CommitRecord, Entry, Lease, NextVersion, Rejection
from service.store.redis_store import SelectorStore
from tests.support.store import digest, meta, published_of, state_of

KEYS = SelectorKeys("sift", "s1")


async def keys_of(client: aioredis.Redis, name: str, pattern: str = "*") -> set[str]:
    return {k.decode() async for k in client.scan_iter(match=f"sift:{{{name}}}:{pattern}")}


async def whole(store: SelectorStore, name: str) -> dict[str, bytes | memoryview]:
    """The encoded whole state of the selector's current checkpoint."""
    head = await store.registry.get_head(name)
    return await store.checkpoints.load_checkpoint(name, head.recovery_point)


async def published(store: SelectorStore, name: str) -> tuple[int, dict[str, bytes]]:
    """The head's version and what readers read of it (encoded fields)."""
    head, fields = await store.checkpoints.read_state_fields(name, ["a", "b", "__scalars__"])
    return head.version, fields


async def test_create_get_list_delete(store: SelectorStore, redis_client: aioredis.Redis) -> None:
    head = await store.registry.create(
        meta("b", ["x", "y", "z"]), state_of(0), published=published_of(0)
    )
    assert head.version == 0 and head.cursor == "0-0" and head.items_seen == 0
    assert abs(head.updated_at - time.time()) < 60
    # The whole state is the first checkpoint; readers read what the first version publishes.
    assert head.checkpoint is not None and head.recovery_point == head.checkpoint
    point = head.checkpoint
    assert (point.version, point.cursor, point.items_seen, point.cut) == (0, "0-0", 0, True)
    await store.registry.create(meta("a"), {})
    assert await store.registry.get_meta("b") == meta("b", ["x", "y", "z"])
    assert await store.registry.get_meta("a") == meta("a")
    assert await store.registry.get_head("b") == head
    assert await store.registry.list_names() == ["a", "b"]
    assert await store.checkpoints.load_checkpoint("b", point) == state_of(0)
    assert await published(store, "b") == (0, published_of(0))
    assert (await store.checkpoints.read_state_fields("b", ["b"]))[1] == {}  # not published
    head_a = await store.registry.get_head("a")
    assert await store.checkpoints.load_checkpoint("a", head_a.recovery_point) == {}
    assert (await store.checkpoints.read_state_fields("a", ["__scalars__"]))[1] == {}

    with pytest.raises(Conflict, match="selector 'b' already exists"):
        await store.registry.create(meta("b"), state_of(5))
    assert await store.checkpoints.load_checkpoint("b", point) == state_of(0)  # untouched
    assert await published(store, "b") == (0, published_of(0))
    assert await store.registry.get_meta("b") == meta("b", ["x", "y", "z"])
    # The refused create's staged state and checkpoint were dropped.
    assert await keys_of(redis_client, "b", "staging*") == set()
    assert await keys_of(redis_client, "b", "ckpt:*") == {point.key}

    await store.log.append("b", Entry(b"p", 1, digest(b"p"), "k1"))
    lease = await store.leases.acquire_lease("b", 10_000)
    assert lease is not None
    await store.registry.delete("b")
    assert await keys_of(redis_client, "b") == set()
    assert await store.registry.list_names() == ["a"]
    for call in (
        store.registry.get_meta("b"),
        store.registry.get_head("b"),
        store.registry.delete("b"),
    ):
        with pytest.raises(NotFound, match="selector 'b' does not exist"):
            await call
    with pytest.raises(NotFound):
        await store.log.append("b", Entry(b"p", 1, digest(b"p"), None))
    with pytest.raises(NotFound):
        await store.commits.commit(lease, NextVersion(0, published_of(1), "0-0", 0), [], entries=0)
    assert await keys_of(redis_client, "b") == set()  # a stale commit writes nothing at all
    with pytest.raises(NotFound):
        await store.checkpoints.checkpoint(lease, 1, "0-0", 0, cut_fields(state_of(1)))
    assert await keys_of(redis_client, "b") == set()  # its pieces were removed again

    # the name is free again, with no trace of the first incarnation
    await store.registry.create(meta("b"), state_of(0))
    assert (await store.log.append("b", Entry(b"p", 1, digest(b"p"), "k1"))).duplicate is False


async def test_names_are_validated(store: SelectorStore) -> None:
    """One rule for names, in the store too: no braces (hash tags), globs or newlines."""
    for bad in ["", "a{b", "x}", "we*ird?[name]\\", "a\n", "-lead", "a" * 129]:
        with pytest.raises(InvalidInput):
            await store.registry.get_head(bad)
    await store.registry.create(meta("ok.name_1-x"), state_of(0))
    await store.registry.delete("ok.name_1-x")
    assert await store.registry.list_names() == []


async def test_client_must_return_bytes(redis_url: str) -> None:
    plain, cluster = cluster_url(redis_url)
    client: RedisClient = (
        RedisCluster.from_url(plain, decode_responses=True)
        if cluster
        else aioredis.from_url(plain, decode_responses=True)
    )
    with pytest.raises(ValueError, match="decode_responses"):
        SelectorStore(client)
    await client.aclose()


async def test_append_is_idempotent(store: SelectorStore, redis_client: aioredis.Redis) -> None:
    await store.registry.create(meta(), state_of(0))
    assert await store.log.last_log_id("s1") is None and await store.log.pending_count("s1") == 0
    first = await store.log.append("s1", Entry(b"one", 2, digest(b"one"), "key-1"))
    assert first.duplicate is False and first.applied_version is None
    again = await store.log.append("s1", Entry(b"one", 2, digest(b"one"), "key-1"))
    assert again.duplicate is True and again.log_id == first.log_id
    assert again.applied_version is None and again.items_seen is None
    with pytest.raises(IdempotencyMismatch, match="Idempotency-Key 'key-1' was first used"):
        await store.log.append("s1", Entry(b"two", 2, digest(b"two"), "key-1"))
    assert await store.log.pending_count("s1") == 1
    assert await store.log.last_log_id("s1") == first.log_id

    plain1 = await store.log.append("s1", Entry(b"one", 2, digest(b"one"), None))
    plain2 = await store.log.append("s1", Entry(b"one", 2, digest(b"one"), None))
    assert not plain1.duplicate and not plain2.duplicate and plain1.log_id != plain2.log_id
    assert await store.log.pending_count("s1") == 3
    assert await store.log.last_log_id("s1") == plain2.log_id
    assert await redis_client.hmget("sift:{s1}:head", ["entries", "applied"]) == [b"3", b"0"]

    ttl = await redis_client.pttl(KEYS.idem("key-1"))
    assert 0 < ttl <= 86_400_000
    assert await store.log.idempotency_record("s1", "key-1") == again
    assert await store.log.idempotency_record("s1", "nope") is None
    with pytest.raises(InvalidInput):
        await store.log.append("s1", Entry(b"x", 1, digest(b"x"), ""))

    entries = await store.log.pending("s1", "0-0", 10)
    assert [e.log_id for e in entries] == [first.log_id, plain1.log_id, plain2.log_id]
    assert entries[0].payload == b"one" and entries[0].idem_record == KEYS.idem("key-1")
    assert entries[0].items == 2 and entries[1].idem_record is None
    assert [e.log_id for e in await store.log.pending("s1", first.log_id, 10)] == [
        plain1.log_id,
        plain2.log_id,
    ]
    assert [e.log_id for e in await store.log.pending("s1", "0-0", 1)] == [first.log_id]
    assert await store.log.pending("s1", plain2.log_id, 10) == []
    with pytest.raises(NotFound):
        await store.log.pending("nobody", "0-0", 10)


async def test_append_numbers_items_and_registers_names_atomically(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    await store.registry.create(meta(), state_of(0))
    a = await store.log.append("s1", Entry(b"a", 3, digest(b"a"), "k-a", ["x", "y", "f2"]))
    b = await store.log.append("s1", Entry(b"b", 2, digest(b"b"), None))
    assert (a.first, b.first) == (0, 3)
    # A repeat answers the first position; nothing is numbered or registered again.
    again = await store.log.append("s1", Entry(b"a", 3, digest(b"a"), "k-a", ["x", "y", "f2"]))
    assert again.duplicate and again.first == 0
    record = await store.log.idempotency_record("s1", "k-a")
    assert record is not None and record.first == 0
    with pytest.raises(Conflict, match="'y' is already used by feature 1"):
        await store.log.append("s1", Entry(b"c", 2, digest(b"c"), "k-c", ["z", "y"]))
    with pytest.raises(Conflict, match="this column is feature 6"):
        await store.log.append("s1", Entry(b"c", 2, digest(b"c"), None, ["z", "f1"]))
    # The rejected appends wrote nothing: no entry, no name, no position, no idempotency record.
    assert await store.log.pending_count("s1") == 2
    assert await redis_client.xlen("sift:{s1}:log") == 2
    assert await store.log.last_log_id("s1") == b.log_id
    assert await store.log.idempotency_record("s1", "k-c") is None
    assert await store.registry.item_names("s1", [0, 1, 2, 3, 5, 6]) == [
        "x",
        "y",
        "f2",
        None,
        None,
        None,
    ]
    c = await store.log.append("s1", Entry(b"c", 2, digest(b"c"), None, ["z", "f6"]))
    assert c.first == 5
    entries = await store.log.pending("s1", "0-0", 10)
    assert [(e.first, e.items) for e in entries] == [(0, 3), (3, 2), (5, 2)]
    await store.registry.delete("s1")
    assert await keys_of(redis_client, "s1") == set()


async def test_segments_are_written_once_and_removed_with_the_selector(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    await store.registry.create(meta(), state_of(0))
    await store.checkpoints.put_segments("s1", {"colblock:0": b"first", "colblock:1": b"second"})
    # The same id always names the same bytes: a second write (a retry, a stale applier)
    # neither fails nor replaces it.
    await store.checkpoints.put_segments("s1", {"colblock:0": b"other", "colblock:2": b"third"})
    assert await store.checkpoints.get_segment("s1", "colblock:0") == b"first"
    assert await store.checkpoints.get_segment("s1", "colblock:2") == b"third"
    await store.checkpoints.put_segments("s1", {})
    with pytest.raises(CodecError, match="segment 'colblock:9' of selector 's1' is missing"):
        await store.checkpoints.get_segment("s1", "colblock:9")
    await store.registry.delete("s1")
    assert await keys_of(redis_client, "s1") == set()
    with pytest.raises(NotFound):
        await store.checkpoints.get_segment("s1", "colblock:0")


async def test_idempotency_keys_expire(redis_client: aioredis.Redis) -> None:
    store = SelectorStore(redis_client, idempotency_ttl_s=1)
    await store.registry.create(meta(), {})
    first = await store.log.append("s1", Entry(b"a", 1, digest(b"a"), "k"))
    await redis_client.pexpire(KEYS.idem("k"), 1)  # fast-forward
    await asyncio.sleep(0.01)
    again = await store.log.append("s1", Entry(b"b", 1, digest(b"b"), "k"))
    assert not again.duplicate and again.log_id != first.log_id


async def test_lease_lifecycle(store: SelectorStore, redis_client: aioredis.Redis) -> None:
    await store.registry.create(meta(), {})
    lease = await store.leases.acquire_lease("s1", 5_000)
    assert lease is not None and lease.name == "s1"
    assert await store.leases.acquire_lease("s1", 5_000) is None
    assert await store.leases.renew_lease(lease, 20_000)
    assert 10_000 < await redis_client.pttl("sift:{s1}:lease") <= 20_000
    await store.leases.release_lease(lease)
    assert not await store.leases.renew_lease(lease, 1_000)
    second = await store.leases.acquire_lease("s1", 5_000)
    assert second is not None and second.token > lease.token and second.holder != lease.holder
    await store.leases.release_lease(lease)  # not ours any more: no effect
    assert await store.leases.renew_lease(second, 5_000)
    with pytest.raises(NotFound):
        await store.leases.acquire_lease("nobody", 1_000)


async def test_commit_publishes_records_what_it_applied_and_keeps_the_log(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    head0 = await store.registry.create(meta(), state_of(0), published=published_of(0))
    e1 = await store.log.append("s1", Entry(b"c1", 2, digest(b"c1"), "k1"))
    e2 = await store.log.append("s1", Entry(b"c2", 3, digest(b"c2"), None))
    e3 = await store.log.append("s1", Entry(b"c3", 4, digest(b"c3"), "k3"))
    assert await store.log.names_with_pending() == ["s1"]
    assert await store.log.pending_count("s1") == 3

    lease = await store.leases.acquire_lease("s1", 10_000)
    assert lease is not None
    head1 = await store.commits.commit(
        lease, NextVersion(0, published_of(1), e2.log_id, 5), [KEYS.idem("k1")], entries=2
    )
    assert head1.version == 1 and head1.cursor == e2.log_id and head1.items_seen == 5
    assert head1.state_key.startswith(f"sift:{{s1}}:state:1:{lease.token}:")
    assert head1.checkpoint == head0.checkpoint  # a commit does not checkpoint
    assert await store.registry.get_head("s1") == head1
    assert not await redis_client.exists(head0.state_key)  # the previous published hash is gone
    assert await redis_client.smembers("sift:{s1}:blobs") == {head1.state_key.encode()}
    # The new hash holds exactly the published fields, and who wrote them.
    assert await redis_client.hgetall(head1.state_key) == {
        **{field.encode(): value for field, value in published_of(1).items()},
        b"__writer__": lease.holder.encode(),
    }
    assert await published(store, "s1") == (1, published_of(1))
    # The log is the truth until a checkpoint covers it: nothing is trimmed; the commit record
    # says which entries the version applied, for a replay.
    assert await redis_client.xlen("sift:{s1}:log") == 3
    assert await store.commits.commits_after("s1", 0) == [CommitRecord(1, e2.log_id, False)]
    assert [e.log_id for e in await store.log.pending("s1", head1.cursor, 10)] == [e3.log_id]
    assert await store.log.pending_count("s1") == 1
    assert await whole(store, "s1") == state_of(0)  # still version 0's

    record = await store.log.idempotency_record("s1", "k1")
    assert record is not None and record.applied_version == 1 and record.items_seen == 5
    assert await redis_client.pttl(KEYS.idem("k1")) > 0  # TTL kept
    dup = await store.log.append("s1", Entry(b"c1", 2, digest(b"c1"), "k1"))
    assert dup == record and dup.log_id == e1.log_id

    ranked = HistoryEntry(2, 9, 0.0, [RankedList(None, [2, 0], [3.0, 1.0])])
    head2 = await store.commits.commit(
        lease,
        NextVersion(1, published_of(2), e3.log_id, 9, history=ranked, history_kept=5),
        [KEYS.idem("k3"), KEYS.idem("expired-key")],
        entries=1,
    )
    assert head2.version == 2 and await store.log.pending_count("s1") == 0
    assert await store.log.names_with_pending() == []
    assert not await redis_client.exists(KEYS.idem("expired-key"))  # not resurrected
    assert await published(store, "s1") == (2, published_of(2))
    assert await store.commits.commits_after("s1", 0) == [
        CommitRecord(1, e2.log_id, False),
        CommitRecord(2, e3.log_id, False),
    ]
    assert await store.commits.commits_after("s1", 1) == [CommitRecord(2, e3.log_id, False)]
    assert await store.commits.commits_after("s1", 2) == []
    # The history entry went in with the commit, stamped with the commit's clock.
    assert await store.history.read("s1", 10) == [
        HistoryEntry(2, 9, head2.updated_at, ranked.rankings)
    ]
    assert await redis_client.xlen("sift:{s1}:log") == 3
    assert await store.log.last_log_id("s1") == e3.log_id

    with pytest.raises(SiftError, match="move the cursor back"):
        await store.commits.commit(
            lease, NextVersion(2, published_of(3), e1.log_id, 9), [], entries=1
        )
    # Refused before anything was written.
    assert await redis_client.smembers("sift:{s1}:blobs") == {head2.state_key.encode()}
    assert await keys_of(redis_client, "s1", "state:*") == {head2.state_key}
    assert len(await store.commits.commits_after("s1", 0)) == 2
    with pytest.raises(ValueError):
        await store.commits.commit(
            lease, NextVersion(2, published_of(3), "not-an-id", 9), [], entries=1
        )


async def test_commit_of_a_rejection_records_its_reason_and_keeps_the_history_capped(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    await store.registry.create(meta(), state_of(0))
    good = await store.log.append("s1", Entry(b"good", 1, digest(b"good"), "k-good"))
    bad = await store.log.append("s1", Entry(b"bad", 1, digest(b"bad"), "k-bad"))
    lease = await store.leases.acquire_lease("s1", 10_000)
    assert lease is not None

    def ranked(version: int) -> HistoryEntry:
        return HistoryEntry(version, version, 0.0, [RankedList(None, [0], [float(version)])])

    await store.commits.commit(
        lease,
        NextVersion(0, published_of(1), good.log_id, 1, history=ranked(1), history_kept=2),
        [KEYS.idem("k-good")],
        entries=1,
    )
    reason = '{"reason":"too big"}'
    head = await store.commits.commit(
        lease,
        NextVersion(1, published_of(1), bad.log_id, 1, history=ranked(2), history_kept=2),
        [],
        [Rejection(bad.log_id, reason, KEYS.idem("k-bad"))],
        entries=1,
    )
    assert head.version == 2 and head.items_seen == 1 and head.cursor == bad.log_id
    assert await store.log.rejection("s1", bad.log_id) == reason
    assert await store.log.rejection("s1", good.log_id) is None
    rejected = await store.log.idempotency_record("s1", "k-bad")
    assert rejected is not None and rejected.rejected == reason
    assert rejected.applied_version is None  # set aside, not applied
    applied = await store.log.idempotency_record("s1", "k-good")
    assert applied is not None and applied.applied_version == 1 and applied.rejected is None
    # The commit record says the version set one entry aside (replay applies its placeholder).
    assert await store.commits.commits_after("s1", 0) == [
        CommitRecord(1, good.log_id, False),
        CommitRecord(2, bad.log_id, True),
    ]
    assert await store.log.pending_count("s1") == 0
    await store.commits.commit(
        lease,
        NextVersion(2, published_of(1), bad.log_id, 1, history=ranked(3), history_kept=2),
        [],
        entries=0,
    )
    assert [e.version for e in await store.history.read("s1", 10)] == [3, 2]  # capped at 2
    assert await redis_client.llen("sift:{s1}:history") == 2


async def test_a_stale_applier_is_refused_and_writes_nothing(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    head0 = await store.registry.create(meta(), state_of(0))
    entry = await store.log.append("s1", Entry(b"c1", 2, digest(b"c1"), "k1"))
    slow = await store.leases.acquire_lease("s1", 50)
    assert slow is not None
    await asyncio.sleep(0.1)  # slow applier's lease expires ...
    fast = await store.leases.acquire_lease("s1", 10_000)  # ... and another takes over
    assert fast is not None and fast.token > slow.token
    assert not await store.leases.renew_lease(slow, 1_000)
    ranked = HistoryEntry(1, 2, 0.0, [RankedList(None, [1], [1.0])])

    before = await keys_of(redis_client, "s1")
    with pytest.raises(StaleApplier, match="lease is now held by"):
        await store.commits.commit(
            slow,
            NextVersion(0, published_of(1), entry.log_id, 2, history=ranked, history_kept=5),
            [KEYS.idem("k1")],
            entries=1,
        )
    # Nothing at all: no state hash, no commit record, no history, no applied mark.
    assert await keys_of(redis_client, "s1") == before
    assert await store.registry.get_head("s1") == head0
    record = await store.log.idempotency_record("s1", "k1")
    assert record is not None and record.applied_version is None

    head1 = await store.commits.commit(
        fast, NextVersion(0, published_of(1), entry.log_id, 2), [KEYS.idem("k1")], entries=1
    )
    with pytest.raises(StaleApplier, match="expected version 0, the head is at version 1"):
        await store.commits.commit(
            fast, NextVersion(0, published_of(9), entry.log_id, 2), [], entries=1
        )
    assert (
        await store.registry.get_head("s1") == head1
    )  # the head's hash survived the failed commit
    assert await published(store, "s1") == (1, published_of(1))

    await store.leases.release_lease(fast)
    with pytest.raises(StaleApplier, match="lease expired"):
        await store.commits.commit(
            fast, NextVersion(1, published_of(2), entry.log_id, 2), [], entries=0
        )
    # same holder string, but the fence moved on (e.g. a lease of an earlier incarnation)
    third = await store.leases.acquire_lease("s1", 10_000)
    assert third is not None
    forged = Lease(name="s1", token=third.token - 1, holder=third.holder)
    with pytest.raises(StaleApplier, match="fenced"):
        await store.commits.commit(
            forged, NextVersion(1, published_of(2), entry.log_id, 2), [], entries=0
        )
    assert await redis_client.smembers("sift:{s1}:blobs") == {head1.state_key.encode()}
    assert await keys_of(redis_client, "s1", "state:*") == {head1.state_key}
    assert await store.commits.commits_after("s1", 0) == [CommitRecord(1, entry.log_id, False)]
    assert await store.history.read("s1", 10) == []
    assert await published(store, "s1") == (1, published_of(1))
    assert await store.registry.get_head("s1") == head1


async def test_orphan_blobs_are_removed_by_the_next_commit(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    await store.registry.create(meta(), state_of(0))
    crashed = await store.leases.acquire_lease("s1", 10_000)
    assert crashed is not None
    orphan = f"sift:{{s1}}:state:1:{crashed.token}:deadbeef"
    orphaned: dict[Any, Any] = state_of(1)
    await redis_client.hset(orphan, mapping=orphaned)  # written, then the applier died
    await redis_client.sadd("sift:{s1}:blobs", orphan)
    await store.leases.release_lease(crashed)
    lease = await store.leases.acquire_lease("s1", 10_000)
    assert lease is not None
    head = await store.commits.commit(
        lease, NextVersion(0, published_of(1), "0-0", 0), [], entries=0
    )
    assert not await redis_client.exists(orphan)
    assert await redis_client.smembers("sift:{s1}:blobs") == {head.state_key.encode()}


async def test_the_published_hash_is_written_whole_and_only_by_the_commit_script(
    store: SelectorStore, redis_client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The published fields travel with the compare-and-set: a refused commit writes none of
    them, and what lay under the new key before (anyone's fields) never shows through."""
    await store.registry.create(meta(), state_of(0))
    lease = await store.leases.acquire_lease("s1", 10_000)
    assert lease is not None
    # Fix the nonce, so that the test knows the key the commit will write.
    monkeypatch.setattr(secrets, "token_hex", lambda nbytes=None: "feedface")
    key = f"sift:{{s1}}:state:1:{lease.token}:feedface"
    foreign: dict[Any, Any] = {b"foreign": b"x", b"a": b"junk", b"__writer__": b"someone-else"}
    await redis_client.hset(key, mapping=foreign)

    impostor = Lease(name="s1", token=lease.token, holder="impostor")
    with pytest.raises(StaleApplier, match="lease is now held by"):
        await store.commits.commit(
            impostor, NextVersion(0, published_of(1), "0-0", 0), [], entries=0
        )
    assert await redis_client.hgetall(key) == foreign  # refused: not touched
    assert (await store.registry.get_head("s1")).version == 0

    head = await store.commits.commit(
        lease, NextVersion(0, published_of(1), "0-0", 0), [], entries=0
    )
    assert head.state_key == key
    assert await redis_client.hgetall(key) == {
        **{field.encode(): value for field, value in published_of(1).items()},
        b"__writer__": lease.holder.encode(),
    }
    assert await published(store, "s1") == (1, published_of(1))


async def test_read_state_fields_is_a_consistent_snapshot(store: SelectorStore) -> None:
    await store.registry.create(meta(), state_of(0))
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    commits = 40
    done = asyncio.Event()

    async def writer() -> None:
        for v in range(commits):
            await store.commits.commit(
                lease, NextVersion(v, state_of(v + 1), "0-0", v + 1), [], entries=0
            )
        done.set()

    async def reader() -> list[int]:
        seen = []
        while not done.is_set():
            head, fields = await store.checkpoints.read_state_fields(
                "s1", ["a", "b", "__scalars__"]
            )
            state = decode_state(fields)
            assert head.version == head.items_seen
            assert state["version"] == head.version
            assert (state["a"] == head.version).all() and (state["b"] == head.version).all()
            seen.append(head.version)
            await asyncio.sleep(0)
        return seen

    results = await asyncio.gather(writer(), *(reader() for _ in range(8)))
    versions = {v for seen in results[1:] if seen for v in seen}
    assert len(versions) > 1  # the readers really overlapped with commits
    head, fields = await store.checkpoints.read_state_fields("s1", ["a", "missing"])
    assert head.version == commits and set(fields) == {"a"}
    head, fields = await store.checkpoints.read_state_fields("s1", [])
    assert head.version == commits and fields == {}
    with pytest.raises(NotFound):
        await store.checkpoints.read_state_fields("nobody", ["a"])


async def test_a_missing_published_hash_or_checkpoint_is_an_error(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    head = await store.registry.create(meta(), state_of(0))
    await redis_client.delete(head.state_key)
    with pytest.raises(CodecError, match="is missing"):
        await store.checkpoints.read_state_fields("s1", ["a"])
    assert await store.checkpoints.load_checkpoint("s1", head.recovery_point) == state_of(
        0
    )  # intact
    await redis_client.delete(head.recovery_point.key)
    with pytest.raises(CodecError, match="is missing"):
        await store.checkpoints.load_checkpoint("s1", head.recovery_point)
    with pytest.raises(NotFound):
        await store.checkpoints.load_checkpoint(
            "nobody", Checkpoint("sift:{nobody}:ckpt:0:0:x", 0, "0-0", 0)
        )


async def test_names_with_pending_and_registry(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    for name in ["z", "y", "x"]:
        await store.registry.create(meta(name), {})
    await store.log.append("y", Entry(b"p", 1, digest(b"p"), None))
    entry = await store.log.append("z", Entry(b"p", 1, digest(b"p"), None))
    assert await store.log.names_with_pending() == ["y", "z"]
    await redis_client.sadd("sift:selectors", "ghost", "br{oken")  # stale registry entries
    assert await store.registry.list_names() == ["x", "y", "z"]
    assert await store.log.names_with_pending() == ["y", "z"]
    lease = await store.leases.acquire_lease("z", 10_000)
    assert lease is not None
    await store.commits.commit(lease, NextVersion(0, {}, entry.log_id, 1), [], entries=1)
    assert await store.log.names_with_pending() == ["y"]


async def test_scripts_reload_after_flush(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    await store.ensure_scripts()
    assert await store.scripts_loaded()
    await redis_client.script_flush()
    assert not await store.scripts_loaded()
    await store.registry.create(meta(), {})  # NOSCRIPT -> reloaded transparently
    await store.ensure_scripts()
    assert await store.scripts_loaded()
    assert await store.ping()


async def test_unreachable_redis_is_unavailable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = aioredis.from_url(f"redis://127.0.0.1:{port}", socket_connect_timeout=0.5)
    store = SelectorStore(client)
    try:
        for call in (store.ping(), store.registry.get_head("s1"), store.registry.list_names()):
            with pytest.raises(Unavailable) as info:
                await call
            assert info.value.retry_after >= 1 and info.value.status == 503
    finally:
        await client.aclose()


def test_stream_id_helpers() -> None:
    assert next_stream_id("5-3") == "5-4"
    assert next_stream_id(f"5-{2**64 - 1}") == "6-0"
    assert compare_stream_ids("10-0", "9-99") == 1
    assert compare_stream_ids("9-99", "9-99") == 0
    assert compare_stream_ids("0-0", "1-0") == -1
    for bad in ["", "5", "5-", "-1-0", "01-0", "a-b"]:
        with pytest.raises(ValueError):
            next_stream_id(bad)


async def test_the_whole_state_never_travels_through_lua(
    store: SelectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating and checkpointing a 20 MB state: the scripts see keys and short arguments;
    the state goes in pieces by plain commands (``test_checkpoints.py`` measures those)."""
    big = np.arange(2_500_000, dtype=np.float64)  # 20 MB
    sizes: list[int] = []
    for name, script in list(store._scripts.items()):

        async def spy(keys: Any = None, args: Any = None, client: Any = None, _s: Any = script):
            sizes.extend(len(a) if isinstance(a, bytes | str) else 0 for a in args or [])
            return await _s(keys=keys, args=args, client=client)

        monkeypatch.setitem(store._scripts, name, spy)
    head0 = await store.registry.create(
        meta(), encode_state({"w": big, "n": 0}), published=encode_state({"n": 0})
    )
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    head = await store.commits.commit(
        lease, NextVersion(0, encode_state({"n": 1}), "0-0", 10), [], entries=0
    )
    point = await store.checkpoints.checkpoint(
        lease, 1, "0-0", 10, cut_fields(encode_state({"w": big + 1, "n": 1}))
    )
    assert sizes and max(sizes) < 1024
    assert point is not None and (point.version, point.items_seen) == (1, 10)
    assert (await store.registry.get_head("s1")).checkpoint == point
    state = decode_state(await store.checkpoints.load_checkpoint("s1", point))
    assert np.array_equal(state["w"], big + 1) and state["n"] == 1
    # The first checkpoint (the created state) is gone with the new one in place.
    assert head0.checkpoint is not None
    with pytest.raises(Conflict, match="re-read the head"):
        await store.checkpoints.load_checkpoint("s1", head0.checkpoint)
    assert (await store.checkpoints.read_state_fields("s1", ["w", "__scalars__"]))[
        1
    ] == encode_state({"n": 1})
    assert head.version == 1


async def test_the_lease_of_a_process_that_died_on_this_machine_is_broken_at_once(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    """A restarted service takes over at once from the process it replaces; a live holder, one
    of another machine, or this very process keeps its lease until it expires."""
    await store.registry.create(meta(), state_of(0))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # exited and reaped: its pid names no process
    lease_key = "sift:{s1}:lease"
    for holder, breakable in [
        (f"{socket.gethostname()}:{dead.pid}:aa", True),
        (f"{socket.gethostname()}:{os.getpid()}:bb", False),  # this process: alive
        (f"{socket.gethostname()}:1:cc", False),  # init: alive
        (f"another-host:{dead.pid}:dd", False),  # not ours to judge
        ("garbage", False),
    ]:
        await redis_client.set(lease_key, holder, px=60_000)
        assert holder_died(holder) is breakable, holder
        assert await store.leases.break_dead_lease("s1") is breakable, holder
        assert (await redis_client.exists(lease_key) == 0) is breakable
        if not breakable:
            assert await store.leases.acquire_lease("s1", 1_000) is None
    await redis_client.delete(lease_key)
    assert await store.leases.break_dead_lease("s1") is False  # nobody holds it
    assert await store.leases.acquire_lease("s1", 1_000) is not None
