"""``sources``: a Redis stream of entries with 100 named features read by one service
process into a ``variance`` selector, against one-row POSTs of the same rows and the method
in-process.

The stream is written before the source is created (``XADD``, pipelined, on a redis-server of
its own beside the stack's: a source may not read Sift's own Redis), so the figure is the
consumption's, not the producer's. The buses listen on loopback, which the stack's sources
may reach because the run opts it in (``SIFT_SOURCE_PRIVATE``). Timed from the source's
creation to the selector having *applied* every row (``rows_seen``), with the source's
defaults (2,000-row batches). Beside it, on the same
stack: one-row JSON POSTs with ``wait=false`` from one keep-alive connection (a producer that
emits one event at a time, through the request path), and ``Variance.update`` in-process on
the same rows in chunks of the same size. The selector's variance must equal numpy's to 1e-9.

The same rows are also read as messages: from the Redis stream's entries of one field
(``value_field``) holding a JSON object or a msgpack map, and from JetStream as JSON and as
msgpack (``format``). A service that takes no such option (an older checkout, through
``--service-root``) has those rows say so.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
from live import Stack
from report import table

from service.algorithms.variance import Variance
from service.sources.spec import DEFAULT_BATCH_ROWS as BATCH_ROWS
from suite.context import SEED, Context
from tests.support.harness import RedisProcess
from tests.support.kafka import KafkaBroker, create_topic, produce
from tests.support.nats import NatsServer, add_stream, publish

FEATURES = 100
#: The Kafka topic's partitions (one process reads them all).
KAFKA_PARTITIONS = 4
NAMES = [f"f{i:03d}" for i in range(FEATURES)]
#: The consumption rates aimed at (rows/s applied): every bus; Kafka in one process (its
#: goal: 100,000 with --workers 2).
TARGET = 40_000
KAFKA_TARGET = 60_000
#: The buses listen on loopback: the stack's sources may reach it (``SIFT_SOURCE_PRIVATE``).
LOOPBACK = "127.0.0.0/8"


#: The message formats measured, and how a row is written in each.
ENCODERS: dict[str, Callable[[Any], bytes]] = {
    "json": orjson.dumps,
    "msgpack": msgspec.msgpack.encode,
}


class NotTaken(Exception):
    """The service refused the source's options (422): it has no such option."""


def consume(s: Stack, selector: str, source: dict[str, Any], rows: int) -> float:
    """Create ``source`` into ``selector`` and wait until the selector applied ``rows``
    rows; the seconds from the creation. Raises if an entry was lost, doubled or refused
    (NotTaken if the service refused the source's options)."""
    s.create(
        {"name": selector, "method": "variance", "n_features": FEATURES, "feature_names": NAMES}
    )
    started = time.perf_counter()
    created = s.http.post("/v1/sources", json={**source, "into": {"selector": selector}})
    if created.status_code == 422:
        raise NotTaken(created.json().get("detail", ""))
    if created.status_code != 201:
        raise RuntimeError(f"creating the source: {created.status_code} {created.text}")
    # Polled every 50 ms, not 10: at 100 describes a second the polling took ~7% of the
    # service's CPU while it consumed (py-spy), and 50 ms is ~1% of a run.
    s.wait_applied(selector, rows, 600, every_s=0.05)
    seconds = time.perf_counter() - started
    described = s.http.get(f"/v1/sources/{source['name']}").json()
    if (described["rows"], described["rejected"]) != (rows, 0):
        raise RuntimeError(f"the source consumed {described['rows']} rows: {described}")
    return seconds


def exactness(s: Stack, selector: str, x: np.ndarray) -> float:
    """The selector's variance against numpy's: the largest relative error."""
    served = np.asarray(s.http.get(f"/v1/selectors/{selector}/weights").json()["weights"])
    error = float(np.max(np.abs(served - x.var(axis=0)) / x.var(axis=0)))
    if error > 1e-9:
        raise RuntimeError(f"{selector}'s variance differs from numpy's by {error:.1e}")
    return error


def exact_rate(s: Stack, selector: str, source: dict[str, Any], x: np.ndarray) -> float | str:
    """``x``'s rows consumed from ``source`` into ``selector`` and checked against numpy's
    variance: rows/s applied, or why the service did not take the source."""
    try:
        seconds = consume(s, selector, source, len(x))
    except NotTaken:
        return "not taken by this service"
    exactness(s, selector, x)
    return len(x) / seconds


def nats_rates(s: Stack, folder: Path, x: np.ndarray) -> dict[str, float | str]:
    """The same rows as messages in a JetStream stream, one subject per format (published
    before the clock starts), read by a ``nats`` source each: rows/s applied, by format (or
    why not); empty without ``nats-server``."""
    try:
        server = NatsServer(folder / "nats")
        server.start()
    except RuntimeError:
        return {}
    rates: dict[str, float | str] = {}
    try:
        asyncio.run(add_stream(server.url, "BENCH", ["bench.>"]))
        documents = [dict(zip(NAMES, row, strict=True)) for row in x.tolist()]
        for format, encode in ENCODERS.items():
            asyncio.run(publish(server.url, f"bench.{format}", list(map(encode, documents))))
            source = {
                "name": f"bench-nats-{format}",
                "kind": "nats",
                "url": server.url,
                "stream": "BENCH",
                "subject": f"bench.{format}",
                **({"format": format} if format != "json" else {}),
            }
            rates[format] = exact_rate(s, f"via-nats-{format}", source, x)
        return rates
    finally:
        server.stop()


def one_field_rates(s: Stack, bus: RedisProcess, x: np.ndarray) -> dict[str, float | str]:
    """The same rows as entries of one field (``data``) holding a message, in each format,
    each in a stream of its own written before the clock starts, read by a source with
    ``value_field``: rows/s applied, by format (or why not)."""
    documents = [dict(zip(NAMES, row, strict=True)) for row in x.tolist()]
    writer = bus.client()
    rates: dict[str, float | str] = {}
    for format, encode in ENCODERS.items():
        key = f"bench:{format}"
        for at in range(0, len(documents), 2000):
            pipe = writer.pipeline(transaction=False)
            for document in documents[at : at + 2000]:
                pipe.xadd(key, {"data": encode(document)})
            pipe.execute()
        source = {
            "name": f"bench-{format}",
            "kind": "redis-stream",
            "url": bus.url,
            "key": key,
            "value_field": "data",
            "format": format,
        }
        rates[format] = exact_rate(s, f"via-{format}", source, x)
    return rates


def kafka_rate(s: Stack, folder: Path, x: np.ndarray) -> float | None:
    """The same rows as JSON messages in a Kafka topic of ``KAFKA_PARTITIONS`` partitions
    (produced round robin before the clock starts), read by a ``kafka`` source: rows/s
    applied; None without a JDK or the broker's jars (``scripts/kafka/fetch``)."""
    try:
        broker = KafkaBroker(folder / "kafka")
        broker.start()
    except (RuntimeError, OSError, subprocess.CalledProcessError):
        return None
    try:
        asyncio.run(create_topic(broker.bootstrap, "bench", KAFKA_PARTITIONS))
        documents = [dict(zip(NAMES, row, strict=True)) for row in x.tolist()]
        asyncio.run(produce(broker.bootstrap, "bench", documents, lambda i: i % KAFKA_PARTITIONS))
        source = {
            "name": "bench-kafka",
            "kind": "kafka",
            "bootstrap": broker.bootstrap,
            "topic": "bench",
        }
        seconds = consume(s, "via-kafka", source, len(x))
        exactness(s, "via-kafka", x)
        return len(x) / seconds
    finally:
        broker.stop()


def rate_line(what: str, rate: float | str, local_rate: float) -> list[str]:
    """A row of the table: rows/s and against in-process, or why none."""
    label = f"{what} -> variance, {BATCH_ROWS:,}-row batches"
    if isinstance(rate, str):
        return [label, rate, "-"]
    return [label, f"{rate:,.0f}", f"{rate / local_rate:.3f}"]


def bench_sources(ctx: Context) -> None:
    rows_total = ctx.sizes.source_rows
    rng = np.random.default_rng([SEED, 32])
    x = rng.standard_normal((rows_total, FEATURES)) * rng.uniform(0.5, 50, FEATURES)

    method = Variance()
    params = method.resolve_params({}, FEATURES)
    state = method.initial_state(params)
    started = time.perf_counter()
    for at in range(0, rows_total, BATCH_ROWS):
        state = method.update(state, params, x[at : at + BATCH_ROWS])
    local_rate = rows_total / (time.perf_counter() - started)

    with ctx.stack(SIFT_SOURCE_PRIVATE=LOOPBACK) as s:
        # The bus: a redis-server of its own, written before the clock starts.
        bus = RedisProcess(s.folder / "bus")
        try:
            text = [[repr(float(v)) for v in row] for row in x]
            writer = bus.client()
            for at in range(0, rows_total, 2000):
                pipe = writer.pipeline(transaction=False)
                for row in text[at : at + 2000]:
                    pipe.xadd("bench:events", dict(zip(NAMES, row, strict=True)))
                pipe.execute()
            redis_before = s.counters()
            source = {
                "name": "bench",
                "kind": "redis-stream",
                "url": bus.url,
                "key": "bench:events",
            }
            source_rate = rows_total / consume(s, "v", source, rows_total)
            redis_after = s.counters()
            one_field = one_field_rates(s, bus, x)
        finally:
            bus.close()
        error = exactness(s, "v", x)

        # One-row POSTs of the same rows, one at a time on one connection, not waited for.
        s.create({"name": "w", "method": "variance", "n_features": FEATURES})
        posts = min(rows_total, ctx.sizes.source_posts)
        started = time.perf_counter()
        for i in range(posts):
            response = s.http.post(
                "/v1/selectors/w/chunks", params={"wait": "false"}, json=[x[i].tolist()]
            )
            if response.status_code not in (200, 202):
                raise RuntimeError(f"one-row POST: {response.status_code} {response.text}")
        s.wait_applied("w", posts, 120)
        post_rate = posts / (time.perf_counter() - started)
        via_nats_formats = nats_rates(s, s.folder, x)
        found = via_nats_formats.get("json")
        via_nats = found if isinstance(found, float) else None
        via_kafka = kafka_rate(s, s.folder, x)

    received = redis_after.net_input_bytes - redis_before.net_input_bytes
    lines = [
        [
            f"source: Redis stream -> variance, {BATCH_ROWS:,}-row batches, applied",
            f"{source_rate:,.0f}",
            f"{source_rate / local_rate:.3f}",
        ],
        *[
            rate_line(f"source: Redis stream, one field of {format}", rate, local_rate)
            for format, rate in one_field.items()
        ],
        *[
            rate_line(f"source: NATS JetStream ({format} messages)", rate, local_rate)
            for format, rate in via_nats_formats.items()
        ],
        *(
            []
            if via_nats_formats
            else [["source: NATS JetStream", "nats-server not installed", "-"]]
        ),
        [
            f"source: Kafka, {KAFKA_PARTITIONS} partitions (JSON messages) -> variance, "
            f"{BATCH_ROWS:,}-row batches",
            "no JDK or Kafka jars" if via_kafka is None else f"{via_kafka:,.0f}",
            "-" if via_kafka is None else f"{via_kafka / local_rate:.3f}",
        ],
        [
            "one-row POSTs (`wait=false`, one connection), applied",
            f"{post_rate:,.0f}",
            f"{post_rate / local_rate:.4f}",
        ],
        [f"`Variance.update` in-process, {BATCH_ROWS:,}-row chunks", f"{local_rate:,.0f}", "1"],
    ]
    ratios = []
    for where, rates in (("Redis, one field", one_field), ("JetStream", via_nats_formats)):
        packed, plain = rates.get("msgpack"), rates.get("json")
        if isinstance(packed, float) and isinstance(plain, float):
            ratios.append(f"{where}: msgpack {packed / plain:.2f}x JSON")
    ctx.report.section(
        f"sources: {rows_total:,} entries of {FEATURES} named features",
        table(["", "rows/s", "/ in-process"], lines),
        f"Sift's Redis received {received / 1e6:,.1f} MB while the Redis-stream source ran "
        f"({received / (rows_total * FEATURES * 8):.2f}x the rows' float64 bytes; the entries "
        "it read came from the bus's own redis-server). Both selectors' variance "
        f"equals numpy's (largest relative error {error:.0e})."
        + (f" Messages, rows/s: {'; '.join(ratios)}." if ratios else ""),
    )
    ctx.report.figure(
        "sources",
        f"{source_rate:,.0f} rows/s applied ({source_rate / post_rate:.0f}x one-row POSTs); "
        + ("NATS not measured" if via_nats is None else f"NATS {via_nats:,.0f} rows/s")
        + ("; Kafka not measured" if via_kafka is None else f"; Kafka {via_kafka:,.0f} rows/s"),
        source_rate >= TARGET and via_nats is not None and via_nats >= TARGET,
    )
    if via_kafka is not None:
        ctx.report.figure(
            "sources-kafka",
            f"{via_kafka:,.0f} rows/s applied ({via_kafka / source_rate:.2f}x the Redis-stream "
            "source in the same run)",
            via_kafka >= KAFKA_TARGET,
        )
