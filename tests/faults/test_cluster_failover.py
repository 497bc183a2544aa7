"""A Redis Cluster master SIGKILLed while producers push: its replica takes over, nothing
acknowledged is lost, and the selectors of the other masters never notice.

Three masters with one replica each (``appendfsync always``), a real ``sift serve`` with
``SIFT_REDIS_WAIT_REPLICAS=1`` (a chunk is acknowledged only once the replica of its selector's
master has it), six ``ocfs`` selectors, two on each master, and one producer per selector pushing
chunks with Idempotency-Keys, retrying 503s. Then the master of two of them is SIGKILLed:

* the selectors of the other masters answer 200 all along;
* those of the failed master answer 503 with Retry-After (no internal text) until its replica is
  promoted: reads come back then, writes once the promoted master has a replica to wait for
  again (the killed node, restarted as an orchestrator would, rejoins as that replica);
* afterwards every acknowledged chunk is applied exactly once (the OCFS tally of each selector).

Before the kill, the same chunks are timed through this service and through one without
``SIFT_REDIS_WAIT_REPLICAS``: what waiting for the replica costs a producer.

Run: ``.venv/bin/python -m pytest tests/faults/test_cluster_failover.py -p no:cacheprovider -s``
(its figures are printed as ``FAULT FIGURES`` and kept as junit properties).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from service.store.keys import SelectorKeys
from tests.support.cluster import LocalCluster, NodeProcess
from tests.support.harness import (
    OCFS_FEATURES,
    Answer,
    Ledger,
    Producer,
    ServiceProcess,
    Traffic,
    Workers,
    create_selector,
    ocfs_chunk,
    report,
    tally_ocfs,
    wait_all_applied,
    wait_for,
)

#: Selectors per master.
PER_MASTER = 2
#: How long the producers push before the kill, and after the failed master's selectors
#: answer again.
STEADY_S = 3.0
#: Chunks timed through each service (with and without waiting for a replica).
TIMED_CHUNKS = 60
#: How long a failover may take before the test gives up (node timeout 2 s, then election).
PROMOTION_TIMEOUT_S = 30.0


@dataclass
class TimedTraffic(Traffic):
    """``Traffic`` that also notes when each 5xx or transport error came (monotonic time)."""

    failures_at: list[float] = field(default_factory=list)

    def count(self, transport_error: bool = False, answer: Answer | None = None) -> None:
        super().count(transport_error, answer)
        if transport_error or answer is not None:
            with self.lock:
                self.failures_at.append(time.monotonic())


@dataclass
class Stream:
    """One selector, its producer's traffic and when each of its chunks was acknowledged."""

    name: str
    master: NodeProcess
    traffic: TimedTraffic = field(default_factory=TimedTraffic)
    ledger: Ledger = field(default_factory=Ledger)
    acked_at: list[float] = field(default_factory=list)

    def acks_between(self, start: float, end: float) -> int:
        with self.ledger.lock:
            return sum(start <= at <= end for at in self.acked_at)


def produce(stream: Stream, url: str, seed: int, abort: threading.Event) -> Callable[..., None]:
    """A producer thread: chunks of 1-8 rows, each pushed (wait=true) until acknowledged."""

    def run(stop: threading.Event) -> None:
        rng = np.random.default_rng(seed)
        producer = Producer([url], stream.traffic, abort=abort, max_pause_s=0.5)
        try:
            seq = 0
            while not stop.is_set():
                chunk = ocfs_chunk(
                    cid=seed * 1_000_000 + seq,
                    rows=int(rng.integers(1, 9)),
                    key=f"{stream.name}-{seq}",
                    npz=bool(rng.random() < 0.25),
                )
                stream.ledger.send(chunk)
                ack = producer.push(
                    f"/v1/selectors/{stream.name}/chunks",
                    chunk.body,
                    chunk.content_type,
                    chunk.key,
                    wait=True,
                )
                with stream.ledger.lock:
                    stream.acked_at.append(time.monotonic())
                stream.ledger.ack(ack)
                seq += 1
                stop.wait(float(rng.uniform(0.01, 0.05)))
        finally:
            producer.close()

    return run


def timed_posts(services: list[ServiceProcess], name: str, wait: bool) -> dict[str, list[float]]:
    """Seconds each of ``TIMED_CHUNKS`` POSTs took through each service, one producer, the
    services taking turns (so that the machine's load drifts alike for all of them)."""
    seconds: dict[str, list[float]] = {service.name: [] for service in services}
    clients = [httpx.Client(base_url=service.url, timeout=30) for service in services]
    try:
        for i in range(TIMED_CHUNKS):
            for service, http in zip(services, clients, strict=True):
                chunk = ocfs_chunk(9_000_000 + i, 4, f"t-{service.name}-{wait}-{i}")
                started = time.perf_counter()
                response = http.post(
                    f"/v1/selectors/{name}/chunks",
                    params={"wait": "true" if wait else "false"},
                    content=chunk.body,
                    headers={"content-type": chunk.content_type, "idempotency-key": chunk.key},
                )
                seconds[service.name].append(time.perf_counter() - started)
                assert response.status_code in (200, 202), response.text
    finally:
        for http in clients:
            http.close()
    return seconds


def latency(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "median_ms": round(1000 * statistics.median(ordered), 1),
        "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1),
    }


def promoted(replica: NodeProcess) -> bool:
    try:
        return replica.info("replication").get("role") == "master"
    except Exception:
        return False


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path / "cluster", masters=3, replicas=1) as started:
        yield started


@pytest.mark.slow
def test_a_failed_master_is_replaced_and_nothing_acknowledged_is_lost(
    cluster: LocalCluster, tmp_path: Path, record_property: Any
) -> None:
    started = time.monotonic()
    waiting = ServiceProcess(
        "waits",
        cluster.url,
        tmp_path,
        {"SIFT_REDIS_WAIT_REPLICAS": "1", "SIFT_REDIS_WAIT_MS": "500"},
    )
    plain = ServiceProcess("plain", cluster.url, tmp_path, {})
    workers = Workers()
    try:
        waiting.start()
        plain.start()
        url = waiting.url

        # Two selectors on each master.
        streams: list[Stream] = []
        per_master: dict[int, int] = {}
        for i in range(64):
            name = f"f{i}"
            master = cluster.master_of(SelectorKeys("sift", name).head)
            if per_master.get(master.port, 0) < PER_MASTER:
                per_master[master.port] = per_master.get(master.port, 0) + 1
                streams.append(Stream(name, master))
            if len(streams) == 3 * PER_MASTER:
                break
        assert len(per_master) == 3, per_master
        for stream in streams:
            create_selector(url, {"name": stream.name, "method": "ocfs", "n_features": 3})

        # What waiting for the replica costs: the same chunks through both services.
        create_selector(url, {"name": "timed", "method": "ocfs", "n_features": OCFS_FEATURES})
        costs: dict[str, Any] = {}
        for wait in (False, True):
            for service_name, seconds in timed_posts([plain, waiting], "timed", wait).items():
                costs[f"{service_name}_{'applied' if wait else 'appended'}"] = latency(seconds)
        plain.kill()

        for seed, stream in enumerate(streams, start=1):
            workers.spawn(f"producer-{stream.name}", produce(stream, url, seed, workers.abort))
        time.sleep(STEADY_S)
        workers.check()

        victim = streams[0].master
        doomed = [s for s in streams if s.master is victim]
        healthy = [s for s in streams if s.master is not victim]
        replica = next(
            node
            for node in cluster.nodes
            if node.info("replication").get("master_port") == str(victim.port)
        )
        victim.kill()
        killed_at = time.monotonic()

        # Reads of a failed master's selector come back once its replica is promoted.
        reads_back_at: float | None = None
        with httpx.Client(base_url=url, timeout=10) as http:
            while reads_back_at is None:
                workers.check()
                assert time.monotonic() - killed_at < PROMOTION_TIMEOUT_S, "no failover"
                if http.get(f"/v1/selectors/{doomed[0].name}").status_code == 200:
                    reads_back_at = time.monotonic()
                time.sleep(0.05)
        wait_for(lambda: promoted(replica), PROMOTION_TIMEOUT_S, "the promotion")
        promoted_at = time.monotonic()
        # The orchestrator restarts the killed node: it rejoins as the new master's replica.
        victim.start()
        cluster.wait_healthy()
        rejoined_at = time.monotonic()
        # Writes come back by themselves (the producers only retry).
        for stream in doomed:

            def answered_again(stream: Stream = stream) -> bool:
                return stream.acks_between(rejoined_at, time.monotonic()) >= 3

            wait_for(answered_again, 60, f"acknowledgements of {stream.name} after the failover")
        writes_back_at = min(
            next(at for at in stream.acked_at if at > killed_at) for stream in doomed
        )
        time.sleep(STEADY_S)
        workers.join(timeout_s=120)
    except BaseException:
        workers.abandon()
        for service in (waiting, plain):
            print(f"--- log tail of service {service.name}:\n{service.log_tail()}")
        raise
    finally:
        waiting.kill()
        plain.kill()

    problems: list[str] = []
    assert waiting.starts == 1
    waiting.start()  # a fresh process reads what Redis kept: the tally is Redis's
    try:
        with cluster.client() as client:
            tallies = {}
            for stream in streams:
                acked, unacked = stream.ledger.split()
                described = wait_all_applied(waiting.url, stream.name, timeout_s=60)
                tally = tally_ocfs(client, stream.name, acked, unacked)
                tallies[stream.name] = tally.figures()
                problems += [f"{stream.name}: {problem}" for problem in tally.problems()]
                if described["rows_seen"] != tally.rows_expected:
                    problems.append(f"{stream.name}: rows_seen {described['rows_seen']}")
    finally:
        waiting.kill()

    for stream in healthy:
        with stream.traffic.lock:
            failures = list(stream.traffic.server_errors)
            transport = stream.traffic.transport_errors
        if failures or transport:
            problems.append(
                f"{stream.name} (another master) got {len(failures)} 5xx and {transport} "
                f"transport errors: {[str(answer) for answer in failures[:3]]}"
            )
        if not stream.acks_between(killed_at, promoted_at):
            problems.append(f"{stream.name} (another master) was not answered during the failover")
    unavailable: list[Answer] = []
    for stream in doomed:
        with stream.traffic.lock:
            unavailable += stream.traffic.server_errors
            if stream.traffic.transport_errors:
                problems.append(
                    f"{stream.name}: {stream.traffic.transport_errors} transport errors"
                )
    if not unavailable:
        problems.append("the failed master's selectors were never answered 503")
    for answer in unavailable:
        problems += [f"{answer}: {defect}" for defect in answer.defects([str(victim.port)])]
    window = [at for stream in doomed for at in stream.traffic.failures_at]
    figures: dict[str, Any] = {
        "cluster": "3 masters + 3 replicas, appendfsync always, cluster-node-timeout 2000 ms",
        "wait_replicas": 1,
        "post_latency": costs,
        "promotion_after_s": round(promoted_at - killed_at, 2),
        "reads_back_after_s": round(reads_back_at - killed_at, 2),
        "killed_node_rejoined_after_s": round(rejoined_at - killed_at, 2),
        "writes_back_after_s": round(writes_back_at - killed_at, 2),
        "answers_503": len(unavailable),
        "window_503_s": round(max(window) - min(window), 2) if window else 0,
        "chunks_acknowledged": sum(t["chunks_acknowledged"] for t in tallies.values()),
        "chunks_acknowledged_on_failed_master": sum(
            tallies[s.name]["chunks_acknowledged"] for s in doomed
        ),
        "chunks_acknowledged_during_failover_elsewhere": sum(
            s.acks_between(killed_at, writes_back_at) for s in healthy
        ),
        "lost": sum(t["lost"] for t in tallies.values()),
        "doubled": sum(t["doubled"] for t in tallies.values()),
        "seconds": round(time.monotonic() - started, 1),
    }
    report(
        record_property,
        "test_a_failed_master_is_replaced_and_nothing_acknowledged_is_lost",
        figures,
    )
    assert figures["chunks_acknowledged_on_failed_master"] >= 20, figures
    assert not problems, "after a master failover:\n" + "\n".join(problems)
