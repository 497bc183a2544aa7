"""Benchmark of OFS (Algorithm 1): incremental factor vs a per-column pseudo-inverse, real data.

(a) Synthetic: seeded Gaussian ``n x 3n`` (n = 200, 1000, 2000), features streamed in calls of
    ``CHUNK`` columns ("a few at a time") and, for n <= 1000, one column per call. Parameters:
    ``ridge = 0`` with the default ``c = 8 eps^-2 log n`` (Gaussian columns then have online
    leverage ~ n / i, so nearly every column is kept: the worst case for the updates) and with
    ``c = 1`` (a large part is discarded).
    ``naive`` runs the same Algorithm 1 (same uniforms, same decisions) but maintains the Gram
    ``A~ A~^T`` and calls ``np.linalg.pinv`` on it for every column, O(n^3) each; it is timed on
    the first few columns only (its cost per column does not depend on the position).
(b) Real: COIL20 (n = 1440, d = 1024) and Isolet (n = 1560, d = 617), features in a seeded random
    order, one call with all columns; both have n > d and full column rank, so ``ridge = 0`` keeps
    every feature (all new directions); the ridge lines use the COIL20 quality-test setting
    (ridge = 1000, c = 4) and the default c.

Prints columns/s, kept counts and wall times. The machine has 2 cores shared with other jobs;
compare numbers from an idle machine (``cat /proc/loadavg``). OFS does many small BLAS calls
(r x 32 blocks, triangular solves), which a second OpenBLAS thread slows down on a loaded
2-core machine, while the naive ``pinv`` (an eigendecomposition) gains from it: run both
``--blas-threads 1`` and the default.

Run: ``.venv/bin/python benchmarks/bench_ofs.py [--quick] [--blas-threads N]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.algorithms.ofs import OFS, SPAN_TOL
from tests.support.datasets import data_path

CHUNK = 32
METHOD = OFS()


def run_ofs(a: np.ndarray, params: dict[str, Any], chunk: int) -> tuple[float, int, list[bool]]:
    n = a.shape[0]
    resolved = METHOD.resolve_params(params, n)
    state = METHOD.initial_state(resolved)
    kept: list[bool] = []
    start = time.perf_counter()
    for i in range(0, a.shape[1], chunk):
        state, decisions = METHOD.add_features(state, resolved, a[:, i : i + chunk])
        kept += [d.kept for d in decisions]
    return time.perf_counter() - start, METHOD.kept_matrix(state).shape[1], kept


def run_naive(a: np.ndarray, params: dict[str, Any], columns: int) -> tuple[float, list[bool]]:
    """Algorithm 1 with a fresh pseudo-inverse of ``A~ A~^T (+ ridge I)`` per column."""
    n = a.shape[0]
    p = METHOD.resolve_params(params, n)
    gram = p.ridge * np.eye(n)
    kept: list[bool] = []
    start = time.perf_counter()
    for i in range(columns):
        col = a[:, i]
        inv = np.linalg.pinv(gram, hermitian=True)
        coef = inv @ col
        norm = float(np.linalg.norm(col))
        if p.ridge == 0 and norm > 0 and np.linalg.norm(col - gram @ coef) > SPAN_TOL * norm:
            lev = 1.0  # new direction, as in OFS
        else:
            lev = min((1 + p.epsilon) * float(col @ coef), 1.0)
        prob = min(p.c * lev, 1.0)
        keep = np.random.default_rng([p.seed, i]).random() < prob
        if keep:
            gram += np.outer(col, col) / prob
        kept.append(bool(keep))
    return time.perf_counter() - start, kept


def load(name: str) -> np.ndarray:
    return np.asarray(scipy.io.loadmat(data_path(name))["X"], dtype=np.float64)


def synthetic(sizes: list[int], naive_columns: dict[int, int], single_max: int) -> None:
    print(f"(a) Gaussian n x 3n, calls of {CHUNK} columns (chunk=1: one column per call)")
    header = f"{'n':>5} {'params':<14} {'method':<12} {'columns':>8} {'kept':>6} {'seconds':>8}"
    print(header + f" {'columns/s':>10}")
    for n in sizes:
        a = np.random.default_rng(n).standard_normal((n, 3 * n))
        for params in ({}, {"c": 1.0}):
            label = "default c" if not params else "c=1"
            seconds, kept, decisions = run_ofs(a, params, CHUNK)
            rate = a.shape[1] / seconds
            print(
                f"{n:>5} {label:<14} {'ofs':<12} {a.shape[1]:>8} {kept:>6} {seconds:>8.2f} "
                f"{rate:>10.0f}"
            )
            if n <= single_max:
                s1, k1, d1 = run_ofs(a, params, 1)
                assert d1 == decisions, "chunk=1 and chunked runs disagree"
                print(
                    f"{n:>5} {label:<14} {'ofs chunk=1':<12} {a.shape[1]:>8} {k1:>6} "
                    f"{s1:>8.2f} {a.shape[1] / s1:>10.0f}"
                )
            m = naive_columns[n]
            naive_s, naive_kept = run_naive(a, params, m)
            assert naive_kept == decisions[:m], "naive and incremental decisions differ"
            print(
                f"{n:>5} {label:<14} {'naive pinv':<12} {m:>8} {sum(naive_kept):>6} "
                f"{naive_s:>8.2f} {m / naive_s:>10.1f}   speedup x{rate / (m / naive_s):.0f}"
            )


def real(names: list[str]) -> None:
    print("\n(b) real data, features in a seeded random order, one call")
    print(f"{'data':<8} {'n x d':<11} {'params':<34} {'kept':>6} {'seconds':>8}")
    settings: list[dict[str, Any]] = [{}, {"ridge": 1000.0, "c": 4.0}, {"ridge": 1000.0}]
    for name in names:
        x = load(name)
        n, d = x.shape
        x = x[:, np.random.default_rng(0).permutation(d)]
        for params in settings:
            seconds, kept, _ = run_ofs(x, params, d)
            c = METHOD.resolve_params(params, n).c
            label = ", ".join(f"{k}={v:g}" for k, v in params.items()) or "ridge=0"
            label += "" if "c" in params else f", c={c:.1f} (default)"
            print(f"{name[:-4]:<8} {f'{n}x{d}':<11} {label:<34} {kept:>6} {seconds:>8.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 200, 1000 only; fewer naive")
    parser.add_argument(
        "--blas-threads", type=int, default=None, help="limit BLAS threads (default: as set)"
    )
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=args.blas_threads):
        threads = sorted({info["num_threads"] for info in threadpool_info()})
        print(f"BLAS threads: {threads}; load average: {Path('/proc/loadavg').read_text()[:14]}")
        if args.quick:
            synthetic([200, 1000], {200: 100, 1000: 10}, single_max=200)
            real(["COIL20.mat"])
        else:
            synthetic([200, 1000, 2000], {200: 300, 1000: 30, 2000: 8}, single_max=1000)
            real(["COIL20.mat", "Isolet.mat"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
