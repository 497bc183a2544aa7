"""Partitioned selectors through the API: each partition a selector of its own, reads merged.

A selector with ``partitions: P`` spreads its chunks over P logs (by Idempotency-Key, else in
turn), each applied by its own applier; every read merges the partitions' states with the
method's ``merge``. For methods whose merge is exact (OCFS's class counts and sums, variance's
moments, Chan et al.'s pairwise update) the merged answer is the unpartitioned one: OCFS bit for
bit on integer data (every sum is exact in floating point), both to rounding otherwise (the
partitions add in another order; Chan's update divides). FSDS's sketches merge within the
Frequent-Directions bound (``tests/algorithms/test_fsds.py``); with 6 features the default ell
is 7, nothing is ever shrunk away, and the merged weights are the unpartitioned ones (to the
rounding of the eigendecompositions).
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np
import pytest

from tests.support.api import npy_bytes, npz_labelled

pytestmark = pytest.mark.asyncio

METHODS = ("ocfs", "variance", "fsds")


def chunks(method: str, integer: bool, count: int = 12) -> list[tuple[bytes, str]]:
    """Seeded chunks (body, content type) of ``method``'s kind: labelled rows or rows."""
    rng = np.random.default_rng([7, int(integer)])
    out = []
    for _ in range(count):
        rows = rng.integers(-5, 6, (int(rng.integers(3, 9)), 6)).astype(float)
        if not integer:
            rows = rows + rng.standard_normal(rows.shape)
        if method == "ocfs":
            labels = rng.integers(0, 4, rows.shape[0])
            out.append((npz_labelled(rows, labels), "application/x-npz"))
        else:
            out.append((npy_bytes(rows), "application/x-npy"))
    return out


async def push_all(
    http: httpx.AsyncClient, name: str, bodies: list[tuple[bytes, str]], prefix: str = "k"
) -> list[dict[str, Any]]:
    answers = []
    for index, (body, content_type) in enumerate(bodies):
        response = await http.post(
            f"/v1/selectors/{name}/chunks",
            content=body,
            headers={"content-type": content_type, "idempotency-key": f"{prefix}{index}"},
        )
        assert response.status_code == 200, response.text
        answers.append(response.json())
    return answers


async def create(http: httpx.AsyncClient, name: str, method: str, **extra: Any) -> Any:
    return await http.post(
        "/v1/selectors", json={"name": name, "method": method, "n_features": 6, **extra}
    )


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("integer", [True, False])
async def test_merged_answers_equal_the_unpartitioned_selector(client, method, integer):
    assert (await create(client, "whole", method)).status_code == 201
    created = await create(client, "parts", method, partitions=3)
    assert created.status_code == 201, created.text
    assert created.json()["partitions"] == 3 and created.json()["versions"] == [0, 0, 0]
    bodies = chunks(method, integer)
    await push_all(client, "whole", bodies)
    answers = await push_all(client, "parts", bodies)
    assert {a["partition"] for a in answers} == {0, 1, 2}  # the keys spread over every partition

    whole = (await client.get("/v1/selectors/whole/weights")).json()
    parts = (await client.get("/v1/selectors/parts/weights")).json()
    if integer and method == "ocfs":  # class counts and sums of integers: every sum exact
        assert parts["weights"] == whole["weights"]
    elif method == "fsds":
        np.testing.assert_allclose(parts["weights"], whole["weights"], rtol=1e-7, atol=1e-12)
    else:
        np.testing.assert_allclose(parts["weights"], whole["weights"], rtol=1e-12, atol=1e-15)
    assert parts["rows_seen"] == whole["rows_seen"]
    assert sum(parts["versions"]) == parts["version"] == len(bodies)
    described = (await client.get("/v1/selectors/parts")).json()
    assert (
        described["versions"] == parts["versions"] and described["rows_seen"] == parts["rows_seen"]
    )
    assert described["state"]["pending_entries"] == 0
    top = (await client.get("/v1/selectors/parts/top?h=4")).json()
    expected = (await client.get("/v1/selectors/whole/top?h=4")).json()
    assert [f["index"] for f in top["features"]] == [f["index"] for f in expected["features"]]
    assert top["versions"] == parts["versions"]


async def test_a_retry_goes_to_the_partition_that_has_the_key(client):
    await create(client, "parts", "variance", partitions=4)
    body, content_type = chunks("variance", True, 1)[0]
    headers = {"content-type": content_type, "idempotency-key": "only-once"}
    first = (await client.post("/v1/selectors/parts/chunks", content=body, headers=headers)).json()
    again = (await client.post("/v1/selectors/parts/chunks", content=body, headers=headers)).json()
    assert again["duplicate"] is True and again["partition"] == first["partition"]
    assert again["log_id"] == first["log_id"]
    assert (await client.get("/v1/selectors/parts")).json()["rows_seen"] == first["rows"]
    # Without a key, chunks go to the partitions in turn.
    taken = []
    for _ in range(4):
        response = await client.post(
            "/v1/selectors/parts/chunks", content=body, headers={"content-type": content_type}
        )
        taken.append(response.json()["partition"])
    assert sorted(taken) == [0, 1, 2, 3]


async def test_a_chunk_status_names_its_partition(client):
    await create(client, "parts", "variance", partitions=2)
    body, content_type = chunks("variance", True, 1)[0]
    pending = await client.post(
        "/v1/selectors/parts/chunks?wait=false",
        content=body,
        headers={"content-type": content_type, "idempotency-key": "s1"},
    )
    assert pending.status_code in (200, 202)
    log_id, partition = pending.json()["log_id"], pending.json()["partition"]
    missing = await client.get(f"/v1/selectors/parts/chunks/{log_id}")
    assert missing.status_code == 422 and "?partition=" in missing.json()["detail"]
    for _ in range(100):
        status = await client.get(f"/v1/selectors/parts/chunks/{log_id}?partition={partition}")
        assert status.status_code == 200, status.text
        if status.json()["status"] == "applied":
            break
    assert status.json()["status"] == "applied"
    other = 1 - partition
    elsewhere = await client.get(f"/v1/selectors/parts/chunks/{log_id}?partition={other}")
    assert elsewhere.status_code == 404


async def test_only_methods_that_merge_take_partitions_and_within_bounds(client):
    refused = await create(client, "x", "ioc", partitions=2)
    assert refused.status_code == 422 and "merge" in refused.json()["detail"]
    assert refused.json()["type"].endswith("selector-mismatch")
    for bad in (0, 65, "2", 2.5, True):
        response = await create(client, "x", "variance", partitions=bad)
        assert response.status_code == 422, (bad, response.text)
    one = await create(client, "one", "variance", partitions=1)
    assert one.status_code == 201 and "partitions" not in one.json()


async def test_a_name_is_one_selector_whether_partitioned_or_not(client, redis_client):
    assert (await create(client, "x", "variance", partitions=3)).status_code == 201
    assert (await create(client, "x", "variance")).status_code == 409
    assert (await create(client, "x", "variance", partitions=2)).status_code == 409
    assert (await create(client, "y", "variance")).status_code == 201
    assert (await create(client, "y", "variance", partitions=2)).status_code == 409
    listed = (await client.get("/v1/selectors")).json()["selectors"]
    assert [s["name"] for s in listed] == ["x", "y"]  # partitions never show
    assert listed[0]["versions"] == [0, 0, 0]
    assert (await client.delete("/v1/selectors/x")).status_code == 204
    assert [key async for key in redis_client.scan_iter(match="sift:{x*")] == []
    assert (await client.get("/v1/selectors/x")).status_code == 404


async def test_what_a_partitioned_selector_does_not_offer_is_refused_clearly(client):
    await create(client, "parts", "ocfs", partitions=2)
    for path in ("/v1/selectors/parts/export", "/v1/selectors/parts/history"):
        response = await client.get(path)
        assert response.status_code == 422, (path, response.text)
        assert "partition" in response.json()["detail"]


async def test_fsds_with_a_bandwidth_each_partition_would_choose_is_refused(client):
    gaussian = {"kernel": "gaussian", "kernel_components": 16}
    refused = await create(client, "g", "fsds", partitions=2, params=gaussian)
    assert refused.status_code == 422 and "kernel_bandwidth" in refused.json()["detail"]
    fixed = {**gaussian, "kernel_bandwidth": 2.0}
    assert (await create(client, "g", "fsds", partitions=2, params=fixed)).status_code == 201


async def test_an_fsds_selector_merges_another_ones_sketch(client):
    """POST .../merge for fsds: the sketches stack and shrink; with 6 features (ell 7) nothing
    is shrunk away, so the merged weights are those of one selector that saw every chunk."""
    for name in ("a", "b", "both"):
        assert (await create(client, name, "fsds")).status_code == 201
    bodies = chunks("fsds", integer=False)
    await push_all(client, "a", bodies[:7], prefix="a")
    await push_all(client, "b", bodies[7:], prefix="b")
    await push_all(client, "both", bodies, prefix="c")
    merged = await client.post("/v1/selectors/a/merge", json={"from": "b"})
    assert merged.status_code == 200, merged.text
    a = (await client.get("/v1/selectors/a/weights")).json()
    both = (await client.get("/v1/selectors/both/weights")).json()
    assert a["rows_seen"] == both["rows_seen"]
    np.testing.assert_allclose(a["weights"], both["weights"], rtol=1e-7, atol=1e-12)
