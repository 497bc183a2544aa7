"""OFS end to end: feature columns/s over HTTP against the same Algorithm 1 run in-process.

Starts the real service (``python -m service serve``) on its embedded Redis in a temporary data
directory, creates one OFS selector per case, posts the columns (``.npy``, ``c`` columns per
request, every POST waiting for its decisions) and prints columns/s, POST latency percentiles,
the committed state's size in Redis and the service's peak RSS, next to the in-process
columns/s of ``OFS.add_features`` on the same columns in the same calls. The decisions over
HTTP are checked to be the in-process ones.

Cases: seeded Gaussian ``n x n`` (n = 200, 1000, 2000) with ``c = 1`` (most columns are new
directions at first, so most are kept: the state grows to ``n x kept``), and the real data of
the quality test (COIL20, Isolet; features in a seeded random order; ``ridge = 1000, c = 4``).

    .venv/bin/python benchmarks/bench_ofs_http.py            # ~3 minutes
    .venv/bin/python benchmarks/bench_ofs_http.py --quick    # n = 200, 1000 and COIL20
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# benchmarks/ is the script's directory, hence on sys.path.
from bench_http import peak_rss_mib, running_service
from bench_ofs import load, run_ofs


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def over_http(
    base: str,
    store: redis.Redis,
    name: str,
    columns: np.ndarray,
    params: dict[str, Any],
    per_call: int,
    producers: int,
) -> dict[str, Any]:
    n, total = columns.shape
    bodies = [npy(columns[:, s : s + per_call]) for s in range(0, total, per_call)]
    latencies: list[float] = []
    answers: dict[int, list[dict[str, Any]]] = {}
    with httpx.Client(base_url=base, timeout=600) as client:
        client.post(
            "/v1/selectors", json={"name": name, "method": "ofs", "n_samples": n, "params": params}
        ).raise_for_status()

        def post(i: int) -> None:
            started = time.perf_counter()
            response = client.post(
                f"/v1/selectors/{name}/features",
                content=bodies[i],
                headers={"content-type": "application/x-npy", "idempotency-key": f"{name}-{i}"},
            )
            response.raise_for_status()
            latencies.append(time.perf_counter() - started)
            answers[i] = response.json()["decisions"]

        started = time.perf_counter()
        if producers == 1:
            for i in range(len(bodies)):
                post(i)
        else:
            with ThreadPoolExecutor(producers) as pool:
                list(pool.map(post, range(len(bodies))))
        elapsed = time.perf_counter() - started
        described = client.get(f"/v1/selectors/{name}").json()
    head = store.hgetall(f"sift:{{{name}}}:head")
    state_bytes = store.memory_usage(head[b"state_key"]) or 0
    decisions = [d for i in sorted(answers) for d in answers[i]]
    return {
        "columns_per_s": total / elapsed,
        "p50_ms": float(np.percentile(latencies, 50) * 1000),
        "p95_ms": float(np.percentile(latencies, 95) * 1000),
        "versions": described["version"],
        "kept": described["features_kept"],
        "state_mib": state_bytes / 2**20,
        "decisions": decisions,
    }


def shuffled(name: str) -> np.ndarray:
    x = load(name)
    return x[:, np.random.default_rng(0).permutation(x.shape[1])]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="n = 200, 1000 and COIL20 only")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    sizes = [200, 1000] if args.quick else [200, 1000, 2000]
    cases: list[tuple[str, np.ndarray, dict[str, Any], int, int]] = []
    for n in sizes:
        gaussian = rng.standard_normal((n, n))
        cases.append((f"Gaussian n={n}", gaussian, {"c": 1.0}, 32, 1))
        if n <= 1000:
            cases.append((f"Gaussian n={n}", gaussian[:, : min(n, 300)], {"c": 1.0}, 1, 1))
    quality = {"ridge": 1000.0, "c": 4.0}
    for data in ["COIL20.mat"] if args.quick else ["COIL20.mat", "Isolet.mat"]:
        x = shuffled(data)
        cases.append((f"{data[:-4]} {x.shape[0]}x{x.shape[1]}", x, quality, 32, 1))
        cases.append((f"{data[:-4]} {x.shape[0]}x{x.shape[1]}", x, quality, 32, 4))
    print(f"numpy {np.__version__}; every POST waits for its decisions; .npy bodies")
    print(
        f"{'case':<22} {'params':<20} {'cols/req':>8} {'prod':>4} {'columns':>7} {'kept':>5} "
        f"{'in-proc col/s':>13} {'HTTP col/s':>10} {'ratio':>6} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'versions':>8} {'state MiB':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp, running_service(Path(tmp)) as (base, process):
        store = redis.Redis(unix_socket_path=str(Path(tmp) / "redis.sock"))
        for i, (label, columns, params, per_call, producers) in enumerate(cases):
            seconds, _kept, local = run_ofs(columns, params, per_call)
            local_rate = columns.shape[1] / seconds
            served = over_http(base, store, f"ofs{i}", columns, params, per_call, producers)
            decided = served["decisions"]
            if producers == 1:
                assert [d["kept"] for d in decided] == local, f"{label}: decisions differ"
            else:  # concurrent requests are numbered in the order they were appended
                assert sorted(d["index"] for d in decided) == list(range(columns.shape[1]))
            shown = ", ".join(f"{k}={v:g}" for k, v in params.items())
            print(
                f"{label:<22} {shown:<20} {per_call:>8} {producers:>4} {columns.shape[1]:>7} "
                f"{served['kept']:>5} {local_rate:>13.0f} {served['columns_per_s']:>10.0f} "
                f"{served['columns_per_s'] / local_rate:>6.0%} {served['p50_ms']:>7.1f} "
                f"{served['p95_ms']:>7.1f} {served['versions']:>8} {served['state_mib']:>9.1f}"
            )
        print(f"service peak RSS {peak_rss_mib(process.pid):.0f} MiB")


if __name__ == "__main__":
    main()
