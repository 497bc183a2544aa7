"""Operations features through the real app: request ids, JSON logs, HTTP metrics and the
selector gauges, CORS and gzip."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis.asyncio as aioredis
import threadpoolctl

from service.logs import JsonFormatter, RequestIdFilter, make_handler, request_id_var
from service.store.keys import SelectorKeys
from service.store.records import Entry
from service.store.redis_store import SelectorStore
from tests.support.api import create_selector

GENERATED_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """Every line the app logs, as the JSON handler of ``sift serve --log-format json`` writes."""
    stream = io.StringIO()
    handler = make_handler("json", stream)
    root = logging.getLogger()
    root.addHandler(handler)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def log_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


# -- request ids ---------------------------------------------------------------------------------


async def test_request_id_is_accepted_and_echoed_on_every_answer(client: Any) -> None:
    ok = await client.get("/v1/healthz", headers={"x-request-id": "client-chosen.1"})
    assert ok.headers["x-request-id"] == "client-chosen.1"
    missing = await client.get("/v1/selectors/nope", headers={"x-request-id": "abc:42"})
    assert missing.status_code == 404 and missing.headers["x-request-id"] == "abc:42"
    no_route = await client.get("/v2/whatever")
    assert no_route.status_code == 404 and GENERATED_ID.fullmatch(no_route.headers["x-request-id"])
    first, second = (await client.get("/v1/healthz")), (await client.get("/v1/healthz"))
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


@pytest.mark.parametrize(
    "offered", ["x" * 129, "has space", 'quote"d', "new\\nline", "semi;colon", "é"]
)
async def test_a_malformed_request_id_is_replaced(client: Any, offered: str) -> None:
    response = await client.get("/v1/healthz", headers={"x-request-id": offered.encode("utf-8")})
    assert GENERATED_ID.fullmatch(response.headers["x-request-id"]), response.headers


async def test_a_5xx_carries_the_request_id_in_body_header_and_log(
    client: Any, redis_client: aioredis.Redis, json_log: io.StringIO
) -> None:
    await create_selector(client, "broken", 4)
    # Damage the stored state (as corruption would): reading it is an internal error.
    keys = SelectorKeys("sift", "broken")
    state_key = await redis_client.hget(keys.head, "state_key")
    assert state_key is not None and await redis_client.delete(state_key) == 1
    response = await client.get(
        "/v1/selectors/broken/weights", headers={"x-request-id": "report-me-7"}
    )
    assert response.status_code == 500
    problem = response.json()
    assert problem["request_id"] == "report-me-7" and response.headers["x-request-id"] == (
        "report-me-7"
    )
    assert re.fullmatch(r"[0-9a-f]{16}", problem["error_id"])
    assert "state" not in problem["detail"]  # no internal text, as before
    errors = [line for line in log_lines(json_log) if line["level"] == "ERROR"]
    assert len(errors) == 1, errors
    assert errors[0]["request_id"] == "report-me-7"
    assert problem["error_id"] in errors[0]["message"]
    assert "CodecError" in errors[0]["exception"] and "Traceback" in errors[0]["exception"]


async def test_a_4xx_body_has_no_request_id_field(client: Any) -> None:
    response = await client.get("/v1/selectors/nope", headers={"x-request-id": "r1"})
    assert response.status_code == 404 and "request_id" not in response.json()


# -- logs ----------------------------------------------------------------------------------------


def test_json_lines_have_the_documented_fields() -> None:
    record = logging.LogRecord("sift.test", logging.WARNING, __file__, 1, "x=%s", ("y",), None)
    token = request_id_var.set("rid-1")
    try:
        RequestIdFilter().filter(record)
    finally:
        request_id_var.reset(token)
    line = json.loads(JsonFormatter().format(record))
    assert set(line) == {"time", "level", "logger", "message", "request_id"}
    assert (line["level"], line["logger"], line["message"], line["request_id"]) == (
        "WARNING",
        "sift.test",
        "x=y",
        "rid-1",
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])
    outside = logging.LogRecord("sift.test", logging.INFO, __file__, 1, "m", (), None)
    RequestIdFilter().filter(outside)
    assert json.loads(JsonFormatter().format(outside))["request_id"] == "-"
    with pytest.raises(ValueError, match="log format"):
        make_handler("yaml")


# -- metrics -------------------------------------------------------------------------------------


def samples(text: str, name: str) -> dict[str, float]:
    """Label sets (as written) -> value of every sample of ``name``."""
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line.rpartition(" ")
            found[labels[len(name) :]] = float(value)
    return found


async def test_http_metrics_by_route_template(client: Any) -> None:
    await create_selector(client, "m1", 3)
    await create_selector(client, "m2", 3)
    for name in ("m1", "m2", "m1"):
        assert (await client.get(f"/v1/selectors/{name}")).status_code == 200
    assert (await client.get("/v1/selectors/ghost")).status_code == 404
    assert (await client.get("/no/such/path/123")).status_code == 404
    text = (await client.get("/metrics")).text
    requests = samples(text, "sift_http_requests_total")
    assert requests['{method="GET",route="/v1/selectors/{name}",status="200"}'] == 3
    assert requests['{method="GET",route="/v1/selectors/{name}",status="404"}'] == 1
    assert requests['{method="POST",route="/v1/selectors",status="201"}'] == 2
    assert requests['{method="GET",route="unmatched",status="404"}'] == 1
    assert not any("m1" in labels or "/no/such" in labels for labels in requests)
    latency = samples(text, "sift_http_request_duration_seconds_count")
    assert latency['{method="GET",route="/v1/selectors/{name}"}'] == 4
    buckets = samples(text, "sift_http_request_duration_seconds_bucket")
    assert buckets['{le="+Inf",method="GET",route="/v1/selectors/{name}"}'] == 4


async def test_selector_gauges_come_from_redis(app_factory: Any, store: SelectorStore) -> None:
    # No sweeps during the test: an entry appended behind the API's back stays pending.
    async with app_factory(metrics_refresh_seconds=0, sweep_interval_seconds=3600) as (_, http):
        await create_selector(http, "g1", 50)
        await create_selector(http, "g2", 5)
        rows = np.random.default_rng(0).standard_normal((40, 50)).tolist()
        assert (await http.post("/v1/selectors/g1/chunks", json=rows)).status_code == 200
        for n in range(2):
            await store.log.append(
                "g2", Entry(b"pending", 1, hashlib.sha256(b"%d" % n).hexdigest(), None)
            )
        text = (await http.get("/metrics")).text
        described = {n: (await http.get(f"/v1/selectors/{n}")).json() for n in ("g1", "g2")}
    assert samples(text, "sift_selectors") == {"": 2.0}
    pending = samples(text, "sift_selector_pending_entries")
    assert pending['{selector="g2"}'] == 2
    assert pending == {
        f'{{selector="{n}"}}': float(described[n]["state"]["pending_entries"]) for n in described
    }
    state = samples(text, "sift_selector_state_bytes")
    # g1's sketch (ell x 50 floats and more) outweighs g2's (5 features).
    assert state['{selector="g1"}'] > state['{selector="g2"}'] > 0
    assert samples(text, "sift_selector_gauges_age_seconds")[""] < 5


async def test_selector_gauges_are_read_at_most_every_refresh_interval(app_factory: Any) -> None:
    async with app_factory(metrics_refresh_seconds=3600) as (_, http):
        await create_selector(http, "first", 3)
        before = (await http.get("/metrics")).text
        await create_selector(http, "second", 3)
        cached = (await http.get("/metrics")).text
    assert samples(before, "sift_selectors") == {"": 1.0}
    assert samples(cached, "sift_selectors") == {"": 1.0}  # the last reading, not a new one


# -- CORS and gzip -------------------------------------------------------------------------------


async def test_cors_is_off_by_default(client: Any) -> None:
    response = await client.get("/v1/healthz", headers={"origin": "https://ui.example"})
    assert "access-control-allow-origin" not in response.headers


async def test_cors_for_configured_origins(app_factory: Any) -> None:
    async with app_factory(cors_origins="https://ui.example, https://other.example") as (_, http):
        preflight = await http.options(
            "/v1/selectors",
            headers={
                "origin": "https://ui.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type, idempotency-key",
            },
        )
        simple = await http.get("/v1/selectors", headers={"origin": "https://other.example"})
        foreign = await http.get("/v1/selectors", headers={"origin": "https://evil.example"})
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == "https://ui.example"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "idempotency-key" in preflight.headers["access-control-allow-headers"].lower()
    assert simple.headers["access-control-allow-origin"] == "https://other.example"
    assert "x-request-id" in simple.headers["access-control-expose-headers"].lower()
    assert "access-control-allow-origin" not in foreign.headers


async def test_gzip_is_off_by_default(client: Any) -> None:
    await create_selector(client, "plain", 2000)
    response = await client.get("/v1/selectors/plain/weights", headers={"accept-encoding": "gzip"})
    assert response.status_code == 200 and "content-encoding" not in response.headers


async def test_gzip_compresses_large_answers_once(app_factory: Any) -> None:
    async with app_factory(gzip_min_bytes=1024) as (_, http):
        await create_selector(http, "big", 2000)
        headers = {"accept-encoding": "gzip"}
        as_json = await http.get("/v1/selectors/big/weights", headers=headers)
        small = await http.get("/v1/healthz", headers=headers)
        async with http.stream(
            "GET", "/v1/selectors/big/weights", headers={**headers, "accept": "application/x-npy"}
        ) as npy:
            raw = b"".join([part async for part in npy.aiter_raw()])
            npy_headers = npy.headers
    assert as_json.headers["content-encoding"] == "gzip"
    assert len(as_json.json()["weights"]) == 2000  # httpx decoded it
    assert "content-encoding" not in small.headers  # under the threshold
    assert npy_headers["content-encoding"] == "gzip"
    once = gzip.decompress(raw)
    assert once.startswith(b"\x93NUMPY"), "the .npy body must be compressed exactly once"
    weights = np.load(io.BytesIO(once), allow_pickle=False)
    assert weights.shape == (2000,)


@pytest.mark.single_redis("a process-wide BLAS setting; the backend does not matter")
async def test_blas_threads_are_capped_as_configured(app_factory: Any) -> None:
    """SIFT_BLAS_THREADS reaches OpenBLAS: concurrent updates must not oversubscribe cores."""

    def blas_threads() -> set[int]:
        return {
            pool["num_threads"]
            for pool in threadpoolctl.threadpool_info()
            if pool["user_api"] == "blas"
        }

    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        assert blas_threads() == {2}
        async with app_factory(blas_threads=1):
            assert blas_threads() == {1}
        async with app_factory(blas_threads=2):
            assert blas_threads() == {2}
