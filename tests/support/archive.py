"""One scenario per method for the archive and replay tests: how to create a selector of it
and push a chunk (made from the method's first ``examples``), and what its answers are
(weights, rankings, descriptions)."""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from service.algorithms import METHODS
from service.algorithms.base import AnyMethod, DecidesOnArrival
from service.algorithms.examples import Example
from service.selectors.archive import MEDIA_TYPE
from service.wire.kinds import chunk_format

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


def targets_of(seed: int, n: int) -> list[float]:
    """Noise for the targets of example rows (a target is the row's sum plus this)."""
    return [float(v) for v in np.random.default_rng(seed + 1000).standard_normal(n)]


def example_chunk(method: AnyMethod, example: Example, i: int) -> Any:
    """The JSON body of chunk ``i`` of a selector made as ``example`` (by the method's chunk
    kind: rows, labelled rows, every view's rows, or named feature columns)."""
    n, low = example.items, example.low
    shape = example.shape
    if method.chunk_kind == "columns":
        names = [f"c{i}-{j}" for j in range(n)]
        return {"columns": rows(i, n, shape["n_samples"], low), "names": names}
    if method.chunk_kind == "views":
        views = shape["views"]
        return {
            "views": {v: rows(i + 50 * j, n, dim, low) for j, (v, dim) in enumerate(views.items())}
        }
    if method.chunk_kind == "labelled rows":
        return {"rows": rows(i, n, shape["n_features"], low), "labels": labels(i, n)}
    if method.chunk_kind == "rows with a target":
        x = rows(i, n, shape["n_features"], low)
        targets = [sum(row) + float(r) for row, r in zip(x, targets_of(i, n), strict=True)]
        return {"rows": x, "targets": targets}
    return rows(i, n, shape["n_features"], low)


def scenario(method: AnyMethod) -> Scenario:
    """The method's first example as a scenario: its creation body, route and chunks."""
    example = method.examples[0]
    body = {**example.shape, **({"params": dict(example.params)} if example.params else {})}
    route = chunk_format(method.chunk_kind).route
    return Scenario(body, route, lambda i: example_chunk(method, example, i))


class _Scenarios(Mapping[str, Scenario]):
    """Every registered method's scenario, read off the registry when asked (so a method the
    tests register for a while has one too)."""

    def __getitem__(self, name: str) -> Scenario:
        return scenario(METHODS[name])

    def __iter__(self) -> Iterator[str]:
        return iter(METHODS)

    def __len__(self) -> int:
        return len(METHODS)


SCENARIOS: Mapping[str, Scenario] = _Scenarios()


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
