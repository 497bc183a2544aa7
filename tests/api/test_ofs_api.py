"""OFS selectors over HTTP: feature columns in, decisions out, k-means on what was kept.

Every expected value comes from running the library (``service.algorithms.ofs``) on the same
columns in-process: the service must decide exactly what Algorithm 1 decides.
"""

from __future__ import annotations

import math
from typing import Any

import httpx
import numpy as np
import pytest

from service.algorithms.ofs import OFS, cluster_samples
from tests.support.api import make_settings, npy_bytes, running_app, wait_for

pytestmark = pytest.mark.asyncio

N = 40
METHOD = OFS()
#: Few enough samples per kept column that many columns are discarded.
PARAMS = {"epsilon": 0.5, "c": 1.5, "seed": 11}


def low_rank_columns(count: int, rank: int = 6, seed: int = 0) -> np.ndarray:
    """``N x count`` columns in a ``rank``-dimensional subspace (so most are not new)."""
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(N, rank))
    columns = basis @ rng.normal(size=(rank, count))
    return columns * rng.uniform(0.2, 3.0, size=count)


def reference(columns: np.ndarray, params: dict[str, Any] = PARAMS) -> tuple[Any, list[Any]]:
    resolved = METHOD.resolve_params(params, N)
    state = METHOD.initial_state(resolved)
    return METHOD.add_features(state, resolved, columns)


async def create_ofs(http: httpx.AsyncClient, name: str = "cols", **params: Any) -> dict[str, Any]:
    response = await http.post(
        "/v1/selectors",
        json={"name": name, "method": "ofs", "n_samples": N, "params": {**PARAMS, **params}},
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def push(
    http: httpx.AsyncClient, name: str, columns: np.ndarray, **kwargs: Any
) -> httpx.Response:
    body: dict[str, Any] = {"columns": columns.T.tolist()}
    if "names" in kwargs:
        body["names"] = kwargs.pop("names")
    return await http.post(f"/v1/selectors/{name}/features", json=body, **kwargs)


def assert_same_decisions(got: list[dict[str, Any]], expected: list[Any]) -> None:
    assert [d["index"] for d in got] == [d.index for d in expected]
    assert [d["kept"] for d in got] == [d.kept for d in expected]
    np.testing.assert_allclose(
        [d["leverage"] for d in got], [d.leverage for d in expected], rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        [d["probability"] for d in got], [d.probability for d in expected], rtol=1e-9, atol=1e-12
    )
    np.testing.assert_allclose(
        [d["scale"] for d in got], [d.scale for d in expected], rtol=1e-9, atol=1e-12
    )


async def test_create_echoes_resolved_params_and_describe_counts_features(client):
    response = await client.post(
        "/v1/selectors", json={"name": "p", "method": "ofs", "n_samples": N}
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["n_samples"] == N and created["features_seen"] == 0
    assert created["params"] == {
        "epsilon": 0.5,
        "c": pytest.approx(8 * 0.5**-2 * math.log(N)),
        "ridge": 0.0,
        "seed": 0,
    }
    await create_ofs(client, "d")
    pushed = await push(client, "d", low_rank_columns(25))
    assert pushed.status_code == 200, pushed.text
    described = (await client.get("/v1/selectors/d")).json()
    kept = sum(d["kept"] for d in pushed.json()["decisions"])
    assert described["features_seen"] == described["n_features"] == 25
    assert described["features_kept"] == kept and 0 < kept < 25
    assert described["n_samples"] == N and described["version"] >= 1
    listed = {s["name"]: s for s in (await client.get("/v1/selectors")).json()["selectors"]}
    assert listed["d"]["features_seen"] == 25


async def test_decisions_are_algorithm_1_on_the_same_columns(client):
    columns = low_rank_columns(30)
    await create_ofs(client)
    response = await push(client, "cols", columns)
    assert response.status_code == 200, response.text
    body = response.json()
    _, expected = reference(columns)
    assert_same_decisions(body["decisions"], expected)
    assert body["features_seen"] == 30 and body["duplicate"] is False
    # The stream starts: the first column is a new direction, leverage 1, kept for sure.
    assert body["decisions"][0]["leverage"] == 1.0 and body["decisions"][0]["kept"] is True
    assert [d["name"] for d in body["decisions"]] == [f"f{i}" for i in range(30)]


async def test_batching_of_columns_does_not_change_decisions(client):
    columns = low_rank_columns(24, seed=3)
    await create_ofs(client, "whole")
    await create_ofs(client, "single")
    whole = (await push(client, "whole", columns)).json()["decisions"]
    single: list[dict[str, Any]] = []
    for i in range(24):
        response = await push(client, "single", columns[:, i : i + 1])
        single += response.json()["decisions"]
    _, expected = reference(columns)
    assert_same_decisions(whole, expected)
    assert_same_decisions(single, expected)
    # Same for .npy bodies, and for entries coalesced by the applier (wait=false first).
    await create_ofs(client, "npy")
    for start in range(0, 24, 5):
        part = columns[:, start : start + 5]
        response = await client.post(
            "/v1/selectors/npy/features?wait=false",
            content=npy_bytes(part),
            headers={"content-type": "application/x-npy"},
        )
        assert response.status_code in (200, 202), response.text

    async def all_decided() -> bool:
        return bool((await client.get("/v1/selectors/npy")).json()["features_seen"] == 24)

    await wait_for(all_decided)
    page = (await client.get("/v1/selectors/npy/features?limit=100")).json()
    assert_same_decisions(page["features"], expected)


async def test_wait_false_answers_202_and_the_decisions_can_be_looked_up(app_factory):
    # No sweeper and nobody waiting: the entry stays pending until something kicks it.
    async with app_factory(sweep_interval_seconds=3600) as (_, http):
        await create_ofs(http, "later")
        await push(http, "later", low_rank_columns(3))
        columns = low_rank_columns(4, seed=8)
        response = await push(http, "later", columns, params={"wait": "false"})
        assert response.status_code == 202, response.text
        pending = response.json()
        assert pending["status"] == "pending" and pending["columns"] == 4
        assert pending["first_index"] == 3

        async def applied() -> bool:
            status = await http.get(f"/v1/selectors/later/chunks/{pending['log_id']}")
            return bool(status.json()["applied"])

        await wait_for(applied)
        page = await http.get(f"/v1/selectors/later/features?offset={pending['first_index']}")
        decided = page.json()["features"]
        assert [d["index"] for d in decided] == [3, 4, 5, 6]
        _, expected = reference(np.hstack([low_rank_columns(3), columns]))
        assert_same_decisions(decided, expected[3:])


async def test_idempotent_repeat_returns_the_same_decisions(client):
    await create_ofs(client, "idem")
    columns = low_rank_columns(10)
    headers = {"idempotency-key": "cols-1"}
    first = await push(client, "idem", columns, names=[f"x{i}" for i in range(10)], headers=headers)
    assert first.status_code == 200, first.text
    await push(client, "idem", low_rank_columns(5, seed=2))
    again = await push(client, "idem", columns, names=[f"x{i}" for i in range(10)], headers=headers)
    assert again.status_code == 200
    assert again.json()["decisions"] == first.json()["decisions"]
    assert again.json()["version"] == first.json()["version"] and again.json()["duplicate"]
    # Same columns under other names: another body under the same key.
    renamed = await push(
        client, "idem", columns, names=[f"y{i}" for i in range(10)], headers=headers
    )
    assert renamed.status_code == 422 and "different body" in renamed.json()["detail"]
    assert (await client.get("/v1/selectors/idem")).json()["features_seen"] == 15


async def test_names_are_unique_per_selector_and_f_index_is_reserved(client):
    await create_ofs(client, "named")
    ok = await push(client, "named", low_rank_columns(2), names=["age", "f1"])
    assert ok.status_code == 200, ok.text
    assert [d["name"] for d in ok.json()["decisions"]] == ["age", "f1"]
    cases = [
        (["bmi", "bmi"], 422, "'bmi' appears more than once"),
        (["age", "bmi"], 409, "'age' is already used by feature 0"),
        (["f0", "bmi"], 409, "this column is feature 2"),
        (["bmi", ""], 422, "1-256 characters"),
        (["bmi"], 422, "expected 2 names (one per column); got 1"),
    ]
    for names, status, detail in cases:
        response = await push(client, "named", low_rank_columns(2, seed=5), names=names)
        assert response.status_code == status, (names, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert detail in response.json()["detail"], response.json()["detail"]
    # Nothing was written by the rejected requests: the next column is feature 2.
    unnamed = await push(client, "named", low_rank_columns(1, seed=6))
    assert unnamed.json()["decisions"][0]["index"] == 2
    assert unnamed.json()["decisions"][0]["name"] == "f2"
    described = (await client.get("/v1/selectors/named")).json()
    assert described["features_seen"] == 3 and described["state"]["pending_entries"] == 0


async def test_bad_columns_are_rejected_and_change_nothing(client):
    await create_ofs(client, "bad")
    await push(client, "bad", low_rank_columns(3))
    before = (await client.get("/v1/selectors/bad")).json()
    nan = low_rank_columns(2)
    nan[5, 1] = np.nan
    wrong_length = {"columns": [[1.0] * (N - 1)]}
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"json": wrong_length}, 422, f"expected columns of n_samples={N} values; got {N - 1}"),
        ({"json": {"columns": [[1.0] * N, [1.0] * (N + 1)]}}, 422, "column 1 has"),
        (
            {"content": npy_bytes(nan), "headers": {"content-type": "application/x-npy"}},
            422,
            "got nan in column 1 at sample 5",
        ),
        ({"json": {"columns": []}}, 422, "expected at least one column"),
        ({"json": [[1.0] * N]}, 422, '"columns"'),
        ({"json": {"columns": [[1.0] * N], "rows": 1}}, 422, "unexpected keys ['rows']"),
        ({"json": {"columns": [["a"] + [1.0] * (N - 1)]}}, 422, "column 0, sample 0"),
        (
            {
                "content": npy_bytes(np.ones((N, 2, 2))),
                "headers": {"content-type": "application/x-npy"},
            },
            422,
            "2-D",
        ),
        (
            {
                "content": npy_bytes(np.full((N, 1), np.inf)),
                "headers": {"content-type": "application/x-npy"},
            },
            422,
            "finite",
        ),
        (
            {"content": b"1,2,3", "headers": {"content-type": "text/csv"}},
            415,
            "application/json",
        ),
    ]
    for kwargs, status, detail in cases:
        response = await client.post("/v1/selectors/bad/features", **kwargs)
        assert response.status_code == status, (kwargs, response.text)
        assert detail in response.json()["detail"], response.json()["detail"]
    rows = await client.post("/v1/selectors/bad/chunks", json=[[1.0] * N])
    assert rows.status_code == 422 and "/v1/selectors/bad/features" in rows.json()["detail"]
    after = (await client.get("/v1/selectors/bad")).json()
    assert after["version"] == before["version"] and after["features_seen"] == 3
    assert after["state"]["pending_entries"] == 0


async def test_zero_columns_get_leverage_zero_and_are_never_kept(client):
    await create_ofs(client, "zeros")
    columns = low_rank_columns(4)
    columns[:, 0] = 0.0
    columns[:, 2] = 0.0
    decisions = (await push(client, "zeros", columns)).json()["decisions"]
    for zero in (decisions[0], decisions[2]):
        assert zero == {**zero, "leverage": 0.0, "probability": 0.0, "kept": False, "scale": 0}
    assert decisions[1]["leverage"] == 1.0 and decisions[1]["kept"]


async def test_top_and_weights_rank_by_online_leverage(client):
    columns = low_rank_columns(20, seed=4)
    await create_ofs(client, "rank")
    names = [f"gene{i}" for i in range(20)]
    await push(client, "rank", columns, names=names)
    state, _ = reference(columns)
    leverage = METHOD.weights(state, METHOD.resolve_params(PARAMS, N))
    top = (await client.get("/v1/selectors/rank/top?h=8")).json()
    order = np.lexsort((np.arange(20), -leverage))[:8]
    assert [f["index"] for f in top["features"]] == order.tolist()
    assert [f["name"] for f in top["features"]] == [names[i] for i in order]
    np.testing.assert_allclose([f["score"] for f in top["features"]], leverage[order], rtol=1e-9)
    weights = (await client.get("/v1/selectors/rank/weights")).json()["weights"]
    np.testing.assert_allclose(weights, leverage, rtol=1e-9, atol=1e-12)


async def test_cluster_runs_kmeans_on_the_kept_rescaled_columns(client):
    rng = np.random.default_rng(1)
    centres = rng.normal(scale=4.0, size=(3, 12))
    samples = np.repeat(centres, [14, 13, 13], axis=0) + rng.normal(size=(N, 12))
    await create_ofs(client, "km", c=3.0)
    empty = await client.post("/v1/selectors/km/cluster", json={"k": 3})
    assert empty.status_code == 409 and "no feature has been kept yet" in empty.json()["detail"]
    await push(client, "km", samples)
    response = await client.post("/v1/selectors/km/cluster", json={"k": 3, "seed": 5})
    assert response.status_code == 200, response.text
    body = response.json()
    state, _ = reference(samples, {**PARAMS, "c": 3.0})
    labels, objective = cluster_samples(METHOD.kept_matrix(state), 3, 5)
    assert body["labels"] == labels.tolist() and len(body["labels"]) == N
    assert body["objective"] == pytest.approx(objective, rel=1e-9)
    assert body["features_used"] == METHOD.kept_matrix(state).shape[1]
    # The three planted groups are found.
    truth = np.repeat([0, 1, 2], [14, 13, 13])
    assert len({(t, g) for t, g in zip(truth, body["labels"], strict=True)}) == 3
    for payload, status, detail in [
        ({"k": N + 1}, 422, f"k must be at most the selector's n_samples={N}"),
        ({"k": 0}, 422, "k: Input should be greater than or equal to 1"),
        ({"k": 2, "seed": -1}, 422, "seed"),
        ({"k": "3"}, 422, "k"),
    ]:
        bad = await client.post("/v1/selectors/km/cluster", json=payload)
        assert bad.status_code == status, (payload, bad.text)
        assert detail in bad.text
    await client.post("/v1/selectors", json={"name": "rows", "method": "fsds", "n_features": 3})
    wrong = await client.post("/v1/selectors/rows/cluster", json={"k": 2})
    assert wrong.status_code == 422 and "/v1/selectors/rows/chunks" in wrong.json()["detail"]
    wrong = await client.post("/v1/selectors/rows/features", json={"columns": [[1.0, 2.0]]})
    assert wrong.status_code == 422


async def test_invalid_creation_is_rejected(client):
    cases: list[tuple[dict[str, object], str]] = [
        ({"method": "ofs", "n_features": 10}, "expected n_samples"),
        ({"method": "ofs"}, "n_samples must be an integer"),
        ({"method": "ofs", "n_samples": 0}, "n_samples must be between 1"),
        ({"method": "fsds", "n_features": 3, "n_samples": 10}, "not n_samples"),
        ({"method": "ofs", "n_samples": 10, "params": {"epsilon": 1.5}}, "epsilon must be"),
        ({"method": "ofs", "n_samples": 10, "params": {"ridge": -1}}, "ridge must be a finite"),
        ({"method": "ofs", "n_samples": 10, "params": {"lambda": 1}}, "unknown parameter"),
        ({"method": "ofs", "n_samples": 10, "params": {"c": 0}}, "c must be a finite number > 0"),
    ]
    for body, detail in cases:
        response = await client.post("/v1/selectors", json={"name": "x", **body})
        assert response.status_code == 422, (body, response.text)
        assert detail in response.json()["detail"], response.json()["detail"]
    assert (await client.get("/v1/selectors")).json()["selectors"] == []


async def test_restart_keeps_the_stream_and_the_decisions_continue_exactly(redis_url, redis_client):
    columns = low_rank_columns(30, seed=9)
    settings = make_settings(redis_url)
    async with running_app(settings) as (_, http):
        await create_ofs(http, "durable", ridge=0.5)
        first = (await push(http, "durable", columns[:, :17])).json()["decisions"]
    async with running_app(settings) as (_, http):
        described = (await http.get("/v1/selectors/durable")).json()
        assert described["features_seen"] == 17
        rest = (await push(http, "durable", columns[:, 17:])).json()["decisions"]
        cluster = await http.post("/v1/selectors/durable/cluster", json={"k": 2})
        assert cluster.status_code == 200
    _, expected = reference(columns, {**PARAMS, "ridge": 0.5})
    assert_same_decisions(first + rest, expected)
