"""The applier's door, verb by verb, against a real redis-server: a chunk appended here taken
(handed over and kicked), the direct path, waiting until applied, a checkpoint now, a selector
forgotten, a commit observed, and ``run`` applying what nobody kicked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from service.algorithms import get_method
from service.applier import Applier, Update
from service.config import Settings
from service.metrics import Metrics
from service.selectors import Selectors
from service.store.records import Entry, Head, SelectorMeta
from service.store.redis_store import SelectorStore
from service.wire.kinds import ValidChunk, chunk_format
from tests.support.api import make_settings

#: No checkpoint but the ones asked for, and no lingering unless a test asks.
RARE: dict[str, Any] = {
    "checkpoint_interval_seconds": 3600.0,
    "checkpoint_replay_seconds": 3600.0,
    "checkpoint_log_ratio": 1e9,
    "applier_linger_seconds": 0.0,
}


@dataclass
class Built:
    store: SelectorStore
    settings: Settings
    metrics: Metrics
    applier: Applier
    selectors: Selectors

    async def create(self, name: str) -> SelectorMeta:
        await self.selectors.lifecycle.create({"name": name, "method": "variance", "n_features": 3})
        return await self.store.registry.get_meta(name)

    async def append(self, meta: SelectorMeta, chunk: ValidChunk) -> str:
        entry = Entry(chunk.payload, chunk.items, chunk.digest, incarnation=meta.incarnation)
        outcome = await self.store.log.append(meta.name, entry)
        return outcome.log_id


def decoded(meta: SelectorMeta, rows: list[list[float]]) -> ValidChunk:
    """``rows`` as the route decodes them: the chunk, its payload, its digest."""
    kind = chunk_format(get_method(meta.method).chunk_kind)
    return kind.decode(json.dumps(rows).encode(), "application/json", meta, 2**30)


async def build(store: SelectorStore, redis_url: str, **overrides: Any) -> Built:
    settings = make_settings(redis_url, **{**RARE, **overrides})
    metrics = Metrics()
    applier = Applier(store, settings, metrics)
    await store.ensure_scripts()
    return Built(store, settings, metrics, applier, Selectors(store, applier, settings, metrics))


@pytest.fixture
async def built(store: SelectorStore, redis_url: str) -> AsyncIterator[Built]:
    made = await build(store, redis_url)
    try:
        yield made
    finally:
        await made.applier.close(2.0)


def state_of(applier: Applier, name: str) -> dict[str, Any]:
    held = applier.holds(name)
    assert held is not None
    return {field: np.asarray(value) for field, value in held.state.items()}


async def test_a_chunk_appended_here_is_applied_from_what_was_handed_over(built: Built) -> None:
    """``appended`` hands the decoded chunk to the drain it kicks: the drain folds in that chunk
    without reading the payload back (here the log holds other rows, so the state tells)."""
    plain, handed = await built.create("plain"), await built.create("handed")
    rows = decoded(plain, [[1.0, 2.0, 3.0], [4.0, 5.0, 7.0]])
    other = decoded(handed, [[9.0, 9.0, 9.0], [0.0, 0.0, 1.0]])
    first = await built.append(plain, rows)
    built.applier.appended(first, None, len(rows.payload), [(plain.name, plain.incarnation)])
    second = await built.append(handed, other)
    built.applier.appended(
        second, rows.chunk, len(other.payload), [(handed.name, handed.incarnation)]
    )
    for meta, log_id in ((plain, first), (handed, second)):
        settled = await built.applier.wait_applied(meta.name, log_id, 10.0, meta.incarnation)
        assert settled is not None
        # A commit that landed before the wait began is known only by its cursor (rejected
        # None, "cannot tell"); the two rows counted and the states below say it was applied.
        assert (settled.version, settled.items_seen) == (1, 2)
        assert not settled.rejected
    ours, theirs = state_of(built.applier, "plain"), state_of(built.applier, "handed")
    assert ours.keys() == theirs.keys()
    for field in ours:
        assert np.array_equal(ours[field], theirs[field]), field
    assert (await built.store.registry.get_head("handed")).version == 1


async def test_the_direct_path_applies_a_chunk_before_writing_it(
    store: SelectorStore, redis_url: str
) -> None:
    """``try_direct`` goes to the drain lingering with the lease and the state: applied and
    committed in one script; with no such drain here it writes nothing and says None."""
    built = await build(store, redis_url, applier_linger_seconds=5.0)
    try:
        meta = await built.create("direct")
        first = decoded(meta, [[1.0, 2.0, 3.0]])
        entry = Entry(first.payload, first.items, first.digest, incarnation=meta.incarnation)
        assert (
            await built.applier.try_direct(meta.name, meta.incarnation, first.chunk, entry) is None
        )
        assert await store.log.last_log_id(meta.name) is None  # nothing of it was written
        log_id = await built.append(meta, first)
        built.applier.appended(
            log_id, first.chunk, len(first.payload), [(meta.name, meta.incarnation)]
        )
        assert await built.applier.wait_applied(meta.name, log_id, 10.0) is not None
        second = decoded(meta, [[2.0, 3.0, 5.0], [1.0, 1.0, 1.0]])
        entry = Entry(
            second.payload, second.items, second.digest, "k2", incarnation=meta.incarnation
        )
        outcome = None
        for _ in range(200):  # the drain opens to direct chunks once its commit is done
            outcome = await built.applier.try_direct(
                meta.name, meta.incarnation, second.chunk, entry
            )
            if outcome is not None:
                break
            await asyncio.sleep(0.01)
        assert outcome is not None
        assert (outcome.applied_version, outcome.items_seen, outcome.duplicate) == (2, 3, False)
        head = await store.registry.get_head(meta.name)
        assert (head.version, head.items_seen, head.cursor) == (2, 3, outcome.log_id)
    finally:
        await built.applier.close(2.0)


async def test_waiting_times_out_then_its_fallback_applies_what_nobody_kicked(
    built: Built,
) -> None:
    meta = await built.create("waited")
    rows = decoded(meta, [[1.0, 2.0, 3.0]])
    log_id = await built.append(meta, rows)  # appended elsewhere: nobody here was told
    assert await built.applier.wait_applied(meta.name, log_id, 0.05, meta.incarnation) is None
    settled = await built.applier.wait_applied(meta.name, log_id, 10.0, meta.incarnation)
    assert settled is not None and settled.version == 1
    assert await built.applier.settle(meta.name, 10.0)


async def test_checkpoint_now_brings_the_checkpoint_to_the_head(built: Built) -> None:
    meta = await built.create("checked")
    rows = decoded(meta, [[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    log_id = await built.append(meta, rows)
    built.applier.appended(log_id, rows.chunk, len(rows.payload), [(meta.name, meta.incarnation)])
    assert await built.applier.wait_applied(meta.name, log_id, 10.0) is not None
    before = await built.store.registry.get_head(meta.name)
    assert (before.version, before.recovery_point.version) == (1, 0)
    assert (await built.applier.checkpoint_now(meta.name)).version == 1
    after = await built.store.registry.get_head(meta.name)
    assert (after.version, after.recovery_point.version) == (1, 1)


async def test_a_forgotten_selector_is_rebuilt_from_its_checkpoint_and_log(built: Built) -> None:
    meta = await built.create("forgotten")
    rows = decoded(meta, [[1.0, 2.0, 3.0]])
    log_id = await built.append(meta, rows)
    built.applier.appended(log_id, rows.chunk, len(rows.payload), [(meta.name, meta.incarnation)])
    assert await built.applier.wait_applied(meta.name, log_id, 10.0) is not None
    kept = state_of(built.applier, meta.name)
    built.applier.forget(meta.name)
    assert built.applier.holds(meta.name) is None
    more = decoded(meta, [[2.0, 2.0, 2.0]])
    log_id = await built.append(meta, more)
    built.applier.appended(log_id, more.chunk, len(more.payload), [(meta.name, meta.incarnation)])
    settled = await built.applier.wait_applied(meta.name, log_id, 10.0)
    assert settled is not None and settled.version == 2
    assert built.metrics.replayed_versions._value.get() == 1  # version 1 replayed, not held
    assert state_of(built.applier, meta.name).keys() == kept.keys()


async def test_observers_hear_every_commit_of_this_process(built: Built) -> None:
    heard: list[tuple[str, int, int]] = []

    def observer(meta: SelectorMeta, head: Head, update: Update) -> None:
        heard.append((meta.name, head.version, update.state_bytes))

    built.applier.observe(observer)
    meta = await built.create("observed")
    rows = decoded(meta, [[1.0, 2.0, 3.0]])
    log_id = await built.append(meta, rows)
    built.applier.appended(log_id, rows.chunk, len(rows.payload), [(meta.name, meta.incarnation)])
    assert await built.applier.wait_applied(meta.name, log_id, 10.0) is not None
    held = built.applier.holds(meta.name)
    assert held is not None
    assert heard == [("observed", 1, held.state_bytes)]


async def test_run_applies_what_was_appended_elsewhere_until_closed(built: Built) -> None:
    """``run``'s sweeper applies an entry nobody kicked or waits for; its listener hears the
    commit, so a reader's known head moves."""
    meta = await built.create("swept")
    running = asyncio.create_task(built.applier.run())
    try:
        rows = decoded(meta, [[1.0, 2.0, 3.0]])
        await built.append(meta, rows)
        for _ in range(300):
            if (await built.store.registry.get_head(meta.name)).version == 1:
                break
            await asyncio.sleep(0.02)
        assert (await built.store.registry.get_head(meta.name)).version == 1
    finally:
        await built.applier.close(2.0)
        running.cancel()
        await asyncio.wait([running], timeout=2.0)
    assert running.done()
