"""Checkpoints and the replay primitives against a real redis-server.

A commit publishes what readers need and records what it applied; the whole state is written
only as a checkpoint, cut into pieces (``codec.cut_state``), and ``CHECKPOINT`` makes it the
state to recover from, dropping what it covers (older checkpoints, the log up to its cursor,
the commit records up to its version). An applier that does not hold a state rebuilds it from
``load_checkpoint``, ``commits_after`` and ``log_between``. A selector written by the earlier
layout (the whole state under the head, a log of pending entries only) is taken over as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection

from service.errors import CodecError, Conflict, SiftError
from service.store import scripts
from service.store.codec import (
    PIECE_BYTES,
    PIECES_FIELD,
    SCALARS_FIELD,
    cut_fields,
    cut_state,
    decode_state,
    encode_state,
    join_fields,
    piece_name,
)
from service.store.keys import SelectorKeys
from service.store.records import (
    Checkpoint,
    CommitRecord,
    Entry,
    Head,
    Lease,
    NextVersion,
    Rejection,
    SelectorMeta,
)
from service.store.redis_store import SelectorStore

KEYS = SelectorKeys("sift", "s1")


def meta(name: str = "s1") -> SelectorMeta:
    return SelectorMeta(name=name, method="variance", params={}, created_at=1.5, n_features=4)


def state_of(version: int) -> dict[str, bytes]:
    """A whole state whose every field says which version it belongs to."""
    return encode_state(
        {
            "mean": np.full(4, float(version)),
            "m2": np.full(4, 2.0 * version),
            "version": version,
        }
    )


def published_of(version: int) -> dict[str, bytes]:
    """What a version of ``state_of`` publishes: a part of it."""
    return encode_state({"mean": np.full(4, float(version)), "version": version})


def digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


async def keys_of(client: aioredis.Redis, pattern: str) -> set[str]:
    return {k.decode() async for k in client.scan_iter(match=f"sift:{{s1}}:{pattern}")}


async def log_ids(client: aioredis.Redis, key: str = KEYS.log) -> list[str]:
    entries: Any = await client.xrange(key)
    return [entry_id.decode() for entry_id, _fields in entries]


# -- pieces --------------------------------------------------------------------------------


def test_pieces_round_trip_exactly() -> None:
    piece = 64
    fields = {
        "empty": b"",
        "one": b"\x01",
        "under": bytes(range(piece - 1)),
        "exact": bytes(range(piece)),
        "over": bytes(range(piece + 1)),
        "several": bytes(np.random.default_rng(0).integers(0, 256, 3 * piece + 5, dtype=np.uint8)),
        SCALARS_FIELD: b'{"n":3}',
    }
    cut = cut_fields(fields, piece)
    assert all(len(value) <= piece for value in cut.values())
    # Values that fit stay as they are; the others go in order, under names no state uses.
    for name in ("empty", "one", "under", "exact", SCALARS_FIELD):
        assert cut[name] is fields[name]
    manifest = cut[PIECES_FIELD]
    assert isinstance(manifest, bytes) and json.loads(manifest) == {"over": 2, "several": 4}
    assert [cut[piece_name("several", i)] for i in range(4)] == [
        fields["several"][i * piece : (i + 1) * piece] for i in range(4)
    ]
    assert "over" not in cut and "several" not in cut
    assert join_fields(cut) == fields
    # As Redis gives them back: any order, with the store's bookkeeping fields beside them.
    shuffled = dict(reversed(list(cut.items())))
    assert join_fields({**shuffled, "__writer__": b"holder"}) == fields
    # A state with nothing to cut still carries its (empty) manifest.
    assert cut_fields({"a": b"x"}, piece) == {"a": b"x", PIECES_FIELD: b"{}"}
    assert join_fields(cut_fields({}, piece)) == {}


def test_a_real_state_round_trips_through_pieces_of_the_default_size() -> None:
    w = np.arange(3 * PIECE_BYTES // 8 + 7, dtype=np.float64)
    encoded = encode_state({"w": w, "k": 2})
    cut = cut_fields(encoded)
    assert max(len(value) for value in cut.values()) == PIECE_BYTES
    manifest = cut[PIECES_FIELD]
    assert isinstance(manifest, bytes) and json.loads(manifest) == {"w": 4}
    assert join_fields(cut) == encoded
    decoded = decode_state(join_fields(cut))
    assert np.array_equal(decoded["w"], w) and decoded["k"] == 2


def test_a_state_cut_from_its_arrays_joins_to_its_encoding_and_copies_no_array() -> None:
    """``cut_state`` gives what ``cut_fields(encode_state(...))`` gives, byte for byte, for
    arrays of every layout and size around a piece, and scalars too long for one; and every
    piece of a C-ordered little-endian array but its first is a view of the array itself."""
    piece = 64
    rng = np.random.default_rng(3)
    big = rng.standard_normal((9, 7))
    state: dict[str, Any] = {
        "empty": np.zeros((0, 3)),
        "zero_d": np.asarray(2.5),
        "under": np.arange(2, dtype=np.int32),
        "exact": np.arange(piece // 8 - 5, dtype=np.float64),  # header 40 bytes + 24: a piece
        "big": big,
        "transposed": big.T,  # not C-ordered: encoded from a copy
        "swapped": big.astype(">f8"),  # big-endian: encoded from a copy
        "flags": rng.integers(0, 2, 300).astype(bool),
        "name": "x" * 200,  # the scalars' JSON alone is longer than a piece
        "n": 3,
    }
    cut = cut_state(state, piece)
    assert cut == cut_fields(encode_state(state), piece)
    assert all(len(value) <= piece for value in cut.values())
    decoded = decode_state(join_fields(cut))
    for name, value in state.items():
        assert (
            np.array_equal(decoded[name], value)
            if isinstance(value, np.ndarray)
            else (decoded[name] == value)
        ), name
    pieces = json.loads(bytes(cut[PIECES_FIELD]))
    assert pieces["big"] == -(-len(encode_state({"big": big})["big"]) // piece)
    for index in range(1, pieces["big"]):
        view = np.frombuffer(cut[piece_name("big", index)], dtype=np.uint8)
        assert np.shares_memory(view, big), index
    for copied in ("transposed", "swapped"):
        view = np.frombuffer(cut[piece_name(copied, 1)], dtype=np.uint8)
        assert not np.shares_memory(view, big)
    # Joined again into one buffer, read-only, that no piece shares.
    joined = join_fields(cut)["big"]
    assert isinstance(joined, memoryview) and joined.readonly
    assert not np.shares_memory(np.frombuffer(joined, dtype=np.uint8), big)


def test_missing_pieces_and_damaged_manifests_are_codec_errors() -> None:
    piece = 16
    fields = {"w": bytes(range(50)), "s": b"short"}
    cut = cut_fields(fields, piece)
    without_piece = {k: v for k, v in cut.items() if k != piece_name("w", 2)}
    with pytest.raises(CodecError, match=r"piece .* is missing"):
        join_fields(without_piece)
    with pytest.raises(CodecError, match="no manifest"):
        join_fields({k: v for k, v in cut.items() if k != PIECES_FIELD})
    for manifest in [b"{not json", b"\xff\xfe", b"[4]", b'{"w": 0}', b'{"w": -1}', b'{"w": true}']:
        with pytest.raises(CodecError, match="manifest"):
            join_fields({**cut, PIECES_FIELD: manifest})
    for manifest in [b'{"w": "4"}', b'{"w": 4.0}', b'{"w": null}']:
        with pytest.raises(CodecError, match="manifest"):
            join_fields({**cut, PIECES_FIELD: manifest})
    # A manifest that names more pieces than were written.
    with pytest.raises(CodecError, match="is missing"):
        join_fields({**cut, PIECES_FIELD: b'{"w": 5}'})


def test_pieces_swapped_or_damaged_are_caught_when_the_state_decodes() -> None:
    encoded = encode_state({"w": np.arange(100, dtype=np.float64)})
    cut = cut_fields(encoded, 256)
    first, second = piece_name("w", 0), piece_name("w", 1)
    swapped = {**cut, first: cut[second], second: cut[first]}
    with pytest.raises(CodecError):
        decode_state(join_fields(swapped))
    flipped = bytearray(cut[second])
    flipped[3] ^= 0x10
    with pytest.raises(CodecError):
        decode_state(join_fields({**cut, second: bytes(flipped)}))


# -- what a checkpoint sends -----------------------------------------------------------------


@dataclass
class Sent:
    """Every command a client sent: its name and the length of each argument."""

    commands: list[tuple[str, list[int]]] = field(default_factory=list)

    def named(self, name: str) -> list[list[int]]:
        return [sizes for command, sizes in self.commands if command == name]


#: Why the tests of ``recorded`` run on a single Redis only.
SINGLE_CONNECTION_CLASS = (
    "counts commands through its own connection class, which redis-py's cluster client does "
    "not take"
)


@pytest.fixture
async def recorded(
    redis_url: str, redis_client: aioredis.Redis
) -> AsyncIterator[tuple[SelectorStore, Sent]]:
    """A store on a client whose connections note every command they pack (single or in a
    pipeline: both go through ``pack_command``); ``redis_client`` flushes afterwards."""
    sent = Sent()

    class RecordingConnection(Connection):
        def pack_command(self, *args: Any) -> list[bytes]:
            encoded = [self.encoder.encode(arg) for arg in args]
            name = bytes(encoded[0]).decode().upper()
            sent.commands.append((name, [len(arg) for arg in encoded[1:]]))
            return super().pack_command(*args)

    client = aioredis.from_url(redis_url, connection_class=RecordingConnection)
    try:
        yield SelectorStore(client), sent
    finally:
        await client.aclose()


@pytest.mark.single_redis(SINGLE_CONNECTION_CLASS)
async def test_a_checkpoint_of_megabytes_never_sends_a_value_over_a_piece(
    recorded: tuple[SelectorStore, Sent], redis_client: aioredis.Redis
) -> None:
    store, sent = recorded
    state = {
        "big": np.random.default_rng(1).standard_normal(6 * 1024**2 // 8),  # 6 MiB
        "medium": np.arange(200_000, dtype=np.int64),  # 1.5 MiB
        "small": np.ones(3),
        "n": 7,
    }
    whole = encode_state(state)
    assert sum(map(len, whole.values())) > 7 * 1024**2
    await store.registry.create(meta(), encode_state({"n": 0}))
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    await store.commits.commit(
        lease, NextVersion(0, encode_state({"n": 7}), "0-0", 7), [], entries=0
    )

    sent.commands.clear()
    # Cut as the applier cuts it: pieces that are views of the arrays.
    point = await store.checkpoints.checkpoint(lease, 1, "0-0", 7, cut_state(state))
    assert point is not None
    largest = max(max(sizes, default=0) for _name, sizes in sent.commands)
    assert largest <= PIECE_BYTES
    # Each piece went by its own command: at least as many HSETs as there are pieces.
    pieces = -(-len(whole["big"]) // PIECE_BYTES) + -(-len(whole["medium"]) // PIECE_BYTES)
    assert len(sent.named("HSET")) >= pieces
    assert all(len(sizes) == 3 for sizes in sent.named("HSET"))  # key, one field, one value
    # As stored: no field over a piece, and the state comes back exactly.
    for name in await redis_client.hkeys(point.key):
        assert await redis_client.hstrlen(point.key, name) <= PIECE_BYTES
    assert await store.checkpoints.load_checkpoint("s1", point) == whole
    # Read back a few pieces per command, too.
    sent.commands.clear()
    assert await store.checkpoints.load_checkpoint("s1", point) == whole
    assert len(sent.named("HMGET")) >= pieces // 4


# -- CHECKPOINT --------------------------------------------------------------------------------


@dataclass
class Versions:
    """A selector at version 3 whose checkpoint is still version 0's: entries e[0] .. e[4];
    version 1 applied e[0] and e[1] together, version 2 set e[2] aside, version 3 applied
    e[3]; e[4] is pending."""

    lease: Lease
    entries: list[str]
    head: Head
    #: Items seen at each version.
    seen: list[int]


async def three_versions(store: SelectorStore) -> Versions:
    created = await store.registry.create(meta(), state_of(0))
    entries = []
    for i in range(5):
        payload = f"chunk {i}".encode()
        entries.append(
            (await store.log.append("s1", Entry(payload, i + 1, digest(payload), None))).log_id
        )
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    await store.commits.commit(lease, NextVersion(0, published_of(1), entries[1], 3), [], entries=2)
    rejected = [Rejection(entries[2], '{"reason":"no"}')]
    await store.commits.commit(
        lease, NextVersion(1, published_of(2), entries[2], 3), [], rejected, entries=1
    )
    head = await store.commits.commit(
        lease, NextVersion(2, published_of(3), entries[3], 7), [], entries=1
    )
    assert head.checkpoint == created.checkpoint
    return Versions(lease, entries, head, [0, 3, 3, 7])


async def test_checkpoint_replaces_the_recovery_point_and_drops_exactly_what_it_covers(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    v = await three_versions(store)
    e = v.entries
    first = v.head.checkpoint
    assert first is not None and first.version == 0
    assert await store.commits.commits_after("s1", 0) == [
        CommitRecord(1, e[1], False),
        CommitRecord(2, e[2], True),
        CommitRecord(3, e[3], False),
    ]
    assert await log_ids(redis_client) == e

    point = await store.checkpoints.checkpoint(v.lease, 2, e[2], v.seen[2], cut_fields(state_of(2)))
    assert point is not None and point == Checkpoint(point.key, 2, e[2], v.seen[2]) and point.cut
    assert point.key.startswith(f"sift:{{s1}}:ckpt:2:{v.lease.token}:")
    head = await store.registry.get_head("s1")
    # The head itself does not move: only what it recovers from.
    assert (head.version, head.cursor, head.items_seen, head.state_key) == (
        3,
        e[3],
        7,
        v.head.state_key,
    )
    assert head.checkpoint == point and head.recovery_point == point
    # The log after the checkpoint's cursor, and the commit records after its version, stay.
    assert await log_ids(redis_client) == e[3:]
    assert await store.commits.commits_after("s1", 0) == [CommitRecord(3, e[3], False)]
    assert [x.log_id for x in await store.log.log_between("s1", point.cursor, head.cursor)] == [
        e[3]
    ]
    # Older checkpoints are gone; this one holds the state.
    assert not await redis_client.exists(first.key)
    assert await keys_of(redis_client, "ckpt:*") == {point.key}
    assert await redis_client.smembers(KEYS.checkpoints) == {point.key.encode()}
    assert await store.checkpoints.load_checkpoint("s1", point) == state_of(2)
    with pytest.raises(Conflict, match="re-read the head"):
        await store.checkpoints.load_checkpoint("s1", first)
    # What is pending is still pending.
    assert await store.log.pending_count("s1") == 1
    assert await store.log.last_log_id("s1") == e[4]
    assert await store.log.names_with_pending() == ["s1"]
    assert (await store.checkpoints.read_state_fields("s1", ["__scalars__"]))[1] == {
        SCALARS_FIELD: published_of(3)[SCALARS_FIELD]
    }

    # A checkpoint whose writer died before its flip is an orphan the next one removes.
    orphan = KEYS.checkpoint(3, v.lease.token - 1, "deadbeef")
    await redis_client.hset(orphan, "mean", b"partial")
    await redis_client.sadd(KEYS.checkpoints, orphan)
    third = await store.checkpoints.checkpoint(v.lease, 3, e[3], 7, cut_fields(state_of(3)))
    assert third is not None and not await redis_client.exists(orphan)
    assert await redis_client.smembers(KEYS.checkpoints) == {third.key.encode()}
    assert await log_ids(redis_client) == e[4:]
    assert await store.commits.commits_after("s1", 0) == []
    assert await store.log.log_between("s1", third.cursor, head.cursor) == []

    # Everything applied and checkpointed: the log is empty, yet the head still knows its end.
    last = await store.commits.commit(
        v.lease, NextVersion(3, published_of(4), e[4], 12), [], entries=1
    )
    assert (
        await store.checkpoints.checkpoint(v.lease, 4, e[4], 12, cut_fields(state_of(4)))
        is not None
    )
    assert await redis_client.xlen(KEYS.log) == 0
    assert await store.log.last_log_id("s1") == e[4] and last.cursor == e[4]
    assert await store.log.pending_count("s1") == 0
    assert await store.log.names_with_pending() == []
    snapshot = await store.checkpoints.snapshot("s1")
    assert snapshot.state == state_of(4)
    assert (snapshot.head.version, snapshot.head.cursor, snapshot.head.items_seen) == (4, e[4], 12)


async def test_checkpoint_trims_the_log_at_the_exact_entry(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    """Entries of one millisecond differ only in their sequence number: the trim keeps the
    one right after the cursor."""
    await store.registry.create(meta(), state_of(0))
    for entry_id in ("9-0", "9-1", "9-2", "10-0"):
        await redis_client.xadd(KEYS.log, {"payload": b"p", "rows": 1}, id=entry_id)
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    await store.commits.commit(lease, NextVersion(0, published_of(1), "9-1", 2), [], entries=2)
    assert (
        await store.checkpoints.checkpoint(lease, 1, "9-1", 2, cut_fields(state_of(1))) is not None
    )
    assert await log_ids(redis_client) == ["9-2", "10-0"]


async def test_checkpoint_is_refused_without_the_lease_or_out_of_order(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    v = await three_versions(store)
    e = v.entries
    first = v.head.checkpoint
    assert first is not None

    async def untouched() -> None:
        head = await store.registry.get_head("s1")
        assert head.checkpoint == first and head.version == 3
        assert await log_ids(redis_client) == e
        assert len(await store.commits.commits_after("s1", 0)) == 3
        # The refused checkpoint's pieces were removed again.
        assert await keys_of(redis_client, "ckpt:*") == {first.key}
        assert await redis_client.smembers(KEYS.checkpoints) == {first.key.encode()}
        assert await store.checkpoints.load_checkpoint("s1", first) == state_of(0)

    await store.leases.release_lease(v.lease)  # without the lease
    assert await store.checkpoints.checkpoint(v.lease, 2, e[2], 3, cut_fields(state_of(2))) is None
    await untouched()
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    stale = Lease("s1", lease.token - 1, lease.holder)  # the right holder, a stale fence
    assert await store.checkpoints.checkpoint(stale, 2, e[2], 3, cut_fields(state_of(2))) is None
    await untouched()
    with pytest.raises(SiftError, match="ahead of its head"):  # a version not committed
        await store.checkpoints.checkpoint(lease, 4, e[3], 7, cut_fields(state_of(4)))
    await untouched()
    with pytest.raises(SiftError, match="ahead of its head"):  # entries not applied
        await store.checkpoints.checkpoint(lease, 3, e[4], 7, cut_fields(state_of(3)))
    await untouched()
    assert (
        await store.checkpoints.checkpoint(lease, 0, "0-0", 0, cut_fields(state_of(0))) is None
    )  # not newer
    await untouched()

    point = await store.checkpoints.checkpoint(lease, 2, e[2], 3, cut_fields(state_of(2)))
    assert point is not None
    for older in (1, 2):  # a slower writer's checkpoint never replaces a newer one
        assert (
            await store.checkpoints.checkpoint(
                lease, older, e[older], 3, cut_fields(state_of(older))
            )
            is None
        )
    assert (await store.registry.get_head("s1")).checkpoint == point
    assert await keys_of(redis_client, "ckpt:*") == {point.key}
    assert await store.checkpoints.load_checkpoint("s1", point) == state_of(2)


async def test_the_checkpoint_script_refuses_pieces_that_are_not_there(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    v = await three_versions(store)
    keys = [KEYS.head, KEYS.lease, KEYS.fence, KEYS.checkpoints, KEYS.log, KEYS.commits]
    never_written = KEYS.checkpoint(2, v.lease.token, "nothing")
    args: list[Any] = [v.lease.holder, v.lease.token, 2, v.entries[2], 3]
    script = scripts.ALL["checkpoint"]
    reply = await redis_client.eval(script, len(keys) + 1, *keys, never_written, *args)
    assert reply == [b"MISSING"]
    assert (await store.registry.get_head("s1")).checkpoint == v.head.checkpoint


# -- replay primitives -----------------------------------------------------------------------


@pytest.mark.single_redis(SINGLE_CONNECTION_CLASS)
async def test_log_between_reads_past_one_batch_in_bounded_reads(
    recorded: tuple[SelectorStore, Sent],
) -> None:
    store, sent = recorded
    await store.registry.create(meta(), {})
    ids = []
    for i in range(600):
        payload = f"p{i}".encode()
        ids.append(
            (await store.log.append("s1", Entry(payload, 2, digest(payload), f"k{i}"))).log_id
        )
    sent.commands.clear()
    everything = await store.log.log_between("s1", "0-0", ids[-1])
    assert [entry.log_id for entry in everything] == ids
    assert len(sent.named("XRANGE")) == 3  # 256 + 256 + 88
    entry = everything[300]
    assert (entry.payload, entry.items, entry.first, entry.idem_record) == (
        b"p300",
        2,
        600,
        KEYS.idem("k300"),
    )
    assert [e.log_id for e in await store.log.log_between("s1", ids[9], ids[299])] == ids[10:300]
    assert [e.log_id for e in await store.log.log_between("s1", ids[0], ids[256])] == ids[1:257]
    assert await store.log.log_between("s1", ids[5], ids[5]) == []
    assert await store.log.log_between("s1", ids[-1], ids[-1]) == []
    with pytest.raises(ValueError):
        await store.log.log_between("s1", "0-0", "latest")


async def test_commits_after_reads_the_records_in_order(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    v = await three_versions(store)
    e = v.entries
    records = [
        CommitRecord(1, e[1], False),
        CommitRecord(2, e[2], True),
        CommitRecord(3, e[3], False),
    ]
    for after in range(4):
        assert await store.commits.commits_after("s1", after) == records[after:]
    assert await store.commits.commits_after("nobody", 0) == []
    await redis_client.rpush(KEYS.commits, b"[4,")
    with pytest.raises(CodecError, match="commit record of 's1' does not parse"):
        await store.commits.commits_after("s1", 0)


async def test_pending_count_last_log_id_and_names_with_pending(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    for name in ("quiet", "busy"):
        await store.registry.create(meta(name), state_of(0))
    assert (
        await store.log.pending_count("busy") == 0 and await store.log.last_log_id("busy") is None
    )
    assert await store.log.names_with_pending() == []
    ids = [
        (await store.log.append("busy", Entry(b"p", 1, digest(b"p"), None))).log_id
        for _ in range(4)
    ]
    assert (
        await store.log.pending_count("busy") == 4
        and await store.log.last_log_id("busy") == ids[-1]
    )
    assert await store.log.names_with_pending() == ["busy"]
    lease = await store.leases.acquire_lease("busy", 60_000)
    assert lease is not None
    await store.commits.commit(lease, NextVersion(0, published_of(1), ids[2], 3), [], entries=3)
    assert await store.log.pending_count("busy") == 1
    assert await store.log.names_with_pending() == ["busy"]
    await store.commits.commit(
        lease, NextVersion(1, published_of(1), ids[3], 3), [], [Rejection(ids[3], "r")], entries=1
    )
    assert await store.log.pending_count("busy") == 0
    assert await store.log.names_with_pending() == []
    assert await redis_client.xlen(SelectorKeys("sift", "busy").log) == 4  # the log stays
    assert await store.log.last_log_id("busy") == ids[-1]
    assert (
        await store.log.pending_count("quiet") == 0 and await store.log.last_log_id("quiet") is None
    )


# -- the earlier layout ------------------------------------------------------------------------

#: The cursor of the earlier-layout selector: entries up to it were applied and trimmed.
OLD_CURSOR = "1000-0"


async def earlier_layout(client: aioredis.Redis, name: str) -> tuple[str, list[str]]:
    """A selector as the previous code wrote it, with raw commands: version 3 having seen 6
    rows, its whole state (and the writer field) in the hash its head names, two pending
    entries in its log (the applied ones were trimmed), no checkpoint, no commit records, no
    entry counts. Returns the state key and the pending entries' ids."""
    k = SelectorKeys("sift", name)
    state_key = k.state(3, 5, "0ld5tate")
    await client.set(k.meta, meta(name).to_json())
    whole: dict[Any, Any] = {**state_of(3), "__writer__": b"host:1:holder"}
    await client.hset(state_key, mapping=whole)
    await client.sadd(k.blobs, state_key)
    head: dict[Any, Any] = {
        "version": 3,
        "cursor": OLD_CURSOR,
        "rows_seen": 6,
        "appended": 8,
        "state_key": state_key,
        "updated_at": "1700000000.000001",
    }
    await client.hset(k.head, mapping=head)
    pending = []
    for first in (6, 7):
        fields: dict[Any, Any] = {"payload": f"row {first}".encode(), "rows": 1, "first": first}
        entry_id: Any = await client.xadd(k.log, fields)
        pending.append(entry_id.decode())
    await client.sadd("sift:selectors", name)
    return state_key, pending


async def test_a_selector_of_the_earlier_layout_recovers_from_its_whole_state(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    state_key, pending = await earlier_layout(redis_client, "s1")
    head = await store.registry.get_head("s1")
    assert head.checkpoint is None
    assert head.recovery_point == Checkpoint(state_key, 3, OLD_CURSOR, 6, cut=False)
    # Its whole-state hash is read as it is (no manifest, the writer field dropped).
    assert await store.checkpoints.load_checkpoint("s1", head.recovery_point) == state_of(3)
    snapshot = await store.checkpoints.snapshot("s1")
    assert snapshot.state == state_of(3) and snapshot.head.version == 3
    assert (await store.checkpoints.read_state_fields("s1", ["mean", "m2", "__scalars__"]))[
        1
    ] == state_of(3)
    # Its log holds exactly the pending entries.
    assert await store.log.pending_count("s1") == 2
    assert await store.log.last_log_id("s1") == pending[-1]
    assert await store.log.names_with_pending() == ["s1"]
    assert [e.log_id for e in await store.log.pending("s1", head.cursor, 10)] == pending

    # APPEND starts counting from what was pending.
    appended = await store.log.append("s1", Entry(b"row 8", 1, digest(b"row 8"), "k8"))
    assert appended.first == 8
    assert await redis_client.hmget(KEYS.head, ["entries", "applied", "last_id"]) == [
        b"3",
        b"0",
        appended.log_id.encode(),
    ]
    assert await store.log.pending_count("s1") == 3

    # The first COMMIT adopts the whole-state hash as the checkpoint instead of deleting it.
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    head4 = await store.commits.commit(
        lease, NextVersion(3, published_of(4), pending[0], 7), [], entries=1
    )
    adopted = Checkpoint(state_key, 3, OLD_CURSOR, 6, cut=False)
    assert head4.checkpoint == adopted and head4.recovery_point == adopted
    assert await store.registry.get_head("s1") == head4
    assert await redis_client.exists(state_key)
    assert await redis_client.smembers(KEYS.blobs) == {head4.state_key.encode()}
    assert await redis_client.smembers(KEYS.checkpoints) == {state_key.encode()}
    assert await store.checkpoints.load_checkpoint("s1", adopted) == state_of(3)
    assert (await store.checkpoints.read_state_fields("s1", ["mean", "__scalars__"]))[
        1
    ] == published_of(4)
    assert await store.log.pending_count("s1") == 2
    assert await store.commits.commits_after("s1", 3) == [CommitRecord(4, pending[0], False)]
    assert [e.log_id for e in await store.log.log_between("s1", OLD_CURSOR, head4.cursor)] == [
        pending[0]
    ]
    # ... and the next commit keeps it too.
    head5 = await store.commits.commit(
        lease, NextVersion(4, published_of(5), pending[1], 8), [], entries=1
    )
    assert head5.checkpoint == adopted and await redis_client.exists(state_key)
    assert await store.log.pending_count("s1") == 1

    # The first checkpoint in pieces replaces it, with what it covers.
    point = await store.checkpoints.checkpoint(lease, 5, pending[1], 8, cut_fields(state_of(5)))
    assert point is not None and point.cut
    assert not await redis_client.exists(state_key)
    assert (await store.registry.get_head("s1")).checkpoint == point
    assert await redis_client.hget(KEYS.head, "checkpoint_layout") is None
    assert await redis_client.smembers(KEYS.checkpoints) == {point.key.encode()}
    assert await log_ids(redis_client) == [appended.log_id]
    assert await store.commits.commits_after("s1", 0) == []
    assert await store.checkpoints.load_checkpoint("s1", point) == state_of(5)
    assert await store.log.pending_count("s1") == 1


async def test_an_earlier_layout_committed_before_any_append_counts_its_pending_entries(
    store: SelectorStore, redis_client: aioredis.Redis
) -> None:
    state_key, pending = await earlier_layout(redis_client, "s1")
    lease = await store.leases.acquire_lease("s1", 60_000)
    assert lease is not None
    head = await store.commits.commit(
        lease, NextVersion(3, published_of(4), pending[0], 7), [], entries=1
    )
    assert head.recovery_point == Checkpoint(state_key, 3, OLD_CURSOR, 6, cut=False)
    assert await store.log.pending_count("s1") == 1
    # No APPEND wrote the head's last_id: the log's newest entry says what came last.
    assert await store.log.last_log_id("s1") == pending[1]
    assert await store.log.names_with_pending() == ["s1"]
    await store.commits.commit(lease, NextVersion(4, published_of(5), pending[1], 8), [], entries=1)
    assert await store.log.pending_count("s1") == 0
    assert await store.log.names_with_pending() == []
    assert await store.checkpoints.load_checkpoint("s1", head.recovery_point) == state_of(3)
    # Deleting it removes every key, the adopted checkpoint included.
    await store.registry.delete("s1")
    assert await keys_of(redis_client, "*") == set()
