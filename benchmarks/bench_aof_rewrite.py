"""What a wide state in Redis costs a bystander when Redis rewrites its append-only file: the
floor under the PING maximum of the big-state rows of ``run.py``.

A redis-server as the benchmarks run it (AOF on, ``appendfsync always``) holds FSDS's whole
state at ``m`` features twice (the current checkpoint and the one being written); another
client PINGs it every 5 ms, as ``run.py``'s probe does, while:

* the floor: the data set at rest is rewritten (``BGREWRITEAOF``), with one 200-byte write
  every 5 ms (a commit record's size) so that the main thread fsyncs meanwhile;
* a checkpoint of the state is written in the store's pieces (``codec.PIECE_BYTES``) during a
  rewrite;
* the same checkpoint written with no rewrite.

Redis's own rewrites are off (``auto-aof-rewrite-percentage 0``): each case starts its own.

No service runs: the waits are Redis's own (its ``LATENCY LATEST`` events are printed too).
``--busy-cores N`` keeps N cores computing meanwhile (one process each multiplying 800 x 800
matrices on one BLAS thread), as an FSDS update on the service's update threads does.

    .venv/bin/python benchmarks/bench_aof_rewrite.py              # m = 20,000 and 50,000
    .venv/bin/python benchmarks/bench_aof_rewrite.py --m 50000 --busy-cores 2
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from live import PING_INTERVAL_S, PingProbe  # noqa: E402

from service.algorithms import get_method  # noqa: E402
from service.store.codec import PIECE_BYTES  # noqa: E402
from tests.support.harness import RedisProcess  # noqa: E402

#: Pieces written per round trip (the store's pipeline of a checkpoint's pieces is like it).
PIECES_PER_ROUND_TRIP = 4


def state_bytes(m: int) -> int:
    """The bytes of FSDS's state at ``m`` features at its defaults."""
    method = get_method("fsds")
    state = method.initial_state(method.resolve_params({}, m))
    return sum(int(getattr(value, "nbytes", 0)) for value in state.values())


def write_pieces(client: redis.Redis, key: str, total: int) -> None:
    """``total`` bytes as a hash of ``PIECE_BYTES`` pieces, a few per round trip."""
    blob = os.urandom(PIECE_BYTES)
    pipe = client.pipeline(transaction=False)
    for i in range(max(1, total // PIECE_BYTES)):
        pipe.hset(key, f"p{i}", blob)
        if (i + 1) % PIECES_PER_ROUND_TRIP == 0:
            pipe.execute()
    pipe.execute()


def rewrite(client: redis.Redis) -> None:
    """Start an AOF rewrite and wait for it to end."""
    client.bgrewriteaof()
    time.sleep(0.05)
    while client.info("persistence")["aof_rewrite_in_progress"]:
        time.sleep(0.02)


def small_writes(port: int, stop: threading.Event) -> None:
    client = redis.Redis(host="127.0.0.1", port=port)
    i = 0
    while not stop.wait(PING_INTERVAL_S):
        client.set(f"commit:{i % 100}", b"x" * 200)
        i += 1
    client.close()


def measure(label: str, size: int, work: Callable[[redis.Redis], None]) -> None:
    """A fresh Redis holding ``size`` bytes, PINGed while ``work`` runs: one printed line."""
    with tempfile.TemporaryDirectory(prefix="sift-aof-") as folder:
        server = RedisProcess(Path(folder) / "redis")
        client = server.client()
        try:
            # Rewrites only where a case starts one.
            client.config_set("auto-aof-rewrite-percentage", 0)
            client.config_set("latency-monitor-threshold", 5)
            write_pieces(client, "checkpoint:0", size)
            client.bgrewriteaof()  # the data set's own base file, before measuring
            while client.info("persistence")["aof_rewrite_in_progress"]:
                time.sleep(0.05)
            client.latency_reset()
            stop = threading.Event()
            writer = threading.Thread(target=small_writes, args=(server.port, stop), daemon=True)
            with PingProbe(server.port) as probe:
                writer.start()
                time.sleep(0.5)
                started = time.perf_counter()
                work(client)
                took = time.perf_counter() - started
                time.sleep(0.5)
                stop.set()
            writer.join()
            # Each event: its name, when, the latest and the worst milliseconds.
            events = {
                bytes(name).decode() if isinstance(name, bytes) else str(name): int(worst)
                for name, _, _, worst in client.latency_latest()
            }
            fork_ms = int(client.info("stats")["latest_fork_usec"]) / 1e3
        finally:
            client.close()
            server.stop()
    shown = ", ".join(f"{name} {ms} ms" for name, ms in sorted(events.items())) or "none"
    print(
        f"  {label}: {took:.1f} s; PING p99 {probe.latencies.ms(99):.1f} ms, max "
        f"{probe.latencies.max_ms:.1f} ms; last fork {fork_ms:.1f} ms; Redis's worst events: "
        f"{shown}",
        flush=True,
    )


#: What a busy core runs: matrix products on one BLAS thread until killed.
_BUSY = (
    "import os; os.environ['OPENBLAS_NUM_THREADS'] = os.environ['OMP_NUM_THREADS'] = '1'\n"
    "import numpy as np\n"
    "a = np.random.default_rng(0).random((800, 800))\n"
    "while True: a @ a"
)


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """``count`` processes computing for as long as the block runs."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    workers = [subprocess.Popen([sys.executable, "-c", _BUSY], env=env) for _ in range(count)]
    try:
        time.sleep(1.0 if workers else 0.0)  # numpy imported, computing
        yield
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


def report(m: int) -> None:
    size = state_bytes(m)
    print(f"fsds m = {m:,}: state {size / 2**20:,.1f} MiB", flush=True)
    measure("the floor: the state at rest rewritten", size, rewrite)

    def checkpoint_while_rewriting(client: redis.Redis) -> None:
        client.bgrewriteaof()
        write_pieces(client, "checkpoint:1", size)
        while client.info("persistence")["aof_rewrite_in_progress"]:
            time.sleep(0.02)

    measure("a checkpoint written during a rewrite", size, checkpoint_while_rewriting)
    measure(
        "a checkpoint written, no rewrite",
        size,
        lambda client: write_pieces(client, "checkpoint:1", size),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, action="append", help="features (repeatable)")
    parser.add_argument("--busy-cores", type=int, default=0, help="cores kept computing")
    options = parser.parse_args()
    with busy_cores(options.busy_cores):
        print(f"cores kept computing: {options.busy_cores} of {os.cpu_count()}", flush=True)
        for m in options.m or [20_000, 50_000]:
            report(m)


if __name__ == "__main__":
    main()
