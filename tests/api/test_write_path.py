"""The write path through HTTP: idempotency, wait=false, concurrency, restarts, recovery."""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

import numpy as np
import pytest

from service.store.codec import encode_matrix
from service.store.records import Entry
from service.store.redis_store import SelectorStore
from tests.support.api import create_selector, make_settings, npy_bytes, running_app, wait_for

pytestmark = pytest.mark.asyncio


async def test_idempotency_key_returns_the_first_answer(client):
    await create_selector(client, "idem", 4)
    first = await client.post(
        "/v1/selectors/idem/chunks", json=[[1, 2, 3, 4]], headers={"idempotency-key": "k1"}
    )
    assert first.status_code == 200
    await client.post("/v1/selectors/idem/chunks", json=[[4, 3, 2, 1], [0, 1, 0, 1]])
    again = await client.post(
        "/v1/selectors/idem/chunks", json=[[1, 2, 3, 4]], headers={"idempotency-key": "k1"}
    )
    assert again.status_code == 200
    assert again.json() == {**first.json(), "duplicate": True}
    # The same data in another encoding is the same body.
    as_npy = await client.post(
        "/v1/selectors/idem/chunks",
        content=npy_bytes(np.array([[1.0, 2, 3, 4]])),
        headers={"idempotency-key": "k1", "content-type": "application/x-npy"},
    )
    assert as_npy.json()["version"] == first.json()["version"]
    other = await client.post(
        "/v1/selectors/idem/chunks", json=[[9, 9, 9, 9]], headers={"idempotency-key": "k1"}
    )
    assert other.status_code == 422
    assert "different body" in other.json()["detail"]
    described = (await client.get("/v1/selectors/idem")).json()
    assert described["rows_seen"] == 3 and described["version"] == 2


async def test_wait_false_answers_202_and_applies_in_background(client):
    await create_selector(client, "bg", 3)
    response = await client.post(
        "/v1/selectors/bg/chunks", params={"wait": "false"}, json=[[1, 0, 0], [0, 1, 0]]
    )
    assert response.status_code == 202
    body = response.json()
    assert body["status"] == "pending" and body["rows"] == 2 and body["log_id"]

    async def applied() -> bool:
        status = await client.get(f"/v1/selectors/bg/chunks/{body['log_id']}")
        return bool(status.json()["applied"])

    await wait_for(applied)
    assert (await client.get("/v1/selectors/bg")).json()["rows_seen"] == 2


async def test_concurrent_posts_are_each_applied_exactly_once(client):
    m = 16
    await create_selector(client, "busy", m, params={"k": 2, "ell": 5})
    rng = np.random.default_rng(7)
    chunks = [rng.standard_normal((int(rng.integers(1, 30)), m)) for _ in range(24)]

    async def post(i: int, chunk: np.ndarray) -> dict[str, Any]:
        response = await client.post(
            "/v1/selectors/busy/chunks",
            content=npy_bytes(chunk),
            headers={"content-type": "application/x-npy", "idempotency-key": f"c{i}"},
        )
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    answers = await asyncio.gather(*(post(i, c) for i, c in enumerate(chunks)))
    total = sum(c.shape[0] for c in chunks)
    final = (await client.get("/v1/selectors/busy")).json()
    assert final["rows_seen"] == total
    assert final["state"]["pending_entries"] == 0
    # Coalescing: fewer versions than chunks is allowed, more is not.
    assert 1 <= final["version"] <= len(chunks)
    assert all(1 <= a["version"] <= final["version"] for a in answers)
    assert len({a["log_id"] for a in answers}) == len(chunks)
    # Replaying every request changes nothing.
    replays = await asyncio.gather(*(post(i, c) for i, c in enumerate(chunks)))
    assert [r["version"] for r in replays] == [a["version"] for a in answers]
    assert (await client.get("/v1/selectors/busy")).json()["rows_seen"] == total


async def test_state_survives_a_restart_of_service_and_redis(restartable_redis):
    url = restartable_redis.start()
    settings = make_settings(url)
    rows = np.random.default_rng(1).standard_normal((50, 8))
    async with running_app(settings) as (_, http):
        await create_selector(http, "keep", 8, params={"k": 2})
        await http.post("/v1/selectors/keep/chunks", json=rows[:20].tolist())
        await http.post("/v1/selectors/keep/chunks", json=rows[20:].tolist())
        before = (await http.get("/v1/selectors/keep/weights")).json()
    restartable_redis.stop()
    url = restartable_redis.start()
    async with running_app(make_settings(url)) as (_, http):
        after = (await http.get("/v1/selectors/keep/weights")).json()
        described = (await http.get("/v1/selectors/keep")).json()
    assert after == before
    assert described["version"] == 2 and described["rows_seen"] == 50


async def test_embedded_redis_default_mode_persists(tmp_path):
    """No SIFT_REDIS_URL: the service runs its own redis-server and keeps data across runs."""
    settings = make_settings(None, data_dir=tmp_path / "data")
    async with running_app(settings) as (_, http):
        assert (await http.get("/v1/readyz")).json()["redis"] == "embedded"
        await create_selector(http, "own", 5)
        assert (await http.post("/v1/selectors/own/chunks", json=[[1, 2, 3, 4, 5]])).json()[
            "version"
        ] == 1
    async with running_app(settings) as (_, http):
        described = (await http.get("/v1/selectors/own")).json()
    assert described["rows_seen"] == 1 and described["version"] == 1


async def test_entries_left_in_the_log_are_recovered_at_start(redis_url, redis_client):
    """A crash between append and apply: the next service start applies the entry."""
    async with running_app(make_settings(redis_url)) as (_, http):
        await create_selector(http, "crash", 3)
    store = SelectorStore(redis_client)
    payload = encode_matrix(np.array([[1.0, 2.0, 3.0]]))
    await store.log.append("crash", Entry(payload, 1, hashlib.sha256(payload).hexdigest(), None))
    async with running_app(make_settings(redis_url)) as (_, http):

        async def recovered() -> bool:
            return bool((await http.get("/v1/selectors/crash")).json()["rows_seen"] == 1)

        await wait_for(recovered)


async def test_pending_entries_are_coalesced_into_one_version(app_factory, redis_client):
    """Entries that pile up while another applier holds the lease land in one update."""
    async with app_factory() as (app, http):
        await create_selector(http, "pile", 4)
        store = app.state.runtime.selectors.store
        lease = await store.leases.acquire_lease("pile", 60_000)
        assert lease is not None
        for i in range(5):
            response = await http.post(
                "/v1/selectors/pile/chunks", params={"wait": "false"}, json=[[i, 1, 2, 3]]
            )
            assert response.status_code == 202
        assert (await http.get("/v1/selectors/pile")).json()["version"] == 0
        await store.leases.release_lease(lease)

        async def applied() -> bool:
            return bool((await http.get("/v1/selectors/pile")).json()["rows_seen"] == 5)

        await wait_for(applied)
        described = (await http.get("/v1/selectors/pile")).json()
        assert described["version"] == 1
        metrics = (await http.get("/metrics")).text
        assert 'sift_entries_per_update_bucket{le="8.0"} 1.0' in metrics


async def test_a_name_deleted_and_created_again_is_applied_at_once(app_factory, caplog):
    """Delete, create again (another width) and push, seven times in a row: every chunk is
    applied at once. What the process keeps of the name's earlier incarnation (a lingering
    applier, a backoff) never touches the new one's entries, nor holds them up."""
    async with app_factory(apply_wait_seconds=5.0, applier_linger_seconds=2.0) as (_app, http):
        seconds = []
        for cycle in range(7):
            width = 3 + cycle % 2
            await create_selector(http, "again", width)
            started = time.monotonic()
            posted = await http.post("/v1/selectors/again/chunks", json=[[1.0] * width] * 2)
            seconds.append(time.monotonic() - started)
            assert posted.status_code == 200, (cycle, posted.text)
            assert posted.json()["version"] == 1 and posted.json()["rows_seen"] == 2
            assert (await http.delete("/v1/selectors/again")).status_code == 204
    rejected = [r.getMessage() for r in caplog.records if "rejected log entry" in r.getMessage()]
    assert not rejected, rejected
    # Each POST is one append and one update (tens of ms); the bug made them 1, 2, 4, 8 ... s.
    assert max(seconds) < 3.0, seconds


async def test_a_chunk_status_knows_its_own_selector(client):
    """A log id answers only on the selector (and the incarnation) that handed it out."""
    await create_selector(client, "mine", 3)
    await create_selector(client, "theirs", 3)
    mine = (await client.post("/v1/selectors/mine/chunks", json=[[1.0, 2.0, 3.0]])).json()
    theirs = (await client.post("/v1/selectors/theirs/chunks", json=[[1.0, 2.0, 3.0]])).json()
    applied = await client.get(f"/v1/selectors/mine/chunks/{mine['log_id']}")
    assert applied.json()["status"] == "applied"
    ms, seq = mine["log_id"].split("-")
    for log_id in ["0-0", theirs["log_id"], f"{int(ms) + 1}-{seq}", f"{ms}-{int(seq) ^ 1}"]:
        answer = await client.get(f"/v1/selectors/mine/chunks/{log_id}")
        assert answer.status_code == 404, (log_id, answer.text)
    # The same name created again: the old log id is not the new selector's.
    assert (await client.delete("/v1/selectors/mine")).status_code == 204
    await create_selector(client, "mine", 3)
    await client.post("/v1/selectors/mine/chunks", json=[[1.0, 2.0, 3.0]])
    old = await client.get(f"/v1/selectors/mine/chunks/{mine['log_id']}")
    assert old.status_code == 404, old.text


async def test_a_replica_with_a_stale_description_checks_again(app_factory):
    """Replica A describes 'shape' (3 features) and caches it; replica B deletes it and creates
    it again with 4: A's next chunk is checked against the new selector, not the cached one."""
    async with app_factory() as (_a, a), app_factory() as (_b, b):
        await create_selector(a, "shape", 3)
        assert (
            await a.post("/v1/selectors/shape/chunks", json=[[1.0, 2.0, 3.0]])
        ).status_code == 200
        assert (await b.delete("/v1/selectors/shape")).status_code == 204
        await create_selector(b, "shape", 4)
        wide = await a.post("/v1/selectors/shape/chunks", json=[[1.0, 2.0, 3.0, 4.0]])
        assert wide.status_code == 200, wide.text
        assert wide.json()["rows_seen"] == 1 and wide.json()["version"] == 1
        narrow = await a.post("/v1/selectors/shape/chunks", json=[[1.0, 2.0, 3.0]])
        assert narrow.status_code == 422 and "4 features" in narrow.json()["detail"], narrow.text


async def test_rankings_read_again_are_answered_from_memory_until_a_commit_is_announced(
    app_factory, redis_client
):
    """``GET top`` of a selector nothing was committed to since costs no Redis round trip; a
    commit or a deletion on another replica is announced on the commits channel and the next
    read sees it (read-your-writes where the commit was made)."""
    async with app_factory() as (app_a, a), app_factory() as (_b, b):
        # Only the notices may tell A: its heads are not read again by age in this test.
        app_a.state.runtime.selectors.applier.heads.trusted_seconds = 60.0
        await create_selector(a, "mem", 3)
        assert (await a.post("/v1/selectors/mem/chunks", json=[[1.0, 2.0, 3.0]])).status_code == 200
        first = (await a.get("/v1/selectors/mem/top", params={"h": 2})).json()
        assert first["version"] == 1

        async def commands() -> int:
            return int((await redis_client.info("stats"))["total_commands_processed"])

        before = await commands()
        reads = 200
        for _ in range(reads):
            again = await a.get("/v1/selectors/mem/top", params={"h": 2})
            assert again.json() == first
        # The sweepers of both apps and this INFO run meanwhile: a few commands, not 200.
        assert await commands() - before < reads // 4

        # B commits (waiting for it): A hears the notice and reads the head again.
        posted = await b.post("/v1/selectors/mem/chunks", json=[[3.0, 2.0, 1.0]])
        assert posted.status_code == 200 and posted.json()["version"] == 2

        async def a_reads_version_2() -> bool:
            answer = await a.get("/v1/selectors/mem/top", params={"h": 2})
            return int(answer.json()["version"]) == 2

        await wait_for(a_reads_version_2, 2.0)
        # B, which committed it, reads its own write at once.
        assert (await b.get("/v1/selectors/mem/top", params={"h": 2})).json()["version"] == 2

        # B deletes it: A answers 404, not the ranking it kept.
        assert (await b.delete("/v1/selectors/mem")).status_code == 204

        async def gone_on_a() -> bool:
            answer = await a.get("/v1/selectors/mem/top")
            return bool(answer.status_code == 404)

        await wait_for(gone_on_a, 2.0)
