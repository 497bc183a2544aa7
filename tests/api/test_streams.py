"""Streams through HTTP, against one redis-server and a Redis Cluster: one push, applied by
every attached selector exactly once, each as if the chunk had been pushed to it alone.

The references are selectors fed the same chunks directly (``variance`` and ``ocfs`` are exact
for any chunking, so their scores must be equal bit for bit) and ``service.algorithms.agreement``
for the side-by-side agreement.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from service.algorithms.agreement import jaccard, rank_biased_overlap
from service.store.records import Entry
from tests.support.api import assert_problem, npy_bytes, npz_labelled, wait_for

pytestmark = pytest.mark.asyncio

LABELS = ["a", "b", "c"]


def labelled_chunk(seed: int, rows: int = 20, m: int = 6) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, m))
    x[:, 2] *= 4  # a feature with a larger spread, for rankings that are not all ties
    labels = [LABELS[i % 3] for i in range(rows)]
    x[:, 4] += np.array([3.0 * (i % 3) for i in range(rows)])  # the class-separating feature
    return x, labels


async def create_stream(http: httpx.AsyncClient, name: str = "st", **body: Any) -> dict[str, Any]:
    response = await http.post("/v1/streams", json={"name": name, **body})
    assert response.status_code == 201, response.text
    assert response.headers["location"] == f"/v1/streams/{name}"
    created: dict[str, Any] = response.json()
    return created


async def attach(
    http: httpx.AsyncClient, name: str, method: str, stream: str = "st", **body: Any
) -> dict[str, Any]:
    response = await http.post(
        "/v1/selectors", json={"name": name, "method": method, "stream": stream, **body}
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    assert created["stream"] == stream
    return created


async def push_labelled(
    http: httpx.AsyncClient, x: np.ndarray, labels: list[str], key: str | None = None, **params
) -> httpx.Response:
    headers = {"content-type": "application/x-npz"}
    if key is not None:
        headers["idempotency-key"] = key
    return await http.post(
        "/v1/streams/st/chunks",
        content=npz_labelled(x, labels),
        headers=headers,
        params=params,
    )


async def weights(http: httpx.AsyncClient, name: str) -> np.ndarray:
    response = await http.get(f"/v1/selectors/{name}/weights")
    assert response.status_code == 200, response.text
    return np.array(response.json()["weights"])


async def test_one_push_is_applied_by_every_selector_as_a_direct_push_would_be(client):
    created = await create_stream(client, n_features=6, labelled=True)
    assert created["chunk_kind"] == "labelled rows"
    assert created["methods"] == ["anova", "chi2", "fsds", "ioc", "ocfs", "variance"]
    for method in ("fsds", "variance", "ocfs"):
        await attach(client, f"on-{method}", method)
        # The same method fed directly: the reference.
        body: dict[str, Any] = {"name": f"direct-{method}", "method": method, "n_features": 6}
        assert (await client.post("/v1/selectors", json=body)).status_code == 201
    total = 0
    for seed in range(4):
        x, labels = labelled_chunk(seed)
        answer = await push_labelled(client, x, labels)
        assert answer.status_code == 200, answer.text
        total += len(x)
        body = answer.json()
        assert body["status"] == "applied" and body["items"] == len(x)
        assert body["first_index"] == total - len(x)
        assert sorted(s["name"] for s in body["selectors"]) == ["on-fsds", "on-ocfs", "on-variance"]
        assert {s["status"] for s in body["selectors"]} == {"applied"}
        assert {s["rows_seen"] for s in body["selectors"]} == {total}
        for method in ("fsds", "variance", "ocfs"):
            direct = x if method != "ocfs" else None
            if direct is not None:
                response = await client.post(
                    f"/v1/selectors/direct-{method}/chunks",
                    content=npy_bytes(direct),
                    headers={"content-type": "application/x-npy"},
                )
            else:
                response = await client.post(
                    "/v1/selectors/direct-ocfs/chunks",
                    content=npz_labelled(x, labels),
                    headers={"content-type": "application/x-npz"},
                )
            assert response.status_code == 200, response.text
    for method in ("fsds", "variance", "ocfs"):
        described = (await client.get(f"/v1/selectors/on-{method}")).json()
        assert described["rows_seen"] == total and described["version"] == 4
        assert described["stream"] == "st" and described["stream_base"] == 0
        # The labelled stream's rows without their labels, for fsds and variance: the same
        # state as the rows pushed directly.
        assert np.array_equal(
            await weights(client, f"on-{method}"), await weights(client, f"direct-{method}")
        )
    stream = (await client.get("/v1/streams/st")).json()
    assert stream["entries"] == 4 and stream["items"] == total
    assert [s["name"] for s in stream["selectors"]] == ["on-fsds", "on-ocfs", "on-variance"]
    assert {s["pending_entries"] for s in stream["selectors"]} == {0}


async def test_a_stream_checks_its_chunks_and_who_attaches(client):
    assert_problem(await client.post("/v1/streams", json={"name": "x"}), 422, "shape")
    assert_problem(
        await client.post("/v1/streams", json={"name": "x", "n_features": 3, "views": {"a": 2}}),
        422,
        "n_features, views",
    )
    assert_problem(
        await client.post("/v1/streams", json={"name": "x", "views": {"a": 2}, "labelled": True}),
        422,
        "labelled applies to streams of rows",
    )
    assert_problem(
        await client.post("/v1/streams", json={"name": "x", "n_features": 3, "k": 1}),
        422,
        "unexpected fields ['k']",
    )
    await create_stream(client, n_features=3, feature_names=["u", "v", "w"])
    assert_problem(await client.post("/v1/streams", json={"name": "st", "n_features": 3}), 409)
    # Unlabelled rows feed fsds and variance, not the labelled methods nor feature columns.
    for method in ("ocfs", "iqrp"):
        response = await client.post(
            "/v1/selectors", json={"name": "no", "method": method, "stream": "st"}
        )
        assert_problem(response, 422, "fsds, variance")
        assert response.json()["type"] == "urn:sift:problem:selector-mismatch"
    assert_problem(
        await client.post(
            "/v1/selectors",
            json={"name": "no", "method": "fsds", "stream": "st", "n_features": 3},
        ),
        422,
        "takes the stream's shape",
    )
    assert_problem(
        await client.post(
            "/v1/selectors", json={"name": "no", "method": "fsds", "stream": "st", "from": "x"}
        ),
        422,
        "from must be 'start' or 'now'",
    )
    assert_problem(
        await client.post("/v1/selectors", json={"name": "no", "method": "fsds", "stream": "zz"}),
        404,
        "stream 'zz'",
    )
    assert_problem(
        await client.post(
            "/v1/selectors",
            json={"name": "no", "method": "fsds", "stream": "st", "expires_after": 60},
        ),
        422,
        "expires_after applies to selectors without a stream",
    )
    # The stream's names are the selector's, and its chunks are checked against them.
    created = await attach(client, "named", "variance")
    assert created["has_feature_names"] is True
    wide = await client.post("/v1/streams/st/chunks", json=[[1.0, 2.0]])
    assert_problem(wide, 422)
    renamed = await client.post(
        "/v1/streams/st/chunks", json={"rows": [[1.0, 2.0, 3.0]], "feature_names": ["w", "u", "v"]}
    )
    assert renamed.status_code == 200, renamed.text
    top = (await client.get("/v1/selectors/named/top", params={"h": 3})).json()
    assert [f["name"] for f in top["features"]] == ["u", "v", "w"]  # variance 0 each: by index
    # A selector attached to a stream takes no chunk directly.
    direct = await client.post("/v1/selectors/named/chunks", json=[[1.0, 2.0, 3.0]])
    assert_problem(direct, 409, "POST /v1/streams/st/chunks")
    assert_problem(
        await client.post(
            "/v1/streams/st/chunks", content=b"x", headers={"content-type": "text/plain"}
        ),
        415,
    )
    assert_problem(await client.post("/v1/streams/none/chunks", json=[[1, 2, 3]]), 404)


async def test_idempotency_keys_and_concurrent_pushes_are_applied_once_per_selector(client):
    await create_stream(client, n_features=6, labelled=True)
    for method in ("variance", "ocfs"):
        await attach(client, f"on-{method}", method)
    chunks = [labelled_chunk(seed, rows=3 + seed % 5) for seed in range(24)]

    async def push(i: int) -> dict[str, Any]:
        x, labels = chunks[i]
        response = await push_labelled(client, x, labels, key=f"k{i}")
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    first = await asyncio.gather(*(push(i) for i in range(len(chunks))))
    assert not any(answer["duplicate"] for answer in first)
    assert len({answer["log_id"] for answer in first}) == len(chunks)
    again = await asyncio.gather(*(push(i) for i in range(len(chunks))))
    for before, after in zip(first, again, strict=True):
        assert after["duplicate"] and after["log_id"] == before["log_id"]
        assert after["first_index"] == before["first_index"]
        assert {s["status"] for s in after["selectors"]} == {"applied"}
    total = sum(len(x) for x, _labels in chunks)
    x_all = np.vstack([x for x, _labels in chunks])
    for method in ("variance", "ocfs"):
        assert (await client.get(f"/v1/selectors/on-{method}")).json()["rows_seen"] == total
    # Variance is exact for any chunking: the population variance of every row, once.
    assert np.allclose(await weights(client, "on-variance"), x_all.var(axis=0), rtol=1e-12)
    ocfs = (await client.get("/v1/selectors/on-ocfs")).json()
    assert sum(c["count"] for c in ocfs["classes"]) == total
    x0, labels0 = chunks[0]
    mismatch = await push_labelled(client, x0 + 1, labels0, key="k0")
    assert_problem(mismatch, 422, "different body")


async def test_wait_false_answers_202_and_the_status_follows_each_selector(client):
    await create_stream(client, n_features=6)
    await attach(client, "v1", "variance")
    await attach(client, "f1", "fsds")
    x, _labels = labelled_chunk(1)
    pending = await client.post(
        "/v1/streams/st/chunks",
        content=npy_bytes(x),
        headers={"content-type": "application/x-npy"},
        params={"wait": "false"},
    )
    assert pending.status_code == 202, pending.text
    log_id = pending.json()["log_id"]

    async def applied() -> bool:
        status = (await client.get(f"/v1/streams/st/chunks/{log_id}")).json()
        return bool(status["status"] == "applied")

    await wait_for(applied)
    status = (await client.get(f"/v1/streams/st/chunks/{log_id}")).json()
    assert {(s["name"], s["status"], s["rows_seen"]) for s in status["selectors"]} == {
        ("f1", "applied", 20),
        ("v1", "applied", 20),
    }
    # Each selector knows the stream's log id as its own chunk.
    assert (await client.get(f"/v1/selectors/v1/chunks/{log_id}")).json()["applied"] is True
    assert_problem(await client.get("/v1/streams/st/chunks/1-1"), 404)
    assert_problem(await client.get("/v1/selectors/v1/chunks/1-1"), 404)


async def test_from_now_starts_after_what_was_pushed(client):
    await create_stream(client, n_features=6)
    x, _labels = labelled_chunk(2)
    npy = {"content-type": "application/x-npy"}
    first = await client.post("/v1/streams/st/chunks", content=npy_bytes(x), headers=npy)
    assert first.json()["selectors"] == []  # nobody attached yet: applied by nobody
    await attach(client, "from-start", "variance")
    await attach(client, "from-now", "variance", **{"from": "now"})
    second = await client.post("/v1/streams/st/chunks", content=npy_bytes(x[:5]), headers=npy)
    assert {s["name"] for s in second.json()["selectors"]} == {"from-start", "from-now"}
    await wait_for(lambda: _rows_seen(client, "from-start", 25))
    assert (await client.get("/v1/selectors/from-now")).json()["rows_seen"] == 5


async def _rows_seen(client: httpx.AsyncClient, name: str, rows: int) -> bool:
    return bool((await client.get(f"/v1/selectors/{name}")).json()["rows_seen"] == rows)


async def test_a_selector_that_cannot_apply_a_chunk_rejects_it_alone(app_factory):
    # A tiny state limit: ocfs outgrows it with many classes (a row of sums each), while
    # variance's state does not grow: the chunk is ocfs's rejection, and variance's chunk.
    async with app_factory(max_state_bytes=1024) as (_app, client):
        await create_stream(client, n_features=3, labelled=True)
        await attach(client, "v", "variance")
        await attach(client, "o", "ocfs")
        rows = np.arange(180.0).reshape(60, 3)
        response = await client.post(
            "/v1/streams/st/chunks",
            json={"rows": rows.tolist(), "labels": [f"class-{i}" for i in range(60)]},
        )
        assert response.status_code == 200, response.text
        outcome = {s["name"]: s for s in response.json()["selectors"]}
        assert outcome["v"]["status"] == "applied" and outcome["v"]["rows_seen"] == 60
        assert outcome["o"]["status"] == "rejected" and "state" in outcome["o"]["reason"]
        log_id = response.json()["log_id"]
        status = (await client.get(f"/v1/selectors/o/chunks/{log_id}")).json()
        assert status["status"] == "rejected"
        assert (await client.get("/v1/selectors/o")).json()["rows_seen"] == 0
        # Rejected by every selector: the producer is told, as for a direct push.
        await client.delete("/v1/selectors/v")
        again = await client.post(
            "/v1/streams/st/chunks",
            json={"rows": rows.tolist(), "labels": [f"other-{i}" for i in range(60)]},
        )
        assert_problem(again, 422, "every selector set it aside")
        assert again.json()["type"] == "urn:sift:problem:chunk-rejected"


async def test_rankings_side_by_side_agree_as_the_agreement_module_says(client):
    await create_stream(client, n_features=6, labelled=True)
    for name, method in (("a-fsds", "fsds"), ("b-var", "variance"), ("c-var", "variance")):
        await attach(client, name, method)
    await attach(client, "d-ocfs", "ocfs")
    for seed in range(3):
        x, labels = labelled_chunk(seed)
        assert (await push_labelled(client, x, labels)).status_code == 200
    response = await client.get("/v1/streams/st/rankings", params={"h": 4, "p": 0.8})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["h"] == 4 and body["p"] == 0.8
    tops = {t["name"]: [f["index"] for f in t["features"]] for t in body["selectors"]}
    assert list(tops) == ["a-fsds", "b-var", "c-var", "d-ocfs"]
    for name, top in tops.items():
        own = (await client.get(f"/v1/selectors/{name}/top", params={"h": 4})).json()
        assert top == [f["index"] for f in own["features"]]
    pairs = {(a["a"], a["b"]): a for a in body["agreement"]}
    assert set(pairs) == set(itertools.combinations(tops, 2))
    for (a, b), agreed in pairs.items():
        assert agreed["jaccard"] == pytest.approx(jaccard(tops[a], tops[b]))
        assert agreed["rbo"] == pytest.approx(rank_biased_overlap(tops[a], tops[b], 0.8))
        assert agreed["shared"] == len(set(tops[a]) & set(tops[b]))
    assert pairs[("b-var", "c-var")]["rbo"] == 1.0  # one method, one stream: one ranking
    assert tops["d-ocfs"][0] == 4  # the feature that separates the classes
    assert_problem(await client.get("/v1/streams/st/rankings", params={"h": 0}), 422)
    assert_problem(await client.get("/v1/streams/none/rankings"), 404)


async def test_deleting_a_stream_needs_force_while_selectors_are_attached(client):
    await create_stream(client, n_features=6)
    await attach(client, "keep", "variance")
    await attach(client, "gone", "fsds")
    x, _labels = labelled_chunk(3)
    npy = {"content-type": "application/x-npy"}
    assert (
        await client.post("/v1/streams/st/chunks", content=npy_bytes(x), headers=npy)
    ).status_code == 200
    refused = await client.delete("/v1/streams/st")
    assert_problem(refused, 409, "keep", "gone")
    assert refused.json()["selectors"] == ["gone", "keep"]
    # A deleted selector holds nothing back: it is no longer attached.
    assert (await client.delete("/v1/selectors/gone")).status_code == 204
    assert [s["name"] for s in (await client.get("/v1/streams/st")).json()["selectors"]] == ["keep"]
    assert (await client.delete("/v1/streams/st", params={"force": "true"})).status_code == 204
    assert_problem(await client.get("/v1/streams/st"), 404)
    # Forced: detached, with everything it had applied, and standalone from now on.
    kept = (await client.get("/v1/selectors/keep")).json()
    assert kept["rows_seen"] == 20 and "stream" not in kept
    more = await client.post("/v1/selectors/keep/chunks", content=npy_bytes(x), headers=npy)
    assert more.status_code == 200 and more.json()["rows_seen"] == 40
    assert np.allclose(await weights(client, "keep"), np.vstack([x, x]).var(axis=0))
    # A stream created again under the name is another stream: nothing feeds "keep".
    await create_stream(client, n_features=6)
    pushed = await client.post("/v1/streams/st/chunks", content=npy_bytes(x), headers=npy)
    assert pushed.json()["selectors"] == []
    described = (await client.get("/v1/streams/st")).json()
    listed = (await client.get("/v1/streams")).json()
    assert listed == {"streams": [_without_selectors(described)], "next": None}


def _without_selectors(stream: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stream.items() if k != "selectors"}


async def test_a_detached_selector_keeps_its_state_and_takes_chunks_directly(client):
    await create_stream(client, n_features=6)
    await attach(client, "d", "variance")
    x, _labels = labelled_chunk(4)
    npy = {"content-type": "application/x-npy"}
    for _ in range(2):
        await client.post("/v1/streams/st/chunks", content=npy_bytes(x), headers=npy)
    detached = await client.post("/v1/selectors/d/detach")
    assert detached.status_code == 200, detached.text
    assert detached.json()["rows_seen"] == 40 and "stream" not in detached.json()
    assert_problem(await client.post("/v1/selectors/d/detach"), 409, "not attached")
    after = await client.post("/v1/streams/st/chunks", content=npy_bytes(x), headers=npy)
    assert after.json()["selectors"] == []
    stream = (await client.get("/v1/streams/st")).json()
    # What its checkpoint covered is trimmed; what came after, nobody holds back: kept.
    assert stream["selectors"] == [] and stream["log_entries"] == 1
    direct = await client.post("/v1/selectors/d/chunks", content=npy_bytes(x), headers=npy)
    assert direct.status_code == 200 and direct.json()["rows_seen"] == 60


async def test_a_detach_cut_short_is_finished_at_its_cut(app_factory):
    """A process that died between cutting the stream for a selector and detaching it: the
    selector applies nothing past the cut, pushes after it do not wait for it, the log is
    held for it, and the next detach (or a forced delete of the stream) finishes at that cut."""
    async with app_factory() as (app, client):
        store = app.state.runtime.selectors.store
        await create_stream(client, n_features=6)
        for name in ("d", "e"):
            await attach(client, name, "variance")
        x, _labels = labelled_chunk(4)
        npy = {"content-type": "application/x-npy"}
        first = await client.post("/v1/streams/st/chunks", content=npy_bytes(x), headers=npy)
        assert first.status_code == 200, first.text
        for name in ("d", "e"):  # the steps a detach takes before it is made standalone
            meta = await store.registry.get_meta(name)
            cut = await store.streams.cut_stream("st", name, meta.incarnation)
            assert cut == first.json()["log_id"]
            assert await store.streams.cut_selector(meta, cut) == cut
        later = await client.post("/v1/streams/st/chunks", content=npy_bytes(2 * x), headers=npy)
        assert later.status_code == 200 and later.json()["selectors"] == [], later.text
        for name in ("d", "e"):
            described = (await client.get(f"/v1/selectors/{name}")).json()
            assert described["rows_seen"] == 20 and described["stream"] == "st"
            assert described["state"]["pending_entries"] == 0
        assert (await client.get("/v1/streams/st")).json()["selectors"] == []
        # Called again: finished at the same cut, with the state through it.
        detached = await client.post("/v1/selectors/d/detach")
        assert detached.status_code == 200, detached.text
        assert detached.json()["detached_at"] == first.json()["log_id"]
        assert detached.json()["rows_seen"] == 20
        assert np.allclose(await weights(client, "d"), x.var(axis=0))
        # A stream with a detach cut short is held: deleted only by force, which finishes it.
        assert_problem(await client.delete("/v1/streams/st"), 409, "e")
        assert (await client.delete("/v1/streams/st", params={"force": "true"})).status_code == 204
        kept = (await client.get("/v1/selectors/e")).json()
        assert kept["rows_seen"] == 20 and "stream" not in kept
        direct = await client.post("/v1/selectors/e/chunks", content=npy_bytes(x), headers=npy)
        assert direct.status_code == 200 and direct.json()["rows_seen"] == 40


async def test_an_exported_attached_selector_imports_standalone(client):
    await create_stream(client, n_samples=5)
    await attach(client, "early", "ofs", params={"c": 1})
    columns = np.random.default_rng(5).normal(size=(5, 3))
    first = await client.post(
        "/v1/streams/st/chunks", json={"columns": columns.T.tolist(), "names": ["p", "q", "r"]}
    )
    assert first.status_code == 200, first.text
    await attach(client, "late", "iqrp", **{"from": "now"})
    second = await client.post(
        "/v1/streams/st/chunks",
        json={"columns": (2 * columns).T.tolist(), "names": ["s", "t", "u"]},
    )
    assert second.json()["first_index"] == 3
    late = (await client.get("/v1/selectors/late")).json()
    assert late["stream_base"] == 3 and late["features_seen"] == 3
    # Its feature 0 is the stream's feature 3, named on arrival "s".
    top = (await client.get("/v1/selectors/late/top", params={"h": 2})).json()
    assert {f["name"] for f in top["features"]} <= {"s", "t", "u"}
    side = (await client.get("/v1/streams/st/rankings", params={"h": 2})).json()
    late_side = next(t for t in side["selectors"] if t["name"] == "late")
    assert [f["index"] for f in late_side["features"]] == [f["index"] + 3 for f in top["features"]]
    early = (await client.get("/v1/selectors/early/features")).json()
    assert [f["name"] for f in early["features"]] == ["p", "q", "r", "s", "t", "u"]
    archive = await client.get("/v1/selectors/late/export")
    assert archive.status_code == 200
    imported = await client.post(
        "/v1/selectors/import",
        params={"name": "copy"},
        content=archive.content,
        headers={"content-type": "application/vnd.sift.archive"},
    )
    assert imported.status_code == 201, imported.text
    assert "stream" not in imported.json() and imported.json()["features_seen"] == 3
    copied = (await client.get("/v1/selectors/copy/top", params={"h": 2})).json()
    assert copied["features"] == top["features"]
    more = await client.post("/v1/selectors/copy/features", json={"columns": [[1.0] * 5]})
    assert more.status_code == 200 and more.json()["features_seen"] == 4


async def test_streams_follow_the_prefix_of_a_key(app_factory: Callable[..., Any]) -> None:
    async with app_factory(api_token="root") as (_app, client):
        root = {"authorization": "Bearer root"}
        key = (
            await client.post("/v1/keys", json={"scopes": ["admin"], "prefix": "a-"}, headers=root)
        ).json()["key"]
        mine = {"authorization": f"Bearer {key}"}
        refused = await client.post(
            "/v1/streams", json={"name": "b-s", "n_features": 2}, headers=mine
        )
        assert_problem(refused, 403, "start with 'a-'")
        assert (
            await client.post("/v1/streams", json={"name": "b-s", "n_features": 2}, headers=root)
        ).status_code == 201
        assert (
            await client.post("/v1/streams", json={"name": "a-s", "n_features": 2}, headers=mine)
        ).status_code == 201
        assert_problem(await client.get("/v1/streams/b-s", headers=mine), 404, "stream 'b-s'")
        listed = (await client.get("/v1/streams", headers=mine)).json()
        assert [s["name"] for s in listed["streams"]] == ["a-s"]
        attached = await client.post(
            "/v1/selectors",
            json={"name": "a-v", "method": "variance", "stream": "b-s"},
            headers=mine,
        )
        assert_problem(attached, 404, "stream 'b-s'")
        # Another key's selector on a stream this key sees: not shown to it, and not detached
        # by its forced delete.
        assert (
            await client.post(
                "/v1/selectors",
                json={"name": "b-v", "method": "variance", "stream": "a-s"},
                headers=root,
            )
        ).status_code == 201
        assert (await client.get("/v1/streams/a-s", headers=mine)).json()["selectors"] == []
        pushed = await client.post("/v1/streams/a-s/chunks", json=[[1.0, 2.0]], headers=mine)
        assert pushed.status_code == 200 and pushed.json()["selectors"] == []
        assert_problem(
            await client.delete("/v1/streams/a-s", params={"force": "true"}, headers=mine), 403
        )


async def test_the_log_is_kept_for_a_selector_that_lags(client, redis_client):
    """One selector applies and checkpoints everything; the other cannot apply (another
    holder keeps its lease): the stream keeps every entry for it, and once it applies, it
    applies every one, exactly once. A trim past the lagging selector's checkpoint would lose
    its rows."""
    await create_stream(client, n_features=6)
    await attach(client, "fast", "variance")
    await attach(client, "slow", "variance")
    lease = "sift:{slow}:lease"
    await redis_client.set(lease, "another-host:1:holder", px=60_000)
    npy = {"content-type": "application/x-npy"}
    chunks = [labelled_chunk(seed, rows=5)[0] for seed in range(6)]
    for x in chunks:
        response = await client.post(
            "/v1/streams/st/chunks", content=npy_bytes(x), headers=npy, params={"wait": "false"}
        )
        assert response.status_code == 202

    async def fast_checkpointed() -> bool:
        stream = (await client.get("/v1/streams/st")).json()
        by_name = {s["name"]: s for s in stream["selectors"]}
        return bool(by_name["fast"]["checkpoint"] == stream["last_id"])

    await wait_for(fast_checkpointed)
    stream = (await client.get("/v1/streams/st")).json()
    assert stream["log_entries"] == 6 and stream["trimmed_through"] == "0-0"
    assert (await client.get("/v1/selectors/slow")).json()["rows_seen"] == 0
    await redis_client.delete(lease)
    last = await client.post("/v1/streams/st/chunks", content=npy_bytes(chunks[0]), headers=npy)
    assert last.status_code == 200, last.text
    slow = (await client.get("/v1/selectors/slow")).json()
    assert slow["rows_seen"] == 35 and slow["version"] >= 1
    everything = np.vstack([*chunks, chunks[0]])
    assert np.allclose(await weights(client, "slow"), everything.var(axis=0), rtol=1e-12)
    # The same rows, applied in other batches: equal to rounding.
    assert np.allclose(await weights(client, "slow"), await weights(client, "fast"), rtol=1e-12)


async def test_a_chunk_nobody_kicked_is_found_by_the_sweeper(app_factory, redis_client):
    """A chunk appended to the stream's log by a process that died before it woke anybody:
    every attached selector is marked pending by the append itself, and the sweeper (past its
    first, full sweep) finds it and applies it to each."""
    from service.store.codec import encode_matrix
    from service.store.redis_store import SelectorStore

    async with app_factory(sweep_interval_seconds=0.1) as (_app, client):
        await create_stream(client, n_features=6)
        await attach(client, "v1", "variance")
        await attach(client, "v2", "variance")
        await asyncio.sleep(0.5)  # several sweeps: from now on they read the pending marks only
        other = SelectorStore(redis_client, prefix="sift")
        stream = await other.streams.get_stream("st")
        payload = encode_matrix(np.ones((3, 6)))
        outcome, attached = await other.streams.append_to_stream(
            "st", Entry(payload, 3, "digest", None, incarnation=stream.incarnation)
        )
        assert [a.selector for a in attached] == ["v1", "v2"]

        async def both_applied() -> bool:
            counts = [
                (await client.get(f"/v1/selectors/{n}")).json()["rows_seen"] for n in ("v1", "v2")
            ]
            return counts == [3, 3]

        await wait_for(both_applied)
        status = (await client.get(f"/v1/streams/st/chunks/{outcome.log_id}")).json()
        assert status["status"] == "applied"


async def test_drift_names_an_attached_selectors_features_as_its_stream_does(client):
    """An attached selector's features are its stream's items: drift names them as ``top``
    and the history do, by the names the stream's items were given."""
    await create_stream(client, n_samples=5)
    columns = np.random.default_rng(7).normal(size=(5, 3))
    early = await client.post(
        "/v1/streams/st/chunks", json={"columns": columns.T.tolist(), "names": ["p", "q", "r"]}
    )
    assert early.status_code == 200, early.text
    await attach(client, "late", "iqrp", **{"from": "now"})
    for scale, names in ((1.0, ["s", "t", "u"]), (50.0, ["v", "w", "x"])):
        pushed = await client.post(
            "/v1/streams/st/chunks",
            json={"columns": (scale * columns).T.tolist(), "names": names},
        )
        assert pushed.status_code == 200, pushed.text
    history = (await client.get("/v1/selectors/late/history", params={"h": 2})).json()
    drift = (await client.get("/v1/selectors/late/drift", params={"h": 2})).json()
    moved = drift["previous"]["entered"] + drift["previous"]["left"]
    assert moved, drift
    in_history = {f["index"]: f["name"] for v in history["versions"] for f in v["top"]}
    assert {(f["index"], f["name"]) for f in moved} <= in_history.items()
    assert {f["name"] for f in moved} <= set("stuvwx")
