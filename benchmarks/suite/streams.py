"""``streams``: one push of a chunk to a stream with ``fsds``, ``variance`` and
``ocfs`` attached, against three direct pushes of the same chunk to three selectors.

The same labelled chunks (sparse term counts, ``Sizes.stream_features`` features, 500 rows, a
label each) go, on one fresh stack each:

* **direct**: to three standalone selectors, three producers at once (one per selector, as a
  user feeding three methods would run them): the rows alone as ``.npz`` to ``fsds`` and
  ``variance``, the rows and labels as ``.npz`` to ``ocfs``;
* **stream**: to one labelled stream, one producer, the three selectors attached.

Every POST waits until applied (by every selector, for the stream). Measured per phase, over
the timed chunks (after two warm-up chunks): the bytes of the request bodies the client sent
and its requests; what Redis received and sent (``INFO stats``: ``total_net_input_bytes``,
``total_net_output_bytes``) and the commands it ran (``INFO commandstats``: calls, by command),
as deltas; ``used_memory`` at the end; rows/s from the first timed POST to the last answer (a
row counts once, although three selectors apply it). The three selectors' scores must come out
the same in both phases (variance and ocfs exactly, fsds to rounding): the same work was done.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis
from live import Stack
from report import table

from suite.context import NPZ, SEED, Context, TermRows, npz

#: The selectors of both phases: their names and methods.
METHODS = ("fsds", "variance", "ocfs")
CLASSES = 4
WARM_UP = 2


@dataclass(frozen=True)
class Phase:
    """What one phase cost over its timed chunks."""

    label: str
    requests: int
    client_bytes: int
    redis_in: int
    redis_out: int
    commands: Counter[str]
    used_memory: int
    rows: int
    seconds: float

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds

    @property
    def calls(self) -> int:
        return sum(self.commands.values())


def labelled_npz(matrix: Any, labels: np.ndarray) -> bytes:
    """Rows and labels as ``numpy.savez`` writes them (the CSR parts and ``labels``)."""
    import io

    csr = matrix.tocsr()
    buffer = io.BytesIO()
    np.savez(
        buffer,
        data=csr.data,
        indices=csr.indices,
        indptr=csr.indptr,
        shape=np.array(csr.shape),
        labels=labels,
    )
    return buffer.getvalue()


@dataclass(frozen=True)
class Chunk:
    rows: int
    plain: bytes
    labelled: bytes


def chunks(m: int, count: int, rows: int) -> list[Chunk]:
    terms = TermRows(m, 30, SEED + 25)
    rng = np.random.default_rng(SEED + 25)
    out = []
    for _ in range(count):
        matrix = terms.chunk(rows)
        labels = rng.integers(0, CLASSES, size=rows)
        out.append(Chunk(rows, npz(matrix), labelled_npz(matrix, labels)))
    return out


def redis_stats(client: redis.Redis) -> tuple[int, int, Counter[str]]:
    stats: dict[str, Any] = client.info("stats")
    commands: dict[str, Any] = client.info("commandstats")
    calls = Counter(
        {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in commands.items()}
    )
    return int(stats["total_net_input_bytes"]), int(stats["total_net_output_bytes"]), calls


def measure(s: Stack, label: str, push_all: Any, rows: int) -> Phase:
    """Run ``push_all()`` (the timed chunks; it returns requests and body bytes) between two
    readings of Redis's counters."""
    in_before, out_before, calls_before = redis_stats(s.client)
    started = time.perf_counter()
    requests, client_bytes = push_all()
    seconds = time.perf_counter() - started
    in_after, out_after, calls_after = redis_stats(s.client)
    calls_after.subtract(calls_before)
    return Phase(
        label=label,
        requests=requests,
        client_bytes=client_bytes,
        redis_in=in_after - in_before,
        redis_out=out_after - out_before,
        commands=+calls_after,
        used_memory=s.counters().used_memory,
        rows=rows,
        seconds=seconds,
    )


def scores(s: Stack, names: list[str]) -> list[np.ndarray]:
    return [np.array(s.http.get(f"/v1/selectors/{n}/weights").json()["weights"]) for n in names]


def direct_phase(ctx: Context, parts: list[Chunk]) -> tuple[Phase, list[np.ndarray]]:
    m = ctx.sizes.stream_features
    with ctx.stack() as s:
        for method in METHODS:
            s.create({"name": f"direct-{method}", "method": method, "n_features": m})

        def body(method: str, chunk: Chunk) -> bytes:
            return chunk.labelled if method == "ocfs" else chunk.plain

        for i, chunk in enumerate(parts[:WARM_UP]):
            for method in METHODS:
                s.post(f"/v1/selectors/direct-{method}/chunks", body(method, chunk), NPZ, f"w{i}")

        def push_all() -> tuple[int, int]:
            sent = Counter[str]()
            failures: list[BaseException] = []

            def producer(method: str) -> None:
                try:
                    for i, chunk in enumerate(parts[WARM_UP:]):
                        data = body(method, chunk)
                        s.post(f"/v1/selectors/direct-{method}/chunks", data, NPZ, f"c{i}")
                        sent[method] += len(data)
                except BaseException as exc:
                    failures.append(exc)

            threads = [threading.Thread(target=producer, args=(m,)) for m in METHODS]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if failures:
                raise failures[0]
            return len(METHODS) * (len(parts) - WARM_UP), sum(sent.values())

        timed_rows = sum(c.rows for c in parts[WARM_UP:])
        phase = measure(s, "three direct pushes", push_all, timed_rows)
        return phase, scores(s, [f"direct-{m}" for m in METHODS])


def stream_phase(ctx: Context, parts: list[Chunk]) -> tuple[Phase, list[np.ndarray]]:
    m = ctx.sizes.stream_features
    with ctx.stack() as s:
        created = s.http.post("/v1/streams", json={"name": "st", "n_features": m, "labelled": True})
        if created.status_code != 201:
            raise RuntimeError(f"creating the stream: {created.status_code} {created.text}")
        for method in METHODS:
            s.create({"name": f"on-{method}", "method": method, "stream": "st"})
        for i, chunk in enumerate(parts[:WARM_UP]):
            s.post("/v1/streams/st/chunks", chunk.labelled, NPZ, f"w{i}")

        def push_all() -> tuple[int, int]:
            sent = 0
            for i, chunk in enumerate(parts[WARM_UP:]):
                response, _seconds = s.post("/v1/streams/st/chunks", chunk.labelled, NPZ, f"c{i}")
                outcomes = {o["name"]: o["status"] for o in response.json()["selectors"]}
                if outcomes != {f"on-{m}": "applied" for m in METHODS}:
                    raise RuntimeError(f"chunk {i} of the stream: {outcomes}")
                sent += len(chunk.labelled)
            return len(parts) - WARM_UP, sent

        timed_rows = sum(c.rows for c in parts[WARM_UP:])
        phase = measure(s, "one push to a stream", push_all, timed_rows)
        return phase, scores(s, [f"on-{m}" for m in METHODS])


def top_commands(phase: Phase, most: int = 6) -> str:
    return ", ".join(f"{name} {count:,}" for name, count in phase.commands.most_common(most))


def bench_streams(ctx: Context) -> None:
    sizes = ctx.sizes
    parts = chunks(sizes.stream_features, sizes.stream_chunks + WARM_UP, sizes.stream_chunk_rows)
    direct, direct_scores = direct_phase(ctx, parts)
    stream, stream_scores = stream_phase(ctx, parts)
    for method, a, b in zip(METHODS, direct_scores, stream_scores, strict=True):
        same = np.array_equal(a, b) if method != "fsds" else np.allclose(a, b, rtol=1e-9)
        if not same:
            raise RuntimeError(f"{method}'s scores differ between the two phases")
    chunks_timed = len(parts) - WARM_UP
    lines = []
    for phase in (direct, stream):
        lines.append(
            [
                phase.label,
                f"{phase.requests:,}",
                f"{phase.client_bytes / chunks_timed / 1e3:,.1f}",
                f"{phase.redis_in / chunks_timed / 1e3:,.1f}",
                f"{phase.redis_out / chunks_timed / 1e3:,.1f}",
                f"{phase.calls / chunks_timed:,.1f}",
                f"{phase.used_memory / 2**20:,.1f}",
                f"{phase.rows_per_s:,.0f}",
            ]
        )
    ratio = {
        "client": stream.client_bytes / direct.client_bytes,
        "redis_in": stream.redis_in / direct.redis_in,
        "redis_out": stream.redis_out / direct.redis_out,
        "commands": stream.calls / direct.calls,
        "rows": stream.rows_per_s / direct.rows_per_s,
    }
    lines.append(
        [
            "stream / direct",
            f"{stream.requests / direct.requests:.2f}",
            f"{ratio['client']:.2f}",
            f"{ratio['redis_in']:.2f}",
            f"{ratio['redis_out']:.2f}",
            f"{ratio['commands']:.2f}",
            f"{stream.used_memory / direct.used_memory:.2f}",
            f"{ratio['rows']:.2f}",
        ]
    )
    ctx.report.section(
        f"streams: one push to a stream with {', '.join(METHODS)} attached against three direct "
        f"pushes ({chunks_timed} labelled chunks of {sizes.stream_chunk_rows} sparse rows, "
        f"m = {sizes.stream_features:,}, every POST waiting)",
        table(
            [
                "phase",
                "requests",
                "client KB per chunk",
                "Redis in KB per chunk",
                "Redis out KB per chunk",
                "Redis commands per chunk",
                "Redis used MiB at the end",
                "rows/s",
            ],
            lines,
        ),
        f"Commands, direct: {top_commands(direct)}. Stream: {top_commands(stream)}.",
        "The three selectors' scores are the same in both phases (variance and ocfs bit for "
        "bit, fsds to rounding).",
    )
    ctx.report.figure(
        "streams",
        f"client bytes {ratio['client']:.2f}x, Redis bytes in {ratio['redis_in']:.2f}x and out "
        f"{ratio['redis_out']:.2f}x, Redis commands {ratio['commands']:.2f}x, rows/s "
        f"{ratio['rows']:.2f}x of three direct pushes ({stream.rows_per_s:,.0f} against "
        f"{direct.rows_per_s:,.0f})",
        ratio["client"] < 0.5 and ratio["redis_in"] < 1.0,
    )
