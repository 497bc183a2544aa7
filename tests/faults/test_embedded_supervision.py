"""The embedded redis-server is supervised: SIGKILL it under a real ``sift serve`` process and
the service restarts it, says so on /v1/readyz, answers 503 with a Retry-After meanwhile, and
loses nothing it acknowledged.

The first exit is restarted at once (the test sees it through the restart count); an exit soon
after a restart waits a backoff first, which leaves a window to observe ``"restarting"``.
About 3 s: not marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.store.embedded import PIDFILE
from tests.support.harness import ServiceProcess, wait_for


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """Short, so the unix socket path fits the OS limit."""
    path = Path(tempfile.mkdtemp(prefix="sift-sup-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def embedded_service(data_dir: Path, tmp_path: Path) -> Iterator[ServiceProcess]:
    service = ServiceProcess(
        "embedded",
        None,
        tmp_path,
        {"SIFT_LOG_FORMAT": "json"},
        data_dir=data_dir,
        args=["--log-level", "info"],
    )
    try:
        service.start()
        yield service
    finally:
        service.stop()  # SIGTERM: the service stops its Redis too
        print(service.log_tail())


def redis_pid(data_dir: Path) -> int:
    return int((data_dir / PIDFILE).read_text().strip())


def post_chunk(http: httpx.Client, name: str, cid: int, key: str) -> httpx.Response:
    rows = [[cid, i, 1] for i in range(3)]
    return http.post(
        f"/v1/selectors/{name}/chunks",
        json={"rows": rows, "labels": [f"c{cid}"] * 3},
        headers={"idempotency-key": key},
    )


def test_sigkilled_embedded_redis_is_restarted_and_loses_nothing(
    embedded_service: ServiceProcess, data_dir: Path
) -> None:
    name = "sup"
    with httpx.Client(base_url=embedded_service.url, timeout=30) as http:
        assert http.post(
            "/v1/selectors", json={"name": name, "method": "ocfs", "n_features": 3}
        ).is_success
        acknowledged = [post_chunk(http, name, cid, f"k{cid}") for cid in range(3)]
        assert [r.status_code for r in acknowledged] == [200, 200, 200]

        # First kill: restarted at once.
        first = redis_pid(data_dir)
        os.kill(first, signal.SIGKILL)
        killed_at = time.monotonic()
        ready = wait_for(
            lambda: _ready_with_restarts(http, 1), 10, "readyz 200 after the first restart"
        )
        recovered_s = time.monotonic() - killed_at
        assert redis_pid(data_dir) != first
        assert ready["last_incident"]["signal"] == "SIGKILL"
        assert ready["last_incident"]["exit_code"] is None

        # Second kill soon after: a backoff before the restart; watch it restarting.
        os.kill(redis_pid(data_dir), signal.SIGKILL)
        restarting = wait_for(
            lambda: _restarting(http), 5, "readyz to say the embedded Redis is restarting"
        )
        refused = http.get(f"/v1/selectors/{name}", headers={"x-request-id": "during-restart"})
        body = restarting.json()
        assert restarting.status_code == 503 and body["redis"] == "restarting"
        assert body["last_exit"]["signal"] == "SIGKILL" and body["restarts"] == 1
        assert body["since"] <= time.time()
        assert int(restarting.headers["retry-after"]) >= 1
        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.headers["x-request-id"] == "during-restart"
        assert refused.json()["request_id"] == "during-restart"
        assert http.get("/v1/healthz").status_code == 200

        ready = wait_for(
            lambda: _ready_with_restarts(http, 2), 15, "readyz 200 after the second restart"
        )
        assert ready["restarts"] == 2 and ready["last_incident"]["down_seconds"] > 0
        # Acknowledged chunks are all there; new ones are accepted.
        later = post_chunk(http, name, 3, "k3")
        assert later.status_code == 200, later.text
        described = http.get(f"/v1/selectors/{name}").json()
        assert described["rows_seen"] == 12
        assert described["classes"] == [{"label": f"c{c}", "count": 3} for c in range(4)]
        metrics = http.get("/metrics").text
        assert "sift_embedded_redis_restarts_total 2.0" in metrics

    log_lines = [
        json.loads(line)
        for line in embedded_service.log_path.read_text().splitlines()
        if line.startswith("{")
    ]
    messages = [line["message"] for line in log_lines]
    assert any("exited (signal SIGKILL)" in m for m in messages), messages
    access = [
        line
        for line in log_lines
        if line["logger"] == "uvicorn.access" and "/v1/selectors/sup " in line["message"]
    ]
    assert any(line["request_id"] == "during-restart" for line in access), access
    print(f"first restart: readyz 200 {recovered_s:.2f} s after the SIGKILL")


def _ready_with_restarts(http: httpx.Client, restarts: int) -> dict[str, Any] | None:
    try:
        response = http.get("/v1/readyz")
    except httpx.TransportError:
        return None
    body = response.json()
    if response.status_code == 200 and body.get("restarts") == restarts:
        return dict(body)
    return None


def _restarting(http: httpx.Client) -> httpx.Response | None:
    response = http.get("/v1/readyz")
    if response.status_code == 503 and response.json().get("redis") == "restarting":
        return response
    return None
