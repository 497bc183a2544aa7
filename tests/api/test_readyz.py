"""``/v1/readyz`` against a redis-server of its own that is paused (SIGSTOP): 503 within the
probe's own short timeout, and ready again once Redis answers."""

from __future__ import annotations

import time
from pathlib import Path

from service.api.routes.health import READY_TIMEOUT_SECONDS
from tests.support.api import assert_problem, make_settings, running_app, wait_for
from tests.support.harness import RedisProcess


async def test_readyz_answers_503_at_once_while_redis_is_paused(tmp_path: Path) -> None:
    redis_server = RedisProcess(tmp_path / "redis")
    try:
        async with running_app(make_settings(redis_server.url)) as (_app, http):
            assert (await http.get("/v1/readyz")).status_code == 200
            redis_server.pause()
            try:
                started = time.monotonic()
                response = await http.get("/v1/readyz")
                took = time.monotonic() - started
            finally:
                redis_server.resume()
            assert_problem(response, 503, "did not answer within")
            assert response.headers["retry-after"] == "1"
            assert took < READY_TIMEOUT_SECONDS + 1.0, took

            async def ready() -> bool:
                return (await http.get("/v1/readyz")).status_code == 200

            await wait_for(ready)
    finally:
        redis_server.close()
