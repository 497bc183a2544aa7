"""``univariate``: Sift's ``anova`` and ``chi2`` in-process and over HTTP against scikit-learn's
``f_classif`` and ``chi2`` on the whole array (the peer: batch, in-process), with the largest
relative difference of the scores and p-values."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from report import Peer, table
from sklearn.feature_selection import chi2, f_classif

from service.algorithms import METHODS
from service.algorithms.labels import labelled
from service.algorithms.univariate import P_VALUES_FIELD
from suite.context import NPZ, SEED, Context
from tests.support.api import npz_labelled

#: Classes of the labels, and rows per chunk (in-process and over HTTP).
CLASSES = 10
CHUNK_ROWS = 10_000
#: The rows sent over HTTP (a share of the in-process stream: the rate, not the total, counts).
HTTP_CHUNKS = 10


def difference(found: np.ndarray, exact: np.ndarray) -> float:
    """The largest relative difference where both are finite and not zero."""
    both = np.isfinite(found) & np.isfinite(exact) & (exact != 0)
    return float(np.max(np.abs(found[both] - exact[both]) / np.abs(exact[both])))


def bench_univariate(ctx: Context) -> None:
    rows, m = 10 * ctx.sizes.variance_rows, ctx.sizes.variance_features
    rng = np.random.default_rng([SEED, rows, m])
    y = rng.integers(0, CLASSES, rows)
    # Counts for chi2 (Poisson, with a class effect on a third of the features).
    effect = np.where(np.arange(m) < m // 3, 1.0, 0.0)
    x = rng.poisson(2.0 + effect * (y[:, None] % 3)).astype(np.float64)
    starts = range(0, rows, CHUNK_ROWS)
    chunks = [labelled(x[s : s + CHUNK_ROWS], y[s : s + CHUNK_ROWS].tolist()) for s in starts]
    lines, peers = [], []
    references: dict[str, Callable[..., Any]] = {"anova": f_classif, "chi2": chi2}
    for name, reference in references.items():
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
            scores, p_values = reference(x, y)
        batch = rows / (time.perf_counter() - started)
        error = max(
            difference(np.asarray(state[method.score_field]), scores),
            difference(np.asarray(state[P_VALUES_FIELD]), p_values),
        )
        with ctx.stack() as s:
            s.create({"name": name, "method": name, "n_features": m})
            sent = list(starts)[:HTTP_CHUNKS]
            bodies = [npz_labelled(x[i : i + CHUNK_ROWS], y[i : i + CHUNK_ROWS]) for i in sent]
            started = time.perf_counter()
            for i, body in enumerate(bodies):
                s.post(f"/v1/selectors/{name}/chunks", body, NPZ, f"{name}-{i}")
            http = min(rows, len(sent) * CHUNK_ROWS) / (time.perf_counter() - started)
        lines.append(
            [f"`{name}`", f"{local:,.0f}", f"{http:,.0f}", f"{batch:,.0f}", f"{error:.1e}"]
        )
        peers.append(
            Peer(
                f"{name}, {m} features, {CLASSES} classes, {CHUNK_ROWS:,}-row chunks",
                "rows/s",
                local,
                http,
                f"scikit-learn {reference.__name__} (batch)",
                batch,
                f"largest relative difference of scores and p-values: {error:.1e}",
            )
        )
    ctx.report.section(
        f"univariate: {rows:,} rows x {m} count features, {CLASSES} classes, {CHUNK_ROWS:,}-row "
        f"labelled chunks (HTTP: the first {HTTP_CHUNKS} as waited `.npz` chunks)",
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
