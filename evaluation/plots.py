"""PNG plots next to the tables (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt


@dataclass
class Panel:
    """One subplot: named series over a shared x axis, and horizontal reference lines."""

    title: str
    xlabel: str
    ylabel: str
    series: dict[str, tuple[Sequence[float], Sequence[float]]] = field(default_factory=dict)
    lines: dict[str, float] = field(default_factory=dict)
    logx: bool = False
    logy: bool = False


#: Sift's methods (and series named "Sift ...") drawn solid and thick, peers thinner, baselines
#: dashed.
_BASELINES = ("random", "all features", "variance", "static")


def _style(name: str) -> dict[str, object]:
    lowered = name.lower()
    if any(word in lowered for word in _BASELINES):
        return {"linestyle": "--", "linewidth": 1.2}
    if lowered.startswith("sift ") or any(
        word in lowered for word in ("fsds", "ofs", "omvfs", "ocfs", "ioc", "iqrp")
    ):
        return {"linestyle": "-", "linewidth": 2.2, "marker": "o", "markersize": 4}
    return {"linestyle": "-", "linewidth": 1.2, "marker": ".", "markersize": 5}


def grid(path: Path, panels: Sequence[Panel], title: str, columns: int = 3) -> Path:
    """Panels in a grid with one legend per panel, saved as ``path``."""
    count = max(len(panels), 1)
    cols = min(columns, count)
    rows = math.ceil(count / cols)
    figure, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
    for index, panel in enumerate(panels):
        ax = axes[index // cols][index % cols]
        for name, (xs, ys) in panel.series.items():
            ax.plot(list(xs), list(ys), label=name, **_style(name))
        for name, value in panel.lines.items():
            ax.axhline(value, color="grey", linestyle=":", linewidth=1.2, label=name)
        if panel.logx:
            ax.set_xscale("log")
        if panel.logy:
            ax.set_yscale("log")
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(panel.xlabel, fontsize=9)
        ax.set_ylabel(panel.ylabel, fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for index in range(count, rows * cols):
        axes[index // cols][index % cols].axis("off")
    figure.suptitle(title, fontsize=12)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
