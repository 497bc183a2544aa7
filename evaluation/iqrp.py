"""IQRP (Maung & Schweitzer, NIPS 2013) against the paper's Figure 7.

Feature columns are pushed to an ``iqrp`` selector (blocks of ``block_columns``, full blocks set
aside as segments exactly as the applier stores them) and the selection is read through the
``SelectsColumns`` capability, as ``GET .../top?h=k&l=`` runs it: ``pivot_source`` over the
stored blocks, then IQRP's passes, which fetch only the blocks they do not skip.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import scipy.linalg

from evaluation.plots import Panel, grid
from evaluation.protocol import Dataset, Stream, derived_seed, stream_columns, timed
from evaluation.report import Context, Section, num, seconds
from service.algorithms.base import SelectsColumns
from service.algorithms.pivoted_qr import IQRPResult, iqrp
from service.errors import InvalidInput

PAPER = [
    'Fig. 7 and sec. 5 (Day1, thrombin, Amazon, gisette; l = k and l = 100): "For the '
    "recommended setting of l = k ... the number of passes was below 10 for most of the data; "
    'the number of IO-passes was below 2 for most of the data"; the QRP takes k passes, and '
    'IQRP reduced them "by a factor of between 50 to 250" on Day1 ("about 70" on thrombin).',
    'Flops: "The number of flops of the QRP is between 2kmn and 4kmn"; IQRP beats it by more '
    'than 100x on Day1, "For the other datasets the results are not as impressive. There are '
    'still significant savings for small and moderate values of k"; the memory-efficient '
    'variant is within "a factor of 4" of the time-efficient one.',
    "Sec. 4.1: the selection is exactly QRP's (Businger-Golub pivoted QR).",
]


def _select(stream: Stream, n: int, k: int, candidates: int, variant: str = "memory") -> IQRPResult:
    """IQRP's first k pivots over the selector's stored columns (``n`` features), with a
    candidate list of ``candidates`` (the paper's l)."""
    method = stream.method
    assert isinstance(method, SelectsColumns)
    source = method.pivot_source(stream.state, stream.params, stream.read_segment)
    return iqrp(source, k, candidates, variant)


def _residual(x: np.ndarray, columns: np.ndarray) -> float:
    """``|X - Q Q^T X|_F / |X|_F`` with Q an orthonormal basis of the chosen columns."""
    q, _ = np.linalg.qr(x[:, columns])
    rest = x - q @ (q.T @ x)
    return float(np.linalg.norm(rest) / np.linalg.norm(x))


def one_dataset(ctx: Context, data: Dataset, section: Section) -> dict[str, Any]:
    mode = ctx.mode
    x = data.x
    m, n = x.shape
    stream = stream_columns("iqrp", {}, x, np.arange(n), 128)
    (_, pivots), geqp3_seconds = timed(lambda: scipy.linalg.qr(x, pivoting=True, mode="r"))
    singular = np.linalg.svd(x, compute_uv=False)
    total = float(np.sum(singular**2))
    blocks = len(stream.segments) + (1 if np.asarray(stream.state["tail"]).shape[1] else 0)
    rows = []
    curves: dict[str, dict[str, list[float]]] = {}
    for k in [k for k in mode.iqrp_ks if k <= min(m, n)]:
        try:
            same, spent = timed(partial(_select, stream, n, k, k))
        except InvalidInput:
            section.add("", f"{data.name}: k = {k} exceeds the numerical rank; larger k skipped.")
            break
        fast = _select(stream, n, k, k, "time")
        fixed = _select(stream, n, k, mode.iqrp_fixed_l)
        exact = same.indices == [int(p) for p in pivots[:k]]
        randoms = [
            _residual(
                x,
                np.random.default_rng(derived_seed("iqrp", data.name, k, i)).choice(
                    n, k, replace=False
                ),
            )
            for i in range(mode.random_seeds)
        ]
        best = float(np.sqrt(max(total - float(np.sum(singular[:k] ** 2)), 0.0) / total))
        rows.append(
            [
                str(k),
                str(same.passes),
                num(same.io_passes, 2),
                num(same.flops_per_kmn, 2),
                num(fast.flops_per_kmn, 2),
                f"{same.blocks_read} / {blocks}",
                seconds(spent),
                str(fixed.passes),
                num(fixed.io_passes, 2),
                num(fixed.flops_per_kmn, 2),
                "same" if exact else "differs",
                f"{num(_residual(x, np.array(same.indices)))} / "
                f"{num(float(np.mean(randoms)))} / {num(best)}",
            ]
        )
        for key, value in (
            ("passes l=k", same.passes),
            ("IO-passes l=k", same.io_passes),
            ("flops/kmn l=k", same.flops_per_kmn),
            (f"passes l={mode.iqrp_fixed_l}", fixed.passes),
            (f"IO-passes l={mode.iqrp_fixed_l}", fixed.io_passes),
            (f"flops/kmn l={mode.iqrp_fixed_l}", fixed.flops_per_kmn),
        ):
            curves.setdefault(key, {}).setdefault("k", [])
            curves[key].setdefault("values", []).append(float(value))
            curves[key]["k"].append(float(k))
        curves.setdefault("exact", {}).setdefault("values", []).append(float(exact))
    section.add_table(
        f"**{data.name}** (m = {m} objects x n = {n} features, {blocks} blocks of "
        f"{stream.params.as_params()['block_columns']} columns; LAPACK geqp3 on the whole matrix: "
        f"{seconds(geqp3_seconds)} s)",
        [
            "k",
            "passes (l=k)",
            "IO-passes",
            "flops/kmn eq. 6",
            "flops/kmn eq. 7",
            "block reads (all passes) / blocks",
            "s",
            f"passes (l={mode.iqrp_fixed_l})",
            "IO-passes",
            "flops/kmn eq. 6",
            "order vs geqp3",
            "residual IQRP / random / best rank-k",
        ],
        rows,
    )
    return {"curves": curves, "kind": data.kind, "rows": rows}


def run(ctx: Context) -> Section:
    mode = ctx.mode
    section = Section(
        "iqrp",
        "IQRP (Maung & Schweitzer, NIPS 2013; Fig. 7)",
        PAPER,
        [
            "The matrices as stored (objects x features; the features are the columns), pushed "
            "in column order, 128 columns per update, to an `iqrp` selector with its default "
            "blocks; the selection through `SelectsColumns.pivot_source` and IQRP, as "
            "`GET .../top?h=k&l=` runs it (memory-efficient Gram-Schmidt, eq. 6; eq. 7 is the "
            "time-efficient variant's count on the same selection).",
            f"k in {list(mode.iqrp_ks)} (up to the numerical rank), l = k and l = "
            f"{mode.iqrp_fixed_l}. IO-passes q = 1 + sum_(j>=2) n_j / n; flops / (k m n), where "
            "plain QRP costs 2 to 4.",
            "Order: IQRP's k pivots against LAPACK geqp3's first k (scipy). Residual "
            "|X - Q Q^T X|_F / |X|_F of the chosen columns, against random columns (mean over "
            f"{mode.random_seeds} seeds) and the best rank-k approximation (SVD).",
        ],
    )
    results = {name: one_dataset(ctx, ctx.data[name], section) for name in mode.datasets}
    panels = []
    for key in (
        "passes l=k",
        "IO-passes l=k",
        "flops/kmn l=k",
        f"passes l={mode.iqrp_fixed_l}",
        f"IO-passes l={mode.iqrp_fixed_l}",
        f"flops/kmn l={mode.iqrp_fixed_l}",
    ):
        panel = Panel(key, "k", key.split(" ")[0], logy=key.startswith("passes"))
        for name, found in results.items():
            curve = found["curves"].get(key)
            if curve:
                panel.series[name] = (curve["k"], curve["values"])
        if key.startswith("IO"):
            panel.lines["paper: below 2"] = 2.0
        if key.startswith("passes"):
            panel.lines["paper: below 10"] = 10.0
        panels.append(panel)
    path = grid(
        ctx.plot_path("iqrp_passes"), panels, "IQRP: passes, IO-passes and flops against k", 3
    )
    section.add("", ctx.image(path, "passes, IO-passes and flops against k"))
    section.summary = summary(results)
    return section


def summary(results: dict[str, dict[str, Any]]) -> list[str]:
    def share(kinds: tuple[str, ...], test: str) -> tuple[int, int]:
        hit = total = 0
        for found in results.values():
            if (found["kind"] in kinds) != (test == "in"):
                continue
            passes = found["curves"].get("passes l=k", {}).get("values", [])
            io = found["curves"].get("IO-passes l=k", {}).get("values", [])
            for p, q in zip(passes, io, strict=True):
                total += 1
                hit += p < 10 and q < 2
        return hit, total

    text_hit, text_total = share(("text",), "in")
    other_hit, other_total = share(("text",), "out")
    exact = [
        v for found in results.values() for v in found["curves"].get("exact", {}).get("values", [])
    ]
    flops = [
        v
        for found in results.values()
        for v in found["curves"].get("flops/kmn l=k", {}).get("values", [])
    ]
    cheaper = sum(f < 2 for f in flops)
    return [
        f"**Passes (Fig. 7)**: at l = k, passes below 10 and IO-passes below 2 (the paper's "
        f'"most of the data") in {text_hit} of {text_total} (text sets, k) points and '
        f"{other_hit} of {other_total} for the image, speech, digit and multi-feature sets: "
        "Sift matches the paper on sparse text, whose columns are nearly orthogonal so stale "
        "upper bounds fall below the threshold and whole blocks are skipped, and trails it on "
        "dense sets of strongly correlated features (neighbouring pixels, spectral bands, "
        "min-max scaled descriptors), where most columns must be brought up to date in every "
        "pass. The paper's four sets are of the first kind; the algorithm is the paper's "
        "(the order is exact), so this is a property of the data, which the paper itself "
        'calls "easy".',
        f"**Flops**: IQRP's count (eq. 6) is below QRP's lower bound 2kmn in {cheaper} of "
        f"{len(flops)} points. **Exactness (sec. 4.1)**: the order equals LAPACK geqp3's first "
        f"k pivots in {int(sum(exact))} of {len(exact)} selections.",
    ]
