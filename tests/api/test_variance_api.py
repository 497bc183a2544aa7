"""The variance method over HTTP: it arrived as one module and one registry line, and every
route that serves its capabilities (rows, rankings, merges) serves it."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from service.algorithms.subsamples import DEFAULT_RESAMPLES
from tests.support.api import csr_json, npz_bytes

pytestmark = pytest.mark.asyncio


async def test_variance_selector_ranks_and_merges_exactly(client):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((30, 6)) * [1, 5, 0.1, 2, 0, 3]
    b = rng.standard_normal((20, 6)) * [1, 5, 0.1, 2, 0, 3] + 1
    for name in ("east", "west", "all"):
        created = await client.post(
            "/v1/selectors", json={"name": name, "method": "variance", "n_features": 6}
        )
        assert created.status_code == 201, created.text
        assert created.json()["params"] == {"ddof": 0, "resamples": DEFAULT_RESAMPLES}
    assert (await client.post("/v1/selectors/east/chunks", json=a.tolist())).status_code == 200
    sparse = {
        "content": npz_bytes(sp.csr_matrix(b)),
        "headers": {"content-type": "application/x-npz"},
    }
    assert (await client.post("/v1/selectors/west/chunks", **sparse)).status_code == 200
    for part in (a, b):
        pushed = await client.post("/v1/selectors/all/chunks", json=csr_json(part))
        assert pushed.status_code == 200

    merged = await client.post("/v1/selectors/east/merge", json={"from": "west"})
    assert merged.status_code == 200, merged.text
    assert merged.json()["rows_seen"] == 50 and merged.json()["merged"]["rows"] == 20

    expected = np.var(np.vstack([a, b]), axis=0)
    for name in ("east", "all"):
        weights = (await client.get(f"/v1/selectors/{name}/weights")).json()["weights"]
        np.testing.assert_allclose(weights, expected, rtol=1e-12)
    top = (await client.get("/v1/selectors/east/top", params={"h": 3})).json()
    assert [f["index"] for f in top["features"]] == list(np.argsort(-expected)[:3])
    described = (await client.get("/v1/selectors/east")).json()
    assert described["state"]["count"] == 50 and described["rows_seen"] == 50
