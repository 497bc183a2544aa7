"""``variance``: Sift's ``variance`` method in-process and over HTTP against River's
``stats.Var`` per feature, errors against numpy."""

from __future__ import annotations

import time

import numpy as np
from report import Peer, table

from service.algorithms.variance import Variance
from suite.context import NPY, SEED, Context
from tests.support.api import npy_bytes


def river_variances(x: np.ndarray) -> tuple[np.ndarray, float] | None:
    """River's ``stats.Var`` (ddof 1) per feature over the rows of ``x``, one value at a time
    as River takes them: the variances and the seconds; None when River is not installed."""
    try:
        from river import stats
    except ImportError:
        return None
    as_lists = x.tolist()  # River takes Python numbers: converted before the clock starts
    started = time.perf_counter()
    variances = [stats.Var(ddof=1) for _ in range(x.shape[1])]
    for row in as_lists:
        for var, value in zip(variances, row, strict=True):
            var.update(value)
    seconds = time.perf_counter() - started
    return np.array([var.get() for var in variances]), seconds


def bench_variance(ctx: Context) -> None:
    sizes = ctx.sizes
    rows, m = sizes.variance_rows, sizes.variance_features
    rng = np.random.default_rng([SEED, rows, m])
    x = rng.standard_normal((rows, m)) * 10.0 ** rng.uniform(-2, 2, m) + rng.uniform(-5, 5, m)
    chunks = [x[s : s + 500] for s in range(0, rows, 500)]

    method = Variance()
    params = method.resolve_params({"ddof": 1}, m)
    started = time.perf_counter()
    state = method.initial_state(params)
    for chunk in chunks:
        state = method.update(state, params, chunk)
    local_seconds = time.perf_counter() - started
    ours = method.weights(state, params)

    with ctx.stack() as s:
        name = "variance"
        s.create({"name": name, "method": "variance", "n_features": m, "params": {"ddof": 1}})
        started = time.perf_counter()
        for i, chunk in enumerate(chunks):
            s.post(f"/v1/selectors/{name}/chunks", npy_bytes(chunk), NPY, f"{name}-{i}")
        http_seconds = time.perf_counter() - started
        served = np.asarray(s.http.get(f"/v1/selectors/{name}/weights").json()["weights"])
    river = river_variances(x)
    exact = x.var(axis=0, ddof=1)

    def error(found: np.ndarray) -> str:
        return f"{float(np.max(np.abs(found - exact) / exact)):.1e}"

    lines = [
        ["Sift `variance` in-process", f"{rows / local_seconds:,.0f}", error(ours)],
        ["Sift `variance` over HTTP (`.npy`)", f"{rows / http_seconds:,.0f}", error(served)],
    ]
    if river is None:
        lines.append(["River `stats.Var` per feature", "not installed", "-"])
    else:
        lines.append(["River `stats.Var` per feature", f"{rows / river[1]:,.0f}", error(river[0])])
    ctx.report.section(
        f"variance: {rows:,} rows x {m} features in 500-row chunks, ddof = 1",
        table(["", "rows/s", "max relative error vs numpy"], lines),
        *(["River is not installed: `pip install -e '.[bench]'`."] if river is None else []),
    )
    if river is not None:
        ctx.report.peer(
            Peer(
                f"variance, {m} dense features, 500-row chunks",
                "rows/s",
                rows / local_seconds,
                rows / http_seconds,
                "River stats.Var per feature",
                rows / river[1],
                f"max relative error vs numpy: Sift {error(ours)}, River {error(river[0])}",
            )
        )
