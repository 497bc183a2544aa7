"""One command for every benchmark of Sift's write path: prints each table as it goes
and writes ``BENCHMARKS.md``.

    .venv/bin/python benchmarks/run.py                                  # everything (~10 minutes)
    .venv/bin/python benchmarks/run.py --quick                          # a few minutes
    .venv/bin/python benchmarks/run.py --smoke --output "$(mktemp -d)/B.md"       # seconds (CI)
    .venv/bin/python benchmarks/run.py --only fsds-bytes,takeover --output "$(mktemp -d)/B.md"
    .venv/bin/python benchmarks/run.py --service-root ../before         # another checkout's service

Every HTTP benchmark starts its own redis-server (AOF on, ``appendfsync always``, a temporary
directory, a free port) and its own service process with ``SIFT_REDIS_URL`` pointing at it, so it
can read Redis ``INFO`` (bytes received, memory) and PING Redis from another client every 5 ms
while the service works. Only the HTTP API and ``INFO`` are used, so the same command measures
any version of the write path. In-process figures (the methods without HTTP or Redis, and the
peers: the papers' naive updates, scikit-learn's IncrementalPCA, River's variance statistics,
batch recomputation) always come from this checkout.

Benchmarks (``--only`` takes these names, or the keys of the target rows they measure):

* ``big-fsds``: fsds, m = 20,000 (and 50,000), 500-row sparse ``.npz`` chunks on a long stream:
  Redis bytes per chunk byte, another client's PING, ``GET top?h=100`` while ingesting and
  idle; in-process FSDS, the paper's SVD update and IncrementalPCA on the same chunks;
* ``ofs``: ofs, n = 1000, 32 Gaussian columns per ``.npy`` request: bytes, columns/s over HTTP
  and in-process (decisions compared), the naive per-column pseudo-inverse;
* ``many-clients``: 8 concurrent connections (an asyncio client in a process of its own) posting
  one-row JSON chunks with ``wait=false`` (fsds m = 1000);
* ``fsds-http``: BASEHOCK, 1000-row ``.npz`` chunks, 1 and 4 producers, against in-process;
* ``ocfs-http``: PCMAC (and COIL20), 500-row labelled ``.npz`` chunks, against in-process and a
  batch recomputation of the scores from all rows seen after every chunk;
* ``omvfs``: ``OMVFS.update`` per 200-row chunk of the six UCI mfeat views (in-process);
* ``takeover``: SIGKILL the service while its applier holds a pending chunk, restart, time
  until that chunk is applied;
* ``memory``: service RSS and Redis ``used_memory`` every 100,000 rows over 1,000,000 rows
  (fsds m = 2,000, sparse 1000-row chunks);
* ``variance``: Sift's ``variance`` method against River's ``stats.Var`` per feature;
* ``univariate``: ``anova`` and ``chi2`` in-process and over HTTP against scikit-learn's
  ``f_classif`` and ``chi2`` on the whole array, with their largest relative difference;
* ``streams``: one push to a stream with fsds, variance and ocfs attached against three direct
  pushes of the same labelled chunks: client bytes, Redis bytes and commands, rows/s.
* ``big-chunk``: a waited dense chunk of 500 rows x 1024 features (4 MB), ocfs ``.npz`` and
  variance ``.npy``, against the floor app storing the same body once; Redis bytes per ocfs
  chunk byte.
* ``sources``: a Redis stream of 100,000 entries with 100 named features read by a source
  into ``variance`` (and the same rows from NATS JetStream and a 4-partition Kafka topic),
  against one-row POSTs and the method in-process (rows/s applied).
* ``stability``: what the resamples behind ``top``'s stability cost each row method (update
  time, state and published bytes, with 2 resamples against none), in-process.

The benchmarks themselves are in ``benchmarks/suite/`` (one module each, and ``suite.context``
for the sizes and the context they share); this script is the runner: it lists them
(``BENCHMARKS``), runs the selected ones, and writes the report.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import threadpoolctl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# benchmarks/ is this script's directory, hence on sys.path: the existing benchmarks' functions
# are reused as they are, and the benchmarks of this command are the package ``suite``.
from live import Latencies
from report import (
    ROW_KEYS,
    Machine,
    Report,
    command_line,
    git_revision,
    load_average,
    now_utc,
    table,
)
from suite.big_chunk import bench_big_chunk
from suite.clients import bench_many_clients
from suite.context import FULL, QUICK, REPO_ROOT, SMOKE, Context
from suite.fsds import bench_big_fsds, bench_fsds_http
from suite.idle import bench_idle
from suite.labelled import bench_ocfs
from suite.memory import bench_memory
from suite.ofs import bench_ofs
from suite.omvfs import bench_omvfs
from suite.request_path import bench_request_path
from suite.sources import bench_sources
from suite.stability import bench_stability
from suite.streams import bench_streams
from suite.takeover import bench_takeover
from suite.univariate import bench_univariate
from suite.variance import bench_variance

from service.algorithms import parallel
from service.config import default_update_threads
from service.store.embedded import find_redis_server


def ping_line(label: str, pings: Latencies) -> list[str]:
    return [
        label,
        f"{pings.ms(50):.2f}",
        f"{pings.ms(99):.1f}",
        f"{pings.max_ms:.1f}",
        f"{len(pings)}",
    ]


def shown_checkout(root: Path) -> str:
    """A checkout as the report names it: no path of this machine (the report is committed)."""
    if root == REPO_ROOT:
        return "this checkout"
    return f"another checkout (`--service-root {root.name}`)"


# -- the command ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Benchmark:
    run: Callable[[Context], None]
    rows: tuple[str, ...]


BENCHMARKS: dict[str, Benchmark] = {
    "big-fsds": Benchmark(bench_big_fsds, ("fsds-bytes", "ping", "top-latency")),
    "ofs": Benchmark(bench_ofs, ("ofs-bytes", "ofs-http")),
    "many-clients": Benchmark(bench_many_clients, ("many-clients",)),
    "fsds-http": Benchmark(bench_fsds_http, ("fsds-http",)),
    "ocfs-http": Benchmark(bench_ocfs, ("ocfs-http",)),
    "omvfs": Benchmark(bench_omvfs, ("omvfs",)),
    "takeover": Benchmark(bench_takeover, ("takeover",)),
    "memory": Benchmark(bench_memory, ("memory",)),
    "variance": Benchmark(bench_variance, ()),
    "univariate": Benchmark(bench_univariate, ()),
    "stability": Benchmark(bench_stability, ()),
    "request-path": Benchmark(
        bench_request_path,
        ("path-nowait", "path-wait", "path-top", "path-workers", "path-replicas"),
    ),
    "idle": Benchmark(bench_idle, ("idle",)),
    "big-chunk": Benchmark(bench_big_chunk, ("big-chunk",)),
    "streams": Benchmark(bench_streams, ("streams",)),
    "sources": Benchmark(bench_sources, ("sources", "sources-kafka")),
}


def selected(only: str | None) -> list[str]:
    """The benchmarks to run for ``--only`` (benchmark names or target-row keys)."""
    if not only:
        return list(BENCHMARKS)
    wanted = set()
    for name in filter(None, (part.strip() for part in only.split(","))):
        found = [key for key, bench in BENCHMARKS.items() if name == key or name in bench.rows]
        if not found:
            choices = ", ".join([*BENCHMARKS, *(k for k in ROW_KEYS if k not in BENCHMARKS)])
            raise SystemExit(f"--only: unknown name {name!r}; choose from {choices}")
        wanted.update(found)
    return [key for key in BENCHMARKS if key in wanted]


def failure(ctx: Context, name: str, exc: Exception) -> None:
    """A benchmark that raised: its rows say so (MISSED), and a section keeps the error."""
    why = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    ctx.report.section(f"{name}: FAILED", [why])
    for key in BENCHMARKS[name].rows:
        if key not in ctx.report.figures:
            ctx.report.figure(key, f"failed: {why}", False)
    if name in ("big-fsds", "ofs"):  # the benchmarks whose PINGs the ping row takes
        ctx.stalled[name] = why


def ping_figure(ctx: Context) -> None:
    """The PING row: the worst of every benchmark whose service held a big state."""
    pings = ctx.big_state_pings
    if not pings:
        return
    ctx.report.section(
        "PING from another Redis client (every 5 ms) while the service held a big state",
        table(
            ["while", "p50 ms", "p99 ms", "max ms", "PINGs"],
            [ping_line(label, latencies) for label, latencies in pings.items()],
        ),
    )
    unmeasured = "".join(f"; {label}: not measured (see details)" for label in ctx.stalled)
    p99 = max(latencies.ms(99) for latencies in pings.values())
    worst = max(latencies.max_ms for latencies in pings.values())
    ctx.report.figure(
        "ping",
        f"p99 {p99:.1f} ms, max {worst:.1f} ms (worst of: {', '.join(pings)}){unmeasured}",
        p99 < 10.0 and worst < 50.0,
    )


#: The heading of the report's last section, kept by hand: the figures of the standalone scripts
#: and of earlier runs, carried over from the previous report whenever the file is written again.
EARLIER = "\n## Earlier figures\n"


def earlier_figures(previous: str) -> str:
    """The hand-kept section of the previous report (from ``EARLIER`` to the end), or nothing."""
    at = previous.find(EARLIER)
    return previous[at:] if at >= 0 else ""


def markdown(ctx: Context, machine: Machine, names: list[str], started: float) -> str:
    sizes = ctx.sizes
    minutes, seconds = divmod(int(time.monotonic() - started), 60)
    lines = [
        "# Benchmarks of the write path and the request path",
        "",
        "Written by `benchmarks/run.py`; rerun it rather than editing this "
        'file (all but its last section, "Earlier figures", kept by hand). How to read it and '
        'how long it takes: `benchmarks/README.md`, section "One command: run.py".',
        "",
        f"- date: {now_utc()}; mode: **{sizes.mode}**; benchmarks: {', '.join(names)}; "
        f"took {minutes} min {seconds} s",
        f"- command: `{command_line()}`",
        f"- service: `python -m service serve` from {shown_checkout(ctx.service_root)} (git "
        f"{git_revision(ctx.service_root)}); in-process figures and peers from this checkout "
        f"(git {git_revision(REPO_ROOT)})",
        "- Redis: its own redis-server per benchmark, AOF on, `appendfsync always`, a "
        "temporary directory, a free port; the service reaches it through `SIFT_REDIS_URL`",
        *machine.lines(),
        "",
        "## Targets",
        "",
        *ctx.report.target_lines(),
        "",
        "## Peers, same run",
        "",
        *ctx.report.peer_lines(),
        "",
        "## Details",
    ]
    for title, body in ctx.report.sections:
        lines += ["", f"### {title}", "", *body]
    return "\n".join(lines) + "\n"


def stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smaller sizes: a few minutes")
    mode.add_argument(
        "--smoke", action="store_true", help="tiny sizes, seconds (CI); needs --output"
    )
    parser.add_argument(
        "--only", help="comma-separated benchmarks or target rows, e.g. fsds-bytes,takeover"
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="where to write the report (default: BENCHMARKS.md at the repository root, for "
        "complete runs; partial and smoke runs write only when given one)",
    )
    parser.add_argument(
        "--service-root",
        type=Path,
        default=REPO_ROOT,
        help="the checkout whose service runs (PYTHONPATH and cwd of `python -m service serve`)",
    )
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="BLAS threads for this process and the services (default 1, the service's "
        "SIFT_BLAS_THREADS default, so that in-process and HTTP figures compare like for like)",
    )
    parser.add_argument(
        "--update-threads",
        type=int,
        default=None,
        help="threads of one update's parts for this process and the services (default: the "
        "service's SIFT_UPDATE_THREADS default, the cores over the BLAS threads)",
    )
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so every redis-server and service started is stopped.
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    if args.smoke and args.output is None:
        parser.error("--smoke writes only to an explicit --output")
    sizes = SMOKE if args.smoke else QUICK if args.quick else FULL
    names = selected(args.only)
    output: Path | None = args.output
    if output is None and not args.only:
        output = REPO_ROOT / "BENCHMARKS.md"
    service_root = args.service_root.resolve()
    if not (service_root / "service" / "__main__.py").is_file():
        parser.error(f"--service-root {service_root} holds no service package")

    threadpoolctl.threadpool_limits(args.blas_threads)
    update_threads = args.update_threads or default_update_threads(args.blas_threads)
    parallel.configure(update_threads)
    env = {"SIFT_BLAS_THREADS": str(args.blas_threads), "SIFT_UPDATE_THREADS": str(update_threads)}
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[variable] = str(args.blas_threads)
    previous = output.read_text() if output is not None and output.is_file() else ""
    ctx = Context(sizes, service_root, env, Report(), previous)
    machine = Machine.read(find_redis_server())
    started = time.monotonic()
    print(f"{now_utc()}: {sizes.mode} run of {', '.join(names)}; service from {service_root}")
    print("\n".join(machine.lines()), flush=True)
    for name in names:
        print(f"\n== {name} ==", flush=True)
        bench_started = time.monotonic()
        try:
            BENCHMARKS[name].run(ctx)
        except Exception as exc:  # recorded in its rows; the other benchmarks still run
            traceback.print_exc()
            failure(ctx, name, exc)
        print(f"({name}: {time.monotonic() - bench_started:.0f} s)", flush=True)
    ping_figure(ctx)
    machine.load_after = load_average()

    print("\n## Targets\n")
    print("\n".join(ctx.report.target_lines()))
    print("\n## Peers, same run\n")
    print("\n".join(ctx.report.peer_lines()))
    print(f"\nload average after: {machine.load_after}")
    if output is not None:
        report = markdown(ctx, machine, names, started).rstrip("\n") + "\n"
        output.write_text(report + earlier_figures(ctx.previous_report))
        print(f"written: {output}")
    else:
        print("no --output for a partial run: nothing written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
