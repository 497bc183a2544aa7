"""One command for every benchmark of Sift's write path (issue 14): prints each table as it goes
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
* ``variance``: Sift's ``variance`` method against River's ``stats.Var`` per feature.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import json
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import scipy.sparse as sp
import threadpoolctl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# benchmarks/ is this script's directory, hence on sys.path: the existing benchmarks' functions
# are reused as they are.
from bench_fsds_update import FsdsUpdate, IpcaUpdate, PaperUpdate
from bench_fsds_update import Result as UpdateTimes
from bench_fsds_update import timed as timed_update
from bench_http import basehock_chunks, http_run, in_process_rows_per_s
from bench_idle import measure_idle
from bench_labelled import chunks as labelled_chunks
from bench_labelled import ocfs_in_process, stream
from bench_labelled import over_http as labelled_over_http
from bench_ofs import run_naive, run_ofs
from bench_request_path import Checkout, median
from bench_request_path import measure as measure_request_path
from bench_request_path import report as request_path_table
from live import Latencies, Poller, Stack, Stalled, rss_bytes, stack
from report import (
    ROW_KEYS,
    Machine,
    Peer,
    Report,
    command_line,
    git_revision,
    load_average,
    now_utc,
    table,
)

from service.algorithms.omvfs import OMVFS
from service.algorithms.variance import Variance
from service.store.embedded import find_redis_server
from tests.support.api import npy_bytes
from tests.support.datasets import load_uci_multifeature
from tests.support.harness import holder_pid, lease_holder, poll

REPO_ROOT = Path(__file__).resolve().parents[1]
SEED = 20_250_114
NPZ = "application/x-npz"
NPY = "application/x-npy"


@dataclass(frozen=True)
class Sizes:
    """How much each benchmark does in one mode (``full``, ``quick`` or ``smoke``)."""

    mode: str
    #: fsds selectors of the big-state stream: (m, chunks); the first one is the long stream.
    big_fsds: tuple[tuple[int, int], ...]
    big_chunk_rows: int
    #: Terms drawn per row of the sparse chunks (duplicates add up: ~0.9 of it are stored).
    big_terms: int
    fsds_peer_chunks: int
    slow_peer_chunks: int
    idle_top_calls: int
    ofs_samples: int
    ofs_columns: int
    ofs_per_request: int
    naive_columns: int
    clients: int
    chunks_per_client: int
    many_features: int
    basehock_rows: int
    basehock_chunk_rows: int
    rounds: int
    ocfs_sets: tuple[str, ...]
    ocfs_chunks: int | None
    omvfs_chunks: int
    omvfs_params: dict[str, Any]
    takeover_features: int
    takeover_prior_chunks: int
    memory_rows: int
    memory_every: int
    memory_chunk_rows: int
    variance_rows: int
    variance_features: int
    #: bench_request_path: rounds and seconds of each wrk run; bench_idle: selectors, seconds.
    path_rounds: int
    path_seconds: float
    idle_selectors: int
    idle_seconds: float


FULL = Sizes(
    mode="full",
    big_fsds=((20_000, 240), (50_000, 60)),
    big_chunk_rows=500,
    big_terms=74,
    fsds_peer_chunks=30,
    slow_peer_chunks=3,
    idle_top_calls=50,
    ofs_samples=1000,
    ofs_columns=1000,
    ofs_per_request=32,
    naive_columns=30,
    clients=8,
    chunks_per_client=250,
    many_features=1000,
    basehock_rows=12_000,
    basehock_chunk_rows=1000,
    rounds=3,
    ocfs_sets=("PCMAC", "COIL20"),
    ocfs_chunks=None,
    omvfs_chunks=10,
    omvfs_params={},
    takeover_features=20_000,
    takeover_prior_chunks=30,
    memory_rows=1_000_000,
    memory_every=100_000,
    memory_chunk_rows=1000,
    variance_rows=20_000,
    variance_features=100,
    path_rounds=3,
    path_seconds=10.0,
    idle_selectors=100_000,
    idle_seconds=20.0,
)
QUICK = replace(
    FULL,
    mode="quick",
    big_fsds=((20_000, 60), (50_000, 15)),
    fsds_peer_chunks=10,
    slow_peer_chunks=2,
    idle_top_calls=30,
    naive_columns=15,
    basehock_rows=6000,
    rounds=1,
    ocfs_sets=("PCMAC",),
    takeover_prior_chunks=10,
    variance_rows=10_000,
    path_rounds=1,
    path_seconds=5.0,
    idle_selectors=10_000,
    idle_seconds=10.0,
)
SMOKE = replace(
    QUICK,
    mode="smoke",
    big_fsds=((2000, 8),),
    big_chunk_rows=100,
    big_terms=20,
    fsds_peer_chunks=2,
    slow_peer_chunks=1,
    idle_top_calls=5,
    ofs_samples=100,
    ofs_columns=64,
    naive_columns=4,
    chunks_per_client=3,
    many_features=100,
    basehock_rows=400,
    basehock_chunk_rows=100,
    ocfs_chunks=2,
    omvfs_chunks=1,
    omvfs_params={"max_iter": 3},
    takeover_features=2000,
    takeover_prior_chunks=2,
    memory_rows=6000,
    memory_every=2000,
    memory_chunk_rows=500,
    variance_rows=1000,
    variance_features=20,
    path_seconds=1.0,
    idle_selectors=200,
    idle_seconds=1.0,
)


@dataclass
class Context:
    """What every benchmark gets: sizes, where the service comes from, the report so far."""

    sizes: Sizes
    service_root: Path
    service_env: dict[str, str]
    report: Report
    previous_report: str
    #: PING latencies of every benchmark whose service held a big state, by label.
    big_state_pings: dict[str, Latencies] = field(default_factory=dict)
    #: Selectors that stopped applying chunks, by label: why.
    stalled: dict[str, str] = field(default_factory=dict)

    @contextlib.contextmanager
    def stack(self) -> Iterator[Stack]:
        with stack(self.service_root, self.service_env) as running:
            yield running


# -- data ---------------------------------------------------------------------------------


class TermRows:
    """Sparse rows shaped like term counts: each row draws ``terms`` features from a Zipf-like
    popularity over ``m`` features (seeded), repeated draws adding up."""

    def __init__(self, m: int, terms: int, seed: int) -> None:
        self.rng = np.random.default_rng([seed, m])
        popularity = 1.0 / (1.0 + self.rng.permutation(m))
        self.p = popularity / popularity.sum()
        self.m = m
        self.terms = terms

    def chunk(self, rows: int) -> sp.csr_matrix:
        columns = self.rng.choice(self.m, size=rows * self.terms, p=self.p)
        matrix = sp.csr_matrix(
            (np.ones(columns.size), (np.repeat(np.arange(rows), self.terms), columns)),
            shape=(rows, self.m),
        )
        matrix.sum_duplicates()
        return matrix


def npz(matrix: sp.csr_matrix) -> bytes:
    """``scipy.sparse.save_npz`` without compression: the bytes a producer would send."""
    buffer = io.BytesIO()
    sp.save_npz(buffer, matrix, compressed=False)
    return buffer.getvalue()


def pct(value: float) -> str:
    return f"{value:.0%}"


def ping_line(label: str, pings: Latencies) -> list[str]:
    return [
        label,
        f"{pings.ms(50):.2f}",
        f"{pings.ms(99):.1f}",
        f"{pings.max_ms:.1f}",
        f"{len(pings)}",
    ]


# -- big-fsds: bytes per chunk byte, PING, top while ingesting ----------------------------


def fsds_stream(ctx: Context, m: int, count: int, bodies: list[bytes]) -> dict[str, Any]:
    """One fsds selector fed ``count`` chunks after two warm-up ones, with a PING probe and a
    ``top`` reader running: what Redis received, latencies, memory."""
    sizes = ctx.sizes
    with ctx.stack() as s:
        name = f"fsds{m}"
        params = s.create({"name": name, "method": "fsds", "n_features": m})["params"]
        path = f"/v1/selectors/{name}/chunks"
        for i in range(2):  # warm-up: the sketch fills, the service's code paths load
            s.post(path, bodies[i], NPZ, f"{name}-{i}")
        top_url = f"{s.url}/v1/selectors/{name}/top?h=100"
        s.http.get(top_url).raise_for_status()  # the answer for this version, once
        idle = Latencies()
        for _ in range(sizes.idle_top_calls):
            started = time.perf_counter()
            s.http.get(top_url).raise_for_status()
            idle.add(time.perf_counter() - started)
            time.sleep(0.01)
        posts = Latencies()
        sent = 0
        half_sent = 0
        before = s.counters()
        half = before
        started = time.perf_counter()
        with s.ping_probe() as ping, Poller(top_url) as top:
            for i in range(2, count + 2):
                _, seconds = s.post(path, bodies[i], NPZ, f"{name}-{i}")
                posts.add(seconds)
                sent += len(bodies[i])
                if i == 2 + count // 2:
                    half, half_sent = s.counters(), sent
        elapsed = time.perf_counter() - started
        after = s.counters()
        described = s.describe(name)
        expected_rows = (count + 2) * sizes.big_chunk_rows
        if described["rows_seen"] != expected_rows:
            raise RuntimeError(f"{name}: rows_seen {described['rows_seen']} != {expected_rows}")
        for probe, failures in (("PING", ping.failures), ("top", top.failures)):
            if failures:  # shown, not fatal: a slow answer is what is being measured
                print(f"  {probe} failed {len(failures)} times, e.g. {failures[0]}")
        return {
            "m": m,
            "ell": params["ell"],
            "chunks": count,
            "chunk_kb": sent / count / 1e3,
            "ratio": (after.net_input_bytes - before.net_input_bytes) / sent,
            "ratio_second_half": (after.net_input_bytes - half.net_input_bytes)
            / (sent - half_sent),
            "rows_per_s": count * sizes.big_chunk_rows / elapsed,
            "post": posts,
            "ping": ping.latencies,
            "top": top.latencies,
            "top_failures": len(top.failures),
            "ping_failures": len(ping.failures),
            "idle": idle,
            "redis_mib": after.used_memory / 2**20,
            "rss_mib": rss_bytes(s.service.pid) / 2**20,
            "versions": described["version"],
        }


def bench_big_fsds(ctx: Context) -> None:
    sizes = ctx.sizes
    results = []
    stalled: dict[int, str] = {}
    long_m = sizes.big_fsds[0][0]
    matrices_for_peers: list[sp.csr_matrix] = []
    for m, count in sizes.big_fsds:
        terms = TermRows(m, sizes.big_terms, SEED)
        matrices = [terms.chunk(sizes.big_chunk_rows) for _ in range(count + 2)]
        bodies = [npz(matrix) for matrix in matrices]
        if m == long_m:
            matrices_for_peers = matrices
        print(
            f"fsds m={m:,}: {count} chunks of {sizes.big_chunk_rows} rows, "
            f"{np.mean([len(b) for b in bodies]) / 1e3:.0f} KB each, after 2 warm-up chunks",
            flush=True,
        )
        try:
            result = fsds_stream(ctx, m, count, bodies)
        except Stalled as exc:  # recorded as a result: the next size may still work
            stalled[m] = str(exc)
            ctx.stalled[f"fsds m = {m:,}"] = str(exc)
            print(f"  STALLED: {exc}", flush=True)
            continue
        results.append(result)
        ctx.big_state_pings[f"fsds m = {m:,}"] = result["ping"]
        print(
            f"  Redis bytes / chunk bytes {result['ratio']:.1f}x; PING {result['ping'].text()}; "
            f"top while ingesting {result['top'].text()}; idle {result['idle'].text()}",
            flush=True,
        )

    ctx.report.section(
        "big-fsds: fsds, sparse chunks, one producer waiting for each chunk",
        table(
            [
                "m",
                "ell",
                "chunks",
                "chunk KB",
                "Redis bytes / chunk bytes (all; second half)",
                "HTTP rows/s",
                "POST p50 / p99 ms",
                "PING p50 / p99 / max ms",
                "top?h=100 ingesting p50 / p99 / max ms (calls, failed)",
                "top idle p50 / p99 ms",
                "versions",
                "Redis used_memory MiB",
                "service RSS MiB",
            ],
            [
                [
                    f"{r['m']:,}",
                    f"{r['ell']}",
                    f"{r['chunks']}",
                    f"{r['chunk_kb']:.0f}",
                    f"{r['ratio']:.1f}x; {r['ratio_second_half']:.1f}x",
                    f"{r['rows_per_s']:,.0f}",
                    f"{r['post'].ms(50):.0f} / {r['post'].ms(99):.0f}",
                    f"{r['ping'].ms(50):.2f} / {r['ping'].ms(99):.1f} / {r['ping'].max_ms:.1f}"
                    + (f" ({r['ping_failures']} failed)" if r["ping_failures"] else ""),
                    f"{r['top'].ms(50):.0f} / {r['top'].ms(99):.0f} / {r['top'].max_ms:.0f} "
                    f"({len(r['top'])}, {r['top_failures']})",
                    f"{r['idle'].ms(50):.1f} / {r['idle'].ms(99):.1f}",
                    f"{r['versions']}",
                    f"{r['redis_mib']:.0f}",
                    f"{r['rss_mib']:.0f}",
                ]
                for r in results
            ]
            + [
                [f"{m:,}", "-", "-", "-", f"stalled: {why}", *["-"] * 8]
                for m, why in stalled.items()
            ],
        ),
        "Bytes: Redis `INFO stats` total_net_input_bytes over the timed chunks (everything "
        "every client sent Redis, the probes' few bytes included) / the `.npz` bodies posted. "
        "PING: another client every 5 ms during the timed chunks. top: `GET .../top?h=100` "
        "every 20 ms by a second HTTP client while the producer posts; idle: the same GET "
        "with nothing ingesting.",
    )
    by_size = {r["m"]: r for r in results}
    first = by_size.get(long_m)
    if first is None:
        ctx.report.figure("fsds-bytes", f"m = {long_m:,} stalled: {stalled[long_m]}", False)
    else:
        ctx.report.figure(
            "fsds-bytes",
            f"{first['ratio']:.1f}x (m = {first['m']:,}, {first['chunks']} chunks of "
            f"{first['chunk_kb']:.0f} KB; second half {first['ratio_second_half']:.1f}x)",
            first["ratio"] <= 3.0,
        )
    ctx.report.figure(
        "top-latency",
        "; ".join(
            f"m = {m:,}: p99 {by_size[m]['top'].ms(99):.0f} ms "
            f"(idle {by_size[m]['idle'].ms(99):.0f} ms)"
            if m in by_size
            else f"m = {m:,}: stalled, not measured"
            for m, _ in sizes.big_fsds
        ),
        not stalled and all(r["top"].ms(99) <= 10.0 for r in results),
    )
    bench_fsds_peers(
        ctx, long_m, 10, matrices_for_peers, None if first is None else first["rows_per_s"]
    )


def bench_fsds_peers(
    ctx: Context,
    m: int,
    k: int,
    matrices: list[sp.csr_matrix],
    http_rows_per_s: float | None,
) -> None:
    """FSDS in-process against the paper's SVD update and IncrementalPCA on the same chunks
    (``http_rows_per_s``: the same selector's rate over HTTP, measured by the caller)."""
    sizes = ctx.sizes
    params = {"k": k}
    fsds = FsdsUpdate(m, params)
    ell = int(fsds.params["ell"])
    warm, rest = matrices[0], matrices[1:]
    times: dict[str, UpdateTimes] = {}
    for label, update, count in (
        ("FSDS.update", fsds, sizes.fsds_peer_chunks),
        ("paper's SVD update", PaperUpdate(ell, m, params["k"]), sizes.slow_peer_chunks),
        (f"IncrementalPCA({ell})", IpcaUpdate(ell), sizes.slow_peer_chunks),
    ):
        update(warm)  # every timed chunk meets a full sketch
        times[label] = UpdateTimes(label)
        for chunk in rest[:count]:
            timed_update(update, chunk, times[label])
        print(times[label].line(), flush=True)
    rows = matrices[0].shape[0]
    workload = f"fsds m = {m:,}, {rows}-row sparse chunks"
    ours = times["FSDS.update"]
    for label in ("paper's SVD update", f"IncrementalPCA({ell})"):
        theirs = times[label]
        ctx.report.peer(
            Peer(
                workload,
                "rows/s",
                ours.rows / sum(ours.latencies),
                http_rows_per_s,
                label,
                theirs.rows / sum(theirs.latencies),
                f"{len(theirs.latencies)} chunks timed after a warm-up",
            )
        )


# -- ofs: bytes per column byte, HTTP against in-process, the naive update ------------------


def bench_ofs(ctx: Context) -> None:
    sizes = ctx.sizes
    n, total, per_request = sizes.ofs_samples, sizes.ofs_columns, sizes.ofs_per_request
    params = {"c": 1.0}
    columns = np.random.default_rng([SEED, n]).standard_normal((n, total))
    local_seconds, local_kept, local_decisions = run_ofs(columns, params, per_request)
    naive_seconds, naive_decisions = run_naive(columns, params, sizes.naive_columns)
    same_naive = naive_decisions == local_decisions[: sizes.naive_columns]
    bodies = [npy_bytes(columns[:, s : s + per_request]) for s in range(0, total, per_request)]
    with ctx.stack() as s:
        name = "ofs"
        s.create({"name": name, "method": "ofs", "n_samples": n, "params": params})
        path = f"/v1/selectors/{name}/features"
        decisions: list[bool] = []
        posts = Latencies()
        before = s.counters()
        started = time.perf_counter()
        with s.ping_probe() as ping:
            for i, body in enumerate(bodies):
                response, seconds = s.post(path, body, NPY, f"{name}-{i}")
                posts.add(seconds)
                decisions += [bool(d["kept"]) for d in response.json()["decisions"]]
        elapsed = time.perf_counter() - started
        after = s.counters()
        described = s.describe(name)
        rss = rss_bytes(s.service.pid) / 2**20
    if ping.failures:  # shown, not fatal
        print(f"  PING failed {len(ping.failures)} times, e.g. {ping.failures[0]}")
    ctx.big_state_pings[f"ofs n = {n}"] = ping.latencies
    sent = sum(len(body) for body in bodies)
    ratio = (after.net_input_bytes - before.net_input_bytes) / sent
    http_rate = total / elapsed
    local_rate = total / local_seconds
    same = decisions == local_decisions
    ctx.report.section(
        f"ofs: n = {n}, {total} Gaussian columns, {per_request} per `.npy` request, c = 1",
        table(
            [
                "columns",
                "kept",
                "request KB",
                "Redis bytes / column bytes",
                "HTTP col/s",
                "in-process col/s",
                "HTTP / in-process",
                "POST p50 / p99 ms",
                "PING p50 / p99 / max ms",
                "versions",
                "Redis used_memory MiB",
                "service RSS MiB",
                "decisions HTTP = in-process",
            ],
            [
                [
                    f"{total}",
                    f"{local_kept}",
                    f"{sent / len(bodies) / 1e3:.0f}",
                    f"{ratio:.1f}x",
                    f"{http_rate:,.0f}",
                    f"{local_rate:,.0f}",
                    pct(http_rate / local_rate),
                    f"{posts.ms(50):.0f} / {posts.ms(99):.0f}",
                    f"{ping.latencies.ms(50):.2f} / {ping.latencies.ms(99):.1f} / "
                    f"{ping.latencies.max_ms:.1f}",
                    f"{described['version']}",
                    f"{after.used_memory / 2**20:.0f}",
                    f"{rss:.0f}",
                    "yes" if same else "NO",
                ]
            ],
        ),
    )
    ctx.report.figure(
        "ofs-bytes",
        f"{ratio:.1f}x (n = {n}, {len(bodies)} requests of {per_request} columns)",
        ratio <= 3.0,
    )
    ctx.report.figure(
        "ofs-http",
        f"{pct(http_rate / local_rate)} ({http_rate:,.0f} of {local_rate:,.0f} col/s)"
        + ("" if same else "; decisions DIFFER"),
        http_rate / local_rate >= 0.60 and same,
    )
    ctx.report.peer(
        Peer(
            f"ofs n = {n}, {per_request} columns per call",
            "columns/s",
            local_rate,
            http_rate,
            "naive pinv per column (same algorithm)",
            sizes.naive_columns / naive_seconds,
            f"first {sizes.naive_columns} columns; decisions "
            + ("identical" if same_naive else "DIFFER"),
        )
    )


# -- many clients, one-row chunks, wait=false ----------------------------------------------


def post_concurrently(
    url: str, path: str, bodies: list[bytes], clients: int, key_prefix: str
) -> tuple[list[int], list[float]]:
    """POST every body as a one-row JSON chunk (``wait=false``) from ``clients`` concurrent
    connections of one asyncio client; the statuses and seconds of each POST. Runs in a
    process of its own (``bench_many_clients``)."""

    async def run() -> tuple[list[int], list[float]]:
        statuses: list[int] = []
        seconds: list[float] = []
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:

            async def client(index: int) -> None:
                for i in range(index, len(bodies), clients):
                    started = time.perf_counter()
                    response = await http.post(
                        path,
                        params={"wait": "false"},
                        content=bodies[i],
                        headers={
                            "content-type": "application/json",
                            "idempotency-key": f"{key_prefix}{i}",
                        },
                    )
                    seconds.append(time.perf_counter() - started)
                    statuses.append(response.status_code)
                    if response.status_code not in (200, 202):
                        raise RuntimeError(f"POST {path}: {response.status_code} {response.text}")

            await asyncio.gather(*(client(index) for index in range(clients)))
        return statuses, seconds

    return asyncio.run(run())


def bench_many_clients(ctx: Context) -> None:
    sizes = ctx.sizes
    m, clients, each = sizes.many_features, sizes.clients, sizes.chunks_per_client
    total = clients * each
    rng = np.random.default_rng([SEED, m, total])
    bodies = [
        json.dumps({"rows": [rng.standard_normal(m).round(6).tolist()]}).encode()
        for _ in range(total)
    ]
    with ctx.stack() as s:
        name = "clients"
        s.create({"name": name, "method": "fsds", "n_features": m})
        path = f"/v1/selectors/{name}/chunks"
        posts = Latencies()
        started = time.perf_counter()
        # The clients run in a process of their own (asyncio, one connection each): threads
        # of this process, each paying httpx's overhead under one GIL, measured themselves.
        with s.ping_probe() as ping, ProcessPoolExecutor(1) as load:
            statuses, seconds = load.submit(
                post_concurrently, s.url, path, bodies, clients, "c"
            ).result()
            acknowledged = time.perf_counter() - started
            s.wait_applied(name, total, timeout_s=600)
            applied = time.perf_counter() - started
        for value in seconds:
            posts.add(value)
        described = s.describe(name)
    ack_rate, applied_rate = total / acknowledged, total / applied
    ctx.report.section(
        f"many-clients: {clients} clients, {total} one-row JSON chunks (fsds m = {m}), "
        "`wait=false`",
        table(
            [
                "chunks",
                "202 / 200",
                "acknowledged rows/s",
                "applied rows/s (until all applied)",
                "POST p50 / p99 / max ms",
                "versions",
                "PING p99 / max ms",
            ],
            [
                [
                    f"{total}",
                    f"{statuses.count(202)} / {statuses.count(200)}",
                    f"{ack_rate:,.0f}",
                    f"{applied_rate:,.0f}",
                    f"{posts.ms(50):.1f} / {posts.ms(99):.1f} / {posts.max_ms:.1f}",
                    f"{described['version']}",
                    f"{ping.latencies.ms(99):.1f} / {ping.latencies.max_ms:.1f}",
                ]
            ],
        ),
    )
    ctx.report.figure(
        "many-clients",
        f"{applied_rate:,.0f} rows/s applied ({ack_rate:,.0f} acknowledged), "
        f"POST p99 {posts.ms(99):.1f} ms",
        applied_rate >= 2000 and posts.ms(99) <= 20.0,
    )


# -- fsds over HTTP against in-process (BASEHOCK) -------------------------------------------


def bench_fsds_http(ctx: Context) -> None:
    sizes = ctx.sizes
    chunks = basehock_chunks(sizes.basehock_rows, sizes.basehock_chunk_rows)
    m = chunks[0].shape[1]
    params = {"k": 2}
    in_process: list[float] = []
    http: dict[int, list[dict[str, float]]] = {1: [], 4: []}
    with ctx.stack() as s, s.ping_probe() as ping:
        for round_ in range(sizes.rounds):
            # Interleaved, so a slow spell of the shared machine hits both sides alike.
            in_process.append(in_process_rows_per_s(chunks, m, params))
            for producers in http:
                http[producers].append(
                    http_run(s.url, f"basehock{round_}p{producers}", chunks, m, params, producers)
                )
    local = float(np.median(in_process))
    lines = []
    ratio: dict[int, float] = {}
    for producers, runs in http.items():
        ratios = [run["rows_per_s"] / p for run, p in zip(runs, in_process, strict=True)]
        ratio[producers] = float(np.median(ratios))
        lines.append(
            [
                f"{producers}",
                f"{local:,.0f}",
                f"{np.median([r['rows_per_s'] for r in runs]):,.0f}",
                f"{pct(ratio[producers])} (rounds {', '.join(pct(r) for r in ratios)})",
                f"{np.median([r['p50_ms'] for r in runs]):.0f} / "
                f"{np.median([r['p95_ms'] for r in runs]):.0f}",
                f"{runs[0]['versions']:.0f}",
                f"{runs[0]['body_mib'] * 1024:.0f}",
            ]
        )
    ctx.report.section(
        f"fsds-http: BASEHOCK ({sizes.basehock_rows} rows, m = {m}, k = 2), "
        f"{sizes.basehock_chunk_rows}-row `.npz` chunks, every POST waiting; medians of "
        f"{sizes.rounds} interleaved round(s)",
        table(
            [
                "producers",
                "in-process rows/s",
                "HTTP rows/s",
                "HTTP / in-process",
                "POST p50 / p95 ms",
                "versions",
                "body KB",
            ],
            lines,
        ),
        f"PING during these runs: {ping.latencies.text()}.",
    )
    ctx.report.figure(
        "fsds-http",
        f"{pct(ratio[1])} / {pct(ratio[4])}",
        ratio[1] >= 0.85 and ratio[4] >= 0.95,
    )
    http_one = float(np.median([r["rows_per_s"] for r in http[1]]))
    bench_fsds_peers(ctx, m, params["k"], chunks, http_one)


# -- ocfs over HTTP against in-process and batch recomputation ------------------------------


def bench_ocfs(ctx: Context) -> None:
    sizes = ctx.sizes
    lines = []
    worst = float("inf")
    texts = []
    with ctx.stack() as s, s.ping_probe() as ping:
        for data in sizes.ocfs_sets:
            x, y = stream(f"{data}.mat")
            parts = labelled_chunks(x, y)[: sizes.ocfs_chunks]
            d = x.shape[1]
            # One pass is a few ms: the median of three.
            runs = [ocfs_in_process(parts, d) for _ in range(3)]
            local = float(np.median([r["rows_per_s"] for r in runs]))
            batch = float(np.median([r["batch_rows_per_s"] for r in runs]))
            served, p50, p95 = labelled_over_http(
                s.url, f"ocfs-{data.lower()}", "ocfs", d, {}, parts
            )
            rows = sum(part[0].shape[0] for part in parts)
            ratio = served / local
            worst = min(worst, ratio)
            texts.append(f"{data} {pct(ratio)} ({p50:.0f} ms per chunk)")
            lines.append(
                [
                    data,
                    f"{rows}",
                    f"{d}",
                    f"{local:,.0f}",
                    f"{served:,.0f}",
                    pct(ratio),
                    f"{p50:.1f} / {p95:.1f}",
                    f"{batch:,.0f}",
                ]
            )
            ctx.report.peer(
                Peer(
                    f"ocfs {data}, 500-row chunks",
                    "rows/s",
                    local,
                    served,
                    "batch OCFS recomputed on all rows seen, per chunk",
                    batch,
                )
            )
    ctx.report.section(
        "ocfs-http: labelled `.npz` chunks of 500 rows, one producer, every POST waiting",
        table(
            [
                "data",
                "rows",
                "d",
                "in-process rows/s",
                "HTTP rows/s",
                "HTTP / in-process",
                "POST p50 / p95 ms",
                "batch recomputation rows/s",
            ],
            lines,
        ),
        f"PING during these runs: {ping.latencies.text()}.",
    )
    ctx.report.figure("ocfs-http", "; ".join(texts), worst >= 0.50)


# -- omvfs per chunk (in-process) -----------------------------------------------------------


def shown_param(value: Any) -> str:
    """A parameter as the report shows it: a per-view map with one value for all as that one."""
    if isinstance(value, dict) and len(set(map(str, value.values()))) == 1:
        value = next(iter(value.values()))
    return json.dumps(value, sort_keys=True)


def shown_checkout(root: Path) -> str:
    """A checkout as the report names it: no path of this machine (the report is committed)."""
    if root == REPO_ROOT:
        return "this checkout"
    return f"another checkout (`--service-root {root.name}`)"


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
    state = method.initial_state(params, rows.shape[1])
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
        f"{key}={shown_param(value)}" for key, value in sorted(params.items()) if key != "views"
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


# -- takeover after SIGKILL ----------------------------------------------------------------


def bench_takeover(ctx: Context) -> None:
    sizes = ctx.sizes
    m, prior = sizes.takeover_features, sizes.takeover_prior_chunks
    terms = TermRows(m, sizes.big_terms, SEED + 1)
    bodies = [npz(terms.chunk(sizes.big_chunk_rows)) for _ in range(prior + 1)]
    with ctx.stack() as s:
        name = "takeover"
        s.create({"name": name, "method": "fsds", "n_features": m})
        path = f"/v1/selectors/{name}/chunks"
        for i in range(prior):
            s.post(path, bodies[i], NPZ, f"{name}-{i}")
        response, _ = s.post(path, bodies[prior], NPZ, f"{name}-{prior}", wait=False)
        log_id = response.json()["log_id"]
        pid = s.service.pid
        # Kill the applier itself: once it holds the lease (as far as the key layout tells).
        holding = poll(lambda: holder_pid(lease_holder(s.client, name)) == pid, 3.0, 0.002)
        killed = time.monotonic()
        s.service.kill()
        restarted = time.monotonic()
        s.service.start()
        ready = time.monotonic()
        s.wait_applied(name, (prior + 1) * sizes.big_chunk_rows, timeout_s=120)
        applied = time.monotonic()
        status = s.http.get(f"{path}/{log_id}").json().get("status")
    if status != "applied":
        raise RuntimeError(f"takeover: chunk {log_id} is {status!r} after the restart")
    took = applied - restarted
    ctx.report.section(
        f"takeover: fsds m = {m:,}, {prior} chunks applied, one more pending (`wait=false`), "
        "the service SIGKILLed and started again",
        table(
            [
                "applier held the lease when killed",
                "kill -> ready s",
                "ready -> pending chunk applied s",
                "restart -> pending chunk applied s",
            ],
            [
                [
                    "yes" if holding else "not seen within 3 s (killed anyway)",
                    f"{ready - killed:.2f}",
                    f"{applied - ready:.2f}",
                    f"{took:.2f}",
                ]
            ],
        ),
    )
    ctx.report.figure(
        "takeover", f"{took:.2f} s from restart to the pending chunk applied", took <= 5.0
    )


# -- memory over a million rows ------------------------------------------------------------


def bench_memory(ctx: Context) -> None:
    sizes = ctx.sizes
    m, rows, every, chunk_rows = (
        2000,
        sizes.memory_rows,
        sizes.memory_every,
        sizes.memory_chunk_rows,
    )
    terms = TermRows(m, 20, SEED + 2)
    samples: list[tuple[int, float, float]] = []
    with ctx.stack() as s:
        name = "memory"
        s.create({"name": name, "method": "fsds", "n_features": m})
        path = f"/v1/selectors/{name}/chunks"
        sent = 0
        started = time.perf_counter()
        while sent < rows:
            s.post(path, npz(terms.chunk(chunk_rows)), NPZ, f"{name}-{sent}")
            sent += chunk_rows
            if sent % every == 0:
                counters = s.counters()
                samples.append(
                    (sent, rss_bytes(s.service.pid) / 2**20, counters.used_memory / 2**20)
                )
                print(
                    f"  {sent:>9,} rows: service RSS {samples[-1][1]:.1f} MiB, "
                    f"Redis used_memory {samples[-1][2]:.1f} MiB",
                    flush=True,
                )
        elapsed = time.perf_counter() - started

    def drift(series: list[float]) -> tuple[float, float]:
        return (series[-1] - series[0]) / series[0], (max(series) - series[0]) / series[0]

    rss = [sample[1] for sample in samples]
    used = [sample[2] for sample in samples]
    lines = []
    verdicts = []
    for label, series in (("service RSS", rss), ("Redis used_memory", used)):
        last, peak = drift(series)
        verdicts.append(abs(last) <= 0.10 and peak <= 0.10)
        lines.append(
            [
                label,
                f"{series[0]:.1f}",
                f"{series[-1]:.1f}",
                f"{max(series):.1f}",
                f"{last:+.1%}",
                f"{peak:+.1%}",
            ]
        )
    ctx.report.section(
        f"memory: fsds m = {m:,}, {rows:,} rows in sparse {chunk_rows}-row chunks, sampled "
        f"every {every:,} rows ({rows / elapsed:,.0f} rows/s over HTTP)",
        table(
            ["MiB", f"first (at {every:,} rows)", "last", "max", "last vs first", "max vs first"],
            lines,
        ),
    )
    ctx.report.figure(
        "memory",
        "; ".join(
            f"{line[0]} {line[1]} -> {line[2]} MiB ({line[4]}, max {line[5]})" for line in lines
        ),
        all(verdicts),
    )


# -- variance against River ------------------------------------------------------------------


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
    state = method.initial_state(params, m)
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


# -- the request path against the floor of the same stack; the idle cost --------------------


def bench_request_path(ctx: Context) -> None:
    sizes = ctx.sizes
    rows = {
        row.scenario: row
        for row in measure_request_path(
            Checkout(ctx.service_root, tuple(ctx.service_env.items())),
            rounds=sizes.path_rounds,
            seconds=sizes.path_seconds,
        )
    }
    ctx.report.section(
        f"request-path: wrk, {sizes.path_rounds} round(s) of {sizes.path_seconds:.0f} s per "
        "scenario, Sift and the floor app (`benchmarks/floor_app.py`) in turns on one Redis "
        "(medians)",
        request_path_table(list(rows.values())).splitlines(),
    )

    def ratio(name: str) -> tuple[float, float, float]:
        row = rows[name]
        rate = median([x.rate for x in row.sift])
        return (
            rate,
            rate / median([x.rate for x in row.floor]),
            median([x.p99_ms for x in row.sift]),
        )

    rate, share, p99 = ratio("post-nowait")
    settled = max(rows["post-nowait"].settle_s)
    ctx.report.figure(
        "path-nowait",
        f"{rate:,.0f} req/s, {share:.2f} of the floor, p99 {p99:.1f} ms, all applied "
        f"{settled:.2f} s after the load",
        share >= 0.6 and p99 <= 20.0 and settled <= 1.0,
    )
    rate, share, p99 = ratio("post-wait")
    ctx.report.figure(
        "path-wait", f"{rate:,.0f} req/s, {share:.2f} of the floor, p99 {p99:.1f} ms", share >= 0.5
    )
    rate, share, p99 = ratio("get-top")
    ctx.report.figure(
        "path-top", f"{rate:,.0f} req/s, {share:.2f} of the floor, p99 {p99:.1f} ms", share >= 0.6
    )
    nowait, wait = rows["workers-nowait"], rows["workers-wait"]
    rate = median([x.rate for x in nowait.sift])
    settled = max(nowait.settle_s)
    ctx.report.figure(
        "path-workers",
        f"{rate:,.0f} req/s acknowledged, all applied {settled:.2f} s after the load "
        f"(`wait=true`: {median([x.rate for x in wait.sift]):,.0f} req/s, p99 "
        f"{median([x.p99_ms for x in wait.sift]):.1f} ms)",
        rate >= 2000 and settled <= 1.0,
    )
    pair = rows["replicas-wait"]
    p99 = median([x.p99_ms for x in pair.sift])
    worst = max(x.max_ms for x in pair.sift)
    ctx.report.figure(
        "path-replicas",
        f"p99 {p99:.1f} ms, max {worst:.0f} ms, {median([x.rate for x in pair.sift]):,.0f} req/s",
        p99 <= 50.0 and worst < 1000.0,
    )


def bench_idle(ctx: Context) -> None:
    sizes = ctx.sizes
    idle = measure_idle(sizes.idle_selectors, sizes.idle_seconds, ctx.service_root)
    ctx.report.section(
        f"idle: {idle.selectors:,} idle fsds selectors (4 features), one service process",
        table(
            [
                "selectors",
                "created in s",
                "idle CPU (% of a core)",
                "seconds measured",
                "forgotten chunk applied after s",
            ],
            [
                [
                    f"{idle.selectors:,}",
                    f"{idle.create_s:.1f}",
                    f"{100 * idle.cpu_fraction:.2f}",
                    f"{idle.seconds:.0f}",
                    f"{idle.pickup_s:.2f}",
                ]
            ],
        ),
    )
    ctx.report.figure(
        "idle",
        f"{100 * idle.cpu_fraction:.2f}% of a core at {idle.selectors:,} selectors; picked up "
        f"after {idle.pickup_s:.2f} s",
        idle.cpu_fraction < 0.02 and idle.pickup_s <= 1.0,
    )


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
    "request-path": Benchmark(
        bench_request_path,
        ("path-nowait", "path-wait", "path-top", "path-workers", "path-replicas"),
    ),
    "idle": Benchmark(bench_idle, ("idle",)),
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


def markdown(ctx: Context, machine: Machine, names: list[str], started: float) -> str:
    sizes = ctx.sizes
    minutes, seconds = divmod(int(time.monotonic() - started), 60)
    lines = [
        "# Benchmarks of the write path and the request path",
        "",
        "Written by `benchmarks/run.py` (issues 14 and 21); rerun it rather than editing this "
        "file. How to read it and how long it takes: `benchmarks/README.md`, section "
        '"One command: run.py".',
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
    env = {"SIFT_BLAS_THREADS": str(args.blas_threads)}
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
        output.write_text(markdown(ctx, machine, names, started))
        print(f"written: {output}")
    else:
        print("no --output for a partial run: nothing written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
