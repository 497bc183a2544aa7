"""``omvfs``: ``OMVFS.update`` per 200-row chunk of the six UCI mfeat views (in-process), and a
digest of the rankings compared with the previous report's."""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any

import numpy as np
from report import table

from service.algorithms.omvfs import OMVFS
from suite.context import Context
from tests.support.datasets import load_uci_multifeature


def shown_param(value: Any) -> str:
    """A parameter as the report shows it: a per-view map with one value for all as that one."""
    if isinstance(value, dict) and len(set(map(str, value.values()))) == 1:
        value = next(iter(value.values()))
    return json.dumps(value, sort_keys=True)


OMVFS_DIGEST = re.compile(r"omvfs rankings digest `(\w+)` \((.*?)\)")


def bench_omvfs(ctx: Context) -> None:
    sizes = ctx.sizes
    # All six views, each shifted to be nonnegative (the factorisation needs it; kar has some
    # negative values): the heaviest input of the published sets.
    views = {name: x - x.min(axis=0) for name, x in load_uci_multifeature()[0].items()}
    dims = {name: x.shape[1] for name, x in views.items()}
    order = np.random.default_rng(0).permutation(next(iter(views.values())).shape[0])
    rows = np.hstack(list(views.values()))[order]
    method = OMVFS()
    params = method.resolve_params(
        {"views": dims, "n_clusters": 10, **sizes.omvfs_params}, rows.shape[1]
    )
    state = method.initial_state(params)
    seconds = []
    iterations = []
    for start in range(0, 200 * sizes.omvfs_chunks, 200):
        started = time.perf_counter()
        state = method.update(state, params, rows[start : start + 200])
        seconds.append(time.perf_counter() - started)
        iterations.append(int(np.asarray(state["last_iterations"]).item()))
        print(f"  omvfs chunk {len(seconds)}: {seconds[-1]:.2f} s", flush=True)
    bounds = np.cumsum([0, *dims.values()])
    weights = {
        view: np.asarray(state["weights"])[bounds[i] : bounds[i + 1]] for i, view in enumerate(dims)
    }
    tops = {view: np.argsort(-w, kind="stable")[:20].tolist() for view, w in weights.items()}
    digest = hashlib.sha256(json.dumps(tops, sort_keys=True).encode()).hexdigest()[:12]
    # The resolved parameters, not "defaults": a changed default is a change of settings, and
    # rankings are only compared between runs with the same ones.
    settings = f"{sizes.omvfs_chunks} chunks, " + ", ".join(
        f"{key}={shown_param(value)}"
        for key, value in sorted(params.as_params().items())
        if key != "views"
    )
    previous = OMVFS_DIGEST.search(ctx.previous_report)
    if previous is None or previous.group(2) != settings:
        compared = "no earlier report at the output path with the same settings to compare"
        same = True
    else:
        same = previous.group(1) == digest
        compared = "same as the earlier report" if same else "DIFFERENT from the earlier report"
    per_chunk = float(np.mean(seconds))
    ctx.report.section(
        "omvfs: `OMVFS.update` on 200-row chunks of the six UCI mfeat views (in-process)",
        table(
            ["chunks", "mean s per chunk", "p50 / max s", "iterations per chunk"],
            [
                [
                    f"{len(seconds)}",
                    f"{per_chunk:.2f}",
                    f"{np.median(seconds):.2f} / {max(seconds):.2f}",
                    f"{np.mean(iterations):.0f}",
                ]
            ],
        ),
        "Top 5 per view at the end: "
        + "; ".join(f"{view} {top[:5]}" for view, top in tops.items())
        + ".",
        f"omvfs rankings digest `{digest}` ({settings}): the top 20 of every view; {compared}.",
    )
    ctx.report.figure(
        "omvfs",
        f"{per_chunk:.2f} s per chunk (rankings digest {digest}, {compared})",
        per_chunk <= 0.3 and same,
    )
