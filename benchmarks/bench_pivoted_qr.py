"""IQRP's passes, IO-passes, flops and time on the benchmark datasets (columns = features).

For l = k in {10, 50, 100, 200} on each matrix of ``datasets/`` (samples x features, so the
features are the columns; the text sets stay sparse, read as CSC blocks of 256 columns):

* passes p and IO-passes q = 1 + sum_j n_j / n (section 4.3; the paper: "passes below 10 and
  IO-passes below 2 for most data at l = k");
* flops / (k m n) by eq. (6) (memory-efficient, the default) and eq. (7) (time-efficient);
* wall time of IQRP (both variants) against LAPACK's geqp3 (``scipy.linalg.qr(pivoting=True,
  mode="r")`` on the dense matrix: it factors all columns) and the plain k-pass QRP;
* whether IQRP's order equals geqp3's first k pivots (the first mismatch otherwise).

    .venv/bin/python benchmarks/bench_pivoted_qr.py            # ~2 minutes
    .venv/bin/python benchmarks/bench_pivoted_qr.py --quick    # k in {10, 50}, two datasets
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io
import scipy.linalg
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.algorithms.pivoted_qr import MatrixSource, iqrp, qrp
from tests.support.datasets import data_path

DATASETS = ["COIL20.mat", "Isolet.mat", "PCMAC.mat", "BASEHOCK.mat", "warpPIE10P.mat"]


def load(name: str) -> Any:
    x = scipy.io.loadmat(data_path(name))["X"]
    return sp.csc_matrix(x, dtype=np.float64) if sp.issparse(x) else np.asarray(x, np.float64)


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    datasets = DATASETS[:2] if args.quick else DATASETS
    ks = (10, 50) if args.quick else (10, 50, 100, 200)
    print(
        f"{'data':<11} {'m x n':<11} {'k=l':>4} {'passes':>6} {'IO-pass':>7} "
        f"{'flops/kmn mem':>13} {'time':>6} {'iqrp s':>7} {'iqrp-time s':>11} "
        f"{'geqp3 s':>7} {'qrp s':>6} {'order':>7}"
    )
    for name in datasets:
        x = load(name)
        dense = x.toarray() if sp.issparse(x) else x
        m, n = dense.shape
        (_, pivots), geqp3_s = timed(lambda a: scipy.linalg.qr(a, pivoting=True, mode="r"), dense)
        for k in ks:
            if k > min(m, n):
                continue
            memory, memory_s = timed(iqrp, MatrixSource(x, 256), k)
            fast, fast_s = timed(lambda s, kk: iqrp(s, kk, None, "time"), MatrixSource(x, 256), k)
            _, qrp_s = timed(qrp, dense, k)
            mismatch = next((j for j in range(k) if memory.indices[j] != pivots[j]), None)
            order = "same" if mismatch is None else f"@{mismatch}"
            print(
                f"{name[:-4]:<11} {f'{m}x{n}':<11} {k:>4} {memory.passes:>6} "
                f"{memory.io_passes:>7.2f} {memory.flops_per_kmn:>13.3f} "
                f"{fast.flops_per_kmn:>6.3f} {memory_s:>7.2f} {fast_s:>11.2f} "
                f"{geqp3_s:>7.2f} {qrp_s:>6.2f} {order:>7}"
            )


if __name__ == "__main__":
    main()
