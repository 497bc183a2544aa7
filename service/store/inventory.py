"""What the selector registry holds, read in bounded pieces: pages of names, and the usage of
each selector (pending log entries, state bytes) for the gauges of ``/metrics``.

The registry is one Redis set of names (``{prefix}:selectors``). A page costs one ``SMEMBERS``
(names only, a few bytes each) sorted here, plus reads of at most ``limit`` selectors; a page
filtered by what descriptions say (a method, temporary) reads at most ``MAX_SCANNED`` of them,
pipelined. Usage reads are pipelined in batches and capped.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.algorithms import get_method
from service.algorithms.drift import STABLE_H, compare
from service.errors import CodecError, InvalidInput
from service.store.core import UNREACHABLE
from service.store.keys import (
    is_partition,
    registry_key,
    sources_registry_key,
    streams_registry_key,
)
from service.store.monitoring_records import Baseline, HistoryEntry
from service.store.records import SelectorMeta
from service.store.redis_errors import map_redis_errors
from service.store.redis_store import SelectorStore

_BATCH = 256
#: Descriptions one filtered page reads at most (``Inventory.page``'s ``accept``).
MAX_SCANNED = 10_000


@dataclass(frozen=True)
class NamePage:
    """Names of one page, sorted, and the ``after`` of the next page (None: this is the last)."""

    names: list[str]
    next: str | None


@dataclass(frozen=True)
class SelectorUsage:
    name: str
    #: Log entries appended and not yet applied (the head's counters; the log itself is kept
    #: until a checkpoint covers it).
    pending_entries: int
    #: Bytes Redis reports for the committed state (``MEMORY USAGE``, every field sampled).
    state_bytes: int
    #: The stability index of the newest version's top 10 (None: not estimated) ...
    stability: float | None = None
    #: ... and how far that top 10 moved since the baseline (None: no baseline yet).
    drift: float | None = None


@dataclass(frozen=True)
class TenantUsage:
    """What the names of one tenant (those starting with its prefix) hold."""

    selectors: int
    #: The state bytes the selectors declare (``state_sizes`` of their methods, times their
    #: partitions), learned or not.
    state_bytes: int
    alerts: int
    streams: int
    sources: int


@dataclass(frozen=True)
class Usage:
    #: Every selector in the registry.
    selectors: int
    #: The first ``limit`` selectors by name (a bound on the gauges' label sets).
    measured: list[SelectorUsage]


def declared_state_bytes(meta: SelectorMeta) -> int:
    """The bytes a selector's state takes once it has learned: its method's ``state_sizes``
    for its parameters (resolved as stored, for its size), times its partitions."""
    method = get_method(meta.method)
    sizes = method.state_sizes(method.resolve_params(meta.params, meta.size, stored=True))
    return sum(sizes.values()) * max(meta.partitions, 1)


def _accepted(raw: bytes | str, accept: Callable[[SelectorMeta], bool]) -> bool:
    """Whether ``accept`` takes the stored description ``raw``; a damaged one is taken (its
    listing says it is unreadable)."""
    try:
        return accept(SelectorMeta.from_json(raw, None))
    except CodecError:
        return True


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class Inventory:
    """Bounded reads of the registry of one :class:`SelectorStore`."""

    def __init__(self, store: SelectorStore) -> None:
        self.store = store
        self._registry = registry_key(store.prefix)

    @map_redis_errors
    async def names(self) -> list[str]:
        """Every registered selector's name, sorted (partitions show as their selector)."""
        registered = (_text(n) for n in await self.store.redis.smembers(self._registry))
        return sorted(n for n in registered if not is_partition(n))

    @map_redis_errors
    async def page(
        self,
        limit: int,
        after: str | None,
        visible: Callable[[str], bool],
        accept: Callable[[SelectorMeta], bool] | None = None,
    ) -> NamePage:
        """At most ``limit`` names after ``after`` that ``visible`` accepts and that still have
        a description (that ``accept`` accepts, if given); ``next`` is set when more may follow.

        Visibility (a key's prefix, a name filter) filters before paging, so a caller's pages
        are full pages of what it may see. ``accept`` reads the descriptions (pipelined, a
        batch at a time); at most ``MAX_SCANNED`` of them per page, after which the page ends
        early, with ``next`` the last name looked at: a filter that matches few of many
        selectors answers short pages rather than one long request.
        """
        if limit < 1:
            raise InvalidInput(f"limit must be >= 1; got {limit}")
        names = await self.names()
        start = bisect.bisect_right(names, after) if after is not None else 0
        chosen: list[str] = []
        position = start
        scanned = 0
        # Registry entries whose description is gone (a delete in flight) are skipped, so
        # read a batch at a time until the page is full.
        while position < len(names) and len(chosen) <= limit:
            if accept is not None and scanned >= MAX_SCANNED:
                return NamePage(chosen, names[position - 1])
            batch = [n for n in names[position : position + _BATCH] if visible(n)]
            position += _BATCH
            described = self.store.keyed(batch)
            metas = [self.store.keys(name).meta for name in described]
            if accept is None:
                exists = await self.store.read_each(metas, lambda pipe, key: pipe.exists(key))
                # A selector whose master is down (UNREACHABLE) is listed: the registry says so.
                chosen.extend(n for n, e in zip(described, exists, strict=True) if e)
                continue
            scanned += len(described)
            raw = await self.store.read_each(metas, lambda pipe, key: pipe.get(key))
            for name, meta in zip(described, raw, strict=True):
                if meta is UNREACHABLE:
                    chosen.append(name)  # listed, as above: the reads say it is unreachable
                elif meta is not None and _accepted(meta, accept):
                    chosen.append(name)
        if len(chosen) > limit:
            return NamePage(chosen[:limit], chosen[limit - 1])
        return NamePage(chosen, None)

    @map_redis_errors
    async def usage(self, limit: int) -> Usage:
        """Pending entries and state bytes of the first ``limit`` selectors by name."""
        names = await self.names()
        measured: list[SelectorUsage] = []
        for start in range(0, min(len(names), limit), _BATCH):
            batch = self.store.keyed(names[start : min(start + _BATCH, limit)])
            heads = [self.store.keys(name).head for name in batch]
            replies = await self.store.read_each(
                heads, lambda pipe, key: pipe.hmget(key, ["entries", "applied", "state_key"])
            )
            # A selector deleted between the listing and the reads has no head, one whose
            # master is down cannot be read: both are skipped.
            found = []
            for name, reply in zip(batch, replies, strict=True):
                if reply is UNREACHABLE or reply[2] is None:
                    continue
                entries, applied, state_key = reply
                if entries is None:  # a head of the earlier layout: its log is what is pending
                    pending = await self.store.log.pending_count(name)
                else:
                    pending = max(int(entries) - int(applied or 0), 0)
                found.append((name, pending, _text(state_key)))
            sizes = await self.store.read_each(
                [state_key for _, _, state_key in found],
                lambda pipe, key: pipe.memory_usage(key, samples=0),
                raise_on_error=False,
            )
            watched = await self._rankings([name for name, _, _ in found])
            for (name, length, _), size, (stability, drift) in zip(
                found, sizes, watched, strict=True
            ):
                unknown = size is None or size is UNREACHABLE or isinstance(size, Exception)
                measured.append(
                    SelectorUsage(name, length, 0 if unknown else int(size), stability, drift)
                )
        return Usage(selectors=len(names), measured=measured)

    async def tenant_usage(self, prefix: str) -> TenantUsage:
        """What the selectors, streams and sources whose names start with ``prefix`` hold."""
        return (await self.tenant_usages([prefix]))[prefix]

    @map_redis_errors
    async def tenant_usages(self, prefixes: Sequence[str]) -> dict[str, TenantUsage]:
        """``tenant_usage`` of each of ``prefixes`` (nested tenants: each counts every name
        under it) in one pass: one read of each registry, and one pipelined read per selector
        under any of them."""
        if not prefixes:
            return {}
        under = {prefix: [0, 0, 0] for prefix in prefixes}  # selectors, declared, alerts
        names = [n for n in await self.names() if any(n.startswith(p) for p in prefixes)]
        for start in range(0, len(names), _BATCH):
            batch = self.store.keyed(names[start : start + _BATCH])
            metas = await self.store.read_each(
                [self.store.keys(name).meta for name in batch], lambda pipe, key: pipe.get(key)
            )
            counts = await self.store.read_each(
                [self.store.keys(name).alerts for name in batch], lambda pipe, key: pipe.hlen(key)
            )
            for name, raw, count in zip(batch, metas, counts, strict=True):
                declared = 0
                if raw is not None and raw is not UNREACHABLE:
                    declared = declared_state_bytes(SelectorMeta.from_json(raw, None))
                for prefix, held in under.items():
                    if name.startswith(prefix):
                        held[0] += 1
                        held[1] += declared
                        held[2] += count if isinstance(count, int) else 0
        streams = [
            _text(n)
            for n in await self.store.redis.smembers(streams_registry_key(self.store.prefix))
        ]
        sources = [
            _text(n) for n in await self.store.redis.hkeys(sources_registry_key(self.store.prefix))
        ]
        return {
            prefix: TenantUsage(
                selectors=held[0],
                state_bytes=held[1],
                alerts=held[2],
                streams=sum(1 for n in streams if n.startswith(prefix)),
                sources=sum(1 for n in sources if n.startswith(prefix)),
            )
            for prefix, held in under.items()
        }

    async def _rankings(self, names: list[str]) -> list[tuple[float | None, float | None]]:
        """Each selector's newest stability (of its top ``stable_h``: 10, or its features less
        one) and drift since its baseline, from its newest history entry and its baseline: two
        reads each, pipelined."""
        keys: list[str] = []
        for name in names:
            k = self.store.keys(name)
            keys.extend((k.history, k.baseline))
        replies = await self.store.read_each(
            keys,
            lambda pipe, key: pipe.lindex(key, 0) if key.endswith(":history") else pipe.get(key),
            raise_on_error=False,
        )
        out: list[tuple[float | None, float | None]] = []
        for raw_entry, raw_baseline in zip(replies[::2], replies[1::2], strict=True):
            out.append(_watched(raw_entry, raw_baseline))
        return out


def _watched(raw_entry: object, raw_baseline: object) -> tuple[float | None, float | None]:
    """The stability and the drift a history entry and a baseline say (None where either is
    missing, unreadable or unreachable)."""
    if not isinstance(raw_entry, bytes | str):
        return None, None
    try:
        entry = HistoryEntry.from_json(raw_entry)
        baseline = (
            Baseline.from_json(raw_baseline) if isinstance(raw_baseline, bytes | str) else None
        )
    except CodecError:
        return None, None
    stability, h = None, STABLE_H
    single = len(entry.rankings) == 1 and entry.rankings[0].view is None
    if entry.stability is not None and single:
        # The stability a version records is its top stable_h's: 10, or on a selector of 10
        # or fewer features its features less one; the drift is of the same top.
        stability, h = float(entry.stability["index"]), int(entry.stability["h"])
    drift = None
    if baseline is not None:
        drift = compare(baseline.entry.rankings, entry.rankings, h).drift
    return stability, drift
