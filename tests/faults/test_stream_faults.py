"""Fault tests of streams: two real service processes on a real redis-server, three selectors
attached to one stream, producers pushing to the stream, and service processes SIGKILLed while
they apply it, redis-server SIGKILLed and restarted, or paused (SIGSTOP) for a lease or two.

The promise under test: a chunk the service acknowledged (200, or 202 with a ``log_id``) is
applied exactly once *by every selector attached to the stream*. Two of the selectors keep
exact class counts and sums (``ocfs`` and ``ioc``): every chunk has its own class, so their
committed states say for each chunk how many times each of them applied it
(``tests/support/harness.py``, ``tally_ocfs``). The third (``variance``) keeps exact moments: its
rows seen must be the rows of exactly those chunks, and its mean of the first column (the
chunk id) theirs. A repeated ``Idempotency-Key`` must answer the first push's log entry.

Every test prints its figures (``-s`` or ``-rP``) and records them as junit properties.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from tests.support.harness import (
    DEFAULT_LEASE_MS,
    Ledger,
    RedisProcess,
    ServiceProcess,
    Tally,
    Traffic,
    Workers,
    class_counts,
    holder_pid,
    lease_holder,
    ocfs_producer,
    poll,
    read_committed,
    report,
    tally_ocfs,
    wait_all_applied,
    wait_for,
)

pytestmark = pytest.mark.slow

SEED = 20_251_125
STREAM = "events"
#: The selectors attached to the stream: two that keep class counts and sums, one moments.
SELECTORS = {"on-ocfs": "ocfs", "on-ioc": "ioc", "on-variance": "variance"}
COUNTING = ("on-ocfs", "on-ioc")
#: Breaks per fault kind (each 1.5-3 s of load apart).
TRIALS = {"service-sigkill": 8, "redis-sigkill": 3, "redis-pause": 2}

Spawn = Callable[..., ServiceProcess]


def set_up(url: str) -> None:
    created = httpx.post(
        f"{url}/v1/streams",
        json={"name": STREAM, "n_features": 3, "labelled": True},
        timeout=30,
    )
    assert created.status_code == 201, created.text
    for name, method in SELECTORS.items():
        body: dict[str, Any] = {"name": name, "method": method, "stream": STREAM}
        if method == "ioc":
            body["params"] = {"n_components": 1}
        response = httpx.post(f"{url}/v1/selectors", json=body, timeout=30)
        assert response.status_code == 201, response.text


def stream_problems(
    redis_proc: RedisProcess, urls: list[str], ledger: Ledger
) -> tuple[dict[str, Tally], list[str]]:
    """Every check at the end of a stream fault test; the tallies, and the problems found."""
    acked, unacked = ledger.split()
    client = redis_proc.client()
    try:
        tallies = {name: tally_ocfs(client, name, acked, unacked) for name in COUNTING}
        counted = class_counts(read_committed(client, "on-ocfs").state)
        variance = read_committed(client, "on-variance")
    finally:
        client.close()
    problems = [f"{name}: {p}" for name, tally in tallies.items() for p in tally.problems()]
    # The three selectors apply the same entries: those the counting ones found once.
    expected_rows = tallies["on-ocfs"].rows_expected
    if tallies["on-ioc"].rows_expected != expected_rows:
        problems.append("ocfs and ioc applied other chunks")
    if variance.rows_seen != expected_rows:
        problems.append(f"variance saw {variance.rows_seen} rows, expected {expected_rows}")
    applied = [c for c in acked + unacked if counted.get(c.label) == c.rows]
    if applied and expected_rows:
        ids = np.concatenate([np.full(c.rows, float(c.cid)) for c in applied])
        mean = float(np.asarray(variance.state["mean"])[0])
        if not np.isclose(mean, ids.mean(), rtol=1e-12):
            problems.append(f"variance's mean chunk id {mean} != {ids.mean()} of the chunks")
    problems += _pending_202s(urls[0], ledger)
    problems += _replays(urls, ledger)
    return tallies, problems


def _pending_202s(url: str, ledger: Ledger) -> list[str]:
    """Chunks answered 202 that some selector has not applied (GET .../chunks/{log_id})."""
    with ledger.lock:
        pending = [ack for ack in ledger.acks.values() if ack.status == 202]
    wrong = []
    with httpx.Client(base_url=url, timeout=10) as http:
        for ack in pending:
            status = http.get(f"/v1/streams/{STREAM}/chunks/{ack.log_id}").json()
            outcomes = {s["name"]: s["status"] for s in status.get("selectors", [])}
            if outcomes != dict.fromkeys(SELECTORS, "applied"):
                wrong.append(f"202 not applied everywhere: {ack.key} {outcomes}")
    return wrong[:10]


def _replays(urls: list[str], ledger: Ledger) -> list[str]:
    """Every acknowledged chunk pushed again with its key: a duplicate of the same entry, and
    applied by every selector."""
    with ledger.lock:
        acks = [(ledger.sent[key], ack) for key, ack in ledger.acks.items()]
    wrong = []
    with httpx.Client(timeout=30) as http:
        for i, (chunk, ack) in enumerate(acks):
            response = http.post(
                f"{urls[i % len(urls)]}/v1/streams/{STREAM}/chunks",
                content=chunk.body,
                headers={"content-type": chunk.content_type, "idempotency-key": chunk.key},
            )
            body = response.json()
            statuses = {s["name"]: s["status"] for s in body.get("selectors", [])}
            if (
                response.status_code != 200
                or body.get("duplicate") is not True
                or body.get("log_id") != ack.log_id
                or statuses != dict.fromkeys(SELECTORS, "applied")
            ):
                wrong.append(f"{chunk.key}: {response.status_code} {response.text[:300]}")
    return [f"{len(wrong)} replays answered differently: {wrong[:5]}"] if wrong else []


def applier_pids(redis_proc: RedisProcess) -> set[int]:
    """The processes holding a lease of one of the stream's selectors now."""
    client = redis_proc.client()
    try:
        return {
            pid for name in SELECTORS if (pid := holder_pid(lease_holder(client, name))) is not None
        }
    finally:
        client.close()


@pytest.mark.parametrize("fault", list(TRIALS))
def test_every_selector_of_a_stream_applies_each_acknowledged_chunk_once(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any, fault: str
) -> None:
    started = time.monotonic()
    services = [spawn_service("a"), spawn_service("b")]
    urls = [service.url for service in services]
    set_up(urls[0])
    rng = random.Random(f"{SEED}-{fault}")
    kills_while_applying = 0

    def break_and_mend() -> float:
        nonlocal kills_while_applying
        began = time.monotonic()
        if fault == "service-sigkill":
            # The process applying one of the selectors, if one is (within a second).
            pids = poll(lambda: applier_pids(redis_proc), 1.0, interval_s=0.002)
            victim = next((s for s in services if s.pid in pids), rng.choice(services))
            kills_while_applying += victim.pid in pids
            victim.kill()
            victim.start()
        elif fault == "redis-sigkill":
            redis_proc.kill()
            time.sleep(rng.uniform(0.5, 1.5))
            redis_proc.start()
        else:
            redis_proc.pause()
            try:
                time.sleep(rng.uniform(1.0, 2.0) * DEFAULT_LEASE_MS / 1000)
            finally:
                redis_proc.resume()
        return time.monotonic() - began

    ledger, traffic, workers = Ledger(), Traffic(), Workers()
    for index in range(3):
        workers.spawn(
            f"producer-{index}",
            ocfs_producer(
                index, urls, f"/v1/streams/{STREAM}/chunks", ledger, traffic, workers.abort, SEED
            ),
        )
    broken: list[float] = []
    try:
        for _trial in range(TRIALS[fault]):
            workers.check()
            time.sleep(rng.uniform(1.5, 3.0))
            broken.append(break_and_mend())
        acked = ledger.acknowledged()
        wait_for(lambda: ledger.acknowledged() >= acked + 20, 60, "acknowledgements after")
    except BaseException:
        workers.abandon()
        raise
    workers.join(timeout_s=150)

    assert all(service.alive for service in services), f"a service died on its own: {services}"
    for name in SELECTORS:
        wait_all_applied(urls[0], name, timeout_s=60)
    tallies, problems = stream_problems(redis_proc, urls, ledger)
    figures = {
        "fault": fault,
        "breaks": len(broken),
        "broken_total_s": round(sum(broken), 2),
        "kills_while_applying": kills_while_applying,
        "requests": traffic.requests,
        "answers_5xx_by_status": traffic.statuses(),
        "seconds": round(time.monotonic() - started, 1),
        **ledger.figures(),
        **{f"{name}_{k}": v for name, t in tallies.items() for k, v in t.figures().items()},
    }
    report(record_property, f"test_stream_{fault}", figures)
    assert tallies["on-ocfs"].acknowledged >= 40, f"too few chunks to mean anything: {figures}"
    if fault != "redis-pause":
        assert figures["acknowledged_after_retry"] > 0, f"no break hit a request: {figures}"
    assert not problems, f"exactly-once per selector violated ({fault}):\n" + "\n".join(problems)
