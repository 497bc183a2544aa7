"""The direct path: a waited chunk handed to the drain that holds its selector's lease and state
is computed before anything is written, then appended and committed in one script. The log
stays the truth: the entries are in it, the commit records cover them, a rebuild replays them,
and a repeated key answers what the first request did."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from service.store.codec import encode_matrix
from service.store.keys import SelectorKeys
from service.store.records import Entry, NextVersion
from service.store.redis_store import SelectorStore
from tests.support.api import create_selector

pytestmark = pytest.mark.asyncio

#: A rebuild must replay the log: no checkpoint comes due while the test runs.
NO_CHECKPOINTS = {
    "checkpoint_replay_seconds": 3600.0,
    "checkpoint_log_ratio": 1e9,
    "checkpoint_interval_seconds": 3600.0,
    "applier_linger_seconds": 30.0,
}


def direct_calls(app: Any) -> list[int]:
    """Counts the direct commits of ``app``'s store (the script runs for real)."""
    store = app.state.runtime.selectors.store
    calls = [0]
    real = store.commits.append_and_commit

    async def counted(*args: Any, **kwargs: Any) -> Any:
        result = await real(*args, **kwargs)
        calls[0] += not isinstance(result, str)
        return result

    store.commits.append_and_commit = counted
    return calls


@pytest.mark.parametrize(
    ("features", "rows_per_chunk", "as_state"),
    [
        (400, 1, False),  # a one-row chunk is smaller than the state: the chunk is logged
        (4, 200, True),  # the state is smaller than the chunk: it is the checkpoint instead
    ],
)
async def test_waited_chunks_go_direct_and_survive_a_rebuild(
    app_factory, redis_client, features, rows_per_chunk, as_state
):
    rng = np.random.default_rng(7)
    chunks = [rng.normal(size=(rows_per_chunk, features)) for _ in range(24)]
    async with app_factory(**NO_CHECKPOINTS) as (app, http):
        calls = direct_calls(app)
        await create_selector(http, "d", features, method="variance")
        answers = []
        for i, chunk in enumerate(chunks[:20]):
            answer = await http.post(
                "/v1/selectors/d/chunks",
                json=chunk.tolist(),
                headers={"idempotency-key": f"k{i}"},
            )
            assert answer.status_code == 200, answer.text
            answers.append(answer.json())
        # The first chunk started the drain; the ones after it found it lingering.
        assert calls[0] >= 15, calls
        assert [a["version"] for a in answers] == list(range(1, 21))
        assert [a["rows_seen"] for a in answers] == [rows_per_chunk * v for v in range(1, 21)]
        # A retry of a chunk committed directly answers what its first request did.
        again = await http.post(
            "/v1/selectors/d/chunks",
            json=chunks[10].tolist(),
            headers={"idempotency-key": "k10"},
        )
        assert again.json() == {**answers[10], "duplicate": True}
        status = (await http.get(f"/v1/selectors/d/chunks/{answers[12]['log_id']}")).json()
        assert status["status"] == "applied", status
    keys = SelectorKeys("sift", "d")
    head = await redis_client.hgetall(keys.head)
    assert head[b"entries"] == head[b"applied"] == b"20"
    if as_state:
        # Each direct commit made its state the checkpoint: nothing is left to replay.
        assert head[b"checkpoint_version"] == head[b"version"] == b"20"
        assert await redis_client.xlen(keys.log) == 0
        assert await redis_client.llen(keys.commits) == 0
    else:
        assert await redis_client.xlen(keys.log) == 20  # every chunk logged once
    # Another process (this state not in memory) rebuilds it and goes on.
    async with app_factory(**NO_CHECKPOINTS) as (_app, http):
        for chunk in chunks[20:]:
            posted = await http.post("/v1/selectors/d/chunks", json=chunk.tolist())
            assert posted.status_code == 200
        scores = (await http.get("/v1/selectors/d/weights")).json()["weights"]
    np.testing.assert_allclose(scores, np.vstack(chunks).var(axis=0), rtol=1e-12)


async def test_a_direct_commit_writes_nothing_unless_it_may(client, redis_client):
    """Refused before any write: entries pending in the log, a key seen before, a lease that is
    not the caller's."""
    await client.post("/v1/selectors", json={"name": "r", "method": "variance", "n_features": 2})
    store = SelectorStore(redis_client)
    meta = await store.registry.get_meta("r")
    keys = SelectorKeys("sift", "r")

    def entry(values: list[float], key: str | None) -> Entry:
        payload = encode_matrix(np.array([values]))
        digest = hashlib.sha256(payload).hexdigest()
        return Entry(payload, 1, digest, key, incarnation=meta.incarnation)

    async def snapshot() -> tuple[Any, ...]:
        return (
            await redis_client.xlen(keys.log),
            await redis_client.hgetall(keys.head),
            await redis_client.info("persistence"),
        )

    lease = await store.leases.acquire_lease("r", 10_000)
    assert lease is not None
    head = await store.registry.get_head("r")
    published = {"__placeholder__": encode_matrix(np.zeros((1, 1)))}
    # Pending: an entry appended by someone else that the update did not follow.
    await store.log.append("r", Entry(entry([1.0, 2.0], "first").payload, 1, "ab" * 32, "first"))
    before = await redis_client.xlen(keys.log)
    refused = await store.commits.append_and_commit(
        lease, NextVersion(head.version, published, head.cursor, 1), [entry([3.0, 4.0], "second")]
    )
    assert refused == "pending"
    assert await redis_client.xlen(keys.log) == before
    assert not await redis_client.exists(keys.idem("second"))
    # Once it is committed past, a key seen before refuses.
    await redis_client.hset(keys.head, mapping={"cursor": (await store.log.last_log_id("r"))})
    head = await store.registry.get_head("r")
    refused = await store.commits.append_and_commit(
        lease, NextVersion(head.version, published, head.cursor, 2), [entry([1.0, 2.0], "first")]
    )
    assert refused == "idempotency key seen before"
    # Another holder's lease refuses.
    await redis_client.set(keys.lease, "someone else")
    refused = await store.commits.append_and_commit(
        lease, NextVersion(head.version, published, head.cursor, 2), [entry([5.0, 6.0], None)]
    )
    assert refused == "lease"
    assert await redis_client.xlen(keys.log) == before
