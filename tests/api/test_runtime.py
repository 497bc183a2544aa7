"""The composition root (``service.runtime``): what it starts, that leaving it stops every task
it started, and a start that fails saying why with nothing left running."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from service.errors import SiftError
from service.runtime import Runtime
from tests.support.api import make_settings

#: The background tasks a runtime on an external Redis runs (by their task names): the applier's
#: (its sweeper and commit listener, in a group of its own), the expiry, the outbox, the sources.
BACKGROUND = {"applier", "sweeper", "commit-listener", "expiry", "alert-outbox", "sources"}


def live_tasks() -> set[asyncio.Task[Any]]:
    return {task for task in asyncio.all_tasks() if not task.done()}


async def test_a_runtime_runs_its_parts_and_stops_every_task_it_started(
    redis_url: str, redis_client: Any
) -> None:
    before = live_tasks()
    async with Runtime(make_settings(redis_url)) as runtime:
        started = live_tasks() - before
        for _ in range(100):  # the applier's own tasks start once its task runs
            if {task.get_name() for task in started} >= BACKGROUND:
                break
            await asyncio.sleep(0.05)
            started = live_tasks() - before
        assert {task.get_name() for task in started} >= BACKGROUND
        assert runtime.supervisor is None and runtime.startup_error is None
        assert runtime.redis_mode in {"external", "cluster"}
        assert runtime.selectors.store is runtime.store
        assert b"sift_chunks_accepted" in runtime.metrics.render()
    assert not [task.get_name() for task in started if not task.done()]


async def test_a_runtime_whose_redis_does_not_answer_says_so_and_leaves_nothing_running() -> None:
    before = live_tasks()
    runtime = Runtime(make_settings("redis://127.0.0.1:1"))
    with pytest.raises(SiftError, match="does not answer"):
        async with runtime:
            pytest.fail("started without a Redis")
    assert runtime.startup_error is not None
    assert "redis://127.0.0.1:1 does not answer" in runtime.startup_error
    await asyncio.sleep(0)
    assert not [task.get_name() for task in live_tasks() - before]


async def test_a_runtime_left_as_soon_as_it_started_stops_within_its_bounds(redis_url: str) -> None:
    """Leaving at once, while the applier's listener is still subscribing: every part stops (a
    cancellation lost in the Redis client's read timeout must not hold the exit)."""
    before = live_tasks()

    async def enter_and_leave() -> None:
        async with Runtime(make_settings(redis_url)):
            pass

    await asyncio.wait_for(enter_and_leave(), 30)
    await asyncio.sleep(0)
    assert not [task.get_name() for task in live_tasks() - before]
