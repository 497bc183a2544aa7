"""What an idle service costs with many selectors, and how soon a forgotten chunk is applied.

Creates ``--selectors`` small fsds selectors (4 features) straight through the store, starts
``sift serve`` on them (one process, the Redis of the benchmark), waits for its start-up sweep,
then measures its CPU over ``--seconds`` with nothing to do. Then appends one chunk to a
selector from outside, without telling any applier (what a replica that crashed between its
append and its apply leaves), and times how long the service takes to apply it.

    .venv/bin/python benchmarks/bench_idle.py --selectors 100000
    .venv/bin/python benchmarks/bench_idle.py --selectors 10000 --root ../sift-before

``--root`` runs the ``service`` package of another checkout (a release before the pending set,
say) against the same data, for a before/after in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import redis.asyncio as aioredis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.algorithms import get_method  # noqa: E402
from service.applier import publish  # noqa: E402
from service.store.codec import encode_state  # noqa: E402
from service.store.records import Entry, SelectorMeta, new_incarnation  # noqa: E402
from service.store.redis_store import SelectorStore  # noqa: E402
from service.wire.kinds import chunk_format  # noqa: E402
from tests.support.harness import RedisProcess, ServiceProcess, cpu_seconds  # noqa: E402

FEATURES = 4
CREATE_CONCURRENCY = 64


async def create_many(url: str, count: int) -> None:
    """``count`` fsds selectors named ``idle-<i>``, created concurrently through the store."""
    method = get_method("fsds")
    params = method.resolve_params({}, FEATURES)
    state = method.initial_state(params)
    initial = encode_state(state)
    client = aioredis.from_url(url)
    store = SelectorStore(client)
    await store.ensure_scripts()

    async def one(i: int) -> None:
        meta = SelectorMeta(
            name=f"idle-{i}",
            method="fsds",
            params=params.as_params(),
            created_at=time.time(),
            n_features=FEATURES,
            incarnation=new_incarnation(),
        )
        await store.registry.create(meta, initial, published=publish(meta, state))

    for start in range(0, count, CREATE_CONCURRENCY):
        await asyncio.gather(
            *(one(i) for i in range(start, min(count, start + CREATE_CONCURRENCY)))
        )
    await client.aclose()


async def append_behind_its_back(url: str, name: str) -> str:
    """Append one chunk to ``name`` as a replica would that then died: nobody is kicked."""
    client = aioredis.from_url(url)
    store = SelectorStore(client)
    meta = await store.registry.get_meta(name)
    body = np.ones((1, FEATURES)).tolist()
    import orjson

    decoded = chunk_format("rows").decode(orjson.dumps(body), "application/json", meta, 1 << 20)
    outcome = await store.log.append(
        name,
        Entry(decoded.payload, decoded.items, decoded.digest, None, incarnation=meta.incarnation),
    )
    await client.aclose()
    return outcome.log_id


async def seconds_until_applied(url: str, name: str, timeout_s: float = 60.0) -> float:
    client = aioredis.from_url(url)
    store = SelectorStore(client)
    started = time.monotonic()
    while (await store.registry.get_head(name)).version == 0:
        if time.monotonic() - started > timeout_s:
            raise RuntimeError(f"{name} was not applied within {timeout_s} s")
        await asyncio.sleep(0.005)
    await client.aclose()
    return time.monotonic() - started


@dataclass(frozen=True)
class Idle:
    """What one run measured."""

    selectors: int
    create_s: float
    #: The service's CPU over the idle window, as a fraction of one core.
    cpu_fraction: float
    seconds: float
    #: From the append behind its back to the chunk applied.
    pickup_s: float


def measure_idle(selectors: int, seconds: float, root: Path = ROOT) -> Idle:
    """``selectors`` idle selectors, one service of ``root``'s checkout: its idle CPU and how
    soon it applies a chunk it was not told about (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="sift-idle-") as tmp:
        folder = Path(tmp)
        redis_server = RedisProcess(folder / "redis")
        try:
            started = time.monotonic()
            asyncio.run(create_many(redis_server.url, selectors))
            create_s = time.monotonic() - started
            service = ServiceProcess("idle", redis_server.url, folder, root=root.resolve())
            service.start()
            try:
                time.sleep(5.0)  # the start-up sweep reads every selector once
                before = cpu_seconds(service.pid)
                time.sleep(seconds)
                busy = (cpu_seconds(service.pid) - before) / seconds
                name = f"idle-{selectors // 2}"
                asyncio.run(append_behind_its_back(redis_server.url, name))
                waited = asyncio.run(seconds_until_applied(redis_server.url, name))
            finally:
                service.kill()
        finally:
            redis_server.close()
    return Idle(selectors, create_s, busy, seconds, waited)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--selectors", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose service runs")
    args = parser.parse_args(argv)
    idle = measure_idle(args.selectors, args.seconds, args.root)
    print(f"created {idle.selectors:,} selectors in {idle.create_s:.1f} s")
    print(f"idle CPU: {100 * idle.cpu_fraction:.2f}% of a core ({idle.seconds:.0f} s measured)")
    print(f"a chunk appended behind its back was applied after {idle.pickup_s:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
