"""Reading committed state: descriptions, heads, and decoded arrays cached per state key."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from service.algorithms import get_method
from service.algorithms.base import AnyMethod, Mergeable, State
from service.algorithms.resampling import served_from_checkpoint, summary_fields_of
from service.applier import Applier, KnownHeads, resolved_params
from service.cache import LRU
from service.errors import CheckpointReplaced, CodecError, Conflict
from service.store.codec import SCALARS_FIELD, decode_array, decode_state
from service.store.records import Head, SelectorMeta, default_name
from service.store.redis_store import SelectorStore
from service.wire.kinds import ChunkFormat, chunk_format

#: Reads of the partitions' checkpoints tried before a replaced one is answered as a conflict.
CHECKPOINT_READ_ATTEMPTS = 5
#: A reader brings a partition's checkpoint up to date at most this often.
PARTITION_REFRESH_SECONDS = 1.0
#: Merged states of partitioned selectors kept (each is one selector's whole state).
MERGED_CACHED = 8
#: Longest wait for one segment read handed from a worker thread to the event loop.
SEGMENT_READ_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class SelectorMethod:
    """A selector's description, the method it runs, and that method's chunk kind."""

    meta: SelectorMeta
    method: AnyMethod
    kind: ChunkFormat


@dataclass(frozen=True)
class CurrentSelector(SelectorMethod):
    """A ``SelectorMethod`` with the head a reader answers from (a partitioned selector's
    merged one)."""

    head: Head


class StateReader:
    """Reads what is committed; decodes arrays off the event loop and caches small ones.

    Every version publishes what readers need (``published_fields``); the few fields a method
    serves from checkpoints are read from a checkpoint that ``bring_up_to_date`` (the applier's
    ``checkpoint_now``) first brings to the current version, so answers stay current.
    """

    def __init__(
        self,
        store: SelectorStore,
        bring_up_to_date: Callable[[str], Awaitable[Head]],
        heads: KnownHeads | None = None,
        cache_size: int = 64,
    ) -> None:
        self.store = store
        self.bring_up_to_date = bring_up_to_date
        #: Heads kept while no commit notice moved them (the applier's ``KnownHeads``).
        self.heads = heads if heads is not None else KnownHeads()
        self._arrays: LRU[tuple[str, str, tuple[str, ...]], dict[str, np.ndarray]] = LRU(cache_size)
        # When a reader last brought each partition's checkpoint up to date (monotonic).
        self._refreshed: dict[str, float] = {}
        # Merged states of partitioned selectors, per set of partition versions.
        self._merged: LRU[tuple[str, str], State] = LRU(MERGED_CACHED)

    async def meta(self, name: str) -> SelectorMeta:
        return await self.store.registry.get_meta(name)

    async def head(self, name: str) -> Head:
        meta = await self.store.registry.get_meta(name)
        if meta.partitioned:
            return (await self.merged(meta))[0]
        return await self.store.registry.get_head(name)

    def _may_refresh(self, partition: str) -> bool:
        """Whether a reader may bring ``partition``'s checkpoint up to date now (once a second
        at most: a checkpoint is the whole state)."""
        now = time.monotonic()
        if now - self._refreshed.get(partition, 0.0) < PARTITION_REFRESH_SECONDS:
            return False
        self._refreshed[partition] = now
        return True

    async def partition_heads(self, meta: SelectorMeta) -> list[Head]:
        return [
            await self.store.registry.get_head(meta.partition(i).name)
            for i in range(meta.partitions)
        ]

    async def merged(self, meta: SelectorMeta) -> tuple[Head, State]:
        """A partitioned selector as one: every partition's summary merged by the method
        (``Mergeable.merge``, from the initial state, in partition order), with the combined
        head. Cached per set of partition versions.

        A partition's summary is what its current version publishes; where the method serves
        summary fields from checkpoints (FSDS's sketch), it is the partition's last checkpoint,
        brought up to date at most once a second per partition (each time is a checkpoint of
        the whole sketch): merged answers then lag a busy partition by up to a second and its
        checkpoint's writing, and the version vector says exactly which versions they hold.
        """
        method = get_method(meta.method)
        if not isinstance(method, Mergeable):  # pragma: no cover - refused at creation
            raise CodecError(
                f"selector '{meta.name}' is partitioned but {method.name} cannot merge"
            )
        params = resolved_params(meta)
        fields = [SCALARS_FIELD, *summary_fields_of(method, params)]
        names = [meta.partition(i).name for i in range(meta.partitions)]
        summaries: list[Mapping[str, bytes | memoryview]] = []
        if any(served_from_checkpoint(method.served_from_checkpoints, f) for f in fields):
            for attempt in range(CHECKPOINT_READ_ATTEMPTS):
                combined, heads = await self._checkpoint_heads(names)
                cached = self._merged.get((meta.name, combined.state_key))
                if cached is not None:
                    return combined, cached
                try:
                    summaries = [
                        await self._checkpoint_summary(part, at, fields)
                        for part, at in zip(names, heads, strict=True)
                    ]
                    break
                except CheckpointReplaced:
                    # A partition's applier wrote a newer checkpoint meanwhile (they follow
                    # each other quickly under load): the heads again, then the newer ones.
                    if attempt == CHECKPOINT_READ_ATTEMPTS - 1:
                        raise
        else:
            heads = []
            for part in names:
                head, raw = await self.store.checkpoints.read_state_fields(part, fields)
                heads.append(head)
                summaries.append(raw)
            combined = _combined(heads)
            cached = self._merged.get((meta.name, combined.state_key))
            if cached is not None:
                return combined, cached

        def merge() -> State:
            state = method.initial_state(params)
            for raw in summaries:
                state = method.merge(state, params, decode_state(raw))
            return state

        state = await asyncio.to_thread(merge)
        self._merged.put((meta.name, combined.state_key), state)
        return combined, state

    async def _checkpoint_heads(self, names: Sequence[str]) -> tuple[Head, list[Head]]:
        """Each partition's head as of its last checkpoint (brought up to date at most once a
        second per partition), and their combination."""
        heads = []
        for part in names:
            head = await self.store.registry.get_head(part)
            if head.recovery_point.version < head.version and self._may_refresh(part):
                head = await self.bring_up_to_date(part)
            point = head.recovery_point
            heads.append(
                Head(
                    point.version, point.cursor, point.items_seen, point.key, head.updated_at, point
                )
            )
        return _combined(heads), heads

    async def _checkpoint_summary(
        self, part: str, at: Head, fields: Sequence[str]
    ) -> dict[str, bytes | memoryview]:
        assert at.checkpoint is not None
        stored = await self.store.checkpoints.load_checkpoint(part, at.checkpoint)
        return {f: v for f, v in stored.items() if f in fields}

    async def current(self, name: str) -> CurrentSelector:
        """``described``, and the head (a partitioned selector's merged one): from memory when
        no commit was announced since this process last read it (``KnownHeads``), else usually
        one round trip (``Registry.meta_and_head``)."""
        meta: SelectorMeta | None = self.store.registry.trusted_meta(name)
        head = self.heads.get(name)
        if meta is None or head is None or head.incarnation != meta.incarnation:
            mark = self.heads.mark()
            meta, read = await self.store.registry.meta_and_head(name)
            if read is None:
                head = (await self.merged(meta))[0]
            else:
                head = read
                self.heads.read(name, head, mark)
        method = get_method(meta.method)
        return CurrentSelector(meta, method, chunk_format(method.chunk_kind), head)

    async def described(self, name: str) -> SelectorMethod:
        """The selector's description, its method and its method's chunk kind."""
        meta = await self.store.registry.get_meta(name)
        method = get_method(meta.method)
        return SelectorMethod(meta, method, chunk_format(method.chunk_kind))

    async def arrays(
        self, name: str, fields: Sequence[str], cache: bool = True
    ) -> tuple[Head, dict[str, np.ndarray]]:
        """Arrays of the committed state, read atomically with its head.

        Cached per state key (an immutable version), unless ``cache`` is false (large arrays
        read for one answer only).
        """
        wanted = tuple(fields)
        meta = await self.store.registry.get_meta(name)
        if meta.partitioned:
            head, state = await self.merged(meta)
            return head, {f: np.asarray(state[f]) for f in wanted}
        head = await self.store.registry.get_head(name)
        cached = self._arrays.get((name, head.state_key, wanted))
        if cached is not None:
            return head, cached
        head, raw = await self._read(name, wanted)
        missing = [f for f in wanted if f not in raw]
        if missing:
            raise CodecError(f"state of '{name}' at version {head.version} has no {missing}")
        arrays = await asyncio.to_thread(lambda: {f: decode_array(raw[f]) for f in wanted})
        if cache:
            self._arrays.put((name, head.state_key, wanted), arrays)
        return head, arrays

    async def state(self, name: str, fields: Sequence[str]) -> tuple[Head, State]:
        """The scalars and the named array fields of the committed state, decoded."""
        meta = await self.store.registry.get_meta(name)
        if meta.partitioned:
            head, merged = await self.merged(meta)
            wanted = set(fields)
            return head, {
                f: v for f, v in merged.items() if f in wanted or not isinstance(v, np.ndarray)
            }
        head, raw = await self._read(name, [SCALARS_FIELD, *fields])
        return head, await asyncio.to_thread(decode_state, raw)

    async def _read(
        self, name: str, fields: Sequence[str]
    ) -> tuple[Head, Mapping[str, bytes | memoryview]]:
        """Encoded fields of the current version with its head: published ones as they are,
        and (if any is asked for) the method's checkpoint-served ones from a checkpoint brought
        up to date (the answer is then that checkpoint's version)."""
        meta = await self.store.registry.get_meta(name)
        served = get_method(meta.method).served_from_checkpoints
        if not any(served_from_checkpoint(served, f) for f in fields):
            return await self.store.checkpoints.read_state_fields(name, fields)
        await self.bring_up_to_date(name)
        snapshot = await self.store.checkpoints.snapshot(name)
        return snapshot.head, {f: v for f, v in snapshot.state.items() if f in fields}

    async def item_names(
        self, meta: SelectorMeta, kind: ChunkFormat, indices: Sequence[int]
    ) -> list[str]:
        """Names of features by index: given on arrival (feature streams; a selector attached
        to a stream of them: the names its stream's items were given) or at creation."""
        if not kind.names_on_arrival:
            return [meta.feature_name(i) for i in indices]
        if meta.stream is not None:
            at = [kind.stream_feature(i, meta.stream_base) for i in indices]
            given = await self.store.streams.stream_item_names(meta.stream, at)
        else:
            given = await self.store.registry.item_names(meta.name, indices)
        return [g or default_name(i) for g, i in zip(given, indices, strict=True)]

    async def feature_labels(
        self, meta: SelectorMeta, kind: ChunkFormat, wanted: Iterable[tuple[str | None, int]]
    ) -> dict[tuple[str | None, int], str]:
        """The name of each ``(view, index)``, as ``GET .../top`` names it: the names given
        (at creation, or on arrival: ``item_names``), else ``f<index>`` (within its view)."""
        wanted = set(wanted)
        if meta.views:
            offsets, start = {}, 0
            for view, dim in meta.views:
                offsets[view] = start
                start += dim
            return {
                (view, index): meta.feature_names[offsets[view or ""] + index]
                if meta.feature_names
                else default_name(index)
                for view, index in wanted
            }
        indices = sorted({index for _view, index in wanted})
        labels = await self.item_names(meta, kind, indices)
        return {(None, index): label for index, label in zip(indices, labels, strict=True)}

    def segment_reader(self, name: str) -> Callable[[str], np.ndarray]:
        """``read(id)`` for a worker thread: fetches a segment on the event loop, decodes it."""
        loop = asyncio.get_running_loop()

        async def fetch(segment_id: str) -> bytes:
            return await self.store.checkpoints.get_segment(name, segment_id)

        def read(segment_id: str) -> np.ndarray:
            future = asyncio.run_coroutine_threadsafe(fetch(segment_id), loop)
            return decode_array(future.result(SEGMENT_READ_TIMEOUT_SECONDS))

        return read


def _combined(heads: Sequence[Head]) -> Head:
    """The head of a partitioned selector: its partitions' versions and items summed, the
    version vector kept, and a state key naming exactly that set of versions."""
    return Head(
        version=sum(h.version for h in heads),
        cursor=heads[0].cursor,
        items_seen=sum(h.items_seen for h in heads),
        state_key="merged:" + "|".join(h.state_key for h in heads),
        updated_at=max(h.updated_at for h in heads),
        partition_versions=tuple(h.version for h in heads),
    )


@dataclass(frozen=True)
class Seen:
    """What an answer counts: ``rows_seen`` for row streams, ``features_seen`` for feature
    streams (the other one is None, and left out of the answer)."""

    rows_seen: int | None
    features_seen: int | None

    def as_dict(self) -> dict[str, int]:
        return {
            k: v
            for k, v in (("rows_seen", self.rows_seen), ("features_seen", self.features_seen))
            if v is not None
        }


def seen(kind: ChunkFormat, head: Head) -> Seen:
    """The head's count, under the name the kind gives it (the other one None)."""
    return counted(kind, head.items_seen)


def counted(kind: ChunkFormat, items_seen: int) -> Seen:
    """``items_seen`` under the name the kind gives it (the other one None)."""
    counts: dict[str, int | None] = {"rows_seen": None, "features_seen": None}
    counts[kind.seen_field] = items_seen
    return Seen(**counts)


async def settle(applier: Applier, name: str, seconds: float, retried: str) -> None:
    """Wait (at most ``seconds``) until everything appended to ``name`` so far is applied;
    Conflict if it is not, saying when to retry the ``retried`` request (a merge, an
    export)."""
    if not await applier.settle(name, seconds):
        raise Conflict(
            f"selector '{name}' still has chunks being applied; retry the {retried} once "
            f"GET /v1/selectors/{name} shows pending_entries 0"
        )
