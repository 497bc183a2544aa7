"""One hot selector over P partitions and N service processes: rows/s, and the curve beyond.

    .venv/bin/python benchmarks/bench_partitions.py            # ~6 minutes
    .venv/bin/python benchmarks/bench_partitions.py --quick    # ~2 minutes

For P in {1, 2, 4} and N in {1, 2, 4} service processes on one Redis (AOF, ``appendfsync
always``): one fsds selector (sparse term-count rows, m features) with ``partitions: P``;
producers post chunks round robin over the N processes, each waiting until its chunk is
applied. Rows/s = rows posted / time until every chunk is applied. Each partition has its own
applier (its own lease), so P partitions can compute on min(P, N, cores) cores at once.

Then a model of the curve on a machine with more cores, from three costs per chunk measured
in the P = 1, N = 1 run: ``u``, one update (in process, the median over chunks: a partition's
applier does these one after another), ``c``, the service processes' CPU per chunk (the update
included: request, decode, log, commit), and ``r``, Redis's CPU per chunk (one process, so
serial). With C cores and enough processes, a chunk costs the larger of: all the CPU shared by
the cores, (c + r) / C; one partition's updates, u / P (each partition takes 1/P of the
chunks); and Redis, r. So rows/s(P, C) = rows per chunk / max((c + r) / C, u / P, r). The
machine here has 2 cores shared with the load generator and Redis, so the measured curve
flattens at 2: said, not hidden.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import threadpoolctl

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from suite.context import NPZ, SEED, TermRows, npz  # noqa: E402

from service.algorithms import get_method  # noqa: E402
from tests.support.harness import RedisProcess, ServiceProcess, cpu_seconds  # noqa: E402


def redis_cpu(client: Any) -> float:
    cpu = client.info("cpu")
    return float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])


def measure(
    folder: Path, partitions: int, processes: int, bodies: list[bytes], rows: int, m: int
) -> tuple[float, float, float]:
    """Rows/s of one selector with ``partitions`` over ``processes`` services (see module),
    and the CPU seconds per chunk of the service processes and of Redis."""
    redis_proc = RedisProcess(folder / f"redis-{partitions}-{processes}")
    redis_proc.start()
    services = []
    for i in range(processes):
        logs = folder / f"logs-{partitions}-{processes}-{i}"
        logs.mkdir(parents=True, exist_ok=True)
        services.append(ServiceProcess(f"s{i}", redis_proc.url, logs))
    try:
        for service in services:
            service.start()
        name = "hot"
        created = httpx.post(
            services[0].url + "/v1/selectors",
            json={"name": name, "method": "fsds", "n_features": m, "partitions": partitions},
            timeout=30,
        )
        created.raise_for_status()
        next_body = iter(range(len(bodies)))
        lock = threading.Lock()
        failures: list[str] = []

        def producer(index: int) -> None:
            with httpx.Client(timeout=300) as http:
                while True:
                    with lock:
                        i = next(next_body, None)
                    if i is None:
                        return
                    url = services[i % len(services)].url
                    response = http.post(
                        f"{url}/v1/selectors/{name}/chunks",
                        content=bodies[i],
                        headers={"content-type": NPZ, "idempotency-key": f"b{i}"},
                    )
                    if response.status_code != 200:
                        failures.append(f"{response.status_code} {response.text[:200]}")
                        return

        client = redis_proc.client()
        cpu_before = sum(cpu_seconds(service.pid) for service in services)
        redis_before = redis_cpu(client)
        started = time.perf_counter()
        threads = [threading.Thread(target=producer, args=(p,)) for p in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        service_cpu = (sum(cpu_seconds(service.pid) for service in services) - cpu_before) / len(
            bodies
        )
        redis_cpu_per_chunk = (redis_cpu(client) - redis_before) / len(bodies)
        client.close()
        if failures:
            raise RuntimeError(f"P={partitions} N={processes}: {failures[0]}")
        # Every chunk was acknowledged as applied; a merged FSDS read comes from the partitions'
        # checkpoints, which another process may still be writing: it catches up within
        # seconds (and its `versions` say which versions it holds meanwhile).
        deadline = time.monotonic() + 60
        while True:
            answer = httpx.get(f"{services[0].url}/v1/selectors/{name}", timeout=60)
            if answer.status_code != 200:
                raise RuntimeError(f"P={partitions} N={processes}: describe {answer.text}")
            seen = answer.json()["rows_seen"]
            if seen == rows * len(bodies) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if seen != rows * len(bodies):
            raise RuntimeError(f"rows_seen {seen}, expected {rows * len(bodies)}")
        return rows * len(bodies) / elapsed, service_cpu, redis_cpu_per_chunk
    finally:
        for service in services:
            service.stop()
        redis_proc.stop()


def update_seconds(bodies_rows: list[Any], m: int) -> float:
    """Seconds of one fsds update per chunk in process (after a warm-up), the median, with
    one BLAS thread as the service runs its updates (SIFT_BLAS_THREADS)."""
    threadpoolctl.threadpool_limits(1, user_api="blas")
    method = get_method("fsds")
    params = method.resolve_params({}, m)
    state = method.initial_state(params)
    state = method.update(state, params, bodies_rows[0])
    times = []
    for chunk in bodies_rows[1:]:
        started = time.perf_counter()
        state = method.update(state, params, chunk)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer chunks, smaller m")
    args = parser.parse_args()
    m, rows, chunks = (5_000, 500, 24) if args.quick else (20_000, 500, 48)
    terms = TermRows(m, 74, SEED)
    matrices = [terms.chunk(rows) for _ in range(chunks)]
    bodies = [npz(matrix) for matrix in matrices]
    print(f"fsds m = {m:,}, {chunks} chunks of {rows} rows, 4 producers waiting for each chunk")
    print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()}")
    table: dict[tuple[int, int], float] = {}
    costs: dict[tuple[int, int], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="sift-partitions-") as tmp:
        for processes in (1, 2, 4):
            for partitions in (1, 2, 4):
                rate, service_cpu, redis_cpu_chunk = measure(
                    Path(tmp), partitions, processes, bodies, rows, m
                )
                table[(partitions, processes)] = rate
                costs[(partitions, processes)] = (service_cpu, redis_cpu_chunk)
                print(
                    f"  P={partitions} N={processes}: {rate:,.0f} rows/s (CPU per chunk: service "
                    f"{service_cpu * 1e3:.0f} ms, Redis {redis_cpu_chunk * 1e3:.1f} ms)",
                    flush=True,
                )
    print("\n| partitions \\ processes | 1 | 2 | 4 |\n|---|---|---|---|")
    for partitions in (1, 2, 4):
        cells = " | ".join(f"{table[(partitions, n)]:,.0f}" for n in (1, 2, 4))
        print(f"| P = {partitions} | {cells} |")
    u = update_seconds(matrices[:8], m)
    c, r = costs[(1, 1)]
    print(
        f"\nmodel inputs (P = 1, N = 1): update u = {u * 1e3:.0f} ms, service CPU c = "
        f"{c * 1e3:.0f} ms, Redis CPU r = {r * 1e3:.1f} ms per chunk of {rows} rows"
    )
    print("\n| cores | P = 1 | P = 2 | P = 4 | P = 8 | P = 16 |\n|---|---|---|---|---|---|")
    for cores in (2, 4, 8, 16, 32):
        modelled = [
            f"{rows / max((c + r) / cores, u / partitions, r):,.0f}"
            for partitions in (1, 2, 4, 8, 16)
        ]
        print(f"| {cores} | " + " | ".join(modelled) + " |")
    print(f"\nload after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
