"""ANOVA F and chi-squared selectors over HTTP: scikit-learn's scores and p-values in the
answers, selections by p-value, refused negative counts, partitions and merges exact."""

from __future__ import annotations

import warnings
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, load_wine
from sklearn.feature_selection import SelectFdr, chi2, f_classif

from tests.support.api import create_selector, npz_labelled

pytestmark = pytest.mark.asyncio


async def create(http: httpx.AsyncClient, name: str, method: str, m: int, **body: Any) -> Any:
    return await create_selector(http, name, m, method=method, **body)


async def push(http: httpx.AsyncClient, name: str, x: np.ndarray, y: np.ndarray) -> httpx.Response:
    return await http.post(
        f"/v1/selectors/{name}/chunks",
        json={"rows": x.tolist(), "labels": y.tolist()},
        params={"wait": "true"},
    )


def reference(test: Any, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scores, p = test(x, y)
    return np.asarray(scores), np.asarray(p)


async def test_anova_answers_scikit_learns_scores_and_p_values(client: httpx.AsyncClient) -> None:
    x, y = load_wine(return_X_y=True)
    created = await create(client, "wine", "anova", x.shape[1])
    assert "p-values" in created.get("capabilities", ["p-values"])
    for start in range(0, len(y), 40):
        assert (
            await push(client, "wine", x[start : start + 40], y[start : start + 40])
        ).status_code == 200
    top = (await client.get("/v1/selectors/wine/top", params={"h": 13})).json()
    f, p = reference(f_classif, x, y)
    order = np.argsort(-f, kind="stable")
    assert [feature["index"] for feature in top["features"]] == order.tolist()
    np.testing.assert_allclose([ft["score"] for ft in top["features"]], f[order], rtol=1e-9)
    np.testing.assert_allclose([ft["p_value"] for ft in top["features"]], p[order], rtol=1e-9)
    assert top["stability"] is None  # every feature shown: nothing left out to be unsettled
    five = (await client.get("/v1/selectors/wine/top", params={"h": 5})).json()
    assert five["stability"]["resamples"] >= 2 and len(five["features"][0]["band"]) == 2


async def test_chi2_selects_by_p_value_as_select_fdr_and_refuses_negatives(
    client: httpx.AsyncClient,
) -> None:
    x, y = load_digits(return_X_y=True)
    await create(client, "digits", "chi2", x.shape[1])
    pushed = await client.post(
        "/v1/selectors/digits/chunks",
        content=npz_labelled(sp.csr_matrix(x), y),
        headers={"content-type": "application/x-npz"},
        params={"wait": "true"},
    )
    assert pushed.status_code == 200, pushed.text
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        support = SelectFdr(chi2, alpha=1e-3).fit(x, y).get_support()
    chosen = await client.get(
        "/v1/selectors/digits/top", params={"h": 64, "alpha": 1e-3, "correction": "fdr"}
    )
    assert chosen.status_code == 200, chosen.text
    indices = sorted(feature["index"] for feature in chosen.json()["features"])
    assert indices == np.flatnonzero(support).tolist()
    assert all(feature["p_value"] <= 1e-3 for feature in chosen.json()["features"])
    assert "stability" not in chosen.json() or chosen.json()["stability"] is None
    # The constant pixels (always 0) score null, ranked last.
    every = (await client.get("/v1/selectors/digits/top", params={"h": 64})).json()["features"]
    constant = np.flatnonzero(x.max(axis=0) == 0).tolist()
    assert constant and [ft["index"] for ft in every[-len(constant) :]] == constant
    assert all(ft["score"] is None and ft["p_value"] is None for ft in every[-len(constant) :])

    bad = x[:5].copy()
    bad[3, 10] = -2.0
    refused = await push(client, "digits", bad, y[:5])
    assert refused.status_code == 422
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert (
        "nonnegative" in refused.json()["detail"]
        and "row 3, feature 10" in refused.json()["detail"]
    )
    after = (await client.get("/v1/selectors/digits")).json()
    assert after["rows_seen"] == x.shape[0]


async def test_alpha_on_a_method_without_p_values_is_refused(client: httpx.AsyncClient) -> None:
    await create(client, "var", "variance", 3)
    answer = await client.get("/v1/selectors/var/top", params={"alpha": 0.05})
    assert answer.status_code == 422
    assert "p-value" in answer.json()["detail"] and "anova" in answer.json()["detail"]
    bad = await client.get("/v1/selectors/var/top", params={"alpha": 2})
    assert bad.status_code == 422


async def test_partitions_and_merges_are_exact(client: httpx.AsyncClient) -> None:
    x, y = load_wine(return_X_y=True)
    await create(client, "parts", "anova", x.shape[1], partitions=3)
    await create(client, "east", "anova", x.shape[1])
    await create(client, "west", "anova", x.shape[1])
    for start in range(0, len(y), 30):
        rows, labels = x[start : start + 30], y[start : start + 30]
        assert (await push(client, "parts", rows, labels)).status_code == 200
        assert (
            await push(client, "east" if start < 90 else "west", rows, labels)
        ).status_code == 200
    merged = await client.post("/v1/selectors/east/merge", json={"from": "west"})
    assert merged.status_code == 200, merged.text
    f, p = reference(f_classif, x, y)
    for name in ("parts", "east"):
        weights = (await client.get(f"/v1/selectors/{name}/weights")).json()["weights"]
        np.testing.assert_allclose(weights, f, rtol=1e-9)
        top = (await client.get(f"/v1/selectors/{name}/top", params={"h": 3})).json()
        order = np.argsort(-f, kind="stable")[:3]
        np.testing.assert_allclose([ft["p_value"] for ft in top["features"]], p[order], rtol=1e-9)
