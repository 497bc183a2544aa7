"""``ofs``: ofs over HTTP, bytes per column byte and columns/s against in-process (decisions
compared), and the naive per-column pseudo-inverse as the peer."""

from __future__ import annotations

import time

import numpy as np
from bench_ofs import run_naive, run_ofs
from live import Latencies, rss_bytes
from report import Peer, table

from suite.context import NPY, SEED, Context, pct
from tests.support.api import npy_bytes


def bench_ofs(ctx: Context) -> None:
    sizes = ctx.sizes
    n, total, per_request = sizes.ofs_samples, sizes.ofs_columns, sizes.ofs_per_request
    params = {"c": 1.0}
    columns = np.random.default_rng([SEED, n]).standard_normal((n, total))
    local_seconds, local_kept, local_decisions = run_ofs(columns, params, per_request)
    naive_seconds, naive_decisions = run_naive(columns, params, sizes.naive_columns)
    same_naive = naive_decisions == local_decisions[: sizes.naive_columns]
    bodies = [npy_bytes(columns[:, s : s + per_request]) for s in range(0, total, per_request)]
    with ctx.stack() as s:
        name = "ofs"
        s.create({"name": name, "method": "ofs", "n_samples": n, "params": params})
        path = f"/v1/selectors/{name}/features"
        decisions: list[bool] = []
        posts = Latencies()
        before = s.counters()
        started = time.perf_counter()
        with s.ping_probe() as ping:
            for i, body in enumerate(bodies):
                response, seconds = s.post(path, body, NPY, f"{name}-{i}")
                posts.add(seconds)
                decisions += [bool(d["kept"]) for d in response.json()["decisions"]]
        elapsed = time.perf_counter() - started
        after = s.counters()
        described = s.describe(name)
        rss = rss_bytes(s.service.pid) / 2**20
    if ping.failures:  # shown, not fatal
        print(f"  PING failed {len(ping.failures)} times, e.g. {ping.failures[0]}")
    ctx.big_state_pings[f"ofs n = {n}"] = ping.latencies
    sent = sum(len(body) for body in bodies)
    ratio = (after.net_input_bytes - before.net_input_bytes) / sent
    http_rate = total / elapsed
    local_rate = total / local_seconds
    same = decisions == local_decisions
    ctx.report.section(
        f"ofs: n = {n}, {total} Gaussian columns, {per_request} per `.npy` request, c = 1",
        table(
            [
                "columns",
                "kept",
                "request KB",
                "Redis bytes / column bytes",
                "HTTP col/s",
                "in-process col/s",
                "HTTP / in-process",
                "POST p50 / p99 ms",
                "PING p50 / p99 / max ms",
                "versions",
                "Redis used_memory MiB",
                "service RSS MiB",
                "decisions HTTP = in-process",
            ],
            [
                [
                    f"{total}",
                    f"{local_kept}",
                    f"{sent / len(bodies) / 1e3:.0f}",
                    f"{ratio:.1f}x",
                    f"{http_rate:,.0f}",
                    f"{local_rate:,.0f}",
                    pct(http_rate / local_rate),
                    f"{posts.ms(50):.0f} / {posts.ms(99):.0f}",
                    f"{ping.latencies.ms(50):.2f} / {ping.latencies.ms(99):.1f} / "
                    f"{ping.latencies.max_ms:.1f}",
                    f"{described['version']}",
                    f"{after.used_memory / 2**20:.0f}",
                    f"{rss:.0f}",
                    "yes" if same else "NO",
                ]
            ],
        ),
    )
    ctx.report.figure(
        "ofs-bytes",
        f"{ratio:.1f}x (n = {n}, {len(bodies)} requests of {per_request} columns)",
        ratio <= 3.0,
    )
    ctx.report.figure(
        "ofs-http",
        f"{pct(http_rate / local_rate)} ({http_rate:,.0f} of {local_rate:,.0f} col/s)"
        + ("" if same else "; decisions DIFFER"),
        http_rate / local_rate >= 0.60 and same,
    )
    ctx.report.peer(
        Peer(
            f"ofs n = {n}, {per_request} columns per call",
            "columns/s",
            local_rate,
            http_rate,
            "naive pinv per column (same algorithm)",
            sizes.naive_columns / naive_seconds,
            f"first {sizes.naive_columns} columns; decisions "
            + ("identical" if same_naive else "DIFFER"),
        )
    )
