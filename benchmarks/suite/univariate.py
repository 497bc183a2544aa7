"""``univariate``: Sift's ``anova``, ``chi2``, ``f_regression`` and ``correlation`` in-process and
over HTTP against scikit-learn's ``f_classif``, ``chi2``, ``f_regression`` and ``r_regression`` on
the whole array (the peer: batch, in-process), with the largest relative difference of the
scores and p-values."""

from __future__ import annotations

import io
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from report import Peer, table
from sklearn.feature_selection import chi2, f_classif, f_regression, r_regression

from service.algorithms import METHODS
from service.algorithms.labels import labelled
from service.algorithms.targets import TargetRows
from service.algorithms.univariate import P_VALUES_FIELD
from suite.context import NPZ, SEED, Context
from tests.support.api import npz_labelled

#: Classes of the labels, and rows per chunk (in-process and over HTTP).
CLASSES = 10
CHUNK_ROWS = 10_000
#: The rows sent over HTTP (a share of the in-process stream: the rate, not the total, counts).
HTTP_CHUNKS = 10


def _labelled(rows: np.ndarray, labels: np.ndarray) -> Any:
    return labelled(rows, labels.tolist())


def difference(found: np.ndarray, exact: np.ndarray) -> float:
    """The largest relative difference where both are finite and not zero."""
    both = np.isfinite(found) & np.isfinite(exact) & (exact != 0)
    return float(np.max(np.abs(found[both] - exact[both]) / np.abs(exact[both])))


def npz_targets(rows: np.ndarray, targets: np.ndarray) -> bytes:
    """Rows with a target as numpy.savez writes them."""
    buffer = io.BytesIO()
    np.savez(buffer, rows=rows, targets=targets)
    return buffer.getvalue()


def abs_r(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's |r| (what Sift ranks by) and the F-test's p-values."""
    return np.abs(r_regression(x, y)), f_regression(x, y)[1]


@dataclass(frozen=True)
class Case:
    """A method, its scikit-learn reference and the chunks of its kind."""

    name: str
    reference: Callable[..., Any]
    reference_name: str
    chunk: Callable[[np.ndarray, np.ndarray], Any]
    body: Callable[[np.ndarray, np.ndarray], bytes]
    side: str


def bench_univariate(ctx: Context) -> None:
    rows, m = 10 * ctx.sizes.variance_rows, ctx.sizes.variance_features
    rng = np.random.default_rng([SEED, rows, m])
    y = rng.integers(0, CLASSES, rows)
    # Counts for chi2 (Poisson, with a class effect on a third of the features), and a target
    # of a tenth of them with noise for the regression tests.
    effect = np.where(np.arange(m) < m // 3, 1.0, 0.0)
    x = rng.poisson(2.0 + effect * (y[:, None] % 3)).astype(np.float64)
    target = x[:, : m // 10] @ rng.standard_normal(m // 10) + 3 * rng.standard_normal(rows)
    starts = range(0, rows, CHUNK_ROWS)
    lines, peers = [], []
    cases = (
        Case("anova", f_classif, "f_classif", _labelled, npz_labelled, "labels"),
        Case("chi2", chi2, "chi2", _labelled, npz_labelled, "labels"),
        Case("f_regression", f_regression, "f_regression", TargetRows, npz_targets, "target"),
        Case("correlation", abs_r, "r_regression", TargetRows, npz_targets, "target"),
    )
    for case in cases:
        name = case.name
        side = y if case.side == "labels" else target
        chunks = [case.chunk(x[i : i + CHUNK_ROWS], side[i : i + CHUNK_ROWS]) for i in starts]
        method = METHODS[name]
        params = method.resolve_params({}, m)
        started = time.perf_counter()
        state = method.initial_state(params)
        for chunk in chunks:
            state = method.update(state, params, chunk)
        local = rows / (time.perf_counter() - started)
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores, p_values = case.reference(x, side)
        batch = rows / (time.perf_counter() - started)
        error = max(
            difference(np.asarray(state[method.score_field]), scores),
            difference(np.asarray(state[P_VALUES_FIELD]), p_values),
        )
        with ctx.stack() as s:
            s.create({"name": name, "method": name, "n_features": m})
            sent = list(starts)[:HTTP_CHUNKS]
            bodies = [case.body(x[i : i + CHUNK_ROWS], side[i : i + CHUNK_ROWS]) for i in sent]
            started = time.perf_counter()
            for i, body in enumerate(bodies):
                s.post(f"/v1/selectors/{name}/chunks", body, NPZ, f"{name}-{i}")
            http = min(rows, len(sent) * CHUNK_ROWS) / (time.perf_counter() - started)
        lines.append(
            [f"`{name}`", f"{local:,.0f}", f"{http:,.0f}", f"{batch:,.0f}", f"{error:.1e}"]
        )
        what = f"{CLASSES} classes" if case.side == "labels" else "a numeric target"
        peers.append(
            Peer(
                f"{name}, {m} features, {what}, {CHUNK_ROWS:,}-row chunks",
                "rows/s",
                local,
                http,
                f"scikit-learn {case.reference_name} (batch)",
                batch,
                f"largest relative difference of scores and p-values: {error:.1e}",
            )
        )
    ctx.report.section(
        f"univariate: {rows:,} rows x {m} count features, {CLASSES} classes or a numeric target, "
        f"{CHUNK_ROWS:,}-row chunks (HTTP: the first {HTTP_CHUNKS} as waited `.npz` chunks)",
        table(
            [
                "method",
                "in-process rows/s",
                "HTTP rows/s",
                "scikit-learn rows/s (whole array)",
                "largest relative difference",
            ],
            lines,
        ),
    )
    for peer in peers:
        ctx.report.peer(peer)
