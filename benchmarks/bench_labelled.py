"""OCFS and IOC: rows/s in-process and over HTTP, cost per unit of the paper's complexity.

Data: PCMAC and BASEHOCK (sparse text, c = 2) and COIL20 (dense images, c = 20), each stacked
to at least 5000 rows in a seeded order, pushed in chunks of 500 labelled rows.

In-process (the method's update, as the applier runs it, without HTTP or Redis):

* OCFS: rows/s, and the time of one score recomputation per ``c * d`` (Table 2's O(cd)).
  Baseline: re-running batch OCFS on all rows seen so far after every chunk (what a batch
  library does on a stream).
* IOC: rows/s for p = 1 (and p = 5, 19 on COIL20), and the time per sample per ``c * d * p``
  (section 3.1.2's O(cdp)). Baseline: the exact batch OC solution (SVD of the c x d centred
  class means) recomputed after every chunk from all rows seen so far, and the inner product
  of IOC's first vector with it at the end.

Over HTTP: the real service (``python -m service serve``) on its embedded Redis in a
temporary directory; chunks posted as ``.npz`` (``numpy.savez`` with the CSR parts or the rows,
and labels), every POST waiting for its version. rows/s and POST latency percentiles.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_labelled.py          # ~3 minutes
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_labelled.py --quick  # in-process
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/bench_labelled.py --curves # convergence
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_digits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_http import peak_rss_mib, running_service

from service.algorithms.ioc import IOC, projection
from service.algorithms.labels import labelled
from service.algorithms.ocfs import OCFS, oc_directions, ocfs_scores
from tests.support.api import npz_labelled
from tests.support.datasets import load_mat

CHUNK = 500
MIN_ROWS = 5000


def stream(name: str) -> tuple[Any, list[int]]:
    x, y = load_mat(name, dense=name == "COIL20.mat")
    copies = -(-MIN_ROWS // x.shape[0])
    stacked = sp.vstack([x] * copies, format="csr") if sp.issparse(x) else np.vstack([x] * copies)
    labels = np.tile(y, copies)
    order = np.random.default_rng(0).permutation(stacked.shape[0])
    return stacked[order], [int(v) for v in labels[order]]


def chunks(x: Any, y: list[int]) -> list[tuple[Any, list[int]]]:
    return [(x[s : s + CHUNK], y[s : s + CHUNK]) for s in range(0, x.shape[0], CHUNK)]


def timed(fn: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - started


def ocfs_in_process(parts: list[tuple[Any, list[int]]], d: int) -> dict[str, float]:
    method = OCFS()

    def run() -> Any:
        params = method.resolve_params({}, d, stored=True)  # no resamples
        state = method.initial_state(params)
        for rows, labels in parts:
            state = method.update(state, params, labelled(rows, labels))
        return state

    state, seconds = timed(run)
    counts, sums = np.asarray(state["class_counts"]), np.asarray(state["class_sums"])
    _, score_seconds = timed(lambda: [ocfs_scores(counts, sums) for _ in range(20)])
    c = counts.size

    def batch() -> None:
        seen_x: list[Any] = []
        seen_y: list[int] = []
        for rows, labels in parts:
            seen_x.append(rows)
            seen_y += labels
            stacked = sp.vstack(seen_x) if sp.issparse(rows) else np.vstack(seen_x)
            ocfs_scores(*_totals(stacked, seen_y))  # Table 2 on every row seen so far

    _, batch_seconds = timed(batch)
    rows = sum(part[0].shape[0] for part in parts)
    return {
        "rows_per_s": rows / seconds,
        "score_ns_per_cd": score_seconds / 20 / (c * d) * 1e9,
        "batch_rows_per_s": rows / batch_seconds,
    }


def _totals(x: Any, y: list[int]) -> tuple[np.ndarray, np.ndarray]:
    classes = sorted(set(y))
    codes = np.searchsorted(classes, y)
    indicator = sp.csr_matrix((np.ones(len(y)), (np.arange(len(y)), codes)))
    sums = indicator.T @ x
    return np.bincount(codes), np.asarray(sums.toarray() if sp.issparse(sums) else sums)


def ioc_in_process(
    parts: list[tuple[Any, list[int]]], d: int, p: int, amnesia: float
) -> dict[str, float]:
    method = IOC()
    params = method.resolve_params({"n_components": p, "amnesia": amnesia}, d)

    def run() -> Any:
        state = method.initial_state(params)
        for rows, labels in parts:
            state = method.update(state, params, labelled(rows, labels))
        return state

    state, seconds = timed(run)
    rows = sum(part[0].shape[0] for part in parts)
    c = int(np.asarray(state["class_counts"]).size)

    def exact_each_chunk() -> np.ndarray:
        seen_x: list[Any] = []
        seen_y: list[int] = []
        target = np.zeros((d, p))
        for chunk_rows, labels in parts:
            seen_x.append(chunk_rows)
            seen_y += labels
            stacked = sp.vstack(seen_x) if sp.issparse(chunk_rows) else np.vstack(seen_x)
            target, _ = oc_directions(stacked, seen_y, p)
        return target

    target, exact_seconds = timed(exact_each_chunk)
    learned = projection(np.asarray(state["vectors"]))
    return {
        "rows_per_s": rows / seconds,
        "ns_per_cdp": seconds / rows / (c * d * p) * 1e9,
        "exact_rows_per_s": rows / exact_seconds,
        "inner_first": float(abs(learned[:, 0] @ target[:, 0])),
        "inner_last": float(abs(learned[:, -1] @ target[:, -1])),
    }


def over_http(base: str, name: str, method: str, d: int, params: dict[str, Any], parts: Any) -> Any:
    bodies = [npz_labelled(rows, labels) for rows, labels in parts]
    latencies = []
    with httpx.Client(base_url=base, timeout=600) as client:
        client.post(
            "/v1/selectors",
            json={"name": name, "method": method, "n_features": d, "params": params},
        ).raise_for_status()
        started = time.perf_counter()
        for i, body in enumerate(bodies):
            t0 = time.perf_counter()
            response = client.post(
                f"/v1/selectors/{name}/chunks",
                content=body,
                headers={"content-type": "application/x-npz", "idempotency-key": f"{name}-{i}"},
            )
            response.raise_for_status()
            latencies.append(time.perf_counter() - t0)
        seconds = time.perf_counter() - started
    rows = sum(part[0].shape[0] for part in parts)
    p50, p95 = np.percentile(latencies, [50, 95]) * 1000
    return rows / seconds, p50, p95


def convergence_curves() -> None:
    """IOC's first vector against the batch OC solution as samples arrive (paper's Fig. 3b)."""
    method = IOC()
    marks = [2, 5, 10, 20, 40, 60, 100]
    found = []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        cov = [[1.0, 0.5], [0.5, 1.0]]
        x = np.vstack(
            [rng.multivariate_normal([0, 0], cov, 50), rng.multivariate_normal([3, 1.5], cov, 50)]
        )
        order = rng.permutation(100)
        x, y = x[order], [int(v) for v in (np.arange(100) >= 50)[order]]
        target, _ = oc_directions(x, y, 1)
        params = method.resolve_params({"n_components": 1}, 2)
        state = method.initial_state(params)
        row = []
        for lo, hi in zip([0, *marks], marks, strict=False):
            state = method.update(state, params, labelled(x[lo:hi], y[lo:hi]))
            row.append(abs(projection(np.asarray(state["vectors"]))[:, 0] @ target[:, 0]))
        found.append(row)
    print("toy set (2 Gaussian classes in 2-D, 20 seeds): median |u1.e1| after n samples")
    print(
        "  ".join(f"n={n}: {v:.4f}" for n, v in zip(marks, np.median(found, axis=0), strict=True))
    )

    x, y = load_digits(return_X_y=True)
    shuffled = np.random.default_rng(0).permutation(len(y))
    print("\ndigits (64 features, 10 classes), p = 3: |u^j.e_j| after n samples")
    for order_name, order in (("random order", shuffled), ("as shipped", np.arange(len(y)))):
        target, _ = oc_directions(x, [int(v) for v in y], 3)
        for amnesia in (0.0, 2.0, 4.0):
            params = method.resolve_params({"n_components": 3, "amnesia": amnesia}, 64)
            state = method.initial_state(params)
            shown = []
            for n_pass in range(2):
                for lo in range(0, len(y), 600):
                    idx = order[lo : lo + 600]
                    state = method.update(state, params, labelled(x[idx], [int(v) for v in y[idx]]))
                    got = np.abs(np.sum(projection(np.asarray(state["vectors"])) * target, axis=0))
                    seen = n_pass * len(y) + min(lo + 600, len(y))
                    shown.append(f"{seen}: {' '.join(f'{v:.3f}' for v in got)}")
            print(f"  {order_name:>12}, amnesia {amnesia}: " + " | ".join(shown))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="in-process only")
    parser.add_argument("--curves", action="store_true", help="IOC convergence curves only")
    args = parser.parse_args()
    if args.curves:
        convergence_curves()
        return
    sets = {name: stream(f"{name}.mat") for name in ("PCMAC", "BASEHOCK", "COIL20")}

    print(f"in-process, chunks of {CHUNK} labelled rows")
    print(f"{'data':>9} {'rows':>6} {'d':>5} {'c':>3} | OCFS rows/s  score ns/(c*d)", end="")
    print("  batch-rerun rows/s")
    for name, (x, y) in sets.items():
        d, c = x.shape[1], len(set(y))
        got = ocfs_in_process(chunks(x, y), d)
        print(
            f"{name:>9} {x.shape[0]:>6} {d:>5} {c:>3} | {got['rows_per_s']:>11.0f} "
            f"{got['score_ns_per_cd']:>15.2f} {got['batch_rows_per_s']:>19.0f}"
        )
    print(
        f"\n{'data':>9} {'p':>3} {'amnesia':>7} | IOC rows/s  ns/(c*d*p) per row  "
        "exact-OC-rerun rows/s  |u1.e1|  |up.ep|"
    )
    cases = [("PCMAC", 1), ("BASEHOCK", 1), ("COIL20", 1), ("COIL20", 5), ("COIL20", 19)]
    for name, p in cases:
        x, y = sets[name]
        for amnesia in (0.0, 2.0):
            got = ioc_in_process(chunks(x, y), x.shape[1], p, amnesia)
            print(
                f"{name:>9} {p:>3} {amnesia:>7} | {got['rows_per_s']:>10.0f} "
                f"{got['ns_per_cdp']:>19.2f} {got['exact_rows_per_s']:>22.0f} "
                f"{got['inner_first']:>8.4f} {got['inner_last']:>8.4f}"
            )
    if args.quick:
        return

    print("\nover HTTP (embedded Redis, appendfsync always), .npz chunks, one producer")
    print(f"{'case':>18} | rows/s  p50 ms  p95 ms")
    with tempfile.TemporaryDirectory() as folder, running_service(Path(folder)) as (base, proc):
        for name, method, params in [
            ("PCMAC", "ocfs", {}),
            ("BASEHOCK", "ocfs", {}),
            ("COIL20", "ocfs", {}),
            ("PCMAC", "ioc", {"n_components": 1}),
            ("BASEHOCK", "ioc", {"n_components": 1}),
            ("COIL20", "ioc", {"n_components": 5}),
        ]:
            x, y = sets[name]
            label = f"{method} {name}"
            rate, p50, p95 = over_http(
                base, f"{method}-{name.lower()}", method, x.shape[1], params, chunks(x, y)
            )
            print(f"{label:>18} | {rate:>6.0f} {p50:>7.1f} {p95:>7.1f}")
        print(f"service peak RSS {peak_rss_mib(proc.pid):.0f} MiB")


if __name__ == "__main__":
    main()
