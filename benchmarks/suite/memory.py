"""``memory``: service RSS and Redis ``used_memory`` sampled over a long fsds stream (a million
rows in the full run): first, last, max, drift.

Three of Redis's structures are windows that fill and empty by design while the stream runs:
the idempotency records (one per keyed POST, kept ``SIFT_IDEMPOTENCY_TTL_SECONDS`` and at most
``SIFT_IDEMPOTENCY_MAX_RECORDS``), the ranking history (a capped list) and the log since the
last checkpoint (at most ``SIFT_CHECKPOINT_LOG_RATIO`` times the state's bytes, so a sample
taken just before a checkpoint reads higher than one just after). They are measured with
``MEMORY USAGE`` and shown apart; the verdict is on what is left, where a leak would show.
"""

from __future__ import annotations

import time

import redis
from live import rss_bytes
from report import table

from suite.context import NPZ, SEED, Context, TermRows, npz


def retained_bytes(client: redis.Redis, name: str) -> int:
    """Bytes of selector ``name``'s windows: its idempotency records (and the set that orders
    them for expiry), its ranking history and its log. Its keys carry the name as a Redis
    Cluster hash tag (``{name}``)."""
    tagged = f"{{{name}}}"
    keys = [
        key
        for pattern in (
            f"*:{tagged}:idem:*",
            f"*:{tagged}:idems",
            f"*:{tagged}:history",
            f"*:{tagged}:log",
        )
        for key in client.scan_iter(match=pattern, count=1000)
    ]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key, samples=0)
    return sum(int(size or 0) for size in pipe.execute())


def bench_memory(ctx: Context) -> None:
    sizes = ctx.sizes
    m, rows, every, chunk_rows = (
        2000,
        sizes.memory_rows,
        sizes.memory_every,
        sizes.memory_chunk_rows,
    )
    terms = TermRows(m, 20, SEED + 2)
    samples: list[tuple[int, float, float, float]] = []
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
                    (
                        sent,
                        rss_bytes(s.service.pid) / 2**20,
                        counters.used_memory / 2**20,
                        retained_bytes(s.client, name) / 2**20,
                    )
                )
                print(
                    f"  {sent:>9,} rows: service RSS {samples[-1][1]:.1f} MiB, "
                    f"Redis used_memory {samples[-1][2]:.1f} MiB "
                    f"(windows {samples[-1][3]:.1f})",
                    flush=True,
                )
        elapsed = time.perf_counter() - started

    def drift(series: list[float]) -> tuple[float, float]:
        return (series[-1] - series[0]) / series[0], (max(series) - series[0]) / series[0]

    rss = [sample[1] for sample in samples]
    used = [sample[2] for sample in samples]
    retained = [sample[3] for sample in samples]
    rest = [total - window for total, window in zip(used, retained, strict=True)]
    lines = []
    verdicts = []
    for label, series, judged in (
        ("service RSS", rss, True),
        ("Redis used_memory", used, False),
        ("of which windows (idempotency records, ranking history, log)", retained, False),
        ("Redis used_memory less the windows", rest, True),
    ):
        last, peak = drift(series)
        if judged:
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
            f"{line[0]} {line[1]} -> {line[2]} MiB ({line[4]}, max {line[5]})"
            for line in lines
            if not line[0].startswith("of which")
        ),
        all(verdicts),
    )
