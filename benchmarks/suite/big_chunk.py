"""``big-chunk``: one waited dense chunk of 500 rows by 1024 features (4 MB), ocfs, anova and
chi2 (on the values' magnitudes: it takes counts) as a labelled ``.npz``, f_regression as an
``.npz`` with targets and variance as a ``.npy``, against the floor app (``floor_app.py``)
storing the same body durably once on the same Redis (one fsync'd ``XADD``); and the bytes
Redis receives per ocfs chunk against the chunk's (its state is 25 times smaller than the
chunk)."""

from __future__ import annotations

import io
import statistics
import time

import httpx
import numpy as np
from bench_request_path import Floor
from report import table

from suite.context import NPY, NPZ, SEED, Context
from tests.support.api import npz_labelled

CLASSES = 10
#: How each method's bodies are sent.
BODY_NAMES = {
    "ocfs": "`.npz`, labels",
    "anova": "`.npz`, labels",
    "chi2": "`.npz`, labels",
    "f_regression": "`.npz`, targets",
    "variance": "`.npy`",
}


def bench_big_chunk(ctx: Context) -> None:
    sizes = ctx.sizes
    rows, m, count = sizes.big_chunk_dense_rows, sizes.big_chunk_features, sizes.big_chunk_count
    rng = np.random.default_rng([SEED, rows, m])
    # Two warm-up chunks per method, then ``count`` timed ones; every body distinct.
    matrices = [rng.standard_normal((rows, m)) for _ in range(count + 2)]
    labels = [[int(v) for v in rng.integers(0, CLASSES, rows)] for _ in matrices]
    ocfs_bodies = [npz_labelled(x, y) for x, y in zip(matrices, labels, strict=True)]
    counts_bodies = [npz_labelled(np.abs(x), y) for x, y in zip(matrices, labels, strict=True)]
    target_bodies = []
    for x in matrices:
        buffer = io.BytesIO()
        np.savez(buffer, rows=x, targets=x[:, :8].sum(axis=1) + rng.standard_normal(rows))
        target_bodies.append(buffer.getvalue())
    variance_bodies = []
    for x in matrices:
        buffer = io.BytesIO()
        np.save(buffer, x)
        variance_bodies.append(buffer.getvalue())
    bodies = {
        "ocfs": (ocfs_bodies, NPZ),
        "anova": (ocfs_bodies, NPZ),
        "chi2": (counts_bodies, NPZ),
        "f_regression": (target_bodies, NPZ),
        "variance": (variance_bodies, NPY),
    }

    floor_ms: list[float] = []
    sift_ms: dict[str, list[float]] = {method: [] for method in bodies}
    redis_in: list[float] = []
    with ctx.stack() as s:
        floor = Floor(s.redis.url, "auto", "auto")
        try:
            for method in sift_ms:
                s.create({"name": method, "method": method, "n_features": m})
            with httpx.Client(base_url=floor.url, timeout=600) as to_floor:

                def floor_post(body: bytes, content_type: str) -> float:
                    started = time.perf_counter()
                    answer = to_floor.post(
                        "/floor/blobs", content=body, headers={"content-type": content_type}
                    )
                    answer.raise_for_status()
                    return time.perf_counter() - started

                # In turns, chunk by chunk: the floor, then each method.
                for i in range(count + 2):
                    timed = i >= 2
                    took = floor_post(ocfs_bodies[i], NPZ)
                    for method, (chunks, media) in bodies.items():
                        before = s.counters().net_input_bytes
                        _, seconds = s.post(
                            f"/v1/selectors/{method}/chunks", chunks[i], media, f"{method}{i}"
                        )
                        received = s.counters().net_input_bytes - before
                        if timed:
                            sift_ms[method].append(1000 * seconds)
                            if method == "ocfs":
                                redis_in.append(received / len(chunks[i]))
                    if timed:
                        floor_ms.append(1000 * took)
        finally:
            floor.close()

    floor_p50 = statistics.median(floor_ms)
    lines = []
    ratios = {}
    for method, times in sift_ms.items():
        p50 = statistics.median(times)
        ratios[method] = p50 / floor_p50
        lines.append(
            [
                method,
                BODY_NAMES[method],
                f"{p50:.1f}",
                f"{float(np.percentile(times, 95)):.1f}",
                f"{floor_p50:.1f}",
                f"{ratios[method]:.2f}x",
            ]
        )
    bytes_ratio = statistics.median(redis_in)
    ctx.report.section(
        f"big-chunk: waited dense chunks of {rows} rows x {m} features "
        f"({len(variance_bodies[0]) / 2**20:.1f} MiB), {count} timed per method after two "
        "warm-ups, one connection, in turns with the floor storing the same body once",
        table(
            ["method", "body", "Sift p50 ms", "Sift p95 ms", "floor p50 ms", "Sift / floor"],
            lines,
        ),
        f"Redis bytes received per ocfs chunk (everything every client sent it meanwhile) / "
        f"the chunk's bytes: {bytes_ratio:.2f}x (median).",
    )
    ctx.report.figure(
        "big-chunk",
        ", ".join(f"{method} {ratio:.2f}x" for method, ratio in ratios.items()) + " the floor "
        f"({floor_p50:.1f} ms); Redis received {bytes_ratio:.2f}x the ocfs chunk's bytes",
        max(ratios.values()) <= 1.5 and bytes_ratio <= 0.5,
    )
