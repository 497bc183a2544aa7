"""The Kafka phase of the sources benchmark alone, repeated in one stack: rows/s applied, and
the CPU the service, Redis and the broker spent per row while it ran (BENCHMARKS.md, "The
Kafka source").

    .venv/bin/python benchmarks/bench_kafka_source.py --runs 4      # ~1 minute
    .venv/bin/python benchmarks/bench_kafka_source.py --workers 2   # sift serve --workers 2

After the runs, the same topic is read in this process by the source's own bus and converted by
its own ``EntryShape``, partition by partition in 2,000-message batches with nothing else to
do: the rate and CPU per row of the read and the conversion alone, the floor under the
service's figure.

The topic (4 partitions, 100,000 JSON messages of 100 named features, produced round robin)
is written once; each run creates a new ``kafka`` source reading it from the start into a new
``variance`` selector, so the runs differ only by the machine's noise. Needs a JDK and the
broker's jars (``scripts/kafka/fetch``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# benchmarks/ is this script's directory, hence on sys.path, as for run.py.
import redis.asyncio as aioredis  # noqa: E402
from live import stack  # noqa: E402
from suite.sources import FEATURES, KAFKA_PARTITIONS, NAMES, consume  # noqa: E402

from service.sources.adapters import bus_for  # noqa: E402
from service.sources.entries import EntryShape  # noqa: E402
from service.sources.reach import Reach  # noqa: E402
from tests.support.kafka import KafkaBroker, create_topic, produce  # noqa: E402

#: Messages per read and conversion in the in-process floor (the sources' default batch).
BATCH = 2000


def cpu_seconds(process: psutil.Process) -> float:
    """The CPU ``process`` and its living children (``--workers``' processes) spent."""
    total = 0.0
    for each in [process, *process.children(recursive=True)]:
        times = each.cpu_times()
        total += times.user + times.system
    return total


async def read_alone(bootstrap: str, redis_url: str, rows: int) -> tuple[float, float, float]:
    """The topic read from the start by a source's bus in this process, every batch converted:
    the seconds it took, the seconds of this process's CPU (librdkafka's threads too), and
    the conversion's (its thread's)."""
    own = aioredis.from_url(redis_url)
    definition = {"kind": "kafka", "name": "alone", "bootstrap": bootstrap, "topic": "bench"}
    bus = bus_for(definition, Reach.of("127.0.0.0/8", own))
    shape = EntryShape(NAMES, None)
    partitions = [str(p) for p in range(KAFKA_PARTITIONS)]
    try:
        await bus.connect()
        bus.keep(partitions)
        after = {p: (await bus.start(p, "earliest")).position for p in partitions}
        read, converting = 0, 0.0
        started, cpu = time.perf_counter(), time.process_time()
        while read < rows:
            for partition in partitions:
                entries = await bus.read(partition, after[partition], BATCH, 1 << 30, 0.05)
                if entries:
                    at = time.thread_time()
                    read += len(shape.convert(entries).rows)
                    converting += time.thread_time() - at
                    after[partition] = entries[-1].position
        return time.perf_counter() - started, time.process_time() - cpu, converting
    finally:
        await bus.close()
        await own.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=1, help="sift serve --workers N")
    options = parser.parse_args()
    rng = np.random.default_rng([7, 32])
    x = rng.standard_normal((options.rows, FEATURES)) * rng.uniform(0.5, 50, FEATURES)
    documents = [dict(zip(NAMES, row, strict=True)) for row in x.tolist()]
    with tempfile.TemporaryDirectory() as folder:
        broker = KafkaBroker(Path(folder) / "kafka")
        broker.start()
        try:
            asyncio.run(create_topic(broker.bootstrap, "bench", KAFKA_PARTITIONS))
            asyncio.run(
                produce(broker.bootstrap, "bench", documents, lambda i: i % KAFKA_PARTITIONS)
            )
            serve = ["--log-level", "warning"]
            if options.workers > 1:
                serve += ["--workers", str(options.workers)]
            with stack(ROOT, {"SIFT_SOURCE_PRIVATE": "127.0.0.0/8"}, serve) as s:
                service = psutil.Process(s.service.pid)
                redis = psutil.Process(s.redis.server.pid)
                assert broker.process is not None
                kafka = psutil.Process(broker.process.pid)
                for run in range(options.runs):
                    processes = (service, redis, kafka)
                    before = [cpu_seconds(p) for p in processes]
                    source = {
                        "name": f"kafka-{run}",
                        "kind": "kafka",
                        "bootstrap": broker.bootstrap,
                        "topic": "bench",
                    }
                    seconds = consume(s, f"via-kafka-{run}", source, options.rows)
                    service_cpu, redis_cpu, kafka_cpu = (
                        cpu_seconds(p) - b for p, b in zip(processes, before, strict=True)
                    )
                    rows = options.rows
                    print(
                        f"run {run + 1}: {rows / seconds:,.0f} rows/s applied; service "
                        f"{service_cpu / seconds:.0%} of a core, "
                        f"{service_cpu / rows * 1e6:.1f} us of CPU per row; Redis "
                        f"{redis_cpu / seconds:.0%}, {redis_cpu / rows * 1e6:.1f} us per row; "
                        f"the broker {kafka_cpu / seconds:.0%}, {kafka_cpu / rows * 1e6:.1f} us",
                        flush=True,
                    )
                seconds, cpu, converting = asyncio.run(
                    read_alone(broker.bootstrap, s.redis.url, options.rows)
                )
                print(
                    f"in-process, the bus and the conversion alone: "
                    f"{options.rows / seconds:,.0f} rows/s; {cpu / options.rows * 1e6:.1f} us "
                    f"of CPU per row, {converting / options.rows * 1e6:.1f} of them converting",
                    flush=True,
                )
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
