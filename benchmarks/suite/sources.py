"""``sources`` (issue 32): a Redis stream of entries with 100 named features read by one service
process into a ``variance`` selector, against one-row POSTs of the same rows and the method
in-process.

The stream is written before the source is created (``XADD``, pipelined, on the stack's own
redis-server: the bus is the Redis Sift already uses), so the figure is the consumption's, not
the producer's. Timed from the source's creation to the selector having *applied* every row
(``rows_seen``), with the source's defaults but ``batch_rows`` (5,000). Beside it, on the same
stack: one-row JSON POSTs with ``wait=false`` from one keep-alive connection (a producer that
emits one event at a time, through the request path), and ``Variance.update`` in-process on
the same rows in chunks of the same size. The selector's variance must equal numpy's to 1e-9.
"""

from __future__ import annotations

import time

import numpy as np
from report import table

from service.algorithms.variance import Variance
from suite.context import SEED, Context

FEATURES = 100
BATCH_ROWS = 5000
#: Target and goal of the consumption rate (rows/s applied).
TARGET = 20_000
GOAL = 100_000


def bench_sources(ctx: Context) -> None:
    rows_total = ctx.sizes.source_rows
    names = [f"f{i:03d}" for i in range(FEATURES)]
    rng = np.random.default_rng([SEED, 32])
    x = rng.standard_normal((rows_total, FEATURES)) * rng.uniform(0.5, 50, FEATURES)

    method = Variance()
    params = method.resolve_params({}, FEATURES)
    state = method.initial_state(params, FEATURES)
    started = time.perf_counter()
    for at in range(0, rows_total, BATCH_ROWS):
        state = method.update(state, params, x[at : at + BATCH_ROWS])
    local_rate = rows_total / (time.perf_counter() - started)

    with ctx.stack() as s:
        # The bus: the stack's Redis, written before the clock starts.
        text = [[repr(float(v)) for v in row] for row in x]
        for at in range(0, rows_total, 2000):
            pipe = s.client.pipeline(transaction=False)
            for row in text[at : at + 2000]:
                pipe.xadd("bench:events", dict(zip(names, row, strict=True)))
            pipe.execute()
        s.create(
            {"name": "v", "method": "variance", "n_features": FEATURES, "feature_names": names}
        )
        bus_url = f"redis://127.0.0.1:{s.redis.port}/0"
        redis_before = s.counters()
        started = time.perf_counter()
        created = s.http.post(
            "/v1/sources",
            json={
                "name": "bench",
                "kind": "redis-stream",
                "url": bus_url,
                "key": "bench:events",
                "into": {"selector": "v"},
                "batch_rows": BATCH_ROWS,
            },
        )
        if created.status_code != 201:
            raise RuntimeError(f"creating the source: {created.status_code} {created.text}")
        s.wait_applied("v", rows_total, 600)
        source_seconds = time.perf_counter() - started
        redis_after = s.counters()
        source = s.http.get("/v1/sources/bench").json()
        if (source["rows"], source["rejected"]) != (rows_total, 0):
            raise RuntimeError(f"the source consumed {source['rows']} rows: {source}")
        served = np.asarray(s.http.get("/v1/selectors/v/weights").json()["weights"])
        error = float(np.max(np.abs(served - x.var(axis=0)) / x.var(axis=0)))
        if error > 1e-9:
            raise RuntimeError(f"the variance differs from numpy's by {error:.1e}")

        # One-row POSTs of the same rows, one at a time on one connection, not waited for.
        s.create({"name": "w", "method": "variance", "n_features": FEATURES})
        posts = min(rows_total, ctx.sizes.source_posts)
        started = time.perf_counter()
        for i in range(posts):
            response = s.http.post(
                "/v1/selectors/w/chunks", params={"wait": "false"}, json=[x[i].tolist()]
            )
            if response.status_code not in (200, 202):
                raise RuntimeError(f"one-row POST: {response.status_code} {response.text}")
        s.wait_applied("w", posts, 120)
        post_rate = posts / (time.perf_counter() - started)

    source_rate = rows_total / source_seconds
    received = redis_after.net_input_bytes - redis_before.net_input_bytes
    lines = [
        [
            f"source: Redis stream -> variance, {BATCH_ROWS:,}-row batches, applied",
            f"{source_rate:,.0f}",
            f"{source_rate / local_rate:.2f}",
        ],
        [
            "one-row POSTs (`wait=false`, one connection), applied",
            f"{post_rate:,.0f}",
            f"{post_rate / local_rate:.3f}",
        ],
        [f"`Variance.update` in-process, {BATCH_ROWS:,}-row chunks", f"{local_rate:,.0f}", "1.00"],
    ]
    ctx.report.section(
        f"sources: {rows_total:,} entries of {FEATURES} named features in a Redis stream",
        table(["", "rows/s", "/ in-process"], lines),
        f"Sift's Redis received {received / 1e6:,.1f} MB while the source ran "
        f"({received / (rows_total * FEATURES * 8):.2f}x the rows' float64 bytes: the entries "
        "read from the bus are not counted, the same Redis serving as the bus); the variance "
        f"equals numpy's to {error:.0e}.",
    )
    ctx.report.figure(
        "sources",
        f"{source_rate:,.0f} rows/s applied ({source_rate / post_rate:.0f}x one-row POSTs, "
        f"{source_rate / local_rate:.2f} of in-process)",
        source_rate >= TARGET,
    )
