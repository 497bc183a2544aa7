"""``f_regression`` and ``correlation`` (scikit-learn's f_regression and r_regression, streamed)
against scikit-learn's own selection on data with a numeric target.

The training rows of each set stream, with their targets, to an ``f_regression`` and a
``correlation`` selector; the top k features of each (for several k) feed a ridge regression
whose R^2 on the held-out rows is the measure, beside scikit-learn's
``SelectKBest(f_regression)`` (the reference), ``SelectKBest(r_regression)`` (which ranks by the
signed r), Sift's ``variance`` on the same rows, random features and all features. The streamed
scores are checked against scikit-learn's on the whole training set, and against the same
stream in other chunks and merged from two halves.

Data that ship with the repository or its libraries, nothing downloaded: scikit-learn's
bundled diabetes (in its original units, so that the variance baseline ranks something), a
seeded ``make_regression`` whose informative features are known, and COIL20
(``datasets/COIL20.mat``), which holds no numeric target of its own: its centre pixel is the
target, predicted from the other 1023 (a real matrix of strongly correlated features).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluation.peers import largest_difference
from evaluation.plots import Panel, grid
from evaluation.protocol import (
    Mode,
    derived_seed,
    order,
    random_subsets,
    stream_rows,
    stream_targets,
    timed,
    top,
)
from evaluation.report import Context, Section, num
from service.algorithms.base import Mergeable
from service.algorithms.univariate import P_VALUES_FIELD

#: Rows with a target per chunk (the main stream), and the chunk of the chunking check.
CHUNK = 100
OTHER_CHUNK = 7
#: Ridge's penalty on the standardised selected columns.
RIDGE_ALPHA = 1.0
#: make_regression's shape: rows, features, informative features, noise.
SYNTHETIC = (2000, 200, 10, 100.0)
#: COIL20's images are 32 x 32; the target is the centre pixel.
COIL20_TARGET = 16 * 32 + 16

PAPER = [
    "scikit-learn's `f_regression`: \"Univariate linear regression tests returning "
    "F-statistic and p-values. [...] The cross correlation between each regressor and the "
    "target is computed using r_regression as: E[(X[:, i] - mean(X[:, i])) * (y - mean(y))] / "
    '(std(X[:, i]) * std(y)). It is converted to an F score and then to a p-value."',
    "scikit-learn's `r_regression`: \"Compute Pearson's r for each features and the "
    'target"; `f_regression` "is derived from r_regression and will rank features in the same '
    'order if all the features are positively correlated with the target", and is "therefore '
    "recommended as a feature selection criterion [...] irrespective of the sign of the "
    'association with the target variable."',
    "Sift's claim (docs/methods/regression.md): the streamed F, r and p-values equal "
    "scikit-learn's on the rows seen, for any chunking and merge; `correlation` ranks by |r|.",
]


@dataclass(frozen=True)
class RegressionSet:
    """Rows, a numeric target, where they come from, and the truly informative features (when
    known)."""

    name: str
    x: np.ndarray
    y: np.ndarray
    source: str
    informative: np.ndarray | None = None


def load(name: str, rows_cap: int | None) -> RegressionSet:
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        x, y = load_diabetes(return_X_y=True, scaled=False)
        data = RegressionSet(
            name,
            np.asarray(x, dtype=np.float64),
            np.asarray(y, dtype=np.float64),
            "sklearn.datasets.load_diabetes(scaled=False) (bundled; 442 x 10, original units)",
        )
    elif name == "make_regression":
        from sklearn.datasets import make_regression

        rows, features, informative, noise = SYNTHETIC
        x, y, coef = make_regression(
            n_samples=rows,
            n_features=features,
            n_informative=informative,
            noise=noise,
            coef=True,
            random_state=derived_seed("make_regression") % 2**31,
        )
        data = RegressionSet(
            name,
            np.asarray(x, dtype=np.float64),
            np.asarray(y, dtype=np.float64),
            f"sklearn.datasets.make_regression({rows} x {features}, {informative} informative, "
            f"noise {noise:g}, seeded)",
            np.flatnonzero(coef),
        )
    elif name == "COIL20 pixel":
        from tests.support.datasets import load_mat

        pixels, _ = load_mat("COIL20.mat")
        data = RegressionSet(
            name,
            np.delete(pixels, COIL20_TARGET, axis=1),
            pixels[:, COIL20_TARGET].copy(),
            "datasets/COIL20.mat: the centre pixel (row 16, column 16) as the target, the "
            "other 1023 pixels as features",
        )
    else:
        raise KeyError(f"unknown regression set {name!r}")
    if rows_cap is not None and data.x.shape[0] > rows_cap:
        keep = np.sort(
            np.random.default_rng(derived_seed("rows", name)).choice(
                data.x.shape[0], rows_cap, replace=False
            )
        )
        data = RegressionSet(
            data.name,
            data.x[keep],
            data.y[keep],
            data.source + f" ({rows_cap} seeded rows)",
            data.informative,
        )
    return data


@dataclass(frozen=True)
class Split:
    train: np.ndarray
    test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray


def split(data: RegressionSet, mode: Mode) -> Split:
    from sklearn.model_selection import train_test_split

    train, test, y_train, y_test = train_test_split(
        data.x, data.y, test_size=mode.test_fraction, random_state=derived_seed("split", data.name)
    )
    return Split(*(np.asarray(part, dtype=np.float64) for part in (train, test, y_train, y_test)))


def held_out_r2(parts: Split, chosen: np.ndarray) -> float:
    """R^2 on the test rows of a ridge regression on the standardised ``chosen`` columns (the
    scaler fitted on the training rows)."""
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), Ridge(alpha=RIDGE_ALPHA))
    model.fit(parts.train[:, chosen], parts.y_train)
    return float(model.score(parts.test[:, chosen], parts.y_test))


def sklearn_tests(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    from sklearn.feature_selection import f_regression, r_regression

    f, p = f_regression(x, y)
    return {"f": np.asarray(f), "p": np.asarray(p), "r": np.asarray(r_regression(x, y))}


def select_k_best(x: np.ndarray, y: np.ndarray, score: str, k: int) -> np.ndarray:
    """The columns scikit-learn's ``SelectKBest(score_func, k)`` keeps, in index order."""
    from sklearn.feature_selection import SelectKBest, f_regression, r_regression

    func = f_regression if score == "f" else r_regression
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = SelectKBest(func, k=k).fit(x, y).get_support(indices=True)
    return np.asarray(kept, dtype=np.int64)


def same_as_reference(chosen: np.ndarray, kept: np.ndarray, reference: np.ndarray) -> bool:
    """Whether ``chosen`` is the reference's selection ``kept``, but for features whose
    reference scores tie (to 1e-12, relative) with the k-th best: an exact tie may go either way
    (``SelectKBest`` keeps the higher index, Sift the lower)."""
    ours, theirs = set(chosen.tolist()), set(kept.tolist())
    if ours == theirs:
        return True
    cut = float(np.min(reference[kept]))
    swapped = np.array(sorted(ours ^ theirs), dtype=np.int64)
    return bool(np.all(np.abs(reference[swapped] - cut) <= 1e-12 * abs(cut)))


def one_dataset(ctx: Context, name: str, section: Section) -> dict[str, Any]:
    mode = ctx.mode
    data = load(name, mode.rows_cap)
    parts = split(data, mode)
    n_train, m = parts.train.shape
    stream = order(name, n_train, "regression")
    f_run = stream_targets("f_regression", {}, parts.train, parts.y_train, stream, CHUNK)
    r_run = stream_targets("correlation", {}, parts.train, parts.y_train, stream, CHUNK)
    variance = stream_rows("variance", {}, parts.train, stream, CHUNK)
    importlib.import_module("sklearn.feature_selection")  # before the clock starts
    reference, reference_seconds = timed(lambda: sklearn_tests(parts.train, parts.y_train))

    errors = {
        "F": largest_difference(f_run.weights(), reference["f"]),
        "p-value": largest_difference(
            np.asarray(f_run.state[P_VALUES_FIELD], dtype=np.float64), reference["p"]
        ),
        "r": largest_difference(np.asarray(r_run.state["r"], dtype=np.float64), reference["r"]),
    }
    # The same rows in other chunks, and merged from two halves: the same scores.
    other = stream_targets(
        "f_regression", {}, parts.train, parts.y_train, stream, OTHER_CHUNK
    ).weights()
    half = n_train // 2
    first = stream_targets("f_regression", {}, parts.train, parts.y_train, stream[:half], CHUNK)
    second = stream_targets("f_regression", {}, parts.train, parts.y_train, stream[half:], CHUNK)
    method = first.method
    assert isinstance(method, Mergeable)
    merged = first.method.weights(
        method.merge(first.state, first.params, second.state), first.params
    )
    chunking = max(
        largest_difference(other, f_run.weights()), largest_difference(merged, f_run.weights())
    )

    budgets = [k for k in mode.regression_budgets if k < m]
    selections: dict[str, Callable[[int], np.ndarray]] = {
        "Sift f_regression": lambda k: top(f_run.weights(), k),
        "Sift correlation (|r|)": lambda k: top(r_run.weights(), k),
        "SelectKBest(f_regression)": lambda k: select_k_best(parts.train, parts.y_train, "f", k),
        "SelectKBest(r_regression) (signed r)": lambda k: select_k_best(
            parts.train, parts.y_train, "r", k
        ),
        "Sift variance": lambda k: top(variance.weights(), k),
    }
    r2: dict[str, dict[int, float]] = {label: {} for label in [*selections, "random"]}
    same: dict[str, dict[int, bool]] = {"Sift f_regression": {}, "Sift correlation (|r|)": {}}
    signed_differs: dict[int, bool] = {}
    recovered: dict[int, int] = {}
    for k in budgets:
        chosen = {label: pick(k) for label, pick in selections.items()}
        for label, columns in chosen.items():
            r2[label][k] = held_out_r2(parts, columns)
        kept = chosen["SelectKBest(f_regression)"]
        for label in same:
            same[label][k] = same_as_reference(chosen[label], kept, reference["f"])
        signed_differs[k] = set(chosen["SelectKBest(r_regression) (signed r)"].tolist()) != set(
            kept.tolist()
        )
        r2["random"][k] = float(
            np.mean(
                [
                    held_out_r2(parts, subset)
                    for subset in random_subsets(m, k, mode.random_seeds, "regression", name)
                ]
            )
        )
        if data.informative is not None:
            recovered[k] = len(set(chosen["Sift f_regression"].tolist()) & set(data.informative))
    everything = held_out_r2(parts, np.arange(m))

    rows = [[label, *(num(r2[label][k]) for k in budgets), ""] for label in r2]
    rows.append(["all features", *("" for _ in budgets), num(everything)])
    section.add_table(
        f"**{name}** ({n_train} training / {parts.test.shape[0]} test rows, {m} features; "
        f"{data.source}): held-out R^2 of a ridge regression on the top k features.",
        ["selection", *(f"k={k}" for k in budgets), f"all {m}"],
        rows,
    )
    equal_f = sum(same["Sift f_regression"].values())
    equal_r = sum(same["Sift correlation (|r|)"].values())
    notes = [
        f"Sift's streamed scores against scikit-learn's on the {n_train} training rows: max "
        f"relative difference F {errors['F']:.1e}, p-value {errors['p-value']:.1e}, r "
        f"{errors['r']:.1e}; the same rows in chunks of {OTHER_CHUNK} and merged from two "
        f"halves against chunks of {CHUNK}: {chunking:.1e}. Top k equal to "
        f"SelectKBest(f_regression)'s: f_regression at {equal_f} of {len(budgets)} k, "
        f"correlation at {equal_r} of {len(budgets)} (features whose F ties at the cut to 1e-12 "
        f"may swap); SelectKBest(r_regression)'s differs from it at "
        f"{sum(signed_differs.values())} of {len(budgets)} k. Time: the f_regression stream "
        f"{1e3 * f_run.seconds:.1f} ms ({f_run.updates} chunks), scikit-learn's f_regression "
        f"and r_regression on the whole training set {1e3 * reference_seconds:.1f} ms."
    ]
    if data.informative is not None:
        notes.append(
            f"Of the {data.informative.size} informative features, Sift's top k holds "
            + ", ".join(f"{recovered[k]} at k={k}" for k in budgets)
            + "."
        )
    section.add("", " ".join(notes))
    return {
        "r2": r2,
        "all": everything,
        "budgets": budgets,
        "errors": errors,
        "chunking": chunking,
        "same": same,
        "signed_differs": signed_differs,
        "recovered": recovered,
        "informative": None if data.informative is None else int(data.informative.size),
    }


def run(ctx: Context) -> Section:
    mode = ctx.mode
    section = Section(
        "regression",
        "f_regression and correlation (scikit-learn's f_regression and r_regression)",
        PAPER,
        [
            f"One seeded split per set ({100 * (1 - mode.test_fraction):.0f}% train); the "
            f"training rows stream with their targets in a seeded order, {CHUNK} rows per "
            "chunk, to Sift's `f_regression` and `correlation` (and their rows alone to "
            "`variance`), through the method registry as the service runs them.",
            f"Model: scikit-learn Ridge(alpha = {RIDGE_ALPHA:g}) on the selected training "
            "columns, each standardised on the training rows (StandardScaler); R^2 on the test "
            "rows. Selection is on the raw columns, so the variance baseline ranks them in "
            "their own units.",
            "Selections: Sift's `f_regression` (F) and `correlation` (|r|) streams, "
            "scikit-learn SelectKBest(f_regression) (the reference) and "
            "SelectKBest(r_regression) (signed r), Sift's `variance`, random (mean over "
            f"{mode.random_seeds} seeds), all features.",
            "Checks: Sift's F, p-values and signed r against scikit-learn's f_regression and "
            "r_regression on the whole training set (max relative difference where both are "
            f"finite and nonzero), the stream in chunks of {OTHER_CHUNK} and two halves merged "
            f"(`merge`) against chunks of {CHUNK}, and every top k against SelectKBest's.",
        ],
    )
    results = {name: one_dataset(ctx, name, section) for name in mode.regression_datasets}
    panels = []
    for name, found in results.items():
        budgets = found["budgets"]
        panel = Panel(name, "features k", "held-out R^2", lines={"all features": found["all"]})
        panel.logx = bool(budgets) and max(budgets) > 10
        for label, by_k in found["r2"].items():
            panel.series[label] = (budgets, [by_k[k] for k in budgets])
        panels.append(panel)
    path = grid(
        ctx.plot_path("regression"),
        panels,
        "f_regression, correlation and baselines: ridge R^2 on held-out rows",
        3,
    )
    section.add("", ctx.image(path, "held-out R^2 against k"))
    section.summary = summary(results)
    return section


def summary(results: dict[str, dict[str, Any]]) -> list[str]:
    cells = [(name, k) for name, found in results.items() for k in found["budgets"]]
    total = len(cells)
    equal_f = sum(results[name]["same"]["Sift f_regression"][k] for name, k in cells)
    equal_r = sum(results[name]["same"]["Sift correlation (|r|)"][k] for name, k in cells)
    worst = {
        key: max(found["errors"][key] for found in results.values())
        for key in ("F", "p-value", "r")
    }
    chunking = max(found["chunking"] for found in results.values())

    def r2(name: str, label: str, k: int) -> float:
        return float(results[name]["r2"][label][k])

    sift, signed_label = "Sift f_regression", "SelectKBest(r_regression) (signed r)"
    beats_random = sum(r2(n, sift, k) >= r2(n, "random", k) for n, k in cells)
    beats_variance = sum(r2(n, sift, k) >= r2(n, "Sift variance", k) for n, k in cells)
    variance_below_random = sum(r2(n, "Sift variance", k) < r2(n, "random", k) for n, k in cells)
    lost = [
        f"{n} k={k} ({baseline} {num(r2(n, baseline, k))} against {num(r2(n, sift, k))})"
        for n, k in cells
        for baseline in ("random", "Sift variance")
        if r2(n, baseline, k) > r2(n, sift, k)
    ]
    exact = "equal" if max(worst.values()) < 1e-8 and chunking < 1e-8 else "do NOT equal"
    lines = [
        f"**Against scikit-learn (the reference)**: Sift's streamed scores {exact} "
        f"scikit-learn's on the rows seen (largest relative difference F {worst['F']:.1e}, "
        f"p-values {worst['p-value']:.1e}, r {worst['r']:.1e}), and the same rows in other "
        f"chunks or merged from two halves give the same scores ({chunking:.1e}). The top k "
        f"is SelectKBest(f_regression)'s in {equal_f} of {total} (set, k) cells for "
        f"`f_regression` and in {equal_r} for `correlation`, whose |r| orders the features as "
        "F does (F grows with r^2; features whose F ties at the cut may swap). The R^2 rows of "
        "the three are therefore the same.",
        f"**Against the baselines**: the F selection's held-out R^2 is at least a random "
        f"subset's in {beats_random} of {total} cells and at least the variance selection's in "
        f"{beats_variance}"
        + (
            "; a baseline is better in " + "; ".join(lost) + "."
            if lost
            else ": no baseline is better in any cell."
        )
        + " Variance knows nothing of the target (it ranks by units and spread) and trails "
        f"even random subsets in {variance_below_random} of {total} cells.",
    ]
    reaches, short = [], []
    for n, found in results.items():
        close = [k for k in found["budgets"] if r2(n, sift, k) >= found["all"] - 0.01]
        best = max(found["budgets"], key=lambda k: float(found["r2"][sift][k]))
        shown = f"all {num(found['all'])}, best {num(r2(n, sift, best))} at k = {best}"
        if close:
            reaches.append(f"{n} from k = {min(close)} ({shown})")
        else:
            short.append(f"{n} ({shown})")
    lines.append(
        "**Against all features**: the F selection comes within 0.01 of ridge on every "
        "feature, or above it, "
        + ("on " + "; ".join(reaches) if reaches else "on no set")
        + ("; it stays below on " + "; ".join(short) if short else "")
        + ". Where it is above, ridge on every column fits noise that the selection leaves "
        "out (columns the rows do not pin down, or that do not bear on the target); where it "
        "is below, features that each explain little alone still add to a joint model, which "
        "a univariate test cannot see."
    )
    signed = [(n, k) for n, k in cells if results[n]["signed_differs"][k]]
    if signed:
        gaps = [r2(n, sift, k) - r2(n, signed_label, k) for n, k in signed]
        lines.append(
            f"**|r| against signed r**: SelectKBest(r_regression), which ranks by the signed r, "
            f"keeps another top k in {len(signed)} of {total} cells (a negative correlation "
            "ranks below every positive one): "
            + "; ".join(
                f"{n} k={k} (R^2 {num(r2(n, signed_label, k))} against |r|'s {num(r2(n, sift, k))})"
                for n, k in signed
            )
            + f". The two differ by at most {num(float(np.max(np.abs(gaps))))} R^2 here, "
            "either way: the features that swap at the cut explain little. Sift's "
            "`correlation` keeps the signed r in its state and ranks by |r|, so its top k is "
            "f_regression's."
        )
    else:
        lines.append(
            f"**|r| against signed r**: SelectKBest(r_regression) keeps the same top k in all "
            f"{total} cells here: no negative correlation reaches the cut."
        )
    for n, found in results.items():
        if not found["informative"] or not found["budgets"]:
            continue
        k = min(
            (k for k in found["budgets"] if k >= found["informative"]),
            default=found["budgets"][-1],
        )
        lines.append(
            f"**Recovery ({n})**: Sift's top {k} holds {found['recovered'][k]} of the "
            f"{found['informative']} informative features."
        )
    return lines
