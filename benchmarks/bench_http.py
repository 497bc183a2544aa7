"""End-to-end HTTP throughput of FSDS against the same update run in-process.

Starts the real service (``python -m service serve``) in a subprocess on its embedded Redis
default (a temporary data directory), pushes 1000-row chunks and prints rows/s, POST latency
percentiles, the service's peak RSS and Redis memory, next to the in-process rows/s of the
same FSDS updates on the same chunks. Target of the FSDS issue: HTTP >= 70% of in-process.

    .venv/bin/python benchmarks/bench_http.py            # BASEHOCK text (.npz) and dense (.npy)
    .venv/bin/python benchmarks/bench_http.py --quick    # smaller run
"""

from __future__ import annotations

import argparse
import io
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import redis
import scipy.io
import scipy.sparse as sp

from service.algorithms.fsds import FSDS
from service.wire.rows import validate_rows

# datasets/ at the repository root (tests.support.datasets is not importable: root not on sys.path).
DATA = Path(__file__).resolve().parents[1] / "datasets"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_service(data_dir: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    env = {**os.environ, "SIFT_DATA_DIR": str(data_dir), "SIFT_PORT": str(port)}
    # The dense case sends 200 MiB chunks, over the default body limit of 64 MiB.
    env.setdefault("SIFT_MAX_BODY_BYTES", str(256 * 2**20))
    env.pop("SIFT_REDIS_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "serve", "--log-level", "warning"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/v1/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                assert process.stderr is not None  # stderr=PIPE above
                raise RuntimeError(f"service did not start: {process.stderr.read().decode()}")
            time.sleep(0.1)
        yield base, process
    finally:
        process.terminate()
        process.wait(timeout=30)


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def encode(chunk: Any) -> tuple[bytes, str]:
    buffer = io.BytesIO()
    if sp.issparse(chunk):
        sp.save_npz(buffer, sp.csr_matrix(chunk))
        return buffer.getvalue(), "application/x-npz"
    np.save(buffer, chunk, allow_pickle=False)
    return buffer.getvalue(), "application/x-npy"


def in_process_rows_per_s(chunks: list[Any], n_features: int, params: dict[str, Any]) -> float:
    """The same work the service's applier does, without HTTP, Redis or the codec."""
    method = FSDS()
    resolved = method.resolve_params(params, n_features)
    state = method.initial_state(resolved)
    started = time.perf_counter()
    for chunk in chunks:
        state = method.update(state, resolved, validate_rows(chunk, n_features))
    rows = sum(int(chunk.shape[0]) for chunk in chunks)
    return rows / (time.perf_counter() - started)


def http_run(
    base: str, name: str, chunks: list[Any], n_features: int, params: dict[str, Any], producers: int
) -> dict[str, float]:
    with httpx.Client(base_url=base, timeout=600) as client:
        created = client.post(
            "/v1/selectors",
            json={"name": name, "method": "fsds", "n_features": n_features, "params": params},
        )
        created.raise_for_status()
        bodies = [encode(chunk) for chunk in chunks]
        latencies: list[float] = []

        def post(i: int) -> None:
            body, media_type = bodies[i]
            started = time.perf_counter()
            response = client.post(
                f"/v1/selectors/{name}/chunks",
                content=body,
                headers={"content-type": media_type, "idempotency-key": f"{name}-{i}"},
            )
            response.raise_for_status()
            latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        with ThreadPoolExecutor(producers) as pool:
            list(pool.map(post, range(len(bodies))))
        elapsed = time.perf_counter() - started
        described = client.get(f"/v1/selectors/{name}").json()
    rows = sum(c.shape[0] for c in chunks)
    assert described["rows_seen"] == rows, described
    return {
        "rows_per_s": rows / elapsed,
        "p50_ms": float(np.percentile(latencies, 50) * 1000),
        "p95_ms": float(np.percentile(latencies, 95) * 1000),
        "versions": described["version"],
        "body_mib": sum(len(b) for b, _ in bodies) / len(bodies) / 2**20,
    }


def basehock_chunks(target_rows: int, chunk_rows: int) -> list[sp.csr_matrix]:
    X = sp.csr_matrix(scipy.io.loadmat(DATA / "BASEHOCK.mat")["X"], dtype=np.float64)
    repeats = -(-target_rows // X.shape[0])
    stacked = sp.vstack([X] * repeats, format="csr")[:target_rows]
    order = np.random.default_rng(0).permutation(stacked.shape[0])
    stacked = stacked[order]
    return [stacked[i : i + chunk_rows] for i in range(0, target_rows, chunk_rows)]


def dense_chunks(n_rows: int, n_features: int, chunk_rows: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    basis = rng.standard_normal((30, n_features))
    chunks = []
    for _ in range(0, n_rows, chunk_rows):
        chunk = rng.standard_normal((chunk_rows, 30)) @ basis
        chunk += 0.1 * rng.standard_normal((chunk_rows, n_features))
        chunks.append(chunk)
    return chunks


def report(label: str, in_process: list[float], http: list[dict[str, float]], rss: float) -> None:
    """Medians over the rounds (the machine is shared: single runs vary by +-30%)."""
    inproc = float(np.median(in_process))
    served = float(np.median([h["rows_per_s"] for h in http]))
    ratios = [h["rows_per_s"] / p for h, p in zip(http, in_process, strict=True)]
    rounds = ", ".join(f"{r:.0%}" for r in ratios)
    p50 = np.median([h["p50_ms"] for h in http])
    p95 = np.median([h["p95_ms"] for h in http])
    print(
        f"{label:<32} in-process {inproc:8.0f} rows/s | HTTP {served:8.0f} rows/s | "
        f"HTTP/in-process median {np.median(ratios):4.0%} (rounds {rounds}; target >= 70%) | "
        f"POST p50 {p50:7.1f} ms p95 {p95:7.1f} ms | body {http[0]['body_mib']:5.1f} MiB | "
        f"versions {http[0]['versions']:.0f} | service peak RSS {rss:5.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer rows and rounds")
    parser.add_argument(
        "--dense", action="store_true", help="also 200 MiB dense m=26214 chunks (disk-bound)"
    )
    args = parser.parse_args()
    rounds = 1 if args.quick else 3
    sparse_rows = 3000 if args.quick else 6000
    text = lambda: basehock_chunks(sparse_rows, 1000)  # noqa: E731
    cases: list[tuple[str, Callable[[], list[Any]], int, dict[str, Any], int]] = [
        ("BASEHOCK .npz, 1 producer", text, 4862, {"k": 2}, 1),
        ("BASEHOCK .npz, 4 producers", text, 4862, {"k": 2}, 4),
    ]
    if args.dense:
        dense = lambda: dense_chunks(3000, 26214, 1000)  # noqa: E731
        cases.append(("dense m=26214 .npy, 1 producer", dense, 26214, {"k": 20}, 1))
    print(
        f"numpy {np.__version__}; 1000-row chunks; every POST waits until applied; {rounds} rounds"
    )
    with tempfile.TemporaryDirectory() as tmp, running_service(Path(tmp)) as (base, process):
        store = redis.Redis(unix_socket_path=str(Path(tmp) / "redis.sock"))
        for i, (label, make, n_features, params, producers) in enumerate(cases):
            chunks = make()
            in_process: list[float] = []
            http: list[dict[str, float]] = []
            for round_ in range(rounds):
                # Interleaved, so a slow spell of the machine hits both sides alike.
                in_process.append(in_process_rows_per_s(chunks, n_features, params))
                http.append(
                    http_run(base, f"bench{i}-{round_}", chunks, n_features, params, producers)
                )
            report(label, in_process, http, peak_rss_mib(process.pid))
        print(f"Redis used_memory {store.info('memory')['used_memory'] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
