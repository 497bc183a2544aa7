"""Replay is exact: a selector rebuilt from its checkpoint and the log goes on bit for bit.

Checkpoints are made rare here (``RARE``), so versions pile up after the last one; a second
app on the same Redis (a new applier: nothing in memory) then has to rebuild each selector
from its checkpoint and the commit records before it applies anything. Every answer it gives
afterwards must equal that of an app that did everything without a restart, and the state an
in-process run of the method reaches on the same chunks. Rejected entries, merges and
coalesced batches replay as they were first applied; so do states rebuilt before every drain
(no memory for them), states checkpointed in the background while applying went on, and a
selector the earlier layout wrote (its whole state under the head, no checkpoint).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import pytest
from fastapi import FastAPI

from service.algorithms import METHODS, get_method
from service.algorithms.base import (
    SEGMENT_PREFIX,
    Clusters,
    Mergeable,
    Projects,
    SelectsColumns,
    State,
)
from service.algorithms.resampling import summary_fields_of
from service.applier import resolved_params
from service.config import Settings
from service.store.codec import encode_state
from service.store.keys import SelectorKeys
from service.store.records import CommitRecord, SelectorMeta
from service.store.redis_store import SelectorStore
from service.wire.kinds import chunk_format
from tests.support.api import make_settings, running_app, wait_for
from tests.support.archive import SCENARIOS, answers, create, export, push, weights

#: Checkpoints only when something asks for one (an export, a checkpoint-served read). No
#: lingering: a forced checkpoint would wait for the lease a lingering applier holds.
RARE: dict[str, Any] = {
    "checkpoint_interval_seconds": 3600.0,
    "checkpoint_replay_seconds": 3600.0,
    "checkpoint_log_ratio": 1e9,
    "applier_linger_seconds": 0.0,
}


def rare(redis_url: str, **overrides: Any) -> Settings:
    return make_settings(redis_url, **RARE, **overrides)


def chunk_of(meta: SelectorMeta, body: Any) -> Any:
    """A JSON body as the route decodes it (the same validation, the same arrays)."""
    kind = chunk_format(get_method(meta.method).chunk_kind)
    return kind.decode(json.dumps(body).encode(), "application/json", meta, 2**30).chunk


def without_segments(state: State) -> State:
    """What the applier keeps of an updated state (segments are written once, apart)."""
    return {f: v for f, v in state.items() if not f.startswith(SEGMENT_PREFIX)}


def run_in_process(meta: SelectorMeta, batches: Sequence[Sequence[Any]]) -> State:
    """The method itself on the same bodies, one update per batch (chunks joined as the
    applier joins them), from its initial state."""
    method = get_method(meta.method)
    kind = chunk_format(method.chunk_kind)
    state = method.initial_state(resolved_params(meta))
    for batch in batches:
        joined = kind.join([chunk_of(meta, body) for body in batch])
        state = without_segments(method.update(state, resolved_params(meta), joined))
    return state


def hot_state(app: FastAPI, name: str) -> State | None:
    """The state this app's applier holds in memory for ``name`` (None: not held)."""
    hot = app.state.runtime.selectors.applier.holds(name)
    return None if hot is None else dict(hot.state)


async def replayed_versions(http: httpx.AsyncClient) -> float:
    """``sift_replayed_versions_total`` of this app (versions re-applied from the log)."""
    text = (await http.get("/metrics")).text
    match = re.search(r"^sift_replayed_versions_total (\S+)$", text, re.MULTILINE)
    assert match is not None, "the replay counter is not exported"
    return float(match.group(1))


async def checkpointed(store: SelectorStore, name: str) -> dict[str, bytes | memoryview]:
    """The encoded whole state of the selector's current checkpoint."""
    head = await store.registry.get_head(name)
    return await store.checkpoints.load_checkpoint(name, head.recovery_point)


async def everything(http: httpx.AsyncClient, name: str, method: str) -> dict[str, Any]:
    """Every answer a client reads of a selector (without its name and times), including the
    capability reads served from published fields or from a checkpoint brought up to date."""
    out = await answers(http, name, method)
    offered = METHODS[method]
    if isinstance(offered, Projects):
        projection = await http.get(f"/v1/selectors/{name}/projection")
        assert projection.status_code == 200, projection.text
        out["projection"] = projection.json()
    if isinstance(offered, SelectsColumns):
        diverse = await http.get(
            f"/v1/selectors/{name}/top", params={"h": 2, "strategy": "diverse"}
        )
        assert diverse.status_code == 200, diverse.text
        out["diverse"] = diverse.json()
    if isinstance(offered, Clusters):
        clusters = await http.post(f"/v1/selectors/{name}/cluster", json={"k": 2, "seed": 0})
        assert clusters.status_code == 200, clusters.text
        out["clusters"] = clusters.json()
    for answer in out.values():
        if isinstance(answer, dict):
            answer.pop("name", None)
            answer.pop("updated_at", None)
    return out


def answered(response: dict[str, Any]) -> dict[str, Any]:
    """A push's answer without what differs between two selectors (the log id)."""
    return {k: v for k, v in response.items() if k != "log_id"}


@pytest.mark.parametrize("method", sorted(METHODS))
async def test_a_restarted_app_replays_every_method_exactly(
    redis_url: str, redis_client: Any, method: str
) -> None:
    scenario = SCENARIOS[method]
    before, during, after = 2, 3, 2  # chunks before the checkpoint, after it, after the restart
    total = before + during + after
    bodies = [scenario.chunk(i) for i in range(total)]
    store = SelectorStore(redis_client)
    reference: list[dict[str, Any]] = []

    async with running_app(rare(redis_url)) as (app, http):
        await create(http, "ref", method)
        await create(http, "re", method)
        for i in range(before):
            reference.append(answered(await push(http, "ref", method, i)))
            await push(http, "re", method, i)
        # An export brings the checkpoint to the current version: the applier's own state.
        await export(http, "re")
        head = await store.registry.get_head("re")
        assert head.checkpoint is not None and head.checkpoint.version == head.version == before
        meta = await store.registry.get_meta("re")
        held = hot_state(app, "re")
        assert held is not None
        assert await checkpointed(store, "re") == encode_state(held)
        assert encode_state(held) == encode_state(
            run_in_process(meta, [[b] for b in bodies[:before]])
        )
        for i in range(before, before + during):
            reference.append(answered(await push(http, "ref", method, i)))
            await push(http, "re", method, i)
        for i in range(before + during, total):
            reference.append(answered(await push(http, "ref", method, i)))

    # Versions accumulated after the checkpoint: only the log and the commit records hold them.
    head = await store.registry.get_head("re")
    assert head.checkpoint is not None
    assert (head.checkpoint.version, head.version) == (before, before + during)
    records = await store.commits.commits_after("re", head.checkpoint.version)
    assert [r.version for r in records] == list(range(before + 1, before + during + 1))
    replayable = await store.log.log_between("re", head.checkpoint.cursor, head.cursor)
    assert len(replayable) == during

    async with running_app(rare(redis_url)) as (app, http):
        assert hot_state(app, "re") is None  # a new applier holds nothing
        for i in range(before + during, total):
            # The answers after the rebuild (decisions, counts) are the uninterrupted ones.
            assert answered(await push(http, "re", method, i)) == reference[i]
        assert await replayed_versions(http) == during

        np.testing.assert_array_equal(await weights(http, "re"), await weights(http, "ref"))
        per_chunk = run_in_process(meta, [[body] for body in bodies])
        expected = get_method(method).weights(per_chunk, resolved_params(meta))
        np.testing.assert_array_equal(await weights(http, "re"), expected)
        replayed = await everything(http, "re", method)
        if get_method(method).served_from_checkpoints:
            # Its reads of checkpoint-served fields brought the checkpoint to the head.
            head = await store.registry.get_head("re")
            assert head.recovery_point.version == head.version == total
        assert replayed == await everything(http, "ref", method)

        # A checkpoint forced now (an export) holds the rebuilt applier's state, which is the
        # in-process state: replayed exactly, and exactly what it went on from.
        await export(http, "re")
        head = await store.registry.get_head("re")
        assert head.checkpoint is not None and head.checkpoint.version == head.version == total
        held = hot_state(app, "re")
        assert held is not None
        assert await checkpointed(store, "re") == encode_state(held) == encode_state(per_chunk)


@pytest.mark.parametrize("method", sorted(METHODS))
async def test_an_applier_with_room_for_one_state_rebuilds_the_other_exactly(
    redis_url: str, redis_client: Any, method: str
) -> None:
    """With no memory to spare for states (``SIFT_HOT_STATE_BYTES=0`` keeps only the newest),
    two selectors fed in turn evict each other: every drain starts with a rebuild from the
    checkpoint and the whole log, and the results stay exact."""
    pushes = 4
    bodies = [SCENARIOS[method].chunk(i) for i in range(pushes)]
    store = SelectorStore(redis_client)
    async with running_app(rare(redis_url, hot_state_bytes=0)) as (app, http):
        for name in ("a", "b"):
            await create(http, name, method)
        for i in range(pushes):
            assert answered(await push(http, "a", method, i)) == answered(
                await push(http, "b", method, i)
            )
            assert hot_state(app, "a") is None  # b's state took the only place
        # Push i of each replayed the i versions before it.
        assert await replayed_versions(http) == pushes * (pushes - 1)
        meta = await store.registry.get_meta("a")
        expected = get_method(method).weights(
            run_in_process(meta, [[body] for body in bodies]), resolved_params(meta)
        )
        np.testing.assert_array_equal(await weights(http, "a"), expected)
        np.testing.assert_array_equal(await weights(http, "b"), expected)
        assert await everything(http, "a", method) == await everything(http, "b", method)


async def test_rejected_columns_replay_as_their_placeholder(
    redis_url: str, redis_client: Any
) -> None:
    """OFS: a rejected chunk of columns left zero columns in its place (they keep the indices
    of later columns); a rebuild applies the same zero columns, not nothing, not the chunk."""
    n = 40
    rng = np.random.default_rng(0)
    bodies: list[dict[str, Any]] = [
        {"columns": rng.standard_normal((1, n)).tolist()},
        # Ten independent columns would all be kept: over the state limit, so rejected.
        {"columns": rng.standard_normal((10, n)).tolist(), "names": [f"p{i}" for i in range(10)]},
        {"columns": [np.zeros(n).tolist()], "names": ["late"]},
        {"columns": rng.standard_normal((1, n)).tolist(), "names": ["after"]},
        {"columns": rng.standard_normal((1, n)).tolist(), "names": ["last"]},
    ]
    limits = {"max_state_bytes": 4 * 8 * n * 3}
    store = SelectorStore(redis_client)

    async def push_columns(http: httpx.AsyncClient, name: str, i: int) -> httpx.Response:
        return await http.post(f"/v1/selectors/{name}/features", json=bodies[i])

    async with running_app(rare(redis_url, **limits)) as (_app, http):
        for name in ("ref", "re"):
            created = await http.post(
                "/v1/selectors", json={"name": name, "method": "ofs", "n_samples": n}
            )
            assert created.status_code == 201, created.text
        rejected_id = ""
        for i in range(3):
            for name in ("ref", "re"):
                response = await push_columns(http, name, i)
                assert response.status_code == (422 if i == 1 else 200), response.text
                if response.status_code == 422:
                    rejected_id = response.json()["log_id"]
        for i in range(3, 5):
            assert (await push_columns(http, "ref", i)).status_code == 200
    records = await store.commits.commits_after("re", 0)
    assert [r.rejected for r in records] == [False, True, False]
    assert records[1].cursor == rejected_id

    async with running_app(rare(redis_url, **limits)) as (_app, http):
        for i in range(3, 5):
            first = await push_columns(http, "re", i)
            assert first.status_code == 200, first.text
            # Indices after the rejected columns are those of the uninterrupted selector.
            assert first.json()["decisions"][0]["index"] == 11 + (i - 3) + 1
        assert await replayed_versions(http) == 3
        status = (await http.get(f"/v1/selectors/re/chunks/{rejected_id}")).json()
        assert status["status"] == "rejected"
        assert await everything(http, "re", "ofs") == await everything(http, "ref", "ofs")
        np.testing.assert_array_equal(await weights(http, "re"), await weights(http, "ref"))

    meta = await store.registry.get_meta("re")
    zeros = {"columns": np.zeros((10, n)).tolist()}
    expected = run_in_process(meta, [[bodies[0]], [zeros], *[[b] for b in bodies[2:]]])
    assert await checkpointed_after_export(redis_url, store, "re") == encode_state(expected)


async def checkpointed_after_export(redis_url: str, store: SelectorStore, name: str) -> Any:
    """The whole state of ``name`` at its head, written by a forced checkpoint of a new app."""
    async with running_app(rare(redis_url)) as (_app, http):
        await export(http, name)
    head = await store.registry.get_head(name)
    assert head.recovery_point.version == head.version
    return await store.checkpoints.load_checkpoint(name, head.recovery_point)


async def test_rejected_rows_replay_as_nothing(redis_url: str, redis_client: Any) -> None:
    """OCFS: a rejected chunk of rows left nothing behind; a rebuild skips it again."""
    m = 50

    def labelled_rows(classes: list[int], per_class: int = 2) -> dict[str, Any]:
        labels = [c for c in classes for _ in range(per_class)]
        return {"rows": [[float(c + j % 3) for j in range(m)] for c in labels], "labels": labels}

    bodies = [
        labelled_rows([0, 1]),
        labelled_rows(list(range(2, 22))),  # twenty new classes: over the state limit
        labelled_rows([1, 0], 3),
        labelled_rows([0]),
    ]
    limits = {"max_state_bytes": 4096}
    store = SelectorStore(redis_client)
    async with running_app(rare(redis_url, **limits)) as (_app, http):
        for name in ("ref", "re"):
            created = await http.post(
                "/v1/selectors", json={"name": name, "method": "ocfs", "n_features": m}
            )
            assert created.status_code == 201, created.text
            for i in range(3):
                response = await http.post(f"/v1/selectors/{name}/chunks", json=bodies[i])
                assert response.status_code == (422 if i == 1 else 200), response.text
        assert (await http.post("/v1/selectors/ref/chunks", json=bodies[3])).status_code == 200
    assert [r.rejected for r in await store.commits.commits_after("re", 0)] == [False, True, False]

    async with running_app(rare(redis_url, **limits)) as (_app, http):
        response = await http.post("/v1/selectors/re/chunks", json=bodies[3])
        assert response.status_code == 200, response.text
        assert await replayed_versions(http) == 3
        described = (await http.get("/v1/selectors/re")).json()
        assert [(c["label"], c["count"]) for c in described["classes"]] == [(0, 7), (1, 5)]
        assert await everything(http, "re", "ocfs") == await everything(http, "ref", "ocfs")
        np.testing.assert_array_equal(await weights(http, "re"), await weights(http, "ref"))
    meta = await store.registry.get_meta("re")
    expected = run_in_process(meta, [[bodies[0]], [bodies[2]], [bodies[3]]])
    assert await checkpointed_after_export(redis_url, store, "re") == encode_state(expected)


async def test_a_merge_replays_as_a_merge(redis_url: str, redis_client: Any) -> None:
    method = "variance"
    offered = METHODS[method]
    assert isinstance(offered, Mergeable)
    store = SelectorStore(redis_client)
    async with running_app(rare(redis_url)) as (_app, http):
        await create(http, "east", method)
        for i in (10, 11):
            await push(http, "east", method, i)
        for name in ("ref", "re"):
            await create(http, name, method)
            await push(http, name, method, 0)
            merged = await http.post(f"/v1/selectors/{name}/merge", json={"from": "east"})
            assert merged.status_code == 200, merged.text
            await push(http, name, method, 1)
        await push(http, "ref", method, 2)
    records = await store.commits.commits_after("re", 0)
    assert len(records) == 3
    assert [e.merge for e in await store.log.log_between("re", "0-0", records[-1].cursor)] == [
        False,
        True,
        False,
    ]

    async with running_app(rare(redis_url)) as (_app, http):
        await push(http, "re", method, 2)
        assert await replayed_versions(http) == 3
        np.testing.assert_array_equal(await weights(http, "re"), await weights(http, "ref"))
        assert await everything(http, "re", method) == await everything(http, "ref", method)

    # In process: the source's state, its summary merged in between the chunks.
    meta = await store.registry.get_meta("re")
    source = run_in_process(meta, [[SCENARIOS[method].chunk(i)] for i in (10, 11)])
    fields = summary_fields_of(offered, resolved_params(meta))
    summary = {f: v for f, v in source.items() if f in fields or not isinstance(v, np.ndarray)}
    state = run_in_process(meta, [[SCENARIOS[method].chunk(0)]])
    state = offered.merge(state, resolved_params(meta), summary)
    for i in (1, 2):
        state = offered.update(
            state, resolved_params(meta), chunk_of(meta, SCENARIOS[method].chunk(i))
        )
    expected = offered.weights(state, resolved_params(meta))
    async with running_app(rare(redis_url)) as (_app, http):
        np.testing.assert_array_equal(await weights(http, "re"), expected)
    assert await checkpointed_after_export(redis_url, store, "re") == encode_state(state)


async def test_coalesced_batches_replay_as_the_same_batches(
    redis_url: str, redis_client: Any
) -> None:
    """FSDS's sketch depends on where its shrinks fall: four chunks applied as one update
    give another state than four updates. A rebuild must join exactly the chunks each commit
    joined."""
    method = "fsds"
    store = SelectorStore(redis_client)
    bodies = [SCENARIOS[method].chunk(i) for i in range(6)]
    async with running_app(rare(redis_url)) as (_app, http):
        await create(http, "fs", method)
        first = await push(http, "fs", method, 0)
        # Hold the applier off while four chunks arrive, so that it takes them at once.
        blocker = None

        async def blocked() -> bool:
            nonlocal blocker
            blocker = await store.leases.acquire_lease("fs", 60_000)
            return blocker is not None

        await wait_for(blocked)  # the applier lets go of the lease once its drain is done
        assert blocker is not None
        accepted = [await push(http, "fs", method, i, wait=False) for i in range(1, 5)]
        await store.leases.release_lease(blocker)

        async def settled() -> bool:
            described = (await http.get("/v1/selectors/fs")).json()
            return bool(described["state"]["pending_entries"] == 0)

        await wait_for(settled)
        coalesced = await weights(http, "fs")
    assert await store.commits.commits_after("fs", 0) == [
        CommitRecord(1, first["log_id"], False),
        CommitRecord(2, accepted[-1]["log_id"], False),
    ]
    meta = await store.registry.get_meta("fs")
    batches = [[bodies[0]], bodies[1:5]]
    method_ = get_method(method)
    np.testing.assert_array_equal(
        coalesced, method_.weights(run_in_process(meta, batches), resolved_params(meta))
    )
    one_by_one = method_.weights(
        run_in_process(meta, [[b] for b in bodies[:5]]), resolved_params(meta)
    )
    assert not np.array_equal(coalesced, one_by_one)  # the batching shows in the state

    async with running_app(rare(redis_url)) as (_app, http):
        await push(http, "fs", method, 5)
        assert await replayed_versions(http) == 2
        expected = run_in_process(meta, [*batches, [bodies[5]]])
        np.testing.assert_array_equal(
            await weights(http, "fs"), method_.weights(expected, resolved_params(meta))
        )
    assert await checkpointed_after_export(redis_url, store, "fs") == encode_state(expected)


async def test_an_app_takes_over_a_selector_of_the_earlier_layout(
    redis_url: str, redis_client: Any
) -> None:
    """A selector the previous code wrote (the whole state under the head, a log of pending
    entries only, no checkpoint, no commit records) is applied on from where it stood: its
    whole state is what the first rebuild starts from, and stays its checkpoint until a
    checkpoint in pieces replaces it."""
    method = "variance"
    n = 5
    stored = get_method(method).resolve_params({}, n).as_params()
    meta = SelectorMeta("old", method, stored, 1.0, n_features=n)
    bodies = [SCENARIOS[method].chunk(i) for i in range(5)]
    rows = [len(body) for body in bodies]
    kind = chunk_format(get_method(method).chunk_kind)
    keys = SelectorKeys("sift", "old")
    state_key = keys.state(2, 4, "0ldst4te")
    whole: dict[Any, Any] = {
        **encode_state(run_in_process(meta, [[b] for b in bodies[:2]])),
        "__writer__": b"host:1:old-holder",
    }
    head: dict[Any, Any] = {
        "version": 2,
        "cursor": "1-0",
        "rows_seen": sum(rows[:2]),
        "appended": sum(rows[:4]),
        "state_key": state_key,
        "updated_at": "1700000000.5",
    }
    await redis_client.set(keys.meta, meta.to_json())
    await redis_client.hset(state_key, mapping=whole)
    await redis_client.sadd(keys.blobs, state_key)
    await redis_client.hset(keys.head, mapping=head)
    pending: list[str] = []
    for i in (2, 3):
        payload = kind.decode(json.dumps(bodies[i]).encode(), "application/json", meta, 2**30)
        entry: dict[Any, Any] = {
            "payload": payload.payload,
            "rows": rows[i],
            "first": sum(rows[:i]),
        }
        added: Any = await redis_client.xadd(keys.log, entry)
        pending.append(added.decode())
    await redis_client.sadd("sift:selectors", "old")
    store = SelectorStore(redis_client)

    async with running_app(rare(redis_url)) as (_app, http):

        async def settled() -> bool:
            described = (await http.get("/v1/selectors/old")).json()
            return bool(described["state"]["pending_entries"] == 0)

        await wait_for(settled)  # the sweeper found the pending entries and applied them
        adopted = (await store.registry.get_head("old")).checkpoint
        assert adopted is not None and not adopted.cut
        assert (adopted.key, adopted.version, adopted.items_seen) == (state_key, 2, sum(rows[:2]))
        # Both pending entries went into one update (the method coalesces).
        assert await store.commits.commits_after("old", 2) == [CommitRecord(3, pending[-1], False)]
        answer = await push(http, "old", method, 4)
        assert (answer["version"], answer["rows_seen"]) == (4, sum(rows))
        expected = run_in_process(meta, [[bodies[0]], [bodies[1]], bodies[2:4], [bodies[4]]])
        np.testing.assert_array_equal(
            await weights(http, "old"), get_method(method).weights(expected, resolved_params(meta))
        )
        await export(http, "old")
    point = (await store.registry.get_head("old")).checkpoint
    assert point is not None and point.cut and point.version == 4
    assert not await redis_client.exists(state_key)
    assert await store.checkpoints.load_checkpoint("old", point) == encode_state(expected)


async def test_checkpoints_written_while_applying_goes_on_replay_exactly(
    redis_url: str, redis_client: Any
) -> None:
    """Checkpoints due every couple of versions, written in the background while the same
    drain applies the next entries (each its own version): the log and the commit records
    they trim never take what a rebuild needs."""
    method = "fsds"
    per_round = 12
    often = {
        **RARE,
        "checkpoint_log_ratio": 0.5,
        "max_coalesce_entries": 1,
    }
    store = SelectorStore(redis_client)
    async with running_app(make_settings(redis_url, **often)) as (app, http):
        await create(http, "fs", method)

        async def settled() -> bool:
            described = (await http.get("/v1/selectors/fs")).json()
            return bool(described["state"]["pending_entries"] == 0)

        async def log_checkpoints() -> float:
            metrics = (await http.get("/metrics")).text
            found = re.search(r'^sift_checkpoints_total\{trigger="log"\} (\S+)$', metrics, re.M)
            return 0.0 if found is None else float(found.group(1))

        # Every chunk of a round waits until all are there, so that one drain applies them all:
        # a drain writes at most one checkpoint at its end, any other while it goes on. How many
        # a round sees depends on how fast the background writes go beside the drain (on a
        # loaded machine, one): rounds go on until two were written.
        chunks = 0
        for _ in range(4):
            # The drain of the previous round lets its lease go right after its last commit.
            blocker = None
            while blocker is None:
                blocker = await store.leases.acquire_lease("fs", 60_000)
                await asyncio.sleep(0 if blocker else 0.05)
            for i in range(chunks, chunks + per_round):
                await push(http, "fs", method, i, wait=False)
            chunks += per_round
            await store.leases.release_lease(blocker)
            await wait_for(settled)
            if await log_checkpoints() >= 2:
                break
        assert await log_checkpoints() >= 2
        held = hot_state(app, "fs")
        assert held is not None
    head = await store.registry.get_head("fs")
    assert head.version == chunks and head.recovery_point.version >= 1
    meta = await store.registry.get_meta("fs")
    last = SCENARIOS[method].chunk(chunks)
    expected = without_segments(
        get_method(method).update(held, resolved_params(meta), chunk_of(meta, last))
    )

    async with running_app(rare(redis_url)) as (_app, http):
        await push(http, "fs", method, chunks)
        np.testing.assert_array_equal(
            await weights(http, "fs"), get_method(method).weights(expected, resolved_params(meta))
        )
    assert await checkpointed_after_export(redis_url, store, "fs") == encode_state(expected)
