"""OCFS and IOC (Yan et al., TKDE 2006) against the paper's Table 4 and Figures 4-5.

Labelled training rows stream to an ``ocfs`` and an ``ioc`` selector; a linear SVM is trained
on the top p OCFS features, and on the IOC projection ``W^T x`` that the ``Projects``
capability answers (both IOC's learned ``W`` and the exact batch solution, as
``GET .../projection?solution=`` does), against scikit-learn's chi2 and mutual-information
selection (the paper's CHI and IG), Sift's ``variance``, random features and all features.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation.peers import (
    INFORMATION_BINS,
    chi2_scores,
    f_classif_scores,
    information_gain,
    largest_difference,
    raw_chi2,
    variances,
)
from evaluation.plots import Panel, grid
from evaluation.protocol import (
    Dataset,
    classification,
    order,
    random_subsets,
    split,
    stream_labelled,
    stream_rows,
    timed,
    top,
)
from evaluation.report import Context, Section, num, seconds
from service.algorithms.base import Projects
from service.algorithms.ocfs import centred_class_means

#: Labelled rows per chunk.
CHUNK = 100

PAPER = [
    "Table 4 (RCV1, 4 classes, reduced to 3 dimensions, SVM, micro-F1): IOC3 0.8169, ILDA3 "
    "0.8169, IMMC3 0.8063, IPCA3 0.4806, and IG3 = CHI3 = OCFS3 = 0.4475; time 26,884.6 s for "
    "IOC, 66.72 (IG), 68.83 (CHI) and 35.96 s (OCFS).",
    'Figs. 4-5 (RCV1, ODP; 10 to 10,000 features): "The F1 measurements of OCFS are always '
    'better than IG and CHI"; "significant improvements over baselines when the selected '
    'subspace dimension is extremely small"; "the CPU time of OCFS is less than half of its '
    'counterpart of IG and CHI".',
    "Sec. 3.2: OCFS is optimal for the OC criterion J(W~) = trace(W~^T S_b W~) over feature "
    "subsets; sec. 3.1 / Fig. 3b: IOC converges to the batch OC solution.",
]


def one_dataset(ctx: Context, data: Dataset, section: Section) -> dict[str, Any]:
    mode = ctx.mode
    parts = split(data, mode)
    n_train, m = parts.train.shape
    c = data.classes
    stream = order(data.name, n_train, "labelled")
    ocfs = stream_labelled("ocfs", {}, parts.train, parts.y_train, stream, CHUNK)
    phi, priors = centred_class_means(parts.train, [int(v) for v in parts.y_train])
    exact = priors @ (phi**2)
    ocfs_error = float(np.max(np.abs(ocfs.weights() - exact)) / max(float(np.max(exact)), 1e-300))
    chi2, chi2_seconds = timed(lambda: chi2_scores(parts.train, parts.y_train))
    mi, mi_seconds = timed(lambda: information_gain(parts.train, parts.y_train))
    anova = stream_labelled("anova", {}, parts.train, parts.y_train, stream, CHUNK)
    sift_chi2 = stream_labelled("chi2", {}, parts.train, parts.y_train, stream, CHUNK)
    test_errors = {
        "anova": largest_difference(anova.weights(), f_classif_scores(parts.train, parts.y_train)),
        "chi2": largest_difference(sift_chi2.weights(), raw_chi2(parts.train, parts.y_train)),
    }
    variance = stream_rows("variance", {}, parts.train, stream, CHUNK)
    variance_error = float(
        np.max(np.abs(variance.weights() - variances(parts.train)))
        / max(float(np.max(variances(parts.train))), 1e-300)
    )
    scores = {
        "OCFS": ocfs.weights(),
        "ANOVA F": anova.weights(),
        "chi2": chi2,
        "mutual information": mi,
        "variance": variance.weights(),
    }

    budgets = [p for p in mode.labelled_budgets if p < m]
    accuracy: dict[str, dict[int, float]] = {name: {} for name in [*scores, "random"]}
    for p in budgets:
        for name, found in scores.items():
            chosen = top(found, p)
            accuracy[name][p] = classification(parts.train[:, chosen], parts.test[:, chosen], parts)
        accuracy["random"][p] = float(
            np.mean(
                [
                    classification(parts.train[:, s], parts.test[:, s], parts)
                    for s in random_subsets(m, p, mode.random_seeds, "labelled", data.name)
                ]
            )
        )
    everything = classification(parts.train, parts.test, parts)
    same_top = all(same_selection(sift_chi2.weights(), chi2, p) for p in budgets)

    # Table 4: everything reduced to c - 1 dimensions.
    dims = max(c - 1, 1)
    reduced: dict[str, float] = {}
    ioc_info: list[str] = []
    for amnesia in mode.ioc_amnesia:
        ioc = stream_labelled(
            "ioc",
            {"n_components": dims, "amnesia": amnesia},
            parts.train,
            parts.y_train,
            stream,
            CHUNK,
        )
        method = ioc.method
        assert isinstance(method, Projects)
        arrays = {f: np.asarray(ioc.state[f]) for f in method.projection_fields}
        solutions = method.projections(arrays, ioc.params)
        label = "IOC" if amnesia == 0 else f"IOC amnesia={amnesia:g}"
        w = solutions["ioc"].projection
        reduced[label] = classification(parts.train @ w, parts.test @ w, parts)
        ioc_info.append(
            f"{label}: {seconds(ioc.seconds)} s ({1e3 * ioc.seconds / n_train:.2f} ms per "
            "sample), agreement with the exact eigenvectors "
            f"{num(float(np.mean(solutions['ioc'].agreement)))} (mean |u_j . e_j|)"
        )
        if "exact OC (batch)" not in reduced:
            w = solutions["exact"].projection
            reduced["exact OC (batch)"] = classification(parts.train @ w, parts.test @ w, parts)
    for name, found in scores.items():
        chosen = top(found, dims)
        reduced[name] = classification(parts.train[:, chosen], parts.test[:, chosen], parts)

    rows = [[name, *(num(accuracy[name][p]) for p in budgets), ""] for name in accuracy]
    rows.append(["all features", *("" for _ in budgets), num(everything)])
    section.add_table(
        f"**{data.name}** ({n_train} training / {parts.test.shape[0]} test rows, {m} features, "
        f"{c} classes): test accuracy of a linear SVM on the top p features.",
        ["selection", *(f"p={p}" for p in budgets), f"all {m}"],
        rows,
    )
    section.add(
        "",
        f"Reduced to c - 1 = {dims} dimensions (Table 4): "
        + ", ".join(f"{name} {num(value)}" for name, value in reduced.items())
        + f". Seconds: OCFS stream {seconds(ocfs.seconds)}, chi2 {seconds(chi2_seconds)}, "
        f"mutual information {seconds(mi_seconds)}; "
        + "; ".join(ioc_info)
        + f". OCFS streamed against its exact batch scores: max relative difference "
        f"{ocfs_error:.1e}; Sift's variance against VarianceThreshold: {variance_error:.1e}; "
        f"Sift's anova against scikit-learn's f_classif {test_errors['anova']:.1e} and its chi2 "
        f"against scikit-learn's chi2 {test_errors['chi2']:.1e} (where both are finite), the "
        f"chi2 stream's top p {'the same as' if same_top else 'NOT the same as'} scikit-learn's "
        "at every p (but for features whose scores tie at the cut).",
    )
    return {
        "accuracy": accuracy,
        "all": everything,
        "budgets": budgets,
        "reduced": reduced,
        "dims": dims,
        "times": {"OCFS": ocfs.seconds, "chi2": chi2_seconds, "mutual information": mi_seconds},
        "errors": (ocfs_error, variance_error),
        "test_errors": test_errors,
        "same_top": same_top,
    }


def same_selection(found: np.ndarray, reference: np.ndarray, p: int) -> bool:
    """Whether the top p of ``found`` is the reference's, but for features whose reference
    scores tie (to 1e-12, relative) with the p-th best: rounding orders exact ties either way."""
    ours, theirs = set(top(found, p).tolist()), set(top(reference, p).tolist())
    cut = float(reference[top(reference, p)[-1]])
    swapped = np.array(sorted(ours ^ theirs), dtype=np.int64)
    return bool(np.all(np.abs(reference[swapped] - cut) <= 1e-12 * abs(cut)))


def run(ctx: Context) -> Section:
    mode = ctx.mode
    section = Section(
        "labelled",
        "OCFS and IOC (Yan et al., TKDE 2006; Table 4, Figs. 4-5)",
        PAPER,
        [
            f"One stratified split per set ({100 * (1 - mode.test_fraction):.0f}% train, seeded), "
            "features min-max scaled on the training rows (chi2 needs nonnegative values); the "
            f"training rows stream in a seeded order, {CHUNK} labelled rows per chunk.",
            "Classifier: scikit-learn LinearSVC(C = 1) on the selected (or projected) training "
            "columns, test accuracy (= micro-F1 for single-label data, the paper's measure).",
            "Selections: OCFS (Sift's `ocfs` stream), ANOVA F (Sift's `anova` stream: "
            "scikit-learn's f_classif), scikit-learn chi2 (Sift's `chi2` stream gives the same "
            "scores, checked) and "
            f"mutual_info_classif (the paper's CHI and IG; IG as the discrete estimator on "
            f"each scaled feature cut into {INFORMATION_BINS} equal-width bins, see "
            "`evaluation/peers.py`), Sift's `variance`, random (mean over "
            f"{mode.random_seeds} seeds). Projections at c - 1 dimensions: IOC's W (amnesia "
            f"{list(mode.ioc_amnesia)}: 0 is the paper's 1/n average) and the exact batch OC "
            "solution, both from the `Projects` capability.",
        ],
    )
    results = {name: one_dataset(ctx, ctx.data[name], section) for name in mode.datasets}
    section.add_table(
        "**Table 4 style**: test accuracy with everything reduced to c - 1 dimensions "
        "(features or directions).",
        ["dataset", "c - 1", *next(iter(results.values()))["reduced"].keys()],
        [
            [name, str(found["dims"]), *(num(v) for v in found["reduced"].values())]
            for name, found in results.items()
        ],
    )
    panels = []
    for name, found in results.items():
        budgets = found["budgets"]
        panel = Panel(
            name, "features p", "test accuracy", lines={"all features": found["all"]}, logx=True
        )
        for method, by_p in found["accuracy"].items():
            panel.series[method] = (budgets, [by_p[p] for p in budgets])
        panel.series["IOC (c-1 directions)"] = ([found["dims"]], [found["reduced"]["IOC"]])
        panels.append(panel)
    path = grid(
        ctx.plot_path("ocfs_ioc"), panels, "OCFS, IOC and peers: linear SVM test accuracy", 4
    )
    section.add("", ctx.image(path, "test accuracy against p"))
    section.summary = summary(results)
    return section


def summary(results: dict[str, dict[str, Any]]) -> list[str]:
    cells = wins_chi2 = wins_mi = 0
    small_gap: list[float] = []
    for found in results.values():
        acc = found["accuracy"]
        for p in found["budgets"]:
            cells += 1
            wins_chi2 += acc["OCFS"][p] >= acc["chi2"][p]
            wins_mi += acc["OCFS"][p] >= acc["mutual information"][p]
        if found["budgets"]:
            p = found["budgets"][0]
            small_gap.append(acc["OCFS"][p] - max(acc["chi2"][p], acc["mutual information"][p]))
    ioc_beats = sum(
        found["reduced"]["IOC"] > max(found["reduced"]["OCFS"], found["reduced"]["chi2"])
        for found in results.values()
    )
    ioc_gap = [
        found["reduced"]["exact OC (batch)"] - found["reduced"]["IOC"] for found in results.values()
    ]
    faster = sum(
        found["times"]["OCFS"]
        < 0.5 * min(found["times"]["chi2"], found["times"]["mutual information"])
        for found in results.values()
    )
    worst_error = max(found["errors"][0] for found in results.values())
    worst_test = max(max(found["test_errors"].values()) for found in results.values())
    same_top = all(found["same_top"] for found in results.values())
    anova_wins = sum(
        found["accuracy"]["ANOVA F"][p] >= found["accuracy"]["OCFS"][p]
        for found in results.values()
        for p in found["budgets"]
    )
    verdict = "matches" if wins_chi2 >= 0.75 * cells and wins_mi >= 0.75 * cells else "trails"
    margin = float(np.mean(small_gap)) if small_gap else np.nan
    return [
        f"**OCFS against chi2 and mutual information (Figs. 4-5) Sift {verdict} the paper's "
        f'"always better"**: OCFS is at least as accurate as chi2 in {wins_chi2} of {cells} '
        f"(dataset, p) cells and as mutual information in {wins_mi}; at the smallest budget its "
        f"margin over the better of the two is {num(margin)} "
        "on average. OCFS ranks by between-class scatter, which suits a linear classifier; "
        "where it trails, the sets are dense with strongly correlated features (the top OCFS "
        "features are redundant neighbours) or have two classes (one direction of S_b). The "
        f"streamed scores equal the exact batch OCFS scores (max relative difference "
        f"{worst_error:.1e}), as the method promises for any chunking.",
        f"**IOC (Table 4)**: the IOC projection to c - 1 dimensions beats c - 1 selected "
        f"features (OCFS, chi2) on {ioc_beats} of {len(results)} sets, the paper's finding "
        "(0.8169 against 0.4475). IOC's one-pass estimate trails the exact OC solution by "
        f"{num(float(np.mean(ioc_gap)))} accuracy on average: the paper's 1/n average converges "
        "slowly in high dimension, which the amnesic average (tried: `amnesia`) and the exact "
        "solution (`solution=exact`, computed from the state's class sums) address.",
        f"**ANOVA F and chi-squared (scikit-learn's f_classif and chi2, streamed)**: Sift's "
        f"`anova` and `chi2` streams equal scikit-learn's scores on the whole training set "
        f"(largest relative difference {worst_test:.1e}); the chi2 stream's top p is "
        f"scikit-learn's {'at every budget' if same_top else 'NOT at every budget'} (features "
        "whose scores tie to 1e-12 at the cut may swap). ANOVA F is "
        f"at least as accurate as OCFS in {anova_wins} of {cells} cells: F is the "
        "between-class scatter OCFS ranks by, divided by the within-class spread.",
        f"**Time**: the OCFS stream took less than half the time of both chi2 and mutual "
        f"information on {faster} of {len(results)} sets (the paper: less than half of IG and "
        "CHI). Sift's time includes class discovery and per-chunk bookkeeping; scikit-learn's "
        "chi2 is one vectorised pass over the matrix, so the paper's C++ comparison does not "
        "carry over everywhere.",
    ]
