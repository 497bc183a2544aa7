"""OFS (Wang, Shen & Li) against the paper's Figure 1 and Table 3.

Feature columns stream in a seeded random order; each is kept or discarded on arrival
(Algorithm 1) and k-means runs on the kept, rescaled columns through the method's ``Clusters``
capability (what ``POST .../cluster`` answers). The number of kept features follows the sampling
rate ``c``, so the curve "accuracy against kept features" is traced by varying ``c``; at each
point the batch competitors get exactly as many features as OFS kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation.plots import Panel, grid
from evaluation.protocol import (
    Dataset,
    Scores,
    cluster_accuracy,
    derived_seed,
    kmeans_labels,
    order,
    stream_columns,
    timed,
    unit_rows,
)
from evaluation.report import Context, Section, num, seconds
from service.algorithms.base import Clusters
from service.algorithms.leverage import batch_leverage_scores

#: ``OFS.cluster`` runs KMeans with n_init = 10: the batch competitors get the same.
OFS_INITS = 10

PAPER = [
    "Fig. 1 (clustering accuracy of k-means against the number of selected features, 10-500): "
    '"our algorithm achieves competitive performance with other batch methods ... outperforms '
    'all the baseline methods on COIL20, CIFAR-10 and ORL"; "The clustering performance on our '
    'selected subset even outperforms the one with all available features." Baselines: '
    "lambda-ridge leverage score sampling (LevS, Alaoui & Mahoney 2015), Laplacian score, "
    "alpha-investing, SEC.",
    "Table 3 (CPU seconds, COIL20 1440 x 1024): LapS 0.23, LevS 0.64, Alpha 4.79, SEC 0.002, "
    "OFS 0.58; USPS: LapS 1.46, LevS 0.94, OFS 0.15.",
]


def _scores(x: np.ndarray, labels: np.ndarray, k: int, seed: int) -> Scores:
    from sklearn.metrics import normalized_mutual_info_score

    predicted = kmeans_labels(x, k, seed, OFS_INITS)
    return Scores(
        float(normalized_mutual_info_score(labels, predicted)), cluster_accuracy(labels, predicted)
    )


def one_dataset(ctx: Context, data: Dataset, section: Section) -> dict[str, Any]:
    mode = ctx.mode
    x = unit_rows(data.x)
    n, d = x.shape
    k = data.classes
    singular = np.linalg.svd(x, compute_uv=False)
    ridge = float(singular[min(k, singular.size) - 1] ** 2)
    leverage, levs_seconds = timed(lambda: batch_leverage_scores(x, ridge))
    probabilities = leverage / leverage.sum()
    peers = ctx.unsupervised(data.name)
    laplacian = peers.laplacian_order()

    rows: list[list[str]] = []
    curve: dict[str, list[tuple[float, float]]] = {}
    points: list[dict[str, float]] = []
    ofs_seconds: list[float] = []
    for rate in mode.ofs_rates:
        found: dict[str, list[Scores]] = {
            "OFS": [],
            "batch ridge-leverage sampling": [],
            "Laplacian score": [],
            "random": [],
        }
        kept_counts = []
        for seed in mode.ofs_seeds:
            stream = stream_columns(
                "ofs",
                {"ridge": ridge, "c": rate, "seed": seed},
                x,
                order(data.name, d, "ofs", seed),
                mode.ofs_chunk,
            )
            ofs_seconds.append(stream.seconds)
            method = stream.method
            assert isinstance(method, Clusters)
            kept_columns = np.asarray(stream.state["kept_columns"])
            kept = kept_columns.shape[1]
            kept_counts.append(kept)
            if kept == 0:
                continue
            predicted, _objective, _used = method.cluster({"kept_columns": kept_columns}, k, seed)
            from sklearn.metrics import normalized_mutual_info_score

            found["OFS"].append(
                Scores(
                    float(normalized_mutual_info_score(data.labels, predicted)),
                    cluster_accuracy(data.labels, predicted),
                )
            )
            rng = np.random.default_rng(derived_seed("levs", data.name, seed, kept))
            sampled = rng.choice(d, size=kept, p=probabilities)
            rescaled = x[:, sampled] / np.sqrt(kept * probabilities[sampled])
            found["batch ridge-leverage sampling"].append(_scores(rescaled, data.labels, k, seed))
            found["Laplacian score"].append(_scores(x[:, laplacian[:kept]], data.labels, k, seed))
            subset = np.random.default_rng(derived_seed("random", data.name, seed, kept)).choice(
                d, kept, replace=False
            )
            found["random"].append(_scores(x[:, subset], data.labels, k, seed))
        mean_kept = float(np.mean(kept_counts))
        means = {name: Scores.mean(values) for name, values in found.items() if values}
        point = {"rate": rate, "kept": mean_kept}
        for name, value in means.items():
            curve.setdefault(name, []).append((mean_kept, value.acc))
            point[name] = value.acc
        points.append(point)
        rows.append(
            [
                f"{rate:g}",
                f"{mean_kept:.0f}",
                *(
                    f"{num(means[name].acc)} / {num(means[name].nmi)}" if name in means else "-"
                    for name in found
                ),
            ]
        )
    everything = Scores.mean([_scores(x, data.labels, k, seed) for seed in mode.ofs_seeds])
    rows.append(
        ["all features", str(d), f"{num(everything.acc)} / {num(everything.nmi)}", "", "", ""]
    )

    default_c = stream_columns(
        "ofs", {"ridge": ridge, "seed": 0}, x, order(data.name, d, "ofs", 0), mode.ofs_chunk
    )
    resolved = default_c.params.as_params()
    section.add_table(
        f"**{data.name}** ({n} x {d}, {k} classes): k-means accuracy / NMI on what each method "
        f"keeps; ridge lambda = sigma_{k}(X)^2 = {ridge:.4g} (effective dimension "
        f"{float(np.sum(singular**2 / (singular**2 + ridge))):.1f}); epsilon "
        f"{resolved['epsilon']}; means over OFS seeds {list(mode.ofs_seeds)} (each seed "
        "also sets the column order and the k-means seed). The paper's default c = 8 eps^-2 "
        f"log n = {resolved['c']:.0f} keeps "
        f"{int(np.asarray(default_c.state['features_kept']))} of {d} here.",
        ["c", "kept", "OFS", "batch ridge-leverage sampling", "Laplacian score", "random"],
        rows,
    )
    times = {
        "Laplacian score (skfeature, graph + scores)": peers.seconds["laplacian score"],
        "ridge leverage (exact SVD)": levs_seconds,
        "OFS (whole stream, mean over runs)": float(np.mean(ofs_seconds)),
    }
    return {"curve": curve, "all": everything.acc, "points": points, "times": times, "d": d}


def run(ctx: Context) -> Section:
    mode = ctx.mode
    section = Section(
        "ofs",
        "OFS (Wang, Shen & Li; Fig. 1, Table 3)",
        PAPER,
        [
            "Every row scaled to unit L2 norm once; that matrix's columns are the feature "
            f"stream, in a seeded random order, {mode.ofs_chunk} columns per update.",
            "Ridge lambda = sigma_c(X)^2 with c the number of classes (eq. (2.1)): the sets "
            "have more samples than informative directions, so the paper's pseudo-inverse "
            "(lambda = 0) keeps every column until the kept ones span the samples; the sampling "
            f"rate c takes {list(mode.ofs_rates)} to trace kept counts; epsilon at its default.",
            "OFS is clustered through its `Clusters` capability (KMeans(k, n_init = 10, "
            "random_state = seed) on the kept, rescaled columns). Competitors at the same "
            "number of features, with the same k-means: i.i.d. sampling with probabilities "
            "proportional to the exact batch ridge leverage (same lambda), rescaled by "
            "1 / sqrt(m q_i) (`service.algorithms.leverage.batch_leverage_scores`); the top "
            "of skfeature's Laplacian score; a seeded random subset.",
        ],
    )
    results = {name: one_dataset(ctx, ctx.data[name], section) for name in mode.datasets}
    section.add_table(
        "**CPU time** (seconds, wall clock on this machine; Table 3's counterpart):",
        ["dataset", "Laplacian score", "ridge leverage (batch)", "OFS (stream)"],
        [[name, *(seconds(v) for v in found["times"].values())] for name, found in results.items()],
    )
    panels = []
    for name, found in results.items():
        panel = Panel(
            name,
            "features kept",
            "clustering accuracy",
            lines={"all features": found["all"]},
            logx=True,
        )
        for method, pts in found["curve"].items():
            panel.series[method] = ([p[0] for p in pts], [p[1] for p in pts])
        panels.append(panel)
    path = grid(
        ctx.plot_path("ofs_accuracy"), panels, "OFS: k-means accuracy against kept features", 4
    )
    section.add("", ctx.image(path, "accuracy against kept features"))
    section.summary = summary(results)
    return section


def summary(results: dict[str, dict[str, Any]]) -> list[str]:
    diffs, beats_lap, beats_random, beats_all, cells = [], 0, 0, 0, 0
    for found in results.values():
        for point in found["points"]:
            if "OFS" not in point:
                continue
            cells += 1
            diffs.append(point["OFS"] - point.get("batch ridge-leverage sampling", np.nan))
            beats_lap += point["OFS"] >= point.get("Laplacian score", np.inf)
            beats_random += point["OFS"] >= point.get("random", np.inf)
            beats_all += point["OFS"] >= found["all"]
    mean_diff = float(np.nanmean(diffs)) if diffs else np.nan
    verdict = "matches" if abs(mean_diff) <= 0.02 else ("beats" if mean_diff > 0 else "trails")
    coil = results.get("COIL20")
    timing = ""
    if coil is not None:
        t = list(coil["times"].values())
        timing = (
            f" On COIL20 the whole OFS stream took {seconds(t[2])} s against "
            f"{seconds(t[0])} s for skfeature's Laplacian score and {seconds(t[1])} s for the "
            "exact ridge leverage (the paper: OFS 0.58 s, LapS 0.23 s, LevS 0.64 s, in MATLAB "
            "on other hardware): the same order of magnitude."
        )
    return [
        f"**Against batch ridge-leverage sampling (Fig. 1's LevS) Sift {verdict} the paper**: "
        f"over {cells} (dataset, c) points OFS's k-means accuracy is {num(mean_diff)} from "
        "batch sampling at the same number of features on average. That is what Theorem 1 "
        "promises: the online scores over-estimate the batch leverage (Lemma 1) and keep a "
        "spectral approximation of A A^T, so the clustering cost is preserved; the two differ "
        "by sampling noise.",
        f"**Against the other baselines**: OFS is at least as accurate as the Laplacian score in "
        f"{beats_lap} of {cells} points, as random subsets in {beats_random}, and as k-means "
        f"on all features in {beats_all}. The paper's claim that the selected subset beats all "
        "features holds where few kept columns already carry the clusters; with few columns "
        "kept (small c) OFS trails, as any sampling does, and random subsets of these small, "
        "highly correlated image and speech sets are a strong baseline." + timing,
    ]
