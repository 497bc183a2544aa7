"""IQRP served: the pivoted-QR order of columns stored in Redis blocks, against in-memory IQRP.

Starts the real service (embedded Redis, temporary data directory), creates an ``iqrp``
selector per dataset, pushes its features as columns (``.npy``, 128 columns per request) and
times ``GET .../top?h=k`` for several k: the first answer (IQRP reading blocks from Redis in
passes) and the cached one, with the blocks read out of the total, next to ``iqrp`` on the
same matrix in memory. The order is checked against the in-memory one.

    .venv/bin/python benchmarks/bench_iqrp_http.py            # COIL20, Isolet, warpPIE10P
    .venv/bin/python benchmarks/bench_iqrp_http.py --quick    # COIL20 only
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# benchmarks/ is the script's directory, hence on sys.path.
from bench_http import running_service
from bench_ofs import load

from service.algorithms.pivoted_qr import MatrixSource, iqrp

PUSH_COLUMNS = 128
BLOCK_COLUMNS = 64


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def bench_dataset(client: httpx.Client, data: str) -> None:
    x = load(data)
    m, n = x.shape
    name = data.removesuffix(".mat").lower()
    client.post(
        "/v1/selectors",
        json={
            "name": name,
            "method": "iqrp",
            "n_samples": m,
            "params": {"block_columns": BLOCK_COLUMNS},
        },
    ).raise_for_status()
    started = time.perf_counter()
    for start in range(0, n, PUSH_COLUMNS):
        client.post(
            f"/v1/selectors/{name}/features",
            content=npy(x[:, start : start + PUSH_COLUMNS]),
            headers={"content-type": "application/x-npy"},
        ).raise_for_status()
    push_rate = n / (time.perf_counter() - started)
    for k in (10, 50, 100):
        started = time.perf_counter()
        first = client.get(f"/v1/selectors/{name}/top", params={"h": k})
        first.raise_for_status()
        first_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        client.get(f"/v1/selectors/{name}/top", params={"h": k}).raise_for_status()
        cached_ms = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        local = iqrp(MatrixSource(x, block_columns=BLOCK_COLUMNS), k)
        local_ms = (time.perf_counter() - started) * 1000
        body = first.json()
        assert [f["index"] for f in body["features"]] == local.indices, data
        account = body["account"]
        blocks = f"{account['blocks_read']}/{account['blocks_total']}"
        print(
            f"{name:<11} {f'{m}x{n}':<10} {push_rate:>10.0f} {k:>4} "
            f"{account['passes']:>6} {account['io_passes']:>7.2f} {blocks:>12} "
            f"{first_ms:>10.1f} {cached_ms:>11.1f} {local_ms:>9.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="COIL20 only")
    args = parser.parse_args()
    datasets = ["COIL20.mat"] if args.quick else ["COIL20.mat", "Isolet.mat", "warpPIE10P.mat"]
    print(f"blocks of {BLOCK_COLUMNS} columns; l = k; times in ms")
    print(
        f"{'data':<11} {'m x n':<10} {'push col/s':>10} {'k':>4} {'passes':>6} {'IO-pass':>7} "
        f"{'reads/blocks':>12} {'HTTP first':>10} {'HTTP cached':>11} {'in-memory':>9}"
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_service(Path(tmp)) as (base, _),
        httpx.Client(base_url=base, timeout=600) as client,
    ):
        for data in datasets:
            bench_dataset(client, data)


if __name__ == "__main__":
    main()
