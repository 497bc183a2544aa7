"""The replay budget counts what a replay would redo: an update's CPU, not the seconds a busy
machine made it wait. Against a real redis-server, with a real process burning the core the
applier's threads are held to."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
from threadpoolctl import threadpool_limits

from service.algorithms import get_method
from service.store.redis_store import SelectorStore
from service.wire.kinds import chunk_format
from service.wire.media import NPY
from tests.applier.test_verbs import build


@contextlib.contextmanager
def sharing_one_core() -> Iterator[None]:
    """Every thread of this process, and a process spinning, held to one core: each gets
    about half of it, so an update takes about twice its CPU on the clock."""
    core = min(os.sched_getaffinity(0))
    tasks = [int(task) for task in os.listdir("/proc/self/task")]
    before = {task: os.sched_getaffinity(task) for task in tasks}
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(spinner.pid, {core})
        for task in tasks:
            os.sched_setaffinity(task, {core})
        yield
    finally:
        spinner.kill()
        spinner.wait()
        for task, cores in before.items():
            with contextlib.suppress(OSError):  # the thread ended meanwhile
                os.sched_setaffinity(task, cores)


async def test_the_replay_budget_counts_an_updates_cpu_not_its_waits(
    store: SelectorStore, redis_url: str
) -> None:
    built = await build(store, redis_url)
    try:
        spec = {"name": "busy", "method": "fsds", "n_features": 800}
        await built.selectors.lifecycle.create(spec)
        meta = await built.store.registry.get_meta("busy")
        body = io.BytesIO()
        np.save(body, np.random.default_rng(5).standard_normal((1500, 800)))
        kind = chunk_format(get_method(meta.method).chunk_kind)
        chunk = kind.decode(body.getvalue(), NPY, meta, 2**30)
        with threadpool_limits(1, user_api="blas"), sharing_one_core():
            started = time.perf_counter()
            log_id = await built.append(meta, chunk)
            built.applier.appended(
                log_id, chunk.chunk, len(chunk.payload), [(meta.name, meta.incarnation)]
            )
            assert await built.applier.wait_applied(meta.name, log_id, 60.0) is not None
            elapsed = time.perf_counter() - started
        held = built.applier.holds(meta.name)
        assert held is not None and held.last_update_cpu is not None
        # The update's CPU, as read on its thread, is what the budget counts.
        assert held.compute_seconds == held.last_update_cpu
        # And it is well under what the update took on the clock, sharing its core.
        assert 0 < held.compute_seconds < 0.75 * elapsed, (held.compute_seconds, elapsed)
    finally:
        await built.applier.close(2.0)
