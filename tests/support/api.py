"""Small helpers for API tests: encoding bodies and creating selectors."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import scipy.sparse as sp


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
