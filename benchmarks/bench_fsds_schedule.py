"""FSDS's shrink schedule: ranking fidelity against speed, and forgetting on a drifting stream.

Part ``fidelity``: the five datasets of ``datasets/`` (COIL20, Isolet, warpPIE10P, PCMAC,
BASEHOCK), rows in seeded shuffled orders, the paper's 200-row chunks, ``k`` = the number of
classes, ``ell`` at its default. For each schedule (``block_rows`` = ell, 2 ell, 4 ell, 8 ell,
the default, null = one shrink per update call) the top-h overlap (h = 10, 20, 40) of the
ranking with

* ``paper``: the paper's schedule, one shrink per 200-row chunk (``block_rows: null``);
* ``x5``: the same comparison when the service coalesced five 200-row chunks into each update
  call (1000 rows), which is what "one shrink per chunk" turns into behind the applier;
* ``exact``: the exact batch GFW-p2 ranking (Algorithm 1, p = 2) of all rows.

Part ``speed``: the two workloads of ``bench_fsds_update.py`` (dense m = 26214, ell = 162; sparse
BASEHOCK x3, ell = 70; 1000-row chunks), every schedule timed back to back on every chunk, and
the paper's SVD update (``paper_svd_update``) on fewer chunks: p50 per chunk and the speedup.

Part ``drift``: COIL20 ordered by class (classes 0-9, then 10-19, each half shuffled), 200-row
chunks, k = 10: after every chunk, the top-40 overlap of the streaming ranking with the batch
ranking of each half, with ``decay`` = 1 (the default, no forgetting) and with forgetting.

Run: ``.venv/bin/python benchmarks/bench_fsds_schedule.py [--quick] [--parts fidelity,speed,drift]``
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fsds_update import (
    TARGET_PAPER_DENSE,
    TARGET_PAPER_SPARSE,
    FsdsUpdate,
    PaperUpdate,
    Result,
    basehock_chunks,
    dense_chunks,
    timed,
)

from service.algorithms.base import Matrix
from service.algorithms.fsds import FSDS, default_block_rows, gfw_p2_weights
from tests.support.datasets import load_mat

DATASETS = ("COIL20", "Isolet", "warpPIE10P", "PCMAC", "BASEHOCK")
SPARSE = ("PCMAC", "BASEHOCK")
TOPS = (10, 20, 40)
PAPER_CHUNK = 200
COALESCED = 5
TARGET_OVERLAP = 0.9


@dataclass(frozen=True)
class Schedule:
    label: str
    rows: Callable[[int], int | None]  # ell -> block_rows


SCHEDULES = (
    Schedule("ell", lambda ell: ell),
    Schedule("2 ell", lambda ell: 2 * ell),
    Schedule("4 ell", lambda ell: 4 * ell),
    Schedule("8 ell", lambda ell: 8 * ell),
    Schedule("default", default_block_rows),
    Schedule("per call", lambda ell: None),
)


def overlap(a: np.ndarray, b: np.ndarray, h: int) -> float:
    """``|top_h(a) & top_h(b)| / h`` (ties broken by index, as the service ranks)."""
    top_a = np.argsort(-a, kind="stable")[:h]
    top_b = np.argsort(-b, kind="stable")[:h]
    return len(set(top_a.tolist()) & set(top_b.tolist())) / h


def stream(x: Matrix, params: Mapping[str, object], call_rows: int) -> np.ndarray:
    """FSDS weights after the rows of ``x`` arrived in update calls of ``call_rows`` rows."""
    method = FSDS()
    resolved = method.resolve_params(params, x.shape[1])
    state = method.initial_state(resolved)
    for start in range(0, x.shape[0], call_rows):
        state = method.update(state, resolved, x[start : start + call_rows])
    return method.weights(state, resolved)


# -- part 1: fidelity --------------------------------------------------------------------------


def fidelity(seeds: int) -> dict[str, dict[str, np.ndarray]]:
    """Overlaps per schedule and dataset: arrays (seed, comparison, h), comparisons
    (paper, x5, exact)."""
    print(
        f"fidelity: {PAPER_CHUNK}-row chunks, {seeds} seeded row orders, top-h overlap for "
        f"h = {', '.join(map(str, TOPS))}"
    )
    print(
        f"  {'dataset':<11}{'schedule':<10}{'B':>6}   {'vs paper':<16}"
        f"{f'x{COALESCED} vs paper':<16}{'vs exact':<16}"
    )
    found: dict[str, dict[str, np.ndarray]] = {s.label: {} for s in SCHEDULES}
    for name in DATASETS:
        x, labels = load_mat(f"{name}.mat", dense=name not in SPARSE)
        n, m = x.shape
        k = int(np.unique(labels).size)
        ell = FSDS().resolve_params({"k": k}, m).ell
        exact = gfw_p2_weights(x, k)
        per_schedule = {s.label: np.zeros((seeds, 3, len(TOPS))) for s in SCHEDULES}
        for seed in range(seeds):
            rows = x[np.random.default_rng(seed).permutation(n)]
            paper = stream(rows, {"k": k, "block_rows": None}, PAPER_CHUNK)
            for schedule in SCHEDULES:
                params = {"k": k, "block_rows": schedule.rows(ell)}
                one = stream(rows, params, PAPER_CHUNK)
                coalesced = stream(rows, params, COALESCED * PAPER_CHUNK)
                for j, h in enumerate(TOPS):
                    per_schedule[schedule.label][seed, :, j] = (
                        overlap(one, paper, h),
                        overlap(coalesced, paper, h),
                        overlap(one, exact, h),
                    )
        print(f"  {name} (n = {n}, m = {m}, k = {k}, ell = {ell})")
        for schedule in SCHEDULES:
            means = per_schedule[schedule.label].mean(axis=0)
            cells = "".join(
                f"{' '.join(f'{v:.2f}' for v in means[c]):<16}" for c in range(means.shape[0])
            )
            block = schedule.rows(ell)
            print(f"  {'':<11}{schedule.label:<10}{block or 'call':>6}   {cells}")
            found[schedule.label][name] = per_schedule[schedule.label]
    return found


def fidelity_summary(found: dict[str, dict[str, np.ndarray]]) -> None:
    print("\nfidelity summary (mean over seeds; per dataset the mean over h, then min/mean)")
    print(f"  {'schedule':<10}{'vs paper':>16}{f'x{COALESCED} vs paper':>20}{'vs exact':>16}")
    for label, per_dataset in found.items():
        cells = []
        for c in range(3):
            values = [float(a[:, c].mean()) for a in per_dataset.values()]
            cells.append(f"{min(values):.2f} / {float(np.mean(values)):.2f}")
        print(f"  {label:<10}{cells[0]:>16}{cells[1]:>20}{cells[2]:>16}")


# -- part 2: speed -----------------------------------------------------------------------------


def time_schedules(
    chunks: list[Matrix], m: int, k: int, slow_chunks: int
) -> tuple[dict[str, Result], Result]:
    """Every schedule on every chunk, back to back (in rotating order: none always runs first
    on a warm cache); the paper's SVD update on the first ``slow_chunks`` chunks."""
    ell = math.ceil(math.sqrt(m))
    updates = {s.label: FsdsUpdate(m, {"k": k, "block_rows": s.rows(ell)}) for s in SCHEDULES}
    results = {label: Result(label) for label in updates}
    warm, measured = chunks[0], chunks[1:]
    for update in updates.values():
        update(warm)
    labels = list(updates)
    for i, chunk in enumerate(measured):
        for label in labels[i % len(labels) :] + labels[: i % len(labels)]:
            timed(updates[label], chunk, results[label])
    paper = PaperUpdate(ell, m, k)
    paper(warm)
    paper_result = Result("paper svd")
    for chunk in measured[:slow_chunks]:
        timed(paper, chunk, paper_result)
    return results, paper_result


def speed(dense_n: int, sparse_n: int | None, slow_n: int) -> dict[str, dict[str, float]]:
    speedups: dict[str, dict[str, float]] = {}
    m, k = 26214, 20
    print(f"\nspeed (a) dense m = {m}, ell = {math.ceil(math.sqrt(m))}, k = {k}, 1000-row chunks")
    dense = list(dense_chunks(m, dense_n + 1, 1000, 0))
    results, paper = time_schedules(dense, m, k, slow_n)
    del dense
    speedups["dense"] = report(results, paper, math.ceil(math.sqrt(m)), TARGET_PAPER_DENSE)
    sparse = basehock_chunks(1000, 3, 0)
    if sparse_n is not None:
        sparse = sparse[: sparse_n + 1]
    m = sparse[0].shape[1]
    print(f"\nspeed (b) sparse BASEHOCK x3, m = {m}, ell = {math.ceil(math.sqrt(m))}, k = 2")
    results, paper = time_schedules(list(sparse), m, 2, slow_n)
    speedups["sparse"] = report(results, paper, math.ceil(math.sqrt(m)), TARGET_PAPER_SPARSE)
    return speedups


def report(results: dict[str, Result], paper: Result, ell: int, target: float) -> dict[str, float]:
    print(f"  {'paper svd':<10}{'':>6}  p50 {paper.p(50) * 1e3:>8.1f} ms")
    out = {}
    by_label = {s.label: s for s in SCHEDULES}
    for label, result in results.items():
        out[label] = paper.p(50) / result.p(50)
        block = by_label[label].rows(ell)
        verdict = "OK" if out[label] >= target else "below"
        print(
            f"  {label:<10}{block or 'call':>6}  p50 {result.p(50) * 1e3:>8.1f} ms  "
            f"p95 {result.p(95) * 1e3:>8.1f} ms  {out[label]:>6.1f}x the paper "
            f"(target >= {target:g}x: {verdict})"
        )
    return out


# -- part 3: drift -----------------------------------------------------------------------------


def drift(decays: tuple[float, ...], h: int = 40) -> None:
    x, labels = load_mat("COIL20.mat")
    assert isinstance(x, np.ndarray)
    rng = np.random.default_rng(0)
    first = rng.permutation(np.flatnonzero(labels <= 10))
    second = rng.permutation(np.flatnonzero(labels > 10))
    rows = x[np.concatenate([first, second])]
    k = 10
    batch_first = gfw_p2_weights(x[first], k)
    batch_second = gfw_p2_weights(x[second], k)
    print(
        f"\ndrift: COIL20 classes 1-10 ({first.size} rows) then 11-20 ({second.size} rows), "
        f"{PAPER_CHUNK}-row chunks, k = {k}; top-{h} overlap with each half's batch ranking"
    )
    header = "".join(f"{f'decay {d:g}':>20}" for d in decays)
    print(f"  {'rows seen':>9}{header}")
    print(f"  {'':>9}" + "".join(f"{'1st':>10}{'2nd':>10}" for _ in decays))
    method = FSDS()
    params = [method.resolve_params({"k": k, "decay": d}, x.shape[1]) for d in decays]
    states = [method.initial_state(p) for p in params]
    for start in range(0, rows.shape[0], PAPER_CHUNK):
        chunk = rows[start : start + PAPER_CHUNK]
        cells = []
        for i, p in enumerate(params):
            states[i] = method.update(states[i], p, chunk)
            w = method.weights(states[i], p)
            cells.append(f"{overlap(w, batch_first, h):>10.2f}{overlap(w, batch_second, h):>10.2f}")
        print(f"  {start + chunk.shape[0]:>9}" + "".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one row order, fewer chunks")
    parser.add_argument("--parts", default="fidelity,speed,drift")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    started = time.perf_counter()
    if "fidelity" in parts:
        fidelity_summary(fidelity(1 if args.quick else 3))
    if "speed" in parts:
        speed(*((3, 3, 1) if args.quick else (8, None, 3)))
    if "drift" in parts:
        drift((1.0, 0.999, 0.995))
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
