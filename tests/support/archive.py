"""One scenario per method for the archive and replay tests: how to create a selector of it
and push a chunk, and what its answers are (weights, rankings, descriptions)."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from service.algorithms import METHODS
from service.algorithms.base import DecidesOnArrival
from service.selectors.archive import MEDIA_TYPE

ADMIN_TOKEN = "archive-admin-token"


ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


ARCHIVE = {"content-type": MEDIA_TYPE}


@dataclass
class Scenario:
    """How to create a selector of one method and push a chunk to it (seeded data)."""

    create: dict[str, Any]
    route: str
    #: The JSON body of chunk ``i``.
    chunk: Any
    #: Chunks pushed before the export, and after (to both selectors).
    before: int = 3
    after: int = 2
    describe_extra: list[str] = field(default_factory=list)


def rows(seed: int, n: int, m: int, low: float = -1.0) -> list[list[float]]:
    values: list[list[float]] = (
        np.random.default_rng(seed).uniform(low, 1.0, (n, m)).round(6).tolist()
    )
    return values


def labels(seed: int, n: int) -> list[Any]:
    # Integers and strings: classes are kept as sent, in order of discovery.
    return [["a", 1, "b", 2][i] for i in np.random.default_rng(seed).integers(0, 4, n)]


SCENARIOS: dict[str, Scenario] = {
    "fsds": Scenario(
        {"n_features": 6, "feature_names": [f"g{i}" for i in range(6)], "params": {"k": 2}},
        "chunks",
        lambda i: rows(i, 7, 6),
    ),
    "variance": Scenario({"n_features": 5}, "chunks", lambda i: rows(i, 9, 5)),
    "ocfs": Scenario(
        {"n_features": 4},
        "chunks",
        lambda i: {"rows": rows(i, 10, 4), "labels": labels(i, 10)},
    ),
    "ioc": Scenario(
        {"n_features": 5, "params": {"n_components": 2}},
        "chunks",
        lambda i: {"rows": rows(i, 10, 5), "labels": labels(i, 10)},
    ),
    "ofs": Scenario(
        {"n_samples": 6, "params": {"epsilon": 0.5, "seed": 3}},
        "features",
        lambda i: {
            "columns": rows(i, 2, 6),
            "names": [f"col{i}a", f"col{i}b"],
        },
    ),
    "iqrp": Scenario(
        # Blocks of 2 columns: the 3 columns of every chunk fill segments and leave a tail.
        {"n_samples": 5, "params": {"block_columns": 2}},
        "features",
        lambda i: {"columns": rows(i, 3, 5), "names": [f"c{i}-{j}" for j in range(3)]},
    ),
    "omvfs": Scenario(
        {
            "views": {"text": 4, "image": 3},
            "feature_names": {"text": ["w0", "w1", "w2", "w3"], "image": ["p0", "p1", "p2"]},
            "params": {"n_clusters": 2, "buffer_chunks": 2, "max_iter": 5},
        },
        "chunks",
        lambda i: {"views": {"text": rows(i, 6, 4, 0.0), "image": rows(i + 50, 6, 3, 0.0)}},
    ),
}


async def create(http: httpx.AsyncClient, name: str, method: str, **extra: Any) -> Any:
    body = {"name": name, "method": method, **SCENARIOS[method].create, **extra}
    response = await http.post("/v1/selectors", json=body)
    assert response.status_code == 201, response.text
    return response.json()


async def push(http: httpx.AsyncClient, name: str, method: str, i: int, wait: bool = True) -> Any:
    scenario = SCENARIOS[method]
    response = await http.post(
        f"/v1/selectors/{name}/{scenario.route}",
        json=scenario.chunk(i),
        params={} if wait else {"wait": "false"},
    )
    assert response.status_code == (200 if wait else 202), response.text
    return response.json()


async def export(http: httpx.AsyncClient, name: str, **kw: Any) -> bytes:
    response = await http.get(f"/v1/selectors/{name}/export", **kw)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == MEDIA_TYPE
    assert response.headers["content-disposition"] == f'attachment; filename="{name}.sift"'
    return response.content


async def import_(http: httpx.AsyncClient, archive: bytes, **params: str) -> httpx.Response:
    return await http.post("/v1/selectors/import", content=archive, headers=ARCHIVE, params=params)


async def weights(http: httpx.AsyncClient, name: str) -> np.ndarray:
    response = await http.get(
        f"/v1/selectors/{name}/weights", headers={"accept": "application/x-npy"}
    )
    assert response.status_code == 200, response.text
    loaded: np.ndarray = np.load(io.BytesIO(response.content), allow_pickle=False)
    return loaded


async def answers(http: httpx.AsyncClient, name: str, method: str) -> dict[str, Any]:
    """Everything a client reads of a selector, without what must differ (name, times)."""
    described = (await http.get(f"/v1/selectors/{name}")).json()
    for key in ("name", "created_at", "updated_at"):
        described.pop(key)
    response = await http.get(f"/v1/selectors/{name}/top", params={"h": 4})
    assert response.status_code == 200, response.text
    top = response.json()
    top.pop("name")
    out = {"describe": described, "top": top}
    if isinstance(METHODS[method], DecidesOnArrival):  # ofs: every decision, and its name
        page = await http.get(f"/v1/selectors/{name}/features", params={"limit": 1000})
        assert page.status_code == 200, page.text
        out["features"] = {k: v for k, v in page.json().items() if k != "name"}
        assert len(out["features"]["features"]) == described["features_seen"] > 0
    return out
