"""OMVFS (Shao et al.) against the paper's Figures 3-4 and 7, on the UCI multiple-features set.

The six views (2000 digits, 76 + 216 + 64 + 240 + 47 + 6 features) stream as multi-view chunks
(the views side by side, as ``POST .../chunks`` takes them) to an ``omvfs`` selector; the
ranking of each view is its slice of ``weights`` (``GET .../top?view=``). With b features per
view, the selected columns of every view are concatenated and *standardised* (zero mean, unit
variance per column) for k-means, as ``tests/algorithms/test_omvfs_quality.py`` does: no feature
counts for more because its values are larger. (Scaling each view's block to unit row norm, the
Euclidean counterpart of the paper's spherical k-means, lets the largest-valued features of a
view dominate its rows, which favours exactly the rankings that pick large-valued features: the
paper's row norm of V. An earlier version of this evaluation used it.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation.plots import Panel, grid
from evaluation.protocol import (
    Dataset,
    Mode,
    Scores,
    Stream,
    accepts,
    clustering,
    derived_seed,
    order,
    paired_seed,
    random_subsets,
    top,
)
from evaluation.report import Context, Section, num

PAPER = [
    "Fig. 3 (FOX, CNN; ACC and NMI against the number of selected features): the multi-view "
    'methods "outperform the single view feature selection methods"; OMVFS is "very close and '
    'even better than" the best offline method on FOX.',
    'Fig. 4 (Reuters, YouTube): "OMVFS achieves better performance than FSDS in most cases. '
    "Especially when the number of selected feature is small (i.e., less than 300) ... on "
    "YouTube data, when we only select 100 features, the NMI for OMVFS is about 0.58, while the "
    'NMI for FSDS is only 0.28."',
    'Fig. 7 (12,000 Reuters instances, two dominant classes changing every 3,000): "the '
    "performance of static feature subset decreases ... the performance of the proposed OMVFS "
    'will not decrease as more data come in".',
]

#: How the defaults that differ from the paper's were chosen: measured on UCI mfeat when each
#: was set (``tests/algorithms/test_omvfs_quality.py``), quoted in every report, not rerun.
DEFAULTS_CHOSEN = [
    "",
    "**How OMVFS's defaults were chosen** (UCI mfeat, measured when each was set with "
    "`tests/algorithms/test_omvfs_quality.py`; quoted, not rerun by this command):",
    "",
    "- Stopping rule (`tol`, 1e-3 on the relative change of U and of every V): the paper's rule, "
    "the objective's relative change below 1e-4, was never reached. The orthogonality penalty "
    "(gamma = 1e7) dominates the objective and still fell by about 1 % per iteration at "
    "iteration 200 (1e-5 at 1000) while the rankings no longer moved, so every chunk ran the "
    "full `max_iter`. At tol 1e-3 the chunks stop after 54-121 iterations (72 on average), "
    "with every view's top 10 in the order of 1000 iterations and 99.7 % of the top-50 sets "
    "the same.",
    "- Similarity graph (`neighbours`, 10): the kNN graph and the dense kernel give the same NMI "
    "at every budget; at gamma = 1e7 the graph moves U by about 0.1 % (alpha = 0 does the "
    "same), and the dense blocks cost (s m)^2 doubles per view of state.",
    "- Ranking (`score`, explained): the paper's row norm of V follows each feature's column "
    "mean (Spearman 0.997), so it favours large-valued features; the tables below compare the "
    "scores.",
]


def views_of(data: Dataset) -> tuple[np.ndarray, dict[str, int]]:
    """The views side by side, shifted to be nonnegative per feature (NMF needs >= 0)."""
    assert data.raw is not None, "OMVFS runs on the multi-view set"
    raw = data.raw
    return raw - raw.min(axis=0), dict(data.views)


def view_slices(dims: dict[str, int]) -> dict[str, slice]:
    out, start = {}, 0
    for name, dim in dims.items():
        out[name] = slice(start, start + dim)
        start += dim
    return out


def selection_scores(
    x: np.ndarray,
    rows: np.ndarray,
    dims: dict[str, int],
    chosen: dict[str, np.ndarray],
    labels: np.ndarray,
    mode: Mode,
    seeds: tuple[int, ...] | None = None,
) -> Scores:
    """k-means on the chosen features of every view, standardised column by column."""
    slices = view_slices(dims)
    selected = np.hstack(
        [x[np.ix_(rows, np.arange(slices[v].start, slices[v].stop)[chosen[v]])] for v in dims]
    )
    spread = selected.std(axis=0)
    standard = (selected - selected.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    return clustering(standard, labels, mode, int(np.unique(labels).size), seeds)


def per_view_top(weights: np.ndarray, dims: dict[str, int], budget: int) -> dict[str, np.ndarray]:
    slices = view_slices(dims)
    return {v: top(weights[slices[v]], min(budget, dims[v])) for v in dims}


def fsds_per_view(
    x: np.ndarray, dims: dict[str, int], stream: np.ndarray, chunk: int
) -> np.ndarray:
    """FSDS run on each view alone over the same chunks; the weights side by side."""
    slices = view_slices(dims)
    out = []
    for v, dim in dims.items():
        run = Stream.create("fsds", {"k": min(10, dim - 1)}, dim)
        for start in range(0, stream.size, chunk):
            run.push(x[stream[start : start + chunk], slices[v]])
        out.append(run.weights())
    return np.concatenate(out)


#: The paper's setting where Sift's defaults moved away from it (checked with
#: ``resolve_params``): its ranking (row norms of V, step 19) and its gamma (1e7).
PAPER_SETTING: dict[str, Any] = {"score": "paper", "gamma": 1e7}
#: Other rankings the method may offer, tried where accepted.
OTHER_SCORES: tuple[str, ...] = ("scaled",)


def configurations(
    ctx: Context, dims: dict[str, int], size: int
) -> list[tuple[str, dict[str, Any]]]:
    """The paper's OMVFS first, then Sift's default and other offered rankings (if any)."""
    base = {"views": dims, "n_clusters": 10, **ctx.mode.omvfs_params}
    paper = {**base, **PAPER_SETTING}
    if accepts("omvfs", paper, size) is None:
        return [("OMVFS (the paper's, the default)", base)]
    configs = [("OMVFS as the paper (score paper, gamma 1e7)", paper)]
    default = accepts("omvfs", base, size) or {}
    configs.append(
        (f"OMVFS default (score {default.get('score')}, gamma {default.get('gamma')})", base)
    )
    for score in OTHER_SCORES:
        if score != default.get("score") and accepts("omvfs", {**base, "score": score}, size):
            configs.append((f"OMVFS score {score}", {**base, "score": score}))
    return configs


def stream_omvfs(params: dict[str, Any], x: np.ndarray, rows: np.ndarray, chunk: int) -> Stream:
    run = Stream.create("omvfs", params, x.shape[1])
    for start in range(0, rows.size, chunk):
        run.push(x[rows[start : start + chunk]])
    return run


def quality(ctx: Context, data: Dataset, section: Section) -> dict[str, Any]:
    mode = ctx.mode
    x, dims = views_of(data)
    n = x.shape[0]
    everyone = np.arange(n)
    configs = configurations(ctx, dims, x.shape[1])
    weights: dict[str, list[np.ndarray]] = {label: [] for label, _ in configs}
    weights["FSDS per view"] = []
    iterations: dict[str, list[int]] = {label: [] for label, _ in configs}
    seconds: dict[str, list[float]] = {label: [] for label, _ in configs}
    resolved: dict[str, dict[str, Any]] = {}
    for i in range(mode.omvfs_orders):
        stream = order(data.name, n, "omvfs", i)
        for label, params in configs:
            run = stream_omvfs({**params, "seed": i}, x, stream, mode.omvfs_chunk)
            weights[label].append(run.weights())
            iterations[label].append(int(np.asarray(run.state["last_iterations"])))
            seconds[label].append(run.seconds / max(run.updates, 1))
            resolved[label] = run.params.as_params()
        weights["FSDS per view"].append(fsds_per_view(x, dims, stream, mode.omvfs_chunk))

    table: dict[str, dict[int, Scores]] = {label: {} for label in weights}
    table["random"] = {}
    for b in mode.omvfs_budgets:
        for label, found in weights.items():
            table[label][b] = Scores.mean(
                [
                    selection_scores(
                        x,
                        everyone,
                        dims,
                        per_view_top(w, dims, b),
                        data.labels,
                        mode,
                        paired_seed(mode, i) if len(found) > 1 else None,
                    )
                    for i, w in enumerate(found)
                ]
            )
        table["random"][b] = Scores.mean(
            [
                selection_scores(
                    x,
                    everyone,
                    dims,
                    {
                        v: random_subsets(dims[v], min(b, dims[v]), 1, "omvfs", v, i)[0]
                        for v in dims
                    },
                    data.labels,
                    mode,
                    paired_seed(mode, i),
                )
                for i in range(mode.random_seeds)
            ]
        )
    everything = selection_scores(
        x, everyone, dims, {v: np.arange(d) for v, d in dims.items()}, data.labels, mode
    )
    rows = [
        [
            label,
            *(
                f"{num(table[label][b].nmi)} / {num(table[label][b].acc)}"
                for b in mode.omvfs_budgets
            ),
            "",
        ]
        for label in table
    ]
    rows.append(
        [
            "all features",
            *("" for _ in mode.omvfs_budgets),
            f"{num(everything.nmi)} / {num(everything.acc)}",
        ]
    )
    section.add_table(
        f"**UCI multiple features** ({n} x {x.shape[1]}, views {dims}): k-means (k = 10) NMI / "
        f"accuracy with b features per view (all of a view when it has fewer); "
        f"{mode.omvfs_orders} stream order(s) of {mode.omvfs_chunk}-row chunks.",
        ["ranking", *(f"b={b}" for b in mode.omvfs_budgets), f"all {x.shape[1]}"],
        rows,
    )
    section.add(
        "",
        "Settings and cost (everything else at the defaults listed under Defaults in force): "
        + "; ".join(
            f"{label}: gamma {resolved[label]['gamma']}, score {resolved[label].get('score')}, "
            f"{np.mean(seconds[label]):.2f} s per chunk, {np.mean(iterations[label]):.0f} "
            "iterations on the last chunk"
            for label, _ in configs
        )
        + ".",
    )
    return {"table": table, "all": everything, "configs": [label for label, _ in configs]}


def drift_phases(data: Dataset, count: int) -> list[np.ndarray]:
    """Fig. 7's stream: each phase dominated (80 %) by two classes, the rest from the others."""
    rng = np.random.default_rng(derived_seed("omvfs drift", data.name))
    classes = rng.permutation(data.classes)
    reserved: dict[int, np.ndarray] = {}
    pool: list[int] = []
    for c in classes:
        rows = rng.permutation(np.flatnonzero(data.labels == c))
        if c in classes[: 2 * count]:
            cut = round(0.8 * rows.size)
            reserved[int(c)] = rows[:cut]
            pool += rows[cut:].tolist()
        else:
            pool += rows.tolist()
    others = rng.permutation(np.array(pool))
    phases, used = [], 0
    for p in range(count):
        dominant = np.concatenate([reserved[int(c)] for c in classes[2 * p : 2 * p + 2]])
        extra = others[used : used + dominant.size // 4]
        used += extra.size
        phases.append(rng.permutation(np.concatenate([dominant, extra])))
    return phases


def drift(
    ctx: Context, data: Dataset, section: Section, labels: list[str]
) -> dict[str, list[float]]:
    mode = ctx.mode
    x, dims = views_of(data)
    parts = drift_phases(data, mode.drift_phases)
    budget = 25 if max(mode.omvfs_budgets) >= 25 else max(mode.omvfs_budgets)
    configs = dict(configurations(ctx, dims, x.shape[1]))
    one = paired_seed(mode, 0)
    lines: dict[str, list[float]] = {}
    static: list[float] = []
    for label in labels:
        run = Stream.create("omvfs", configs[label], x.shape[1])
        first: dict[str, np.ndarray] | None = None
        scores = []
        for rows in parts:
            for start in range(0, rows.size, mode.omvfs_chunk):
                run.push(x[rows[start : start + mode.omvfs_chunk]])
            chosen = per_view_top(run.weights(), dims, budget)
            first = first or chosen
            scores.append(selection_scores(x, rows, dims, chosen, data.labels[rows], mode, one).nmi)
            if label == labels[0]:
                static.append(
                    selection_scores(x, rows, dims, first, data.labels[rows], mode, one).nmi
                )
        lines[label] = scores
    seen = np.zeros(0, dtype=int)
    fsds_line = []
    for rows in parts:
        seen = np.concatenate([seen, rows])
        w = fsds_per_view(x, dims, seen, mode.omvfs_chunk)
        fsds_line.append(
            selection_scores(
                x, rows, dims, per_view_top(w, dims, budget), data.labels[rows], mode, one
            ).nmi
        )
    lines["FSDS per view"] = fsds_line
    lines["static (first phase)"] = static
    section.add_table(
        f"**Drift** ({len(parts)} phases of {', '.join(str(p.size) for p in parts)} rows, each "
        f"80% two dominant classes; {budget} features per view; NMI on the phase's rows (one "
        "k-means seed, k = classes present):",
        ["ranking", *(f"phase {p + 1}" for p in range(len(parts)))],
        [[label, *(num(v) for v in values)] for label, values in lines.items()],
    )
    return lines


def run(ctx: Context) -> Section:
    mode = ctx.mode
    section = Section(
        "omvfs",
        "OMVFS (Shao et al.; Figs. 3-4, 7)",
        PAPER,
        [
            "UCI multiple features (the only multi-view set here; the paper's FOX, CNN, Reuters "
            "and YouTube are not bundled anywhere): every feature shifted by its minimum "
            "(nonnegative, as NMF needs), rows in a seeded random order, "
            f"{mode.omvfs_chunk}-row chunks, K = 10 clusters, every other parameter at its "
            "default (printed under the table).",
            "Rankings: OMVFS as the paper ranks (row norms of V) and Sift's default where they "
            "differ; FSDS run on each view alone over the same chunks (k = min(10, D_v - 1)), "
            "as the paper applies single-view methods; random features per view (mean over "
            f"{mode.random_seeds} seeds); all features.",
            "k-means with k = 10 on the concatenation of the views' selected blocks, each "
            "standardised (zero mean, unit variance per column); cells are NMI / clustering "
            "accuracy.",
        ],
    )
    section.add(*DEFAULTS_CHOSEN)
    data = ctx.data["mfeat"]
    found = quality(ctx, data, section)
    lines = drift(ctx, data, section, found["configs"])
    budgets = list(mode.omvfs_budgets)
    panel = Panel(
        "UCI mfeat: NMI against features per view",
        "features per view",
        "NMI",
        lines={"all features": found["all"].nmi},
    )
    for label, by_b in found["table"].items():
        panel.series[label] = (budgets, [by_b[b].nmi for b in budgets])
    drift_panel = Panel(
        "Drift: NMI on each phase",
        "phase",
        "NMI",
        {label: (list(range(1, len(v) + 1)), v) for label, v in lines.items()},
    )
    path = grid(ctx.plot_path("omvfs"), [panel, drift_panel], "OMVFS", 2)
    section.add("", ctx.image(path, "OMVFS NMI and drift"))
    section.summary = summary(found, lines, budgets)
    return section


def summary(found: dict[str, Any], lines: dict[str, list[float]], budgets: list[int]) -> list[str]:
    table = found["table"]
    labels = found["configs"]
    text = []
    for label in labels:
        wins = sum(table[label][b].nmi > table["FSDS per view"][b].nmi for b in budgets)
        small = budgets[0]
        text.append(
            f"**{label} against FSDS per view (Figs. 3-4)**: higher NMI at {wins} of "
            f"{len(budgets)} budgets; at {small} features per view "
            f"{num(table[label][small].nmi)} against {num(table['FSDS per view'][small].nmi)} "
            f"(random {num(table['random'][small].nmi)}, all features {num(found['all'].nmi)})."
        )
    if len(labels) > 1:
        paper, default = labels[:2]
        gain = float(np.mean([table[default][b].nmi - table[paper][b].nmi for b in budgets]))
        text.append(
            f"**Sift's default against the paper's setting**: {gain:+.3f} NMI on average over "
            "the budgets. The paper ranks a feature by the row norm of V, which grows with the "
            "feature's own scale (a feature with large values needs a large row in V to be "
            "reconstructed), so it favours features with large values whatever they separate; "
            "Sift's default scores what "
            "the clusters explain of each feature's variance, and ties gamma to the data's "
            "scale instead of the paper's fixed 1e7."
        )
    drift_gain = [
        a - b for a, b in zip(lines[labels[0]][1:], lines["static (first phase)"][1:], strict=True)
    ]
    text.append(
        f"**Drift (Fig. 7)**: after the first phase the current ranking scores "
        f"{num(float(np.mean(drift_gain)) if drift_gain else np.nan)} NMI above the first "
        "phase's static ranking on average (the paper: the static subset degrades, OMVFS does "
        "not). The paper's claims come from text and video sets with thousands of features per "
        "view, where a few features per view separate the topics; mfeat's views are small, "
        "dense descriptors of the same digits, so every view alone already clusters well and "
        "the margins between rankings are small."
    )
    return text
