"""IQRP over HTTP: columns stored in Redis blocks, the exact pivoted-QR order read in passes;
and ``strategy=diverse`` on FSDS sketches. References: LAPACK geqp3 through scipy."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.linalg
from redis.asyncio.cluster import RedisCluster

from service.algorithms.fsds import FSDS
from service.algorithms.iqrp import StoredColumns
from service.algorithms.pivoted_qr import MatrixSource, iqrp
from service.store.codec import decode_array
from service.store.connection import RedisClient
from service.store.keys import SelectorKeys
from tests.support.api import create_selector, make_settings, npy_bytes, running_app

pytestmark = pytest.mark.asyncio

M = 30
BLOCK = 8
NPY = "application/x-npy"


def scaled_columns(n: int, seed: int = 0) -> np.ndarray:
    """Gaussian columns with spread norms: no ties in the pivots, skipping pays off."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((M, n)) * np.geomspace(5.0, 0.05, n)[rng.permutation(n)]


def geqp3(matrix: np.ndarray, k: int) -> tuple[list[int], np.ndarray]:
    r, pivots = scipy.linalg.qr(matrix, pivoting=True, mode="r")
    return pivots[:k].tolist(), np.abs(np.diag(r))[:k]


async def create_iqrp(http: httpx.AsyncClient, name: str = "cols", **body: Any) -> dict[str, Any]:
    response = await http.post(
        "/v1/selectors",
        json={"name": name, "method": "iqrp", "params": {"block_columns": BLOCK}, **body}
        | ({} if "n_objects" in body else {"n_samples": M}),
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def push_columns(http: httpx.AsyncClient, name: str, columns: np.ndarray) -> None:
    """Half as JSON, half as .npy, in uneven requests (blocks fill across requests)."""
    n = columns.shape[1]
    cuts = sorted({0, 5, 19, n // 2, n - 3, n})
    for i, (start, stop) in enumerate(itertools.pairwise(cuts)):
        part = columns[:, start:stop]
        if i % 2:
            response = await http.post(
                f"/v1/selectors/{name}/features",
                content=npy_bytes(part),
                headers={"content-type": "application/x-npy"},
            )
        else:
            response = await http.post(
                f"/v1/selectors/{name}/features", json={"columns": part.T.tolist()}
            )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["first_index"] == start and body["columns"] == stop - start


async def test_top_is_the_exact_pivoted_qr_order_read_from_blocks(client, redis_client):
    columns = scaled_columns(50)
    created = await create_iqrp(client, n_objects=M)
    assert created["params"] == {"block_columns": BLOCK} and created["n_samples"] == M
    await push_columns(client, "cols", columns)
    described = (await client.get("/v1/selectors/cols")).json()
    assert described["features_seen"] == 50 and described["state"]["full_blocks"] == 6
    segments = {k async for k in redis_client.scan_iter(match="sift:{cols}:segment:*")}
    assert len(segments) == 6  # the 2 columns of the block being filled stay in the state

    for h in (1, 7, 20):
        expected, pivots = geqp3(columns, h)
        top = (await client.get(f"/v1/selectors/cols/top?h={h}")).json()
        assert [f["index"] for f in top["features"]] == expected
        np.testing.assert_allclose([f["score"] for f in top["features"]], pivots, rtol=1e-8)
        assert [f["name"] for f in top["features"]] == [f"f{i}" for i in expected]
        account = top["account"]
        assert top["strategy"] == "pivoted-qr" and account["l"] == h
        assert account["io_passes"] <= account["passes"] and account["blocks_total"] == 7
        assert account["columns_read"][0] == 50
        if h >= 7:
            assert account["passes"] < h
    # Another l, the same order; weights are the squared column norms.
    top = (await client.get("/v1/selectors/cols/top?h=20&l=3")).json()
    assert [f["index"] for f in top["features"]] == geqp3(columns, 20)[0]
    assert top["account"]["l"] == 3
    weights = (await client.get("/v1/selectors/cols/weights")).json()["weights"]
    np.testing.assert_allclose(weights, (columns**2).sum(axis=0), rtol=1e-12)


async def reset_stats(client: RedisClient) -> None:
    """CONFIG RESETSTAT on the server, or on every master of a cluster."""
    if isinstance(client, RedisCluster):
        await client.config_resetstat(target_nodes=RedisCluster.PRIMARIES)
    else:
        await client.config_resetstat()


async def calls(client: RedisClient, command: str) -> int:
    """Times ``command`` ran since the last CONFIG RESETSTAT, on every master of a cluster."""
    field = f"cmdstat_{command}"
    if isinstance(client, RedisCluster):
        per_node = await client.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
        return sum(int(stats.get(field, {}).get("calls", 0)) for stats in per_node.values())
    return int((await client.info("commandstats")).get(field, {}).get("calls", 0))


async def test_redis_blocks_and_memory_give_the_same_answer_and_skipped_blocks_are_not_read(
    app_factory, redis_client
):
    # The first block holds big columns, the others tiny ones that can never be selected: after
    # pass 1 the heap fills from the first block and the other blocks are skipped unread.
    rng = np.random.default_rng(3)
    columns = np.hstack([100 * rng.standard_normal((M, 8)), 1e-3 * rng.standard_normal((M, 53))])
    # The GETs counted must be the reader's: an applier holding the lease renews it with a GET
    # (in a script) every third of it, and a checkpoint of the idle selector checks it too. So
    # no lingering, no idle checkpoint, and the count starts once the lease is gone.
    quiet = {"applier_linger_seconds": 0.0, "checkpoint_interval_seconds": 3600.0}
    async with app_factory(**quiet) as (app, http):
        await create_iqrp(http)
        await push_columns(http, "cols", columns)
        lease = SelectorKeys("sift", "cols").lease
        while await redis_client.exists(lease):
            await asyncio.sleep(0.02)
        reader = app.state.runtime.selectors.reader
        head = await reader.head("cols")
        _, raw = await reader.store.checkpoints.read_state_fields("cols", ["tail"])
        tail = decode_array(raw["tail"])
        bounds = [(b * BLOCK, (b + 1) * BLOCK) for b in range(7)] + [(56, 61)]
        assert head.items_seen == 61
        stored = StoredColumns(bounds, 7, tail, reader.segment_reader("cols"))
        await reset_stats(redis_client)
        from_redis = await asyncio.to_thread(iqrp, stored, 4, 2)
        gets = await calls(redis_client, "get")
    in_memory = MatrixSource(columns, block_columns=BLOCK)
    from_memory = iqrp(in_memory, 4, 2)
    assert from_redis.indices == from_memory.indices == geqp3(columns, 4)[0]
    assert from_redis.pivots == pytest.approx(from_memory.pivots, rel=1e-12)
    assert stored.reads == in_memory.reads and from_redis.blocks_read == len(stored.reads)
    # Every fetch of a full block is one GET; the tail came with the state.
    assert gets == sum(1 for block in stored.reads if block < 7)
    assert from_redis.passes > 1 and set(stored.reads[len(bounds) :]) == {0}


async def test_answers_are_cached_per_version_and_survive_restarts(redis_url, redis_client):
    columns = scaled_columns(40, seed=5)
    settings = make_settings(redis_url)
    async with running_app(settings) as (_, http):
        await create_iqrp(http, "durable")
        await push_columns(http, "durable", columns[:, :30])
        first = (await http.get("/v1/selectors/durable/top?h=5")).json()
        assert (await http.get("/v1/selectors/durable/top?h=5")).json() == first
    async with running_app(settings) as (_, http):
        assert (await http.get("/v1/selectors/durable/top?h=5")).json() == first
        response = await http.post(
            "/v1/selectors/durable/features", json={"columns": columns[:, 30:].T.tolist()}
        )
        assert response.status_code == 200
        after = (await http.get("/v1/selectors/durable/top?h=5")).json()
        assert after["version"] > first["version"]
        assert [f["index"] for f in after["features"]] == geqp3(columns, 5)[0]
        assert (await http.delete("/v1/selectors/durable")).status_code == 204
    assert [k async for k in redis_client.scan_iter(match="sift:{durable}:*")] == []


async def test_bad_requests_are_rejected_and_change_nothing(client):
    await create_iqrp(client, "bad")
    empty = await client.get("/v1/selectors/bad/top?h=2")
    assert empty.status_code == 409 and "no columns yet" in empty.json()["detail"]
    rng = np.random.default_rng(1)
    low_rank = rng.standard_normal((M, 3)) @ rng.standard_normal((3, 12))
    response = await client.post(
        "/v1/selectors/bad/features", json={"columns": low_rank.T.tolist()}
    )
    assert response.status_code == 200
    cases = [
        ("/v1/selectors/bad/top?h=13", 422, "larger than the number of columns"),
        ("/v1/selectors/bad/top?h=5", 422, "numerical rank"),
        ("/v1/selectors/bad/top?h=2&l=0", 422, "l"),
        ("/v1/selectors/bad/top?h=2&strategy=best", 422, "strategy"),
        ("/v1/selectors/bad/features", 422, "decides on every column as it arrives (ofs)"),
    ]
    for url, status, detail in cases:
        answer = await client.get(url)
        assert answer.status_code == status, (url, answer.text)
        assert detail in answer.text, answer.text
    assert (await client.get("/v1/selectors/bad/top?h=3")).status_code == 200
    bad_bodies: list[tuple[dict[str, Any], str]] = [
        ({"json": {"columns": [[1.0] * (M + 1)]}}, f"n_samples={M}"),
        (
            {"content": npy_bytes(np.full((M, 1), np.nan)), "headers": {"content-type": NPY}},
            "finite",
        ),
    ]
    for kwargs, detail in bad_bodies:
        answer = await client.post("/v1/selectors/bad/features", **kwargs)
        assert answer.status_code == 422 and detail in answer.json()["detail"]
    cluster = await client.post("/v1/selectors/bad/cluster", json={"k": 2})
    assert cluster.status_code == 422 and "runs iqrp" in cluster.json()["detail"]
    described = (await client.get("/v1/selectors/bad")).json()
    assert described["features_seen"] == 12 and described["state"]["pending_entries"] == 0
    refused: list[tuple[dict[str, object], str]] = [
        ({"params": {"block_columns": 0}}, "block_columns must be an integer"),
        ({"params": {"k": 3}}, "unknown parameter"),
        ({"n_objects": M}, "not both"),
    ]
    for body, detail in refused:
        answer = await client.post(
            "/v1/selectors", json={"name": "x", "method": "iqrp", "n_samples": M, **body}
        )
        assert answer.status_code == 422 and detail in answer.json()["detail"], answer.text


async def test_diverse_strategy_is_pivoted_qr_on_the_fsds_sketch(client):
    rng = np.random.default_rng(7)
    # Near-duplicate features: a high score each, but together they add little.
    base = rng.standard_normal((300, 10))
    rows = np.hstack([base, base[:, :4] + 1e-3 * rng.standard_normal((300, 4))])
    params = {"k": 3, "ell": 8}
    await create_selector(client, "sk", 14, params=params)
    response = await client.post(
        "/v1/selectors/sk/chunks", content=npy_bytes(rows), headers={"content-type": NPY}
    )
    assert response.status_code == 200
    method = FSDS()
    resolved = method.resolve_params(params, 14)
    state = method.update(method.initial_state(resolved), resolved, rows)
    sketch = np.asarray(state["sketch_rows"])[:, :14]
    diverse = (await client.get("/v1/selectors/sk/top?h=5&strategy=diverse")).json()
    assert [f["index"] for f in diverse["features"]] == geqp3(sketch, 5)[0]
    assert diverse["strategy"] == "pivoted-qr" and diverse["account"]["passes"] >= 1
    by_score = (await client.get("/v1/selectors/sk/top?h=5")).json()
    assert "account" not in by_score
    for url, detail in [
        ("/v1/selectors/sk/top?h=9&strategy=diverse", "numerical rank"),
        ("/v1/selectors/sk/top?h=3&l=2", "strategy=diverse"),
    ]:
        answer = await client.get(url)
        assert answer.status_code == 422 and detail in answer.json()["detail"], answer.text
    await client.post("/v1/selectors", json={"name": "o", "method": "ofs", "n_samples": 3})
    answer = await client.get("/v1/selectors/o/top?h=1&strategy=diverse")
    assert answer.status_code == 422 and "runs ofs" in answer.json()["detail"]
