"""What ``benchmarks/run.py`` measured, printed as it comes and written as ``BENCHMARKS.md``.

* ``ROWS``: the target tables (the write path, the request path, streams, sources), one
  ``Row`` per line with the figure it is compared with ("now") and its target; ``--only`` takes
  these keys;
* ``Report``: each row's measured figure with OK/MISSED, the peers measured in the same run, and
  one section of detail per benchmark;
* ``machine``: what the numbers depend on (CPU, cores, memory, load, versions, BLAS threads).
"""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import numpy as np
import threadpoolctl


@dataclass(frozen=True)
class Row:
    """One line of the issue's target table."""

    key: str
    what: str
    now: str
    target: str


ROWS: tuple[Row, ...] = (
    Row(
        "fsds-bytes",
        "Redis bytes received per chunk / chunk bytes, fsds m = 20,000 sparse",
        "78x",
        "<= 3x on a long stream",
    ),
    Row("ofs-bytes", "the same for ofs n = 1000, 32 columns per request", "56x", "<= 3x"),
    Row(
        "ping",
        "another client's PING during big-state work",
        "107-288 ms max (504-1,147 ms at m = 50,000)",
        "< 10 ms p99, < 50 ms max",
    ),
    Row(
        "top-latency",
        "`GET top?h=100` p99 while ingesting, m = 20,000-50,000",
        "107-287 ms (19-27 ms idle)",
        "<= 10 ms",
    ),
    Row(
        "many-clients",
        "8 clients, one-row chunks, `wait=false`",
        "201-434 rows/s",
        ">= 2,000 rows/s, POST p99 <= 20 ms",
    ),
    Row(
        "fsds-http",
        "fsds HTTP / in-process, 1000-row `.npz`, 1 producer / 4 producers",
        "48-62% / 63-78%",
        ">= 85% / >= 95%",
    ),
    Row(
        "ofs-http",
        "ofs HTTP / in-process, n = 1000, 32 columns per request",
        "14-20%",
        ">= 60%",
    ),
    Row(
        "ocfs-http",
        "ocfs over HTTP, 500-row chunks",
        "6% of in-process (~15-20 ms per chunk floor)",
        ">= 50% of in-process",
    ),
    Row(
        "omvfs",
        "omvfs per chunk (200 rows, 6 mfeat views)",
        "~1.2 s",
        "<= 0.3 s, same rankings",
    ),
    Row(
        "takeover",
        "takeover after SIGKILL (replay)",
        "lease-bound",
        "<= 5 s at the default checkpoint interval",
    ),
    Row(
        "memory",
        "service RSS and Redis memory over 1,000,000 rows (fsds m = 2,000)",
        "not measured",
        "flat within 10%",
    ),
)
#: The request path: one-row chunks and rankings against the floor app of the
#: same stack (``bench_request_path.py``), measured with wrk; the idle cost (``bench_idle.py``).
ROWS += (
    Row(
        "path-nowait",
        "one-row POST `wait=false` (fsds m = 1000, 8 connections) / floor app",
        "685-830 of 2,700 req/s (0.25-0.31), p99 22-33 ms",
        ">= 0.8 of the floor (>= 0.6 at the least), p99 <= 20 ms, applied within 1 s",
    ),
    Row(
        "path-wait",
        "one-row POST `wait=true` / floor app",
        "408-473 of 2,700 req/s (0.15-0.18)",
        ">= 0.5 of the floor",
    ),
    Row(
        "path-top",
        "`GET top?h=10` / the floor's constant GET",
        "1,225 of 6,300 req/s (0.19)",
        ">= 0.6 of the floor",
    ),
    Row(
        "path-workers",
        "`sift serve --workers 2`, one-row POST `wait=false`, applied",
        "-",
        ">= 2,000 req/s applied",
    ),
    Row(
        "path-replicas",
        "two replicas on one Redis, `wait=true`, POST p99",
        "820-990 ms",
        "<= 50 ms",
    ),
    Row(
        "idle",
        "one process's idle CPU with many idle selectors; a forgotten chunk picked up",
        "~17% of a core at 10,000 selectors",
        "< 2% of a core at 100,000; picked up within 1 s",
    ),
)
#: The write path: a large chunk against the floor storing it once.
ROWS += (
    Row(
        "big-chunk",
        "waited 500-row x 1024-feature chunk (ocfs, anova, chi2 `.npz` with labels; f_regression "
        "`.npz` with targets; variance `.npy`) / the floor storing the same body once; Redis "
        "bytes received / ocfs chunk bytes",
        "2.61x, 2.27x; 1.17x",
        "<= 1.5x (goal 1.0x); <= 0.5x",
    ),
    Row(
        "many-clients-wrk",
        "8 wrk connections, one-row JSON chunks (fsds m = 1000), `wait=false`, applied "
        "(the many-clients row's producers are Python clients that measure themselves)",
        "317 rows/s (many-clients)",
        ">= 2,000 rows/s applied",
    ),
)
#: Streams (``suite/streams.py``).
ROWS += (
    Row(
        "streams",
        "one push to a stream with fsds, variance and ocfs attached / three direct pushes",
        "3 pushes: 3x the client bytes, 3 logs, 3 idempotency records",
        "client bytes < 0.5x; Redis bytes received < 1x (the chunk logged once; every "
        "selector still commits and checkpoints its own state)",
    ),
)
#: Sources (``suite/sources.py``).
ROWS += (
    Row(
        "sources",
        "100,000 entries of 100 named features in a Redis stream, consumed by one process "
        "into `variance`, applied",
        "one-row POSTs: ~1,200-2,400 rows/s",
        ">= 40,000 rows/s from a Redis stream and from NATS",
    ),
    Row(
        "sources-kafka",
        "a 4-partition Kafka topic of 100,000 JSON messages of 100 named features, consumed by "
        "one process into `variance`, applied",
        "no Kafka source",
        ">= 60,000 rows/s (goal 100,000 with `--workers 2`)",
    ),
)
ROW_KEYS = tuple(row.key for row in ROWS)


@dataclass(frozen=True)
class Figure:
    """A row as measured: the text shown and whether it meets the target."""

    text: str
    ok: bool

    @property
    def verdict(self) -> str:
        return "OK" if self.ok else "MISSED"


@dataclass(frozen=True)
class Peer:
    """Sift and a peer on the same workload, in the same unit (rows/s or columns/s)."""

    workload: str
    unit: str
    sift_in_process: float
    sift_http: float | None
    peer: str
    peer_rate: float
    note: str = ""


def table(header: list[str], lines: list[list[str]]) -> list[str]:
    """A markdown table (cells with ``|`` escaped)."""

    def row(cells: list[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    return [row(header), "|" + "---|" * len(header), *(row(cells) for cells in lines)]


def rate(value: float) -> str:
    """A throughput with the precision that means something at its size."""
    if value != value:  # NaN
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


@dataclass
class Report:
    """Everything measured in one run, in the order it was measured."""

    figures: dict[str, Figure] = field(default_factory=dict)
    peers: list[Peer] = field(default_factory=list)
    sections: list[tuple[str, list[str]]] = field(default_factory=list)

    def figure(self, key: str, text: str, ok: bool) -> None:
        if key not in ROW_KEYS:
            raise KeyError(f"no row {key!r} in the target table")
        self.figures[key] = Figure(text, ok)
        row = next(r for r in ROWS if r.key == key)
        print(f"  => {key}: {text}  [target {row.target}: {self.figures[key].verdict}]")

    def peer(self, peer: Peer) -> None:
        self.peers.append(peer)
        http = f", HTTP {rate(peer.sift_http)}" if peer.sift_http is not None else ""
        print(
            f"  peer {peer.workload}: Sift in-process {rate(peer.sift_in_process)}{http} "
            f"{peer.unit}; {peer.peer} {rate(peer.peer_rate)} {peer.unit}"
        )

    def section(self, title: str, lines: list[str], *notes: str) -> None:
        """A benchmark's details: a table, then paragraphs of notes."""
        body = [*lines]
        for note in notes:
            body += ["", note]
        self.sections.append((title, body))
        print(f"\n### {title}\n")
        print("\n".join(body), flush=True)

    def target_lines(self) -> list[str]:
        lines = []
        for row in ROWS:
            found = self.figures.get(row.key)
            measured, verdict = (found.text, found.verdict) if found else ("not run", "-")
            lines.append([row.key, row.what, row.now, measured, row.target, verdict])
        return table(["row", "what", "issue (now)", "measured", "target", "verdict"], lines)

    def peer_lines(self) -> list[str]:
        lines = []
        for p in self.peers:
            http = rate(p.sift_http) if p.sift_http is not None else "-"
            versus = p.sift_in_process / p.peer_rate if p.peer_rate > 0 else float("nan")
            http_versus = (
                f"{p.sift_http / p.peer_rate:.2f}x"
                if p.sift_http is not None and p.peer_rate > 0
                else "-"
            )
            lines.append(
                [
                    p.workload,
                    p.unit,
                    rate(p.sift_in_process),
                    http,
                    p.peer,
                    rate(p.peer_rate),
                    f"{versus:.2f}x",
                    http_versus,
                    p.note,
                ]
            )
        return table(
            [
                "workload",
                "unit",
                "Sift in-process",
                "Sift over HTTP",
                "peer",
                "peer",
                "in-process / peer",
                "HTTP / peer",
                "note",
            ],
            lines,
        )


# -- the machine --------------------------------------------------------------------------


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2**20
    return float("nan")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def redis_server_version(executable: str) -> str:
    out = subprocess.run([executable, "--version"], capture_output=True, text=True, check=False)
    return next((part[2:] for part in out.stdout.split() if part.startswith("v=")), out.stdout)


def blas_threads() -> str:
    """The BLAS libraries numpy loaded here, their thread counts and kernels (threadpoolctl)."""
    np.ones(2) @ np.ones(2)  # make sure the BLAS is loaded
    found = [
        f"{info.get('internal_api')} {info.get('version')} "
        f"({info.get('num_threads')} threads, {info.get('architecture', '?')})"
        for info in threadpoolctl.threadpool_info()
        if info.get("user_api") == "blas"
    ]
    variables = ", ".join(
        f"{name}={os.environ.get(name, 'unset')}"
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_CORETYPE")
    )
    return f"{'; '.join(found) or 'none found'} ({variables})"


def git_revision(root: Path) -> str:
    """``<short hash>`` of ``root``'s checkout, marked when it has uncommitted changes."""

    def git(*args: str) -> str:
        out = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
        return out.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "not a git checkout"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{head} + uncommitted changes" if dirty else head


@dataclass
class Machine:
    """What the figures depend on, read at the start (and the load again at the end)."""

    cpu: str
    cores: int
    memory_gib: float
    load_before: str
    python: str
    versions: dict[str, str]
    redis_server: str
    blas: str
    load_after: str = ""

    @classmethod
    def read(cls, redis_executable: str) -> Machine:
        return cls(
            cpu=_cpu_model(),
            cores=os.cpu_count() or 0,
            memory_gib=_memory_gib(),
            load_before=load_average(),
            python=platform.python_version(),
            versions={
                name: _version(name)
                for name in ("numpy", "scipy", "scikit-learn", "river", "redis", "httpx")
            },
            redis_server=redis_server_version(redis_executable),
            blas=blas_threads(),
        )

    def lines(self) -> list[str]:
        versions = ", ".join(f"{name} {version}" for name, version in self.versions.items())
        return [
            f"- CPU: {self.cpu}, {self.cores} cores; RAM {self.memory_gib:.1f} GiB",
            f"- load average (1, 5, 15 min): before {self.load_before}"
            + (f"; after {self.load_after}" if self.load_after else ""),
            f"- Python {self.python}; {versions}; redis-server {self.redis_server}",
            f"- BLAS: {self.blas}",
        ]


def command_line() -> str:
    """How this run was started, as a shell would take it."""
    python = Path(sys.executable)
    shown = os.path.relpath(python) if python.is_relative_to(Path.cwd()) else str(python)
    return shlex.join([shown, *sys.argv])


def now_utc() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
