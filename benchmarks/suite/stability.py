"""``stability``: what the resamples behind ``GET .../top``'s stability cost each row method
(bounded at two resamples by at most twice the state and the update time of the method
without them), in-process, with and without them in the same run, chunk by chunk in turn:
update time per chunk, the same with the subsamples' scores every version computes (a derived
subsample is computed there), the state's bytes, the bytes each version publishes (what a
commit writes), and the time a ``top`` answer takes to assess the published resample ranks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from report import table

from service.algorithms import METHODS
from service.algorithms.labels import labelled
from service.algorithms.stability import resampled_ranking
from service.applier import assess_resamples, publish, resolved_params, state_sizes
from service.store.records import SelectorMeta
from suite.context import SEED, Context


def _dense(rng: np.random.Generator, rows: int, m: int) -> np.ndarray:
    scales = np.linspace(3.0, 0.5, m)
    return rng.standard_normal((rows, m)) * scales


def _labelled(rng: np.random.Generator, rows: int, m: int) -> Any:
    x = _dense(rng, rows, m)
    labels = rng.integers(0, 10, rows)
    x[:, :10] += labels[:, None] == np.arange(10)  # ten features carry the class
    return labelled(x, [int(v) for v in labels])


def _views(rng: np.random.Generator, rows: int, m: int) -> np.ndarray:
    dense: np.ndarray = np.abs(_dense(rng, rows, m))
    return dense


#: method -> (params besides resamples, chunk maker, shape of the creation).
CASES: dict[str, tuple[dict[str, Any], Callable[[np.random.Generator, int, int], Any]]] = {
    "variance": ({}, _dense),
    "fsds": ({}, _dense),
    "ocfs": ({}, _labelled),
    "ioc": ({"n_components": 3}, _labelled),
    "omvfs": ({"n_clusters": 5, "max_iter": 30}, _views),
}


def _setup(method_name: str, params: dict[str, Any], m: int) -> tuple[dict[str, Any], Any]:
    method = METHODS[method_name]
    given = dict(params)
    if method.chunk_kind == "views":
        given["views"] = {"a": m // 2, "b": m - m // 2}
    resolved = method.resolve_params(given, m)
    meta = SelectorMeta(
        name="bench",
        method=method_name,
        params=resolved.as_params(),
        created_at=0.0,
        n_features=m,
        views=tuple((v, d) for v, d in given["views"].items()) if "views" in given else None,
    )
    return resolved, meta


#: The resamples compared: none, the default, and more (the second table).
RESAMPLES = (0, 2, 4, 8)


def _runs(
    method_name: str,
    params: dict[str, Any],
    chunks: list[Any],
    m: int,
    resamples: tuple[int, ...] = RESAMPLES,
) -> list[tuple[float, float, int, int, Any, SelectorMeta]]:
    """For each of ``resamples``, each chunk applied to every selector in turn (so that the
    load of the moment weighs on all alike): the mean seconds of an update (after the first;
    the mean, as FSDS's refreshes its subsamples' scores in some updates only), the mean
    seconds of the subsamples' scores after it (what every version reads), state bytes and
    published bytes after the stream, the state and its meta."""
    method = METHODS[method_name]
    runs = [_setup(method_name, {**params, "resamples": k}, m) for k in resamples]
    states = [method.initial_state(resolved) for resolved, _meta in runs]
    seconds: list[list[float]] = [[] for _ in runs]
    scoring: list[list[float]] = [[] for _ in runs]
    for chunk in chunks:
        for i, (resolved, _meta) in enumerate(runs):
            started = time.perf_counter()
            states[i] = method.update(states[i], resolved, chunk)
            seconds[i].append(time.perf_counter() - started)
            started = time.perf_counter()
            method.resample_scores(states[i], resolved)  # type: ignore[attr-defined]
            scoring[i].append(time.perf_counter() - started)
    out = []
    for i, (_resolved, meta) in enumerate(runs):
        resampled, _ = assess_resamples(meta, states[i], 100)
        published = publish(meta, states[i], None, resampled)
        out.append(
            (
                statistics.mean(seconds[i][1:] or seconds[i]),
                statistics.mean(scoring[i][1:] or scoring[i]),
                sum(state_sizes(states[i]).values()),
                sum(len(v) for v in published.values()),
                states[i],
                meta,
            )
        )
    return out


def _cost_row(
    method_name: str, chunk: str, measured: list[tuple[float, float, int, int, Any, SelectorMeta]]
) -> list[str]:
    """One row of the cost table: resamples 2 (``measured[1]``) against 0 (``measured[0]``)."""
    without, with_two = measured[0], measured[1]
    method = METHODS[method_name]
    state, meta = with_two[4], with_two[5]
    scores = np.asarray(method.weights(state, resolved_params(meta)))
    resampled = method.resample_scores(state, resolved_params(meta))  # type: ignore[attr-defined]
    assess_us = float("nan")
    if resampled is not None and not meta.views:
        ranking = resampled_ranking(scores, resampled, 100)
        assert ranking is not None
        started = time.perf_counter()
        for _ in range(200):
            ranking.assess(10)
        assess_us = (time.perf_counter() - started) / 200 * 1e6
    return [
        method_name,
        chunk,
        f"{without[0] * 1e3:.2f}",
        f"{with_two[0] * 1e3:.2f}",
        f"{with_two[0] / without[0]:.2f}",
        f"{with_two[1] * 1e3:.2f}",
        f"{(with_two[0] + with_two[1]) / without[0]:.2f}",
        f"{with_two[2] / without[2]:.2f}",
        f"{with_two[3] / without[3]:.2f}",
        "-" if np.isnan(assess_us) else f"{assess_us:.0f}",
    ]


def bench_stability(ctx: Context) -> None:
    sizes = ctx.sizes
    rows, m, per_chunk = sizes.stability_rows, sizes.stability_features, sizes.stability_chunk_rows
    lines, more = [], []
    for method_name, (params, make) in CASES.items():
        rng = np.random.default_rng([SEED, m, rows])
        chunk_rows = per_chunk if method_name != "omvfs" else min(per_chunk, 200)
        count = rows // chunk_rows if method_name != "omvfs" else max(2, rows // (5 * chunk_rows))
        chunks = [make(rng, chunk_rows, m) for _ in range(count)]
        measured = _runs(method_name, params, chunks, m)
        lines.append(_cost_row(method_name, f"{chunk_rows} x {m}", measured))
        without = measured[0]
        more.append(
            [
                method_name,
                *(
                    f"{(run[0] + run[1]) / without[0]:.2f} / {run[2] / without[2]:.2f}"
                    for run in measured[1:]
                ),
            ]
        )
    wide = sizes.stability_wide_features
    rng = np.random.default_rng([SEED, wide])
    chunks = [_dense(rng, 500, wide) for _ in range(sizes.stability_wide_chunks)]
    lines.append(_cost_row("fsds", f"500 x {wide:,}", _runs("fsds", {}, chunks, wide, (0, 2))))
    ctx.report.section(
        f"stability: the cost of resamples 2 against 0, in-process ({rows:,} rows per method; "
        f"fsds also {sizes.stability_wide_chunks} chunks of 500 x {wide:,})",
        table(
            [
                "method",
                "chunk",
                "update ms (0)",
                "update ms (2)",
                "time x",
                "scores ms (2)",
                "with scores x",
                "state x",
                "published x",
                "top's assessment us",
            ],
            lines,
        ),
        "Mean update per chunk after the first, the two selectors' updates in turn chunk by "
        "chunk; the subsamples' scores every version reads after its update (a derived "
        "subsample is derived there; FSDS keeps them and computes them again in the update once "
        "the rows grew by a tenth), and the update with them against the update without "
        "resamples; the state's array bytes after the stream; the bytes one version publishes "
        "(what each commit writes); the time a `top` answer takes to assess h = 10 from the "
        "published resample ranks. The issue's bound: at most twice the state and the update "
        "time of the method without resamples (x 2; omvfs: plus one copy of its factors, "
        "docs/stability-and-drift.md).",
    )
    ctx.report.section(
        "stability: more resamples, in-process (the same streams)",
        table(["method", *(f"K = {k}: time x / state x" for k in RESAMPLES[1:])], more),
        "The update with the subsamples' scores, and the state's bytes, against the method "
        "without resamples, for K subsamples (`resamples`); each selector updated in turn chunk "
        "by chunk as above.",
    )
