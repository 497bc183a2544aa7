"""Helpers for API tests: the app with its lifespan, encoding bodies, creating selectors."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import numpy as np
import scipy.sparse as sp
from fastapi import FastAPI

from service.api.app import create_app
from service.config import Settings


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def npz_bytes(matrix: Any) -> bytes:
    buffer = io.BytesIO()
    sp.save_npz(buffer, sp.csr_matrix(matrix) if not sp.issparse(matrix) else matrix)
    return buffer.getvalue()


def npz_labelled(rows: Any, labels: Any) -> bytes:
    """A labelled chunk as numpy.savez writes it: rows (or the CSR parts) and labels."""
    buffer = io.BytesIO()
    if sp.issparse(rows):
        csr = sp.csr_matrix(rows)
        np.savez(
            buffer,
            data=csr.data,
            indices=csr.indices,
            indptr=csr.indptr,
            shape=np.array(csr.shape),
            labels=np.asarray(labels),
        )
    else:
        np.savez(buffer, rows=rows, labels=np.asarray(labels))
    return buffer.getvalue()


def csr_json(matrix: Any) -> dict[str, Any]:
    csr = sp.csr_matrix(matrix)
    return {
        "shape": list(csr.shape),
        "indptr": csr.indptr.tolist(),
        "indices": csr.indices.tolist(),
        "data": csr.data.tolist(),
    }


async def create_selector(
    http: httpx.AsyncClient, name: str = "news", n_features: int = 30, **body: Any
) -> dict[str, Any]:
    response = await http.post(
        "/v1/selectors", json={"name": name, "method": "fsds", "n_features": n_features, **body}
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def wait_for(predicate: Callable[[], Any], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


def make_settings(redis_url: str | None, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "redis_url": redis_url,
        "sweep_interval_seconds": 0.1,
        "lease_ms": 2000,
        "apply_wait_seconds": 30.0,
    }
    values.update(overrides)
    return Settings(**values)


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Start the app with its lifespan (as uvicorn would) and an httpx client bound to it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sift") as client:
            yield app, client


def assert_problem(response, status: int, *fragments: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == status and problem["title"] and problem["type"]
    for fragment in fragments:
        assert fragment in problem["detail"], problem["detail"]


async def assert_untouched(client, name: str = "s") -> None:
    described = (await client.get(f"/v1/selectors/{name}")).json()
    assert described["version"] == 0
    assert described["rows_seen"] == 0
    assert described["state"]["pending_entries"] == 0
