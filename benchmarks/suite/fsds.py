"""fsds benchmarks: ``big-fsds`` (bytes per chunk byte, PING, top while ingesting, on a long
stream of sparse chunks) and ``fsds-http`` (BASEHOCK over HTTP against in-process); both end
with ``bench_fsds_peers``, FSDS in-process against the paper's SVD update and IncrementalPCA."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import scipy.sparse as sp
from bench_fsds_update import FsdsUpdate, IpcaUpdate, PaperUpdate
from bench_fsds_update import Result as UpdateTimes
from bench_fsds_update import timed as timed_update
from bench_http import basehock_chunks, http_run, in_process_rows_per_s
from live import Latencies, Poller, Stalled, rss_bytes
from report import Peer, table

from suite.context import NPZ, SEED, Context, TermRows, npz, pct

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
    ell = fsds.params.ell
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
