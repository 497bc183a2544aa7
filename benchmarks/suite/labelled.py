"""``ocfs-http``: ocfs over HTTP on labelled chunks against in-process and against a batch
recomputation of the scores from all rows seen after every chunk."""

from __future__ import annotations

import numpy as np
from bench_labelled import chunks as labelled_chunks
from bench_labelled import ocfs_in_process, stream
from bench_labelled import over_http as labelled_over_http
from report import Peer, table

from suite.context import Context, pct


def bench_ocfs(ctx: Context) -> None:
    sizes = ctx.sizes
    lines = []
    worst = float("inf")
    texts = []
    with ctx.stack() as s, s.ping_probe() as ping:
        for data in sizes.ocfs_sets:
            x, y = stream(f"{data}.mat")
            parts = labelled_chunks(x, y)[: sizes.ocfs_chunks]
            d = x.shape[1]
            # One pass is a few ms: the median of three.
            runs = [ocfs_in_process(parts, d) for _ in range(3)]
            local = float(np.median([r["rows_per_s"] for r in runs]))
            batch = float(np.median([r["batch_rows_per_s"] for r in runs]))
            served, p50, p95 = labelled_over_http(
                s.url, f"ocfs-{data.lower()}", "ocfs", d, {}, parts
            )
            rows = sum(part[0].shape[0] for part in parts)
            ratio = served / local
            worst = min(worst, ratio)
            texts.append(f"{data} {pct(ratio)} ({p50:.0f} ms per chunk)")
            lines.append(
                [
                    data,
                    f"{rows}",
                    f"{d}",
                    f"{local:,.0f}",
                    f"{served:,.0f}",
                    pct(ratio),
                    f"{p50:.1f} / {p95:.1f}",
                    f"{batch:,.0f}",
                ]
            )
            ctx.report.peer(
                Peer(
                    f"ocfs {data}, 500-row chunks",
                    "rows/s",
                    local,
                    served,
                    "batch OCFS recomputed on all rows seen, per chunk",
                    batch,
                )
            )
    ctx.report.section(
        "ocfs-http: labelled `.npz` chunks of 500 rows, one producer, every POST waiting",
        table(
            [
                "data",
                "rows",
                "d",
                "in-process rows/s",
                "HTTP rows/s",
                "HTTP / in-process",
                "POST p50 / p95 ms",
                "batch recomputation rows/s",
            ],
            lines,
        ),
        f"PING during these runs: {ping.latencies.text()}.",
    )
    ctx.report.figure("ocfs-http", "; ".join(texts), worst >= 0.50)
