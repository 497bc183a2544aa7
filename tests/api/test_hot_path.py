"""The hot path (``service.api.hot_path``) answers exactly as FastAPI's routes do.

Every request of a matrix (plain and non-plain parameters, bad bodies, missing selectors, auth
failures, idempotency keys) goes once to an app with the hot path and once to one without, each
on a fresh Redis; status, content type and body must agree. A dependency override counts which
requests FastAPI's routing saw, so the test also proves the hot path served the plain ones.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from starlette.requests import Request

from service.api.deps import get_selectors
from tests.support.api import npy_bytes

pytestmark = pytest.mark.asyncio

ADMIN = {"authorization": "Bearer hot-admin"}
NPY = {"content-type": "application/x-npy"}
CSV = {"content-type": "text/csv"}
ARROW = {"content-type": "application/vnd.apache.arrow.stream"}


def _arrow_chunk() -> bytes:
    table = pa.table({name: [0.5, 1.5] for name in "badc"})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


ARROW_CHUNK = _arrow_chunk()

#: (method, path, query, headers, body, whether the hot path should serve it)
Case = tuple[str, str, str, dict[str, str], Any, bool]
MATRIX: list[Case] = [
    ("POST", "/v1/selectors/hp/chunks", "", ADMIN, [[1, 2, 3, 4]], True),
    ("POST", "/v1/selectors/hp/chunks", "wait=true", ADMIN, [[0, 1, 0, 1]], True),
    (
        "POST",
        "/v1/selectors/hp/chunks",
        "",
        {**ADMIN, "idempotency-key": "k1"},
        [[3, 1, 4, 1]],
        True,
    ),
    (
        "POST",
        "/v1/selectors/hp/chunks",
        "",
        {**ADMIN, "idempotency-key": "k1"},
        [[3, 1, 4, 1]],
        True,
    ),
    (
        "POST",
        "/v1/selectors/hp/chunks",
        "",
        {**ADMIN, "idempotency-key": "k1"},
        [[9, 9, 9, 9]],
        True,
    ),
    ("POST", "/v1/selectors/hp/chunks", "", {**ADMIN, **NPY}, np.eye(4), True),
    # Tables: the first names the selector's features, the next lands by name; a label column
    # is a parameter, which FastAPI decides.
    ("POST", "/v1/selectors/hp/chunks", "", {**ADMIN, **CSV}, b"a,b,c,d\n1,2,3,4\n", True),
    ("POST", "/v1/selectors/hp/chunks", "", {**ADMIN, **CSV}, b"d,c,b,a\r\n1,2,3,4\r\n", True),
    ("POST", "/v1/selectors/hp/chunks", "", {**ADMIN, **ARROW}, ARROW_CHUNK, True),
    ("POST", "/v1/selectors/hp/chunks", "", {**ADMIN, **CSV}, b"a,b,c,d\n1,2,3\n", True),
    ("POST", "/v1/selectors/hp/chunks", "labels=d", {**ADMIN, **CSV}, b"a,b,c,d\n1,2,3,4\n", False),
    # Refused bodies: wrong width, a NaN, not JSON, an unknown media type.
    ("POST", "/v1/selectors/hp/chunks", "", ADMIN, [[1, 2, 3]], True),
    ("POST", "/v1/selectors/hp/chunks", "", ADMIN, b"[[1, 2, NaN, 4]]", True),
    ("POST", "/v1/selectors/hp/chunks", "", ADMIN, b"[[1, 2", True),
    ("POST", "/v1/selectors/hp/chunks", "", {**ADMIN, "content-type": "text/plain"}, b"x", True),
    ("POST", "/v1/selectors/nobody/chunks", "", ADMIN, [[1, 2, 3, 4]], True),
    # Auth: none, a wrong token.
    ("POST", "/v1/selectors/hp/chunks", "", {}, [[1, 2, 3, 4]], True),
    ("GET", "/v1/selectors/hp/top", "", {"authorization": "Bearer wrong"}, None, True),
    # Not in plain form: FastAPI decides (and refuses or accepts) them.
    ("POST", "/v1/selectors/hp/chunks", "wait=1", ADMIN, [[1, 1, 1, 1]], False),
    ("POST", "/v1/selectors/hp/chunks", "wait=maybe", ADMIN, [[1, 1, 1, 1]], False),
    (
        "POST",
        "/v1/selectors/hp/chunks",
        "",
        {**ADMIN, "idempotency-key": ""},
        [[1, 1, 1, 1]],
        False,
    ),
    (
        "POST",
        "/v1/selectors/hp/chunks",
        "",
        {**ADMIN, "idempotency-key": "a b"},
        [[1, 1, 1, 1]],
        False,
    ),
    ("GET", "/v1/selectors/hp/top", "h=010", ADMIN, None, False),
    ("GET", "/v1/selectors/hp/top", "h=0", ADMIN, None, False),
    ("GET", "/v1/selectors/hp/top", "h=two", ADMIN, None, False),
    ("GET", "/v1/selectors/hp/top", "strategy=diverse&h=2", ADMIN, None, False),
    # Plain rankings, and one of a selector that is not there.
    ("GET", "/v1/selectors/hp/top", "", ADMIN, None, True),
    ("GET", "/v1/selectors/hp/top", "h=2", ADMIN, None, True),
    ("GET", "/v1/selectors/hp/top", "h=999", ADMIN, None, True),
    ("GET", "/v1/selectors/nobody/top", "h=2", ADMIN, None, True),
    ("GET", "/v1/selectors/Not%20a%20name/top", "", ADMIN, None, False),
    # The stability and the bands of the answer: estimated (hp), not estimated (hp0, created
    # with resamples 0), and asked deeper than the history keeps (HISTORY_TOP: computed from
    # every score instead of the published top).
    (
        "POST",
        "/v1/selectors/hp0/chunks",
        "",
        ADMIN,
        [[1, 2, 3, 4], [4, 3, 2, 1], [0, 1, 0, 2]],
        True,
    ),
    ("GET", "/v1/selectors/hp0/top", "h=2", ADMIN, None, True),
    ("GET", "/v1/selectors/hp/top", "h=3", ADMIN, None, True),
    ("GET", "/v1/selectors/hp/top", "h=3", ADMIN, None, True),
]
#: The features each version publishes (SIFT_HISTORY_TOP): h=3 reads every score.
HISTORY_TOP = 2

#: Fields that differ between two runs of the same requests (ids and clocks).
VOLATILE = {"log_id", "instance", "request_id", "applied_at", "created_at", "updated_at"}


def normalised(body: Any) -> Any:
    if isinstance(body, dict):
        return {k: ("*" if k in VOLATILE else normalised(v)) for k, v in body.items()}
    if isinstance(body, list):
        return [normalised(v) for v in body]
    return body


async def run_matrix(app_factory, redis_client, hot_path: bool) -> list[tuple[Any, ...]]:
    await redis_client.flushall()
    async with app_factory(api_token="hot-admin", hot_path=hot_path, history_top=HISTORY_TOP) as (
        app,
        http,
    ):
        seen_by_fastapi: list[str] = []

        async def counted(request: Request) -> Any:
            seen_by_fastapi.append(request.url.path)
            return await get_selectors(request)

        app.dependency_overrides[get_selectors] = counted
        created = await http.post(
            "/v1/selectors",
            json={"name": "hp", "method": "fsds", "n_features": 4, "params": {"k": 2, "ell": 3}},
            headers=ADMIN,
        )
        assert created.status_code == 201, created.text
        without_resamples = await http.post(
            "/v1/selectors",
            json={"name": "hp0", "method": "fsds", "n_features": 4, "params": {"resamples": 0}},
            headers=ADMIN,
        )
        assert without_resamples.status_code == 201, without_resamples.text
        seen_by_fastapi.clear()
        answers = []
        for method, path, query, headers, body, hot in MATRIX:
            before = len(seen_by_fastapi)
            content: bytes | None
            if isinstance(body, np.ndarray):
                content = npy_bytes(body)
            elif isinstance(body, bytes):
                content = body
            else:
                content = None if body is None else json.dumps(body).encode()
            if content is not None and "content-type" not in headers:
                headers = {**headers, "content-type": "application/json"}
            response = await http.request(
                method, path + ("?" + query if query else ""), headers=headers, content=content
            )
            through_fastapi = len(seen_by_fastapi) > before
            answers.append(
                (
                    method,
                    path,
                    query,
                    response.status_code,
                    response.headers.get("content-type"),
                    normalised(response.json()),
                    through_fastapi,
                    hot,
                )
            )
        return answers


async def test_the_hot_path_answers_as_fastapi_does(app_factory, redis_client):
    with_hot = await run_matrix(app_factory, redis_client, hot_path=True)
    without = await run_matrix(app_factory, redis_client, hot_path=False)
    for hot_answer, plain_answer in zip(with_hot, without, strict=True):
        assert hot_answer[:6] == plain_answer[:6], (hot_answer, plain_answer)
    statuses = {answer[3] for answer in with_hot}
    assert {200, 401, 404, 415, 422}.issubset(statuses), statuses
    # Both kinds of ranking answers were compared: with a stability and bands, and without.
    tops = [answer[5] for answer in with_hot if answer[1].endswith("/top") and answer[3] == 200]
    assert any(top["stability"] is not None for top in tops)
    assert any(top["stability"] is None for top in tops)
    deep = [top for top in tops if top["name"] == "hp" and len(top["features"]) == 3]
    assert deep and all("band" in f for top in deep for f in top["features"])
    # Which requests FastAPI's routing saw. Without the hot path: every one that got past
    # authentication. With it: none of the plain ones (auth failures never reach a
    # dependency, so they prove nothing either way and are left out).
    for method, path, query, status, _type, _body, through_fastapi, hot in with_hot:
        if status == 401:
            continue
        assert through_fastapi is not hot, (method, path, query, status)
    assert all(answer[6] for answer in without if answer[3] != 401 and "Not%20a" not in answer[1])
