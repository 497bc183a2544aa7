"""Benchmark of the FSDS update (Algorithm 2) against the paper's SVD update and baselines.

Workloads (1000-row chunks):

(a) dense, m = 26214 (the 20 Newsgroups vocabulary size of the paper), seeded synthetic rows:
    rank-50 signal with a decaying spectrum plus noise; ell = ceil(sqrt(m)) = 162, k = 20;
(b) sparse text: BASEHOCK (1993 x 4862 term counts) stacked three times, rows shuffled
    (5979 rows), CSR throughout; ell = ceil(sqrt(m)) = 70, k = 2 (its number of classes).

Compared per chunk:

* ``fsds``              -- ``FSDS.update`` (normalise, Frequent Directions via Gram matrices with
                           the default schedule, one shrink per max(4 ell, 200) rows, weights);
* ``fsds block=null``   -- the same with one shrink per chunk (the paper's schedule);
* ``paper svd``         -- normalise + ``paper_svd_update`` (dense SVD of [B | Y_t]) + weights;
* ``sklearn ipca``      -- ``IncrementalPCA(n_components=ell).partial_fit`` (densified chunk);
* ``gram alone``        -- ``X @ X.T`` on the dense 1000 x 26214 chunk (dense workload only).

Each method first folds one warm-up chunk (not timed), so every timed chunk meets a full sketch.
Prints rows/s, per-chunk latency p50/p95 and the peak memory of one update, then the speedups
against the targets. Memory is measured with tracemalloc (numpy's allocations, excluding the
input chunk) on separate, untimed calls -- tracing slowed the baseline GEMM by ~30 % -- namely the
warm-up call for the slow methods and one extra call at the end for the others. The machine is
shared and has 2 cores, so ``fsds`` and ``gram alone`` are timed back to back on every chunk and
their ratio is reported per chunk (median) as well as from the medians.

Run: ``.venv/bin/python benchmarks/bench_fsds_update.py [--quick]``.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.algorithms.base import Matrix
from service.algorithms.fsds import FSDS, normalize_rows
from service.algorithms.sketching import paper_svd_update
from tests.support.datasets import data_path

BASEHOCK = data_path("BASEHOCK.mat")
TARGET_PAPER_DENSE = 8.0
TARGET_PAPER_SPARSE = 20.0
TARGET_GRAM_RATIO = 1.5


@dataclass
class Result:
    name: str
    latencies: list[float] = field(default_factory=list)
    rows: int = 0
    peak_bytes: int = 0
    #: Per chunk, these seconds over a baseline's on the same chunk (bench_dense: gram alone).
    latencies_ratio: list[float] = field(default_factory=list)

    def p(self, q: float) -> float:
        return float(np.percentile(self.latencies, q))

    def line(self) -> str:
        rate = self.rows / sum(self.latencies)
        return (
            f"  {self.name:<18} {len(self.latencies):>3} chunks  {rate:>9.0f} rows/s  "
            f"p50 {self.p(50) * 1e3:>8.1f} ms  p95 {self.p(95) * 1e3:>8.1f} ms  "
            f"peak {self.peak_bytes / 2**20:>7.1f} MiB"
        )


def dense_chunks(m: int, count: int, rows: int, seed: int) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    rank = 50
    basis = rng.standard_normal((rank, m)) / math.sqrt(m)
    spectrum = 10.0 / (1.0 + np.arange(rank))
    for _ in range(count):
        coeffs = rng.standard_normal((rows, rank)) * spectrum
        yield coeffs @ basis + 0.05 * rng.standard_normal((rows, m)) / math.sqrt(m)


def basehock_chunks(rows: int, repeats: int, seed: int) -> list[sp.csr_matrix]:
    x = sp.csr_matrix(np.asarray(scipy.io.loadmat(BASEHOCK)["X"], dtype=np.float64))
    stacked = sp.csr_matrix(sp.vstack([x] * repeats, format="csr"))
    stacked = stacked[np.random.default_rng(seed).permutation(stacked.shape[0])]
    return [stacked[i : i + rows] for i in range(0, stacked.shape[0], rows)]


def gram_alone(rows: Matrix) -> object:
    return rows @ rows.T


class PaperUpdate:
    """Normalise, dense SVD of [B | Y_t] (Algorithm 2 steps 1-4, literally), weights."""

    def __init__(self, ell: int, m: int, k: int):
        self.sketch = np.zeros((ell, m))
        self.k = k

    def __call__(self, rows: Matrix) -> None:
        upd = paper_svd_update(self.sketch, normalize_rows(rows))
        self.sketch = upd.sketch_rows
        s = upd.singular_values[: self.k]
        alpha = 8.0 * s[-1]
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(s > 0, 1.0 / (s**2 + alpha), 0.0)
        np.max(np.abs(self.sketch[: self.k]) * scale[:, None], axis=0)


class FsdsUpdate:
    def __init__(self, m: int, params: dict[str, Any]):
        self.method = FSDS()
        self.params = self.method.resolve_params(params, m)
        self.state = self.method.initial_state(self.params)

    def __call__(self, rows: Matrix) -> None:
        self.state = self.method.update(self.state, self.params, rows)


class IpcaUpdate:
    def __init__(self, ell: int):
        from sklearn.decomposition import IncrementalPCA

        self.model = IncrementalPCA(n_components=ell)

    def __call__(self, rows: Matrix) -> None:
        dense = sp.csr_matrix(rows).toarray() if sp.issparse(rows) else rows
        self.model.partial_fit(dense)


def timed(fn: Callable[[Matrix], object], rows: Matrix, result: Result) -> float:
    start = time.perf_counter()
    fn(rows)
    elapsed = time.perf_counter() - start
    result.latencies.append(elapsed)
    result.rows += rows.shape[0]
    return elapsed


def traced(fn: Callable[[Matrix], object], rows: Matrix, result: Result) -> None:
    """One untimed call under tracemalloc; records its peak allocation."""
    tracemalloc.start()
    try:
        fn(rows)
        result.peak_bytes = max(result.peak_bytes, tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def bench_dense(chunks: int, slow_chunks: int, seed: int) -> dict[str, Result]:
    m, k = 26214, 20
    ell = math.ceil(math.sqrt(m))
    print(f"(a) dense m={m}, ell={ell}, k={k}, 1000-row chunks (synthetic rank-50 + noise)")
    data = list(dense_chunks(m, chunks + 1, 1000, seed))
    warm, timed_chunks = data[0], data[1:]
    fast = FsdsUpdate(m, {"k": k})
    fast_null = FsdsUpdate(m, {"k": k, "block_rows": None})
    results = {name: Result(name) for name in ("fsds", "fsds block=null", "gram alone")}
    fast(warm)
    fast_null(warm)
    ratios = []
    for chunk in timed_chunks:
        gram = timed(gram_alone, chunk, results["gram alone"])
        ratios.append(timed(fast, chunk, results["fsds"]) / gram)
        timed(fast_null, chunk, results["fsds block=null"])
    traced(gram_alone, timed_chunks[-1], results["gram alone"])
    traced(fast, timed_chunks[-1], results["fsds"])
    traced(fast_null, timed_chunks[-1], results["fsds block=null"])
    paper = PaperUpdate(ell, m, k)
    ipca = IpcaUpdate(ell)
    results["paper svd"] = Result("paper svd")
    results["sklearn ipca"] = Result("sklearn ipca")
    traced(paper, warm, results["paper svd"])
    traced(ipca, warm, results["sklearn ipca"])
    for chunk in timed_chunks[:slow_chunks]:
        timed(paper, chunk, results["paper svd"])
        timed(ipca, chunk, results["sklearn ipca"])
    for name in ("fsds", "fsds block=null", "paper svd", "sklearn ipca", "gram alone"):
        print(results[name].line())
    results["fsds"].latencies_ratio = ratios
    return results


def bench_sparse(slow_chunks: int, seed: int, max_chunks: int | None) -> dict[str, Result]:
    chunks = basehock_chunks(1000, 3, seed)
    m = chunks[0].shape[1]
    ell, k = math.ceil(math.sqrt(m)), 2
    n = sum(c.shape[0] for c in chunks)
    nnz = sum(c.nnz for c in chunks) / n
    print(f"(b) sparse BASEHOCK x3 shuffled: {n} rows, m={m}, {nnz:.0f} nnz/row, ell={ell}, k={k}")
    warm, timed_chunks = chunks[0], chunks[1:]
    if max_chunks is not None:
        timed_chunks = timed_chunks[:max_chunks]
    updates: dict[str, Callable[[Matrix], object]] = {
        "fsds": FsdsUpdate(m, {"k": k}),
        "fsds block=null": FsdsUpdate(m, {"k": k, "block_rows": None}),
        "paper svd": PaperUpdate(ell, m, k),
        "sklearn ipca": IpcaUpdate(ell),
    }
    results = {}
    for name, update in updates.items():
        results[name] = Result(name)
        slow = name in ("paper svd", "sklearn ipca")
        if slow:
            traced(update, warm, results[name])
        else:
            update(warm)
        for chunk in timed_chunks[: slow_chunks if slow else len(timed_chunks)]:
            timed(update, chunk, results[name])
        if not slow:
            traced(update, timed_chunks[-1], results[name])
        print(results[name].line())
    return results


def verdict(label: str, value: float, target: float, higher_is_better: bool) -> str:
    ok = value >= target if higher_is_better else value <= target
    sign = ">=" if higher_is_better else "<="
    return f"  {label:<52} {value:>7.2f}x   target {sign} {target:g}x   {'OK' if ok else 'MISSED'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer chunks (about 1 minute)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    dense_n, slow_n, sparse_n = (3, 1, 3) if args.quick else (8, 3, None)

    dense = bench_dense(dense_n, slow_n, args.seed)
    print()
    sparse = bench_sparse(slow_n, args.seed, sparse_n) if BASEHOCK.exists() else None

    print("\nspeedups (per-chunk p50 latencies)")
    p50 = {name: r.p(50) for name, r in dense.items()}
    print(
        verdict("dense: paper svd / fsds", p50["paper svd"] / p50["fsds"], TARGET_PAPER_DENSE, True)
    )
    print(verdict("dense: sklearn ipca / fsds", p50["sklearn ipca"] / p50["fsds"], 1.0, True))
    if sparse is not None:
        sp50 = {name: r.p(50) for name, r in sparse.items()}
        print(
            verdict(
                "sparse: paper svd / fsds",
                sp50["paper svd"] / sp50["fsds"],
                TARGET_PAPER_SPARSE,
                True,
            )
        )
        print(
            verdict("sparse: sklearn ipca / fsds", sp50["sklearn ipca"] / sp50["fsds"], 1.0, True)
        )
    print(
        verdict(
            "dense: fsds / gram alone (p50s)",
            p50["fsds"] / p50["gram alone"],
            TARGET_GRAM_RATIO,
            False,
        )
    )
    per_chunk = float(np.median(dense["fsds"].latencies_ratio))
    print(
        verdict(
            "dense: fsds / gram alone (median of per-chunk ratios)",
            per_chunk,
            TARGET_GRAM_RATIO,
            False,
        )
    )
    print(
        verdict(
            "dense: fsds block=null / gram alone (p50s)",
            p50["fsds block=null"] / p50["gram alone"],
            TARGET_GRAM_RATIO,
            False,
        )
    )
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nprocess peak RSS {maxrss:.0f} MiB (includes the benchmark's own data)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
