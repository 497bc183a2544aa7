"""``request-path``: ``bench_request_path``'s wrk scenarios, Sift against the floor app of the
same stack; the ``path-*`` rows, and ``many-clients-wrk``."""

from __future__ import annotations

from bench_request_path import Checkout, median
from bench_request_path import measure as measure_request_path
from bench_request_path import report as request_path_table

from suite.context import Context


def bench_request_path(ctx: Context) -> None:
    sizes = ctx.sizes
    rows = {
        row.scenario: row
        for row in measure_request_path(
            Checkout(ctx.service_root, tuple(ctx.service_env.items())),
            rounds=sizes.path_rounds,
            seconds=sizes.path_seconds,
        )
    }
    ctx.report.section(
        f"request-path: wrk, {sizes.path_rounds} round(s) of {sizes.path_seconds:.0f} s per "
        "scenario, Sift and the floor app (`benchmarks/floor_app.py`) in turns on one Redis "
        "(medians)",
        request_path_table(list(rows.values())).splitlines(),
    )

    def ratio(name: str) -> tuple[float, float, float]:
        row = rows[name]
        rate = median([x.rate for x in row.sift])
        return (
            rate,
            rate / median([x.rate for x in row.floor]),
            median([x.p99_ms for x in row.sift]),
        )

    rate, share, p99 = ratio("post-nowait")
    settled = max(rows["post-nowait"].settle_s)
    ctx.report.figure(
        "path-nowait",
        f"{rate:,.0f} req/s, {share:.2f} of the floor, p99 {p99:.1f} ms, all applied "
        f"{settled:.2f} s after the load",
        share >= 0.6 and p99 <= 20.0 and settled <= 1.0,
    )
    load = rows["post-nowait"]
    applied = median(
        [
            x.requests / (x.seconds + settle)
            for x, settle in zip(load.sift, load.settle_s, strict=True)
        ]
    )
    ctx.report.figure(
        "many-clients-wrk",
        f"{applied:,.0f} rows/s applied (acknowledged and applied by {settled:.2f} s after "
        "the load)",
        applied >= 2000,
    )
    rate, share, p99 = ratio("post-wait")
    ctx.report.figure(
        "path-wait", f"{rate:,.0f} req/s, {share:.2f} of the floor, p99 {p99:.1f} ms", share >= 0.5
    )
    rate, share, p99 = ratio("get-top")
    ctx.report.figure(
        "path-top", f"{rate:,.0f} req/s, {share:.2f} of the floor, p99 {p99:.1f} ms", share >= 0.6
    )
    nowait, wait = rows["workers-nowait"], rows["workers-wait"]
    rate = median([x.rate for x in nowait.sift])
    settled = max(nowait.settle_s)
    ctx.report.figure(
        "path-workers",
        f"{rate:,.0f} req/s acknowledged, all applied {settled:.2f} s after the load "
        f"(`wait=true`: {median([x.rate for x in wait.sift]):,.0f} req/s, p99 "
        f"{median([x.p99_ms for x in wait.sift]):.1f} ms)",
        rate >= 2000 and settled <= 1.0,
    )
    pair = rows["replicas-wait"]
    p99 = median([x.p99_ms for x in pair.sift])
    worst = max(x.max_ms for x in pair.sift)
    ctx.report.figure(
        "path-replicas",
        f"p99 {p99:.1f} ms, max {worst:.0f} ms, {median([x.rate for x in pair.sift]):,.0f} req/s",
        p99 <= 50.0 and worst < 1000.0,
    )
