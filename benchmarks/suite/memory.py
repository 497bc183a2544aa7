"""``memory``: service RSS and Redis ``used_memory`` sampled over a long fsds stream (a million
rows in the full run): first, last, max, drift."""

from __future__ import annotations

import time

from live import rss_bytes
from report import table

from suite.context import NPZ, SEED, Context, TermRows, npz


def bench_memory(ctx: Context) -> None:
    sizes = ctx.sizes
    m, rows, every, chunk_rows = (
        2000,
        sizes.memory_rows,
        sizes.memory_every,
        sizes.memory_chunk_rows,
    )
    terms = TermRows(m, 20, SEED + 2)
    samples: list[tuple[int, float, float]] = []
    with ctx.stack() as s:
        name = "memory"
        s.create({"name": name, "method": "fsds", "n_features": m})
        path = f"/v1/selectors/{name}/chunks"
        sent = 0
        started = time.perf_counter()
        while sent < rows:
            s.post(path, npz(terms.chunk(chunk_rows)), NPZ, f"{name}-{sent}")
            sent += chunk_rows
            if sent % every == 0:
                counters = s.counters()
                samples.append(
                    (sent, rss_bytes(s.service.pid) / 2**20, counters.used_memory / 2**20)
                )
                print(
                    f"  {sent:>9,} rows: service RSS {samples[-1][1]:.1f} MiB, "
                    f"Redis used_memory {samples[-1][2]:.1f} MiB",
                    flush=True,
                )
        elapsed = time.perf_counter() - started

    def drift(series: list[float]) -> tuple[float, float]:
        return (series[-1] - series[0]) / series[0], (max(series) - series[0]) / series[0]

    rss = [sample[1] for sample in samples]
    used = [sample[2] for sample in samples]
    lines = []
    verdicts = []
    for label, series in (("service RSS", rss), ("Redis used_memory", used)):
        last, peak = drift(series)
        verdicts.append(abs(last) <= 0.10 and peak <= 0.10)
        lines.append(
            [
                label,
                f"{series[0]:.1f}",
                f"{series[-1]:.1f}",
                f"{max(series):.1f}",
                f"{last:+.1%}",
                f"{peak:+.1%}",
            ]
        )
    ctx.report.section(
        f"memory: fsds m = {m:,}, {rows:,} rows in sparse {chunk_rows}-row chunks, sampled "
        f"every {every:,} rows ({rows / elapsed:,.0f} rows/s over HTTP)",
        table(
            ["MiB", f"first (at {every:,} rows)", "last", "max", "last vs first", "max vs first"],
            lines,
        ),
    )
    ctx.report.figure(
        "memory",
        "; ".join(
            f"{line[0]} {line[1]} -> {line[2]} MiB ({line[4]}, max {line[5]})" for line in lines
        ),
        all(verdicts),
    )
