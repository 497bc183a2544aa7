"""How fast a chunk's body becomes validated rows, by format: the same rows as JSON, ``.npy``,
``text/csv`` and an Arrow IPC stream, each decoded as the service decodes it
(``service.wire.rows.decode_rows``: parsing, the names matched, every value checked).

The rows fill a CSV of about ``--mb`` megabytes (``%.17g``, every bit of every float);
the other bodies hold exactly those rows. One thread, best of ``--repeat``; ``peak MB`` is the
most memory the decoding held at once beyond the body (``tracemalloc``, which numpy reports to):
JSON's Python objects, the other formats' arrays.

    .venv/bin/python benchmarks/bench_table_formats.py             # 10 MB, 50 features
    .venv/bin/python benchmarks/bench_table_formats.py --mb 4 --features 500
"""

from __future__ import annotations

import argparse
import io
import time
import tracemalloc

import numpy as np
import orjson
import pyarrow as pa

from service.wire.media import ARROW, CSV, JSON, NPY
from service.wire.rows import decode_rows


def bodies(n_rows: int, n_features: int) -> tuple[np.ndarray, list[str], dict[str, bytes]]:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((n_rows, n_features))
    names = [f"f{j}" for j in range(n_features)]
    text = io.StringIO()
    text.write(",".join(names) + "\n")
    np.savetxt(text, rows, delimiter=",", fmt="%.17g")
    npy = io.BytesIO()
    np.save(npy, rows, allow_pickle=False)
    table = pa.table({name: rows[:, j] for j, name in enumerate(names)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=10_000)
    return (
        rows,
        names,
        {
            JSON: orjson.dumps({"rows": rows.tolist(), "feature_names": names}),
            NPY: npy.getvalue(),
            CSV: text.getvalue().encode(),
            ARROW: bytes(sink.getvalue().to_pybytes()),
        },
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=10.0, help="size of the CSV body")
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # A %.17g standard normal is about 20 characters and its comma.
    n_rows = max(1, int(args.mb * 1e6 / (21 * args.features)))
    rows, names, encoded = bodies(n_rows, args.features)
    print(f"{n_rows} rows x {args.features} features")
    print(f"{'format':<37} {'MB':>5} {'seconds':>8} {'rows/s':>11} {'peak MB':>8}")
    for media_type, body in encoded.items():
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            decoded = decode_rows(body, media_type, args.features, 2**31, names)
            best = min(best, time.perf_counter() - start)
        assert np.asarray(decoded.rows).tobytes() == rows.tobytes(), media_type
        del decoded
        tracemalloc.start()
        decode_rows(body, media_type, args.features, 2**31, names)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"{media_type:<37} {len(body) / 1e6:>5.1f} {best:>8.3f} {n_rows / best:>11,.0f} "
            f"{peak / 1e6:>8.1f}"
        )


if __name__ == "__main__":
    main()
