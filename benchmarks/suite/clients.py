"""``many-clients``: concurrent connections posting one-row JSON chunks with ``wait=false``;
rows/s acknowledged and applied, POST latencies."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ProcessPoolExecutor

import httpx
import numpy as np
from live import Latencies
from report import table

from suite.context import SEED, Context


def post_concurrently(
    url: str, path: str, bodies: list[bytes], clients: int, key_prefix: str
) -> tuple[list[int], list[float]]:
    """POST every body as a one-row JSON chunk (``wait=false``) from ``clients`` concurrent
    connections of one asyncio client; the statuses and seconds of each POST. Runs in a
    process of its own (``bench_many_clients``)."""

    async def run() -> tuple[list[int], list[float]]:
        statuses: list[int] = []
        seconds: list[float] = []
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

            async def client(index: int) -> None:
                for i in range(index, len(bodies), clients):
                    started = time.perf_counter()
                    response = await http.post(
                        path,
                        params={"wait": "false"},
                        content=bodies[i],
                        headers={
                            "content-type": "application/json",
                            "idempotency-key": f"{key_prefix}{i}",
                        },
                    )
                    seconds.append(time.perf_counter() - started)
                    statuses.append(response.status_code)
                    if response.status_code not in (200, 202):
                        raise RuntimeError(f"POST {path}: {response.status_code} {response.text}")

            await asyncio.gather(*(client(index) for index in range(clients)))
        return statuses, seconds

    return asyncio.run(run())


def bench_many_clients(ctx: Context) -> None:
    sizes = ctx.sizes
    m, clients, each = sizes.many_features, sizes.clients, sizes.chunks_per_client
    total = clients * each
    rng = np.random.default_rng([SEED, m, total])
    bodies = [
        json.dumps({"rows": [rng.standard_normal(m).round(6).tolist()]}).encode()
        for _ in range(total)
    ]
    with ctx.stack() as s:
        name = "clients"
        s.create({"name": name, "method": "fsds", "n_features": m})
        path = f"/v1/selectors/{name}/chunks"
        posts = Latencies()
        started = time.perf_counter()
        # The clients run in a process of their own (asyncio, one connection each): threads
        # of this process, each paying httpx's overhead under one GIL, measured themselves.
        with s.ping_probe() as ping, ProcessPoolExecutor(1) as load:
            statuses, seconds = load.submit(
                post_concurrently, s.url, path, bodies, clients, "c"
            ).result()
            acknowledged = time.perf_counter() - started
            s.wait_applied(name, total, timeout_s=600)
            applied = time.perf_counter() - started
        for value in seconds:
            posts.add(value)
        described = s.describe(name)
    ack_rate, applied_rate = total / acknowledged, total / applied
    ctx.report.section(
        f"many-clients: {clients} clients, {total} one-row JSON chunks (fsds m = {m}), "
        "`wait=false`",
        table(
            [
                "chunks",
                "202 / 200",
                "acknowledged rows/s",
                "applied rows/s (until all applied)",
                "POST p50 / p99 / max ms",
                "versions",
                "PING p99 / max ms",
            ],
            [
                [
                    f"{total}",
                    f"{statuses.count(202)} / {statuses.count(200)}",
                    f"{ack_rate:,.0f}",
                    f"{applied_rate:,.0f}",
                    f"{posts.ms(50):.1f} / {posts.ms(99):.1f} / {posts.max_ms:.1f}",
                    f"{described['version']}",
                    f"{ping.latencies.ms(99):.1f} / {ping.latencies.max_ms:.1f}",
                ]
            ],
        ),
    )
    ctx.report.figure(
        "many-clients",
        f"{applied_rate:,.0f} rows/s applied ({ack_rate:,.0f} acknowledged), "
        f"POST p99 {posts.ms(99):.1f} ms",
        applied_rate >= 2000 and posts.ms(99) <= 20.0,
    )
