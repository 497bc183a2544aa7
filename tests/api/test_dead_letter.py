"""Poison entries: a chunk that validates but cannot be applied is set aside, never retried forever.

The chunks here are real: they pass validation and fail in the applier for a real reason (the
state would outgrow ``SIFT_MAX_STATE_BYTES``, a log entry damaged in Redis, an update that
keeps killing the process that tries it). The selector goes on with the next entries; the
producer learns why.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import numpy as np
import pytest

from service.algorithms import get_method
from service.algorithms.labels import labelled
from service.applier import UpdateFailed, compute_update
from service.errors import StaleApplier
from service.store.codec import encode_matrix
from service.store.keys import SelectorKeys, log_id_tag
from service.store.records import Entry, SelectorMeta
from service.store.redis_store import SelectorStore
from service.wire.log import encode_chunk
from tests.support.api import wait_for

pytestmark = pytest.mark.asyncio

M = 50
#: Room for the OCFS scores and a few classes of M sums, not for twenty more classes.
SMALL_STATE = 4096


def labelled_rows(classes: list[int], per_class: int = 2, offset: float = 0.0) -> dict[str, object]:
    labels = [c for c in classes for _ in range(per_class)]
    rows = [[float(c + offset + j % 3) for j in range(M)] for c in labels]
    return {"rows": rows, "labels": labels}


async def described(http, name: str) -> dict[str, Any]:
    response = await http.get(f"/v1/selectors/{name}")
    assert response.status_code == 200, response.text
    description: dict[str, Any] = response.json()
    return description


async def test_poison_chunk_is_rejected_and_the_selector_goes_on(app_factory, caplog):
    caplog.set_level(logging.WARNING, logger="sift.applier")
    async with app_factory(max_state_bytes=SMALL_STATE) as (_app, http):
        created = await http.post(
            "/v1/selectors", json={"name": "mail", "method": "ocfs", "n_features": M}
        )
        assert created.status_code == 201, created.text
        first = await http.post("/v1/selectors/mail/chunks", json=labelled_rows([0, 1]))
        assert first.status_code == 200, first.text

        # Twenty new classes: 20 x M sums would take the state past the limit.
        poison = await http.post(
            "/v1/selectors/mail/chunks",
            json=labelled_rows(list(range(2, 22))),
            headers={"idempotency-key": "poison-1"},
        )
        assert poison.status_code == 422, poison.text
        assert poison.headers["content-type"] == "application/problem+json"
        problem = poison.json()
        assert problem["type"] == "urn:sift:problem:chunk-rejected"
        assert "SIFT_MAX_STATE_BYTES" in problem["detail"]
        assert str(SMALL_STATE) in problem["detail"]
        log_id = problem["log_id"]

        status = (await http.get(f"/v1/selectors/mail/chunks/{log_id}")).json()
        assert status["status"] == "rejected" and status["applied"] is False
        assert "SIFT_MAX_STATE_BYTES" in status["reason"]

        # A retry with the same key answers the same rejection; nothing is appended again.
        again = await http.post(
            "/v1/selectors/mail/chunks",
            json=labelled_rows(list(range(2, 22))),
            headers={"idempotency-key": "poison-1"},
        )
        assert again.status_code == 422 and again.json()["log_id"] == log_id

        after = await http.post("/v1/selectors/mail/chunks", json=labelled_rows([1, 0], 3))
        assert after.status_code == 200, after.text

        state = await described(http, "mail")
        assert [(c["label"], c["count"]) for c in state["classes"]] == [(0, 5), (1, 5)]
        assert state["rows_seen"] == 10
        assert state["state"]["pending_entries"] == 0

        metrics = (await http.get("/metrics")).text
        assert 'sift_chunks_dead_lettered_total{method="ocfs"} 1.0' in metrics
    rejections = [r for r in caplog.records if "rejected log entry" in r.getMessage()]
    assert len(rejections) == 1, [r.getMessage() for r in caplog.records]


async def test_a_poison_entry_among_coalesced_ones_rejects_only_itself(app_factory):
    async with app_factory(max_state_bytes=SMALL_STATE) as (_app, http):
        await http.post("/v1/selectors", json={"name": "s", "method": "ocfs", "n_features": M})
        bodies = [
            labelled_rows([0, 1]),
            labelled_rows([1]),
            labelled_rows(list(range(2, 22))),  # poison
            labelled_rows([0]),
            labelled_rows([1, 0]),
        ]
        log_ids = []
        for body in bodies:
            response = await http.post(
                "/v1/selectors/s/chunks", params={"wait": "false"}, json=body
            )
            assert response.status_code == 202, response.text
            log_ids.append(response.json()["log_id"])

        async def settled() -> bool:
            return bool((await described(http, "s"))["state"]["pending_entries"] == 0)

        await wait_for(settled)
        statuses = [
            (await http.get(f"/v1/selectors/s/chunks/{log_id}")).json()["status"]
            for log_id in log_ids
        ]
        assert statuses == ["applied", "applied", "rejected", "applied", "applied"]
        state = await described(http, "s")
        assert [(c["label"], c["count"]) for c in state["classes"]] == [(0, 6), (1, 6)]


async def test_damaged_log_entry_is_rejected(client, redis_client):
    await client.post("/v1/selectors", json={"name": "d", "method": "fsds", "n_features": 3})
    # An entry whose payload was damaged in Redis (it never passed through validation).
    keys = SelectorKeys("sift", "d")
    # Under an id of the selector's own (an id it did not hand out is not its chunk).
    incarnation = (await redis_client.hget(keys.head, "incarnation")).decode()
    ms = int(time.time() * 1000)
    log_id = f"{ms}-{log_id_tag(incarnation, ms, 0)}"
    await redis_client.xadd(keys.log, {"payload": b"garbage", "rows": 1}, id=log_id)
    await redis_client.hset(keys.head, "last_id", log_id)
    ok = await client.post("/v1/selectors/d/chunks", json=[[1.0, 2.0, 3.0]])
    assert ok.status_code == 200, ok.text
    status = (await client.get(f"/v1/selectors/d/chunks/{log_id}")).json()
    assert status["status"] == "rejected"
    assert "does not decode" in status["reason"]
    assert (await described(client, "d"))["rows_seen"] == 1


async def test_entry_that_keeps_killing_its_applier_is_rejected(client, redis_client):
    await client.post("/v1/selectors", json={"name": "k", "method": "fsds", "n_features": 3})
    store = SelectorStore(redis_client)
    payload = encode_matrix(np.array([[0.0, 1.0, 0.0]]))
    entry = await store.log.append(
        "k", Entry(payload, 1, hashlib.sha256(payload).hexdigest(), None)
    )
    # Three appliers took the entry and died before committing, as processes killed by its
    # update would (their leases lapse); the next one must not try a fourth time.
    for expected in (1, 2, 3):
        lease = await store.leases.acquire_lease("k", 10_000)
        assert lease is not None
        attempt, entries = await store.log.take(lease, "0-0", 8)
        assert attempt == expected and entries[0].log_id == entry.log_id
        await redis_client.delete(SelectorKeys("sift", "k").lease)
    ok = await client.post("/v1/selectors/k/chunks", json=[[1.0, 0.0, 0.0]])
    assert ok.status_code == 200, ok.text
    status = (await client.get(f"/v1/selectors/k/chunks/{entry.log_id}")).json()
    assert status["status"] == "rejected"
    assert "started 3 times" in status["reason"]
    assert (await described(client, "k"))["rows_seen"] == 1


async def test_attempts_taken_back_by_live_appliers_do_not_count(client, redis_client):
    """Appliers that made no progress for reasons that were no fault of the entry (Redis away,
    the lease lost) take their attempts back: however many there were, the entry is applied."""
    await client.post("/v1/selectors", json={"name": "f", "method": "fsds", "n_features": 3})
    store = SelectorStore(redis_client)
    payload = encode_matrix(np.array([[0.0, 1.0, 0.0]]))
    entry = await store.log.append(
        "f", Entry(payload, 1, hashlib.sha256(payload).hexdigest(), None)
    )
    holders: list[str] = []
    for expected in (1, 2, 3, 3):
        lease = await store.leases.acquire_lease("f", 10_000)
        assert lease is not None
        # The last one carries the word of the one before it that its attempt was no fault.
        forgive = holders[-1:] if expected == len(holders) else []
        attempt, _entries = await store.log.take(lease, "0-0", 8, forgive=forgive)
        assert attempt == expected
        holders.append(lease.holder)
        await redis_client.delete(SelectorKeys("sift", "f").lease)
    await store.log.forgive_attempts("f", holders)
    await store.log.forgive_attempts("f", holders)  # said twice: taken back once
    assert await redis_client.hget(SelectorKeys("sift", "f").attempts, entry.log_id) == b"0"
    ok = await client.post("/v1/selectors/f/chunks", json=[[1.0, 0.0, 0.0]])
    assert ok.status_code == 200, ok.text
    status = (await client.get(f"/v1/selectors/f/chunks/{entry.log_id}")).json()
    assert status["status"] == "applied", status
    assert (await described(client, "f"))["rows_seen"] == 2


async def test_a_reader_without_the_lease_takes_nothing(client, redis_client):
    await client.post("/v1/selectors", json={"name": "t", "method": "fsds", "n_features": 3})
    store = SelectorStore(redis_client)
    lease = await store.leases.acquire_lease("t", 10_000)
    assert lease is not None
    await redis_client.delete(SelectorKeys("sift", "t").lease)  # lapsed
    with pytest.raises(StaleApplier):
        await store.log.take(lease, "0-0", 8)


async def test_rejected_columns_keep_the_indices_of_later_ones(app_factory):
    n = 40
    async with app_factory(max_state_bytes=4 * 8 * n * 3) as (_app, http):
        created = await http.post(
            "/v1/selectors", json={"name": "o", "method": "ofs", "n_samples": n}
        )
        assert created.status_code == 201, created.text
        rng = np.random.default_rng(0)
        first = await http.post(
            "/v1/selectors/o/features", json={"columns": rng.standard_normal((1, n)).tolist()}
        )
        assert first.status_code == 200, first.text
        # Ten independent columns are all kept (leverage 1): the kept columns (n x 11) and the
        # basis would outgrow the limit.
        poison = await http.post(
            "/v1/selectors/o/features",
            json={
                "columns": rng.standard_normal((10, n)).tolist(),
                "names": [f"p{i}" for i in range(10)],
            },
        )
        assert poison.status_code == 422, poison.text
        later = await http.post(
            "/v1/selectors/o/features",
            json={"columns": [np.zeros(n).tolist()], "names": ["late"]},
        )
        assert later.status_code == 200, later.text
        decision = later.json()["decisions"][0]
        assert decision["index"] == 11 and decision["name"] == "late"
        page = (await http.get("/v1/selectors/o/features", params={"limit": 20})).json()
        assert [f["index"] for f in page["features"]] == list(range(12))
        # The rejected columns hold their places, as zero columns that are never kept.
        assert [f["kept"] for f in page["features"][1:11]] == [False] * 10
        assert page["features_seen"] == 12


async def test_a_state_that_is_not_finite_is_never_committed():
    """An update whose result overflows is refused with its reason, whatever the method."""
    method = get_method("ocfs")
    meta = SelectorMeta("x", "ocfs", {}, 0.0, n_features=2)
    state = method.initial_state(method.resolve_params({}, 2, stored=True))
    state["class_sums"] = np.array([[1e200, 0.0]])
    state["class_counts"] = np.array([1], dtype=np.int64)
    state["classes"] = "[0]"
    chunk = encode_chunk(labelled(np.array([[-1e200, 0.0]]), [1]))
    with pytest.raises(UpdateFailed, match="non-finite"):
        compute_update(meta, state, [chunk], 2**30)


async def test_a_take_that_does_not_count_writes_nothing(client, redis_client):
    """An applier woken by entries appended while it lingered takes them without recording an
    attempt (no write, so no fsync of its own); it still learns the attempts recorded before."""
    await client.post("/v1/selectors", json={"name": "w", "method": "fsds", "n_features": 3})
    store = SelectorStore(redis_client)
    payload = encode_matrix(np.array([[0.0, 1.0, 0.0]]))
    entry = await store.log.append(
        "w", Entry(payload, 1, hashlib.sha256(payload).hexdigest(), None)
    )
    lease = await store.leases.acquire_lease("w", 10_000)
    assert lease is not None
    attempts_key = SelectorKeys("sift", "w").attempts

    async def writes() -> int:
        return int((await redis_client.info("persistence"))["rdb_changes_since_last_save"])

    before = await writes()
    attempt, entries = await store.log.take(lease, "0-0", 8, counts=False)
    assert (attempt, [e.log_id for e in entries]) == (1, [entry.log_id])
    assert await writes() == before and not await redis_client.exists(attempts_key)
    # A counted take records it; a take that does not count then reports it, one more.
    assert (await store.log.take(lease, "0-0", 8))[0] == 1
    assert (await store.log.take(lease, "0-0", 8, counts=False))[0] == 2
    assert await redis_client.hget(attempts_key, entry.log_id) == b"1"
