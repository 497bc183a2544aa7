"""OCFS and IOC selectors over HTTP: labelled chunks, classes, merges, projections, bad input."""

from __future__ import annotations

import io
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits

from service.algorithms.ioc import IOC, projection
from service.algorithms.labels import labelled
from service.algorithms.ocfs import between_class_scatter, oc_directions
from tests.support.api import csr_json, npy_bytes, npz_labelled, wait_for
from tests.support.states import array_field

pytestmark = pytest.mark.asyncio


async def create(http: httpx.AsyncClient, name: str, method: str, m: int, **body: Any) -> Any:
    response = await http.post(
        "/v1/selectors", json={"name": name, "method": method, "n_features": m, **body}
    )
    assert response.status_code == 201, response.text
    return response.json()


async def push(http: httpx.AsyncClient, name: str, rows: Any, labels: list[Any], **kw: Any) -> Any:
    response = await http.post(
        f"/v1/selectors/{name}/chunks",
        json={"rows": np.asarray(rows).tolist(), "labels": labels},
        **kw,
    )
    return response


def digits() -> tuple[np.ndarray, list[int]]:
    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))[:600]
    return x[order], [int(v) for v in y[order]]


async def test_ocfs_rankings_and_classes_over_every_body_format(client):
    x, y = digits()
    names = [f"px{i}" for i in range(64)]
    await create(client, "digits", "ocfs", 64, feature_names=names)
    labels: list[Any] = [f"d{v}" if v % 2 else v for v in y]  # strings and integers
    assert (await push(client, "digits", x[:200], labels[:200])).status_code == 200
    response = await client.post(
        "/v1/selectors/digits/chunks",
        json={**csr_json(x[200:400]), "labels": labels[200:400]},
    )
    assert response.status_code == 200, response.text
    response = await client.post(
        "/v1/selectors/digits/chunks",
        content=npz_labelled(sp.csr_matrix(x[400:500]), [str(v) for v in labels[400:500]]),
        headers={"content-type": "application/x-npz"},
    )
    assert response.status_code == 200, response.text
    response = await client.post(
        "/v1/selectors/digits/chunks",
        content=npz_labelled(x[500:], [str(v) for v in labels[500:]]),
        headers={"content-type": "application/x-npz"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["rows_seen"] == 600

    # .npz labels are strings: "0" is another class than the integer 0 sent as JSON.
    sent = labels[:400] + [str(v) for v in labels[400:]]
    described = (await client.get("/v1/selectors/digits")).json()
    expected = list(dict.fromkeys((type(v), v) for v in sent))
    assert [(type(c["label"]), c["label"]) for c in described["classes"]] == expected
    assert [c["count"] for c in described["classes"]] == [
        sum(1 for v in sent if (type(v), v) == key) for key in expected
    ]
    top = (await client.get("/v1/selectors/digits/top", params={"h": 10})).json()
    scores = np.diag(between_class_scatter(x, sent))
    order = np.lexsort((np.arange(64), -scores))[:10]
    assert [f["index"] for f in top["features"]] == [int(i) for i in order]
    assert [f["name"] for f in top["features"]] == [names[i] for i in order]
    np.testing.assert_allclose([f["score"] for f in top["features"]], scores[order], rtol=1e-9)
    weights = (await client.get("/v1/selectors/digits/weights")).json()["weights"]
    assert sum(weights) == pytest.approx(np.trace(between_class_scatter(x, sent)), rel=1e-9)


async def test_merge_equals_one_selector_over_the_union(client):
    x, y = digits()
    for name in ("east", "west", "all"):
        await create(client, name, "ocfs", 64)
    await push(client, "east", x[:300], y[:300])
    await push(client, "west", x[300:], y[300:])
    await push(client, "all", x, y)
    headers = {"Idempotency-Key": "merge-west-1"}
    response = await client.post("/v1/selectors/east/merge", json={"from": "west"}, headers=headers)
    assert response.status_code == 200, response.text
    merged = response.json()
    assert merged["rows_seen"] == 600 and merged["rows"] == 300
    assert merged["merged"] == {"from": "west", "version": 1, "rows": 300}
    assert merged["duplicate"] is False
    east = (await client.get("/v1/selectors/east/weights")).json()["weights"]
    union = (await client.get("/v1/selectors/all/weights")).json()["weights"]
    np.testing.assert_allclose(east, union, rtol=1e-12)
    # A retry with the same key does not merge twice.
    again = await client.post("/v1/selectors/east/merge", json={"from": "west"}, headers=headers)
    assert again.status_code == 200 and again.json()["duplicate"] is True
    described = (await client.get("/v1/selectors/east")).json()
    assert described["rows_seen"] == 600
    assert sum(c["count"] for c in described["classes"]) == 600
    # The source is untouched.
    assert (await client.get("/v1/selectors/west")).json()["rows_seen"] == 300


async def test_merge_applies_the_sources_pending_chunks_first(client):
    x, y = digits()
    await create(client, "a", "ocfs", 64)
    await create(client, "b", "ocfs", 64)
    await push(client, "a", x[:100], y[:100])
    for start in range(100, 600, 100):
        response = await push(
            client, "b", x[start : start + 100], y[start : start + 100], params={"wait": "false"}
        )
        assert response.status_code in (200, 202)
    response = await client.post("/v1/selectors/a/merge", json={"from": "b"})
    assert response.status_code == 200, response.text
    assert response.json()["merged"]["rows"] == 500
    weights = (await client.get("/v1/selectors/a/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.diag(between_class_scatter(x, y)), rtol=1e-9)


async def test_bad_merges_are_refused_and_change_nothing(client):
    x, y = digits()
    await create(client, "target", "ocfs", 64)
    await create(client, "empty", "ocfs", 64)
    await create(client, "narrow", "ocfs", 8)
    await create(client, "proj", "ioc", 64)
    await push(client, "target", x[:50], y[:50])
    await push(client, "proj", x[:50], y[:50])
    cases = [
        ("target", {"from": "target"}, 422, "into itself"),
        ("target", {"from": "nowhere"}, 404, "nowhere"),
        ("target", {"from": "narrow"}, 422, "8"),
        ("target", {"from": "proj"}, 422, "ioc"),
        ("target", {"from": "empty"}, 409, "no rows"),
        ("proj", {"from": "target"}, 422, "only some methods can (fsds, ocfs"),
        ("target", {"source": "empty"}, 422, ""),
        ("target", {"from": "bad name!"}, 422, "from: expected a selector name"),
    ]
    for name, body, status, text in cases:
        response = await client.post(f"/v1/selectors/{name}/merge", json=body)
        assert response.status_code == status, (body, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert text in response.json()["detail"] or not text
    described = (await client.get("/v1/selectors/target")).json()
    assert described["version"] == 1 and described["rows_seen"] == 50


async def test_ioc_projection_transform_and_top_match_the_library(client):
    x, y = digits()
    await create(client, "oc", "ioc", 64, params={"n_components": 3, "amnesia": 2})
    for start in range(0, 600, 150):
        response = await push(client, "oc", x[start : start + 150], y[start : start + 150])
        assert response.status_code == 200, response.text
    method = IOC()
    params = method.resolve_params({"n_components": 3, "amnesia": 2}, 64)
    state = method.update(method.initial_state(params), params, labelled(x, y))
    expected = projection(np.asarray(state["vectors"]))

    answer = (await client.get("/v1/selectors/oc/projection")).json()
    assert answer["n_components"] == 3 and answer["rows_seen"] == 600
    assert answer["solution"] == "ioc"
    np.testing.assert_allclose(answer["projection"], expected, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(answer["eigenvalues"], array_field(state, "eigenvalues"), rtol=1e-9)
    batch, batch_values = oc_directions(x, y, 3)
    agreement = np.abs(np.sum(expected * batch, axis=0))
    np.testing.assert_allclose(answer["agreement"], agreement, rtol=1e-9)
    assert np.all(agreement > 0.8) and np.all(agreement < 1 - 1e-6)  # close, not exact
    exact = (await client.get("/v1/selectors/oc/projection?solution=exact")).json()
    assert exact["solution"] == "exact"
    np.testing.assert_allclose(np.abs(np.sum(np.asarray(exact["projection"]) * batch, axis=0)), 1)
    np.testing.assert_allclose(exact["eigenvalues"], batch_values, rtol=1e-9)
    np.testing.assert_allclose(exact["agreement"], agreement, rtol=1e-9)
    bad = await client.get("/v1/selectors/oc/projection?solution=best")
    assert bad.status_code == 422
    as_npy = await client.get(
        "/v1/selectors/oc/projection", headers={"accept": "application/x-npy"}
    )
    assert as_npy.headers["content-type"] == "application/x-npy"
    assert as_npy.headers["sift-version"] == "4"
    np.testing.assert_allclose(np.load(io.BytesIO(as_npy.content)), expected, rtol=1e-9)

    new_rows = x[:5]
    response = await client.post(
        "/v1/selectors/oc/transform",
        content=npy_bytes(new_rows),
        headers={"content-type": "application/x-npy"},
    )
    assert response.status_code == 200, response.text
    np.testing.assert_allclose(response.json()["rows"], new_rows @ expected, rtol=1e-9)
    response = await client.post(
        "/v1/selectors/oc/transform",
        json=csr_json(new_rows),
        headers={"accept": "application/x-npy"},
    )
    np.testing.assert_allclose(np.load(io.BytesIO(response.content)), new_rows @ expected)

    top = (await client.get("/v1/selectors/oc/top", params={"h": 5})).json()
    weights = np.asarray(state["weights"])
    assert [f["index"] for f in top["features"]] == list(np.lexsort((np.arange(64), -weights))[:5])
    described = (await client.get("/v1/selectors/oc")).json()
    assert len(described["classes"]) == 10
    assert described["state"]["vectors_started"] == 3


async def test_projection_waits_for_enough_classes_and_vectors(client):
    await create(client, "few", "ioc", 4, params={"n_components": 2})
    response = await client.get("/v1/selectors/few/projection")
    assert (
        response.status_code == 409
        and "0 of the n_components=2 vectors have started" in response.json()["detail"]
    )
    await push(client, "few", [[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0]], ["a", "b", "a"])
    response = await client.get("/v1/selectors/few/projection")
    assert response.status_code == 409
    assert "rank at most 1" in response.json()["detail"]
    assert "n_components <= 1" in response.json()["detail"]
    response = await client.post("/v1/selectors/few/transform", json=[[1, 2, 3, 4]])
    assert response.status_code == 409
    await push(client, "few", [[0, 0, 1, 0]], ["c"])
    response = await client.get("/v1/selectors/few/projection")
    assert response.status_code == 200, response.text
    response = await client.get("/v1/selectors/digits-none/projection")
    assert response.status_code == 404


async def test_bad_labelled_chunks_are_refused_and_change_nothing(client):
    await create(client, "lab", "ocfs", 3)
    await create(client, "plain", "fsds", 3)
    ok = await push(client, "lab", [[1, 2, 3], [4, 5, 6]], ["a", "b"])
    assert ok.status_code == 200
    before = (await client.get("/v1/selectors/lab")).json()
    json_cases: list[tuple[Any, int, str]] = [
        ([[1, 2, 3]], 422, "labelled rows"),
        ({"rows": [[1, 2, 3]]}, 422, "labelled rows"),
        ({"rows": [[1, 2, 3], [1, 2, 3]], "labels": ["a"]}, 422, "expected 2 labels"),
        ({"rows": [[1, 2, 3]], "labels": [1.5]}, 422, "integers or strings"),
        ({"rows": [[1, 2, 3]], "labels": [True]}, 422, "integers or strings"),
        ({"rows": [[1, 2, 3]], "labels": [None]}, 422, "integers or strings"),
        ({"rows": [[1, 2, 3]], "labels": [""]}, 422, "1-256 characters"),
        ({"rows": [[1, 2, 3]], "labels": [2**70]}, 422, "integers or strings"),
        ({"rows": [[1, 2, 3]], "labels": "a"}, 422, "must be a list"),
        ({"rows": [[1, 2]], "labels": ["a"]}, 422, "expected 3 features"),
        ({"rows": [[1, 2, 3]], "labels": ["a"], "weights": [1]}, 422, "unexpected keys"),
    ]
    for body, status, text in json_cases:
        response = await client.post("/v1/selectors/lab/chunks", json=body)
        assert response.status_code == status, (body, response.text)
        assert text in response.json()["detail"], response.json()["detail"]
    nan = await client.post(
        "/v1/selectors/lab/chunks",
        content=b'{"rows": [[1, NaN, 3]], "labels": ["a"]}',
        headers={"content-type": "application/json"},
    )
    assert nan.status_code in (400, 422)
    npz_nan = await client.post(
        "/v1/selectors/lab/chunks",
        content=npz_labelled(np.array([[1.0, np.nan, 3.0]]), ["a"]),
        headers={"content-type": "application/x-npz"},
    )
    assert npz_nan.status_code == 422 and "finite" in npz_nan.json()["detail"]
    float_labels = await client.post(
        "/v1/selectors/lab/chunks",
        content=npz_labelled(np.ones((2, 3)), np.array([0.5, 1.0])),
        headers={"content-type": "application/x-npz"},
    )
    assert float_labels.status_code == 422 and "dtype float64" in float_labels.json()["detail"]
    huge = await client.post(
        "/v1/selectors/lab/chunks",
        content=npz_labelled(np.ones((1, 3)), np.array([2**64 - 1], dtype=np.uint64)),
        headers={"content-type": "application/x-npz"},
    )
    assert huge.status_code == 422 and "64 bits" in huge.json()["detail"]
    npy = await client.post(
        "/v1/selectors/lab/chunks",
        content=npy_bytes(np.ones((2, 3))),
        headers={"content-type": "application/x-npy"},
    )
    assert npy.status_code == 415 and "cannot carry labels" in npy.json()["detail"]
    plain = await push(client, "plain", [[1, 2, 3]], ["a"])
    assert plain.status_code == 422 and "labelled methods" in plain.json()["detail"]
    after = (await client.get("/v1/selectors/lab")).json()
    assert after["version"] == before["version"] and after["classes"] == before["classes"]
    assert (await client.get("/v1/selectors/plain")).json()["version"] == 0


async def test_ioc_parameters_are_validated_at_creation(client):
    for params, text in (
        ({"n_components": 0}, "n_components"),
        ({"n_components": 9}, "n_features=4"),
        ({"amnesia": -1}, "amnesia"),
        ({"decay": 1}, "unknown parameter"),
    ):
        response = await client.post(
            "/v1/selectors",
            json={"name": "bad", "method": "ioc", "n_features": 4, "params": params},
        )
        assert response.status_code == 422 and text in response.json()["detail"]
    response = await client.post(
        "/v1/selectors", json={"name": "bad", "method": "ocfs", "n_features": 4, "params": {"k": 1}}
    )
    assert (
        response.status_code == 422
        and "some of: standardize, resamples" in response.json()["detail"]
    )


async def test_labelled_chunks_survive_a_restart_and_coalesce_in_log_order(app_factory):
    x, y = digits()
    async with app_factory() as (_, http):
        await create(http, "durable", "ioc", 64, params={"n_components": 2})
        for start in range(0, 300, 30):
            response = await push(
                http,
                "durable",
                x[start : start + 30],
                y[start : start + 30],
                params={"wait": "false"},
            )
            assert response.status_code in (200, 202)

        async def applied() -> bool:
            return bool((await http.get("/v1/selectors/durable")).json()["rows_seen"] == 300)

        await wait_for(applied)
    async with app_factory() as (_, http):
        vectors = (await http.get("/v1/selectors/durable/projection")).json()["projection"]
    method = IOC()
    params = method.resolve_params({"n_components": 2}, 64)
    state = method.update(method.initial_state(params), params, labelled(x[:300], y[:300]))
    np.testing.assert_allclose(vectors, projection(np.asarray(state["vectors"])), rtol=1e-12)


async def test_the_number_of_classes_is_bounded(client, monkeypatch):
    import service.selectors

    monkeypatch.setattr(service.selectors.ingest, "MAX_CLASS_CELLS", 12)  # 12 sums of 3 features: 4
    await create(client, "many", "ocfs", 3)
    assert (await push(client, "many", np.ones((3, 3)), ["a", "b", "c"])).status_code == 200
    response = await push(client, "many", np.ones((2, 3)), ["a", "d"])
    assert response.status_code == 200, response.text
    response = await push(client, "many", np.ones((2, 3)), ["b", "e"])
    assert response.status_code == 422
    assert "at most 4 classes" in response.json()["detail"]
    assert "has 4 and this chunk brings 1 new" in response.json()["detail"]
    assert (await client.get("/v1/selectors/many")).json()["rows_seen"] == 5


async def test_ocfs_standardize_ranks_wine_by_separation_not_by_magnitude(client):
    """On wine, plain OCFS ranks proline first for its magnitude (hundreds, where most features
    are below 10); standardized, each feature is judged against its own within-class spread,
    and the separation the classes make leads. Both are the numpy reference's scores."""
    from sklearn.datasets import load_wine

    wine = load_wine()
    x, y = np.asarray(wine.data), [int(v) for v in wine.target]
    names = [str(n) for n in wine.feature_names]
    tops = {}
    for name, standardize in (("plain", False), ("scaled", True)):
        body = {"name": name, "method": "ocfs", "n_features": x.shape[1], "feature_names": names}
        params = {"standardize": standardize}
        created = await client.post("/v1/selectors", json={**body, "params": params})
        assert created.status_code == 201, created.text
        assert created.json()["params"]["standardize"] is standardize
        for start in range(0, len(y), 50):  # chunked, as a stream comes
            pushed = await push(client, name, x[start : start + 50], y[start : start + 50])
            assert pushed.status_code == 200, pushed.text
        answer = (await client.get(f"/v1/selectors/{name}/top", params={"h": 13})).json()
        tops[name] = answer["features"]
    classes = np.unique(y)
    target = np.asarray(y)
    means = np.array([x[target == c].mean(axis=0) for c in classes])
    counts = np.array([np.sum(target == c) for c in classes])
    between = (counts[:, None] * (means - x.mean(axis=0)) ** 2).sum(axis=0) / len(y)
    within = sum(((x[target == c] - means[i]) ** 2).sum(axis=0) for i, c in enumerate(classes))
    expected = {"plain": between, "scaled": between / (within / len(y))}
    for name, features in tops.items():
        got = {f["index"]: f["score"] for f in features}
        want = expected[name]
        ratio = [got[i] / want[i] for i in range(x.shape[1])]
        assert np.allclose(ratio, ratio[0], rtol=1e-9), (name, ratio)  # up to one constant
        assert [f["index"] for f in features] == list(np.argsort(-want, kind="stable"))
    assert tops["plain"][0]["name"] == "proline"
    assert tops["scaled"][0]["name"] == "flavanoids"
