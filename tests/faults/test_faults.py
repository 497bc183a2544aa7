"""Fault tests: real service processes and a real redis-server, killed, paused and restarted.

The promise under test: a chunk the service acknowledged (200, or 202 with a ``log_id``) is
applied exactly once whatever crashes, and a repeated ``Idempotency-Key`` answers what the first
request answered. ``ocfs`` selectors make the check exact: every chunk has its own class, and
the committed class counts and sums say how many times each chunk was applied (see
``tests/support/harness.py``). Every test prints its figures (run with ``-s`` or ``-rP`` to see
them) and records them as junit properties.

Run: ``.venv/bin/python -m pytest tests/faults -p no:cacheprovider -q -x`` (``-m "not slow"``
for the quick ones only).
"""

from __future__ import annotations

import io
import random
import time
import zlib
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
import numpy as np
import pytest

from service.store.records import partition_name
from tests.support.harness import (
    DEFAULT_LEASE_MS,
    Answer,
    LabelledChunk,
    Ledger,
    RedisProcess,
    ServiceProcess,
    Tally,
    Traffic,
    Workers,
    as_text,
    class_counts,
    cpu_seconds,
    create_selector,
    describe,
    holder_pid,
    labelled_npz,
    lease_holder,
    ocfs_chunk,
    ocfs_producer,
    poll,
    read_committed,
    report,
    selector_keys,
    tally_ocfs,
    wait_all_applied,
    wait_for,
)

SEED = 20_240_611
#: SIGKILLs of a service process in the crash test (the brief asks for at least 20).
SERVICE_KILL_TRIALS = 24
#: SIGKILLs of redis-server in the Redis crash test (at least 3).
REDIS_KILL_TRIALS = 6
#: The longest a restarted service may take to apply what a killed applier left (seconds).
TAKEOVER_BOUND_S = 5.0

Spawn = Callable[..., ServiceProcess]


# -- helpers ----------------------------------------------------------------------------------


def chunk_path(name: str) -> str:
    return f"/v1/selectors/{name}/chunks"


def ocfs_chaos(
    urls: list[str],
    name: str,
    trials: int,
    seed: int,
    break_and_mend: Callable[[random.Random], float],
) -> tuple[Ledger, Traffic, list[float]]:
    """Three producers push ``ocfs`` chunks to ``name`` through ``urls`` while
    ``break_and_mend(rng)`` breaks something and mends it ``trials`` times (returning how long
    it was broken), then until 20 more chunks are acknowledged; what they saw, and the
    breaks."""
    ledger, traffic, workers = Ledger(), Traffic(), Workers()
    for index in range(3):
        workers.spawn(
            f"producer-{index}",
            ocfs_producer(index, urls, chunk_path(name), ledger, traffic, workers.abort, SEED),
        )
    rng = random.Random(seed)
    broken: list[float] = []
    try:
        for _trial in range(trials):
            workers.check()
            time.sleep(rng.uniform(1.5, 3.0))  # producers are acknowledged meanwhile
            broken.append(break_and_mend(rng))
        acked = ledger.acknowledged()
        wait_for(
            lambda: ledger.acknowledged() >= acked + 20,
            60,
            "acknowledgements after the last break",
        )
    except BaseException:
        workers.abandon()
        raise
    workers.join(timeout_s=150)
    return ledger, traffic, broken


def pending_202s_not_applied(url: str, name: str, ledger: Ledger) -> list[str]:
    """Chunks answered 202 whose ``GET .../chunks/{log_id}`` does not say ``applied``."""
    with ledger.lock:
        pending = [ack for ack in ledger.acks.values() if ack.status == 202]
    wrong = []
    with httpx.Client(base_url=url, timeout=10) as http:
        for ack in pending:
            partition = ack.body.get("partition")
            query = "" if partition is None else f"?partition={partition}"
            response = http.get(f"{chunk_path(name)}/{ack.log_id}{query}")
            status = response.json().get("status") if response.status_code == 200 else None
            if status != "applied":
                wrong.append(
                    f"{ack.key} ({ack.log_id}): {response.status_code} {response.text[:200]}"
                )
    return wrong


def replay_mismatches(urls: list[str], name: str, ledger: Ledger) -> list[str]:
    """Send every acknowledged chunk again with its key: the answer must be a duplicate of the
    same log entry, and a first 200's version and rows_seen must come back unchanged."""
    with ledger.lock:
        acks = [(ledger.sent[key], ack) for key, ack in ledger.acks.items()]
    wrong = []
    with httpx.Client(timeout=30) as http:
        for i, (chunk, ack) in enumerate(acks):
            response = http.post(
                urls[i % len(urls)] + chunk_path(name),
                params={"wait": "true" if ack.wait else "false"},
                content=chunk.body,
                headers={"content-type": chunk.content_type, "idempotency-key": chunk.key},
            )
            body = response.json()
            problems = []
            if response.status_code != 200:
                problems.append(f"status {response.status_code}")
            if body.get("duplicate") is not True:
                problems.append("not marked duplicate")
            if body.get("log_id") != ack.log_id:
                problems.append(f"log_id {body.get('log_id')} != first {ack.log_id}")
            if ack.status == 200:
                for fld in ("version", "rows_seen", "rows"):
                    if body.get(fld) != ack.body.get(fld):
                        problems.append(f"{fld} {body.get(fld)} != first {ack.body.get(fld)}")
            if problems:
                wrong.append(f"{chunk.key}: {', '.join(problems)}")
    return wrong


def api_counts_mismatch(url: str, name: str, tally_source: dict[Any, int]) -> list[str]:
    """The class counts the API lists must be the committed ones."""
    body = describe(url, name)
    if body is None:
        return [f"describe of '{name}' failed at the end"]
    listed = {str(c["label"]): int(c["count"]) for c in body["classes"]}
    expected = {str(label): count for label, count in tally_source.items()}
    return [] if listed == expected else ["GET /v1/selectors lists other class counts than Redis"]


def exactly_once_problems(
    redis_proc: RedisProcess, urls: list[str], name: str, ledger: Ledger, partitions: int = 1
) -> tuple[Tally, list[str]]:
    """Everything the end of a crash test checks, as one list of problems (empty: all good).

    A partitioned selector is checked partition by partition: every chunk must be in the
    partition its key chose (its first answer named it), exactly once, and in no other.
    """
    acked, unacked = ledger.split()
    client = redis_proc.client()
    try:
        if partitions == 1:
            tally = tally_ocfs(client, name, acked, unacked)
            committed_counts = class_counts(read_committed(client, name).state)
        else:
            tally, committed_counts = Tally(acknowledged=len(acked)), {}
            for index in range(partitions):
                chosen = [c for c in acked if zlib.crc32(c.key.encode()) % partitions == index]
                unsure = [c for c in unacked if zlib.crc32(c.key.encode()) % partitions == index]
                part = tally_ocfs(client, partition_name(name, index), chosen, unsure)
                tally = tally.plus(part)
                committed_counts |= class_counts(
                    read_committed(client, partition_name(name, index)).state
                )
    finally:
        client.close()
    problems = tally.problems()
    problems += [
        f"202 not applied: {p}" for p in pending_202s_not_applied(urls[0], name, ledger)[:10]
    ]
    problems += api_counts_mismatch(urls[0], name, committed_counts)
    replays = replay_mismatches(urls, name, ledger)
    if replays:
        problems.append(f"{len(replays)} replays answered differently: {replays[:10]}")
    return tally, problems


def slow_labelled_chunk(
    seed: int, rows: int, features: int, classes: int
) -> tuple[bytes, Counter[int]]:
    """An ``ioc`` chunk that takes a noticeable time to apply (IOC goes one sample at a time)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 10, size=(rows, features)).astype(np.float64)
    labels = rng.integers(0, classes, size=rows)
    return labelled_npz(x, labels), Counter(int(label) for label in labels)


def post_chunk(url: str, name: str, body: bytes, key: str, wait: bool) -> httpx.Response:
    return httpx.post(
        url + chunk_path(name),
        params={"wait": "true" if wait else "false"},
        content=body,
        headers={"content-type": "application/x-npz", "idempotency-key": key},
        timeout=60,
    )


def lease_pid(redis_proc: RedisProcess, name: str) -> int | None:
    client = redis_proc.client()
    try:
        return holder_pid(lease_holder(client, name))
    finally:
        client.close()


# -- 1. SIGKILL of service processes during ingestion -----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("partitions", [1, 2])
def test_sigkill_service_during_ingestion(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any, partitions: int
) -> None:
    started = time.monotonic()
    services = [spawn_service("a"), spawn_service("b")]
    urls = [service.url for service in services]
    name = "ingest"
    trials = SERVICE_KILL_TRIALS if partitions == 1 else SERVICE_KILL_TRIALS // 2
    create_selector(
        urls[0], {"name": name, "method": "ocfs", "n_features": 3, "partitions": partitions}
    )
    ledger, traffic, workers = Ledger(), Traffic(), Workers()
    for index in range(4):
        workers.spawn(
            f"producer-{index}",
            ocfs_producer(index, urls, chunk_path(name), ledger, traffic, workers.abort, SEED),
        )

    rng = random.Random(SEED)
    kills_while_applying = 0
    ready_seconds: list[float] = []
    client = redis_proc.client()

    # The applier watched: the selector's, or its first partition's.
    applying = name if partitions == 1 else partition_name(name, 0)

    def applier_pid() -> int | None:
        return holder_pid(lease_holder(client, applying))

    try:
        for trial in range(trials):
            workers.check()
            time.sleep(rng.uniform(0.2, 1.0))  # the random moment of the next crash
            victim = services[rng.randrange(len(services))]
            if trial % 2:
                # Every other crash hits the process that is applying, if one is (within 1 s).
                pid = poll(applier_pid, 1.0, interval_s=0.002)
                victim = next((s for s in services if s.pid == pid), victim)
            if applier_pid() == victim.pid:
                kills_while_applying += 1
            victim.kill()
            ready_seconds.append(victim.start())
        # The producers go on until both processes have served again after the last crash.
        acked = ledger.acknowledged()
        wait_for(
            lambda: ledger.acknowledged() >= acked + 20,
            60,
            "acknowledgements after the last restart",
        )
    except BaseException:
        workers.abandon()
        raise
    finally:
        client.close()
    workers.join(timeout_s=150)

    assert all(service.alive for service in services), f"a service died on its own: {services}"
    described = wait_all_applied(urls[0], name, timeout_s=60)
    tally, problems = exactly_once_problems(redis_proc, urls, name, ledger, partitions)
    figures = {
        "partitions": partitions,
        "kill_trials": trials,
        "kills_while_lease_held_by_victim": kills_while_applying,
        "restart_to_ready_max_s": round(max(ready_seconds), 2),
        "requests": traffic.requests,
        "transport_errors": traffic.transport_errors,
        "server_errors_by_status": traffic.statuses(),
        "final_version": described["version"],
        "seconds": round(time.monotonic() - started, 1),
        **ledger.figures(),
        **tally.figures(),
    }
    report(record_property, f"test_sigkill_service_during_ingestion[{partitions}]", figures)
    # Not vacuous: enough chunks, and crashes that hit requests in flight (they were retried).
    assert tally.acknowledged >= 100, f"too few chunks acknowledged to mean anything: {figures}"
    assert figures["acknowledged_after_retry"] > 0, f"no crash hit a request in flight: {figures}"
    assert not problems, "exactly-once violated after service SIGKILLs:\n" + "\n".join(problems)


# -- 2. a restarted service takes over a killed applier's work quickly ------------------------


def test_takeover_after_sigkill_is_fast(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any
) -> None:
    service = spawn_service("applier")
    name = "takeover"
    create_selector(
        service.url,
        {"name": name, "method": "ioc", "n_features": 300, "params": {"n_components": 8}},
    )
    rows = 3000
    body, expected_counts = slow_labelled_chunk(SEED + 2, rows, 300, classes=10)
    response = post_chunk(service.url, name, body, "slow-1", wait=False)
    assert response.status_code == 202, f"expected 202, got {response.status_code}: {response.text}"
    log_id = response.json()["log_id"]
    # Kill the applier itself: once it holds the lease, while it computes.
    pid = service.pid
    wait_for(
        lambda: lease_pid(redis_proc, name) == pid,
        10,
        f"the lease of '{name}' to name the service's pid {pid}",
        interval_s=0.005,
    )
    killed_at = time.monotonic()
    service.kill()
    service.start()
    ready_at = time.monotonic()
    described = wait_all_applied(service.url, name, timeout_s=60, rows=rows)
    done_at = time.monotonic()
    takeover_s = done_at - ready_at
    apply_s = service.metric("sift_apply_seconds_sum")

    status = httpx.get(f"{service.url}{chunk_path(name)}/{log_id}", timeout=10).json()
    counts = {int(c["label"]): c["count"] for c in described["classes"]}
    figures = {
        "lease_ms": DEFAULT_LEASE_MS,
        "kill_to_ready_s": round(ready_at - killed_at, 2),
        "ready_to_applied_s": round(takeover_s, 2),
        "kill_to_applied_s": round(done_at - killed_at, 2),
        "apply_seconds_of_the_chunk": round(apply_s, 2),
        "version": described["version"],
    }
    report(record_property, "test_takeover_after_sigkill_is_fast", figures)
    assert status["status"] == "applied", f"chunk {log_id} is not applied: {status}"
    assert counts == dict(expected_counts), f"class counts {counts} != sent {dict(expected_counts)}"
    assert described["rows_seen"] == rows and described["version"] == 1, described
    assert takeover_s <= TAKEOVER_BOUND_S, (
        f"the restarted service applied the killed applier's entry {takeover_s:.2f} s after it "
        f"was ready (bound {TAKEOVER_BOUND_S} s, lease {DEFAULT_LEASE_MS} ms): {figures}"
    )


def test_a_chunk_whose_appender_died_is_applied_by_another_process(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any
) -> None:
    """The hand-off from the request to the applier lives in the appender's memory: when it
    dies right after its 202, another process, long past its first (full) sweep, finds the
    entry through the pending set and applies it, exactly once."""
    survivor = spawn_service("survivor")
    appender = spawn_service("appender")
    name = "handoff"
    create_selector(
        survivor.url,
        {"name": name, "method": "ioc", "n_features": 100, "params": {"n_components": 4}},
    )
    time.sleep(1.5)  # the survivor's sweeps read marks now, not every selector
    rows = 1500
    body, expected_counts = slow_labelled_chunk(SEED + 3, rows, 100, classes=5)
    response = post_chunk(appender.url, name, body, "handoff-1", wait=False)
    assert response.status_code == 202, f"expected 202, got {response.status_code}: {response.text}"
    appender.kill()
    killed_at = time.monotonic()
    described = wait_all_applied(survivor.url, name, timeout_s=60, rows=rows)
    applied_s = time.monotonic() - killed_at
    counts = {int(c["label"]): c["count"] for c in described["classes"]}
    report(
        record_property,
        "test_a_chunk_whose_appender_died_is_applied_by_another_process",
        {"kill_to_applied_s": round(applied_s, 2), "lease_ms": DEFAULT_LEASE_MS},
    )
    assert counts == dict(expected_counts), f"class counts {counts} != sent {dict(expected_counts)}"
    assert described["rows_seen"] == rows and described["version"] == 1, described
    # At worst the appender had taken the lease: the survivor waits for it to lapse.
    assert applied_s <= TAKEOVER_BOUND_S + DEFAULT_LEASE_MS / 1000, applied_s


# -- 3. a paused applier that lost its lease cannot commit ------------------------------------


@pytest.mark.slow
def test_stale_applier_cannot_commit(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any
) -> None:
    a, b = spawn_service("a"), spawn_service("b")
    name = "stale"
    create_selector(
        a.url, {"name": name, "method": "ioc", "n_features": 400, "params": {"n_components": 10}}
    )
    rows = 6000
    body, expected_counts = slow_labelled_chunk(SEED + 3, rows, 400, classes=12)
    response = post_chunk(a.url, name, body, "slow-stale", wait=False)
    assert response.status_code == 202, f"expected 202, got {response.status_code}: {response.text}"

    # A holds the lease and has taken the entry (its attempt is counted): it is computing.
    client = redis_proc.client()
    keys = selector_keys(name)
    a_pid, b_pid = a.pid, b.pid
    try:
        wait_for(
            lambda: holder_pid(lease_holder(client, name)) == a_pid and client.hlen(keys.attempts),
            10,
            f"process A (pid {a_pid}) to hold the lease of '{name}' and take its entry",
            interval_s=0.002,
        )
        # ... and is deep in the update (CPU time only grows while it computes): paused there,
        # it must find its commit rejected on waking. Paused before the computation, it would
        # instead find the log applied by B and have nothing to commit.
        cpu_at_take = cpu_seconds(a_pid)
        wait_for(
            lambda: cpu_seconds(a_pid) - cpu_at_take >= 0.3,
            10,
            "process A to compute the update for 0.3 s of CPU time",
            interval_s=0.01,
        )
        a.pause()
        paused_at = time.monotonic()
        # B takes over once A's lease expires, and applies the entry itself.
        described = wait_all_applied(b.url, name, timeout_s=60, rows=rows)
        taken_over_s = time.monotonic() - paused_at
        # A stays stopped at least twice its lease (deliberately: it must be well past it).
        time.sleep(max(0.0, 2 * DEFAULT_LEASE_MS / 1000 - (time.monotonic() - paused_at)))
        before = read_committed(client, name)
        a.resume()
        stale = wait_for(
            lambda: a.metric("sift_stale_commits_total"),
            30,
            "A's commit to be rejected (sift_stale_commits_total >= 1 on A)",
        )
        after = read_committed(client, name)
    finally:
        client.close()

    figures = {
        "lease_ms": DEFAULT_LEASE_MS,
        "paused_to_applied_by_b_s": round(taken_over_s, 2),
        "stale_commits_on_a": stale,
        "version_after": after.version,
    }
    report(record_property, "test_stale_applier_cannot_commit", figures)
    assert holder_pid(before.writer) == b_pid, (
        f"version {before.version} written by {before.writer}, not B"
    )
    assert (after.version, after.head["state_key"]) == (before.version, before.head["state_key"]), (
        f"the state changed after A resumed: version {before.version} -> {after.version}, "
        f"written by {after.writer}"
    )
    assert after.rows_seen == rows and after.version == 1, after.head
    assert class_counts(after.state) == dict(expected_counts), "class counts are not exactly once"
    assert described["rows_seen"] == rows
    # A still works after its rejected commit.
    small, small_counts = slow_labelled_chunk(SEED + 30, 20, 400, classes=12)
    response = post_chunk(a.url, name, small, "after-resume", wait=True)
    assert response.status_code == 200, (
        f"A after resuming answered {response.status_code}: {response.text}"
    )
    final = wait_all_applied(b.url, name, timeout_s=30, rows=rows + 20)
    final_counts = {int(c["label"]): c["count"] for c in final["classes"]}
    assert final_counts == dict(expected_counts + small_counts), final_counts


# -- 4. SIGKILL of redis-server during ingestion ----------------------------------------------


@pytest.mark.slow
def test_redis_sigkill_loses_no_acknowledged_chunk(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any
) -> None:
    started = time.monotonic()
    service = spawn_service("solo")
    urls = [service.url]
    name = "durable"
    create_selector(service.url, {"name": name, "method": "ocfs", "n_features": 3})

    def kill_and_restart(rng: random.Random) -> float:
        redis_proc.kill()
        down_at = time.monotonic()
        time.sleep(rng.uniform(0.5, 1.5))  # Redis stays down: the service answers 503
        redis_proc.start()
        return time.monotonic() - down_at

    ledger, traffic, downtimes = ocfs_chaos(
        urls, name, REDIS_KILL_TRIALS, SEED + 4, kill_and_restart
    )

    assert service.alive and service.starts == 1, "the service died or was restarted"
    described = wait_all_applied(service.url, name, timeout_s=60)
    tally, problems = exactly_once_problems(redis_proc, urls, name, ledger)
    with traffic.lock:
        answers: list[Answer] = list(traffic.server_errors)
    unavailable = [answer for answer in answers if answer.status == 503]
    if not unavailable:
        problems.append("no 503 answer was seen while Redis was down")
    defects = Counter(
        defect for answer in answers for defect in answer.defects([f":{redis_proc.port}"])
    )
    problems += [f"{count} 5xx answers with {defect}" for defect, count in defects.items()]
    figures = {
        "redis_kills": redis_proc.kills,
        "redis_downtime_total_s": round(sum(downtimes), 2),
        "requests": traffic.requests,
        "answers_5xx_by_status": traffic.statuses(),
        "answers_503_well_formed": sum(not a.defects([f":{redis_proc.port}"]) for a in unavailable),
        "sample_503_detail": (unavailable[0].problem or {}).get("detail") if unavailable else None,
        "final_version": described["version"],
        "seconds": round(time.monotonic() - started, 1),
        **ledger.figures(),
        **tally.figures(),
    }
    report(record_property, "test_redis_sigkill_loses_no_acknowledged_chunk", figures)
    assert tally.acknowledged >= 50, f"too few chunks acknowledged to mean anything: {figures}"
    assert figures["acknowledged_after_retry"] > 0, f"no crash hit a request in flight: {figures}"
    assert not problems, "after redis-server SIGKILLs:\n" + "\n".join(problems)


# -- 5. Redis stopped, then back: the service recovers by itself ------------------------------


def test_redis_down_then_back(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any
) -> None:
    service = spawn_service("solo")
    name = "x"
    create_selector(service.url, {"name": name, "method": "ocfs", "n_features": 3})
    before = ocfs_chunk(1, 4, "before")
    during = ocfs_chunk(2, 3, "during")
    after = ocfs_chunk(3, 5, "after")
    with httpx.Client(base_url=service.url, timeout=30) as http:

        def post(chunk: LabelledChunk) -> httpx.Response:
            return http.post(
                chunk_path(name),
                content=chunk.body,
                headers={"content-type": chunk.content_type, "idempotency-key": chunk.key},
            )

        assert post(before).status_code == 200
        redis_proc.stop()
        down = {
            f"GET /v1/selectors/{name}": http.get(f"/v1/selectors/{name}"),
            f"POST {chunk_path(name)}": post(during),
            "GET /v1/readyz": http.get("/v1/readyz"),
        }
        healthz = http.get("/v1/healthz")
        redis_proc.start()
        recovered_in = time.monotonic()
        wait_for(
            lambda: http.get("/v1/readyz").status_code == 200, 30, "/v1/readyz to answer 200 again"
        )
        recovered_s = time.monotonic() - recovered_in
        again = post(after)

    defects = {
        route: Answer(service.url, r.status_code, dict(r.headers), r.text).defects(
            [f":{redis_proc.port}"]
        )
        for route, r in down.items()
    }
    figures = {
        "answers_while_down": {route: r.status_code for route, r in down.items()},
        "retry_after": {route: r.headers.get("retry-after") for route, r in down.items()},
        "healthz_while_down": healthz.status_code,
        "redis_start_to_ready_s": round(recovered_s, 2),
        "post_after_recovery": again.status_code,
    }
    report(record_property, "test_redis_down_then_back", figures)
    assert all(not found for found in defects.values()), f"answers while Redis was down: {defects}"
    assert healthz.status_code == 200, f"healthz while Redis was down: {healthz.status_code}"
    assert service.alive and service.starts == 1, "the service died or was restarted"
    assert again.status_code == 200, (
        f"a chunk after Redis came back: {again.status_code} {again.text}"
    )
    wait_all_applied(service.url, name, timeout_s=30)
    client = redis_proc.client()
    try:
        tally = tally_ocfs(client, name, [before, after], [during])
    finally:
        client.close()
    assert not tally.problems(), tally.problems()
    assert tally.unacknowledged_applied == 0, "the chunk answered 503 was applied anyway"


# -- 6. Redis paused while a chunk is applied: the pauses are not the chunk's fault -----------


#: Pauses of redis-server, each longer than the lease, while one chunk is being applied: more
#: than ``SIFT_MAX_APPLY_ATTEMPTS`` (3), which is what used to dead-letter the chunk.
REDIS_PAUSES = 5


@pytest.mark.slow
def test_redis_pauses_never_dead_letter_an_acknowledged_chunk(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any
) -> None:
    """Each attempt at the chunk loses its lease to a SIGSTOPped Redis; the process is alive,
    so none of those attempts counts against the chunk, which is applied exactly once."""
    lease_ms = 1000
    service = spawn_service("paused", SIFT_LEASE_MS=str(lease_ms))
    name = "paused"
    m, ell, rows = 1000, 300, 3000
    create_selector(
        service.url, {"name": name, "method": "fsds", "n_features": m, "params": {"ell": ell}}
    )
    rng = np.random.default_rng(SEED + 6)
    buffer = io.BytesIO()
    np.save(buffer, rng.standard_normal((rows, m)))
    body = buffer.getvalue()
    headers = {"content-type": "application/x-npy", "idempotency-key": "paused-chunk"}
    with httpx.Client(base_url=service.url, timeout=120) as http:
        accepted = http.post(
            f"/v1/selectors/{name}/chunks?wait=false", content=body, headers=headers
        )
        assert accepted.status_code == 202, accepted.text
        log_id = accepted.json()["log_id"]
        client = redis_proc.client()
        attempts_hit = 0
        seen_holders: set[str] = set()
        try:
            for _ in range(REDIS_PAUSES):
                # An applier takes the entry (its attempt recorded under its lease holder) ...
                def new_attempt() -> bool:
                    fields = client.hgetall(selector_keys(name).attempts)
                    holders = {as_text(f) for f in fields if as_text(f).startswith("by:")}
                    holders -= seen_holders
                    seen_holders.update(holders)
                    return bool(holders)

                if not poll(new_attempt, 30, interval_s=0.01):
                    break  # applied already: nothing left to attempt
                attempts_hit += 1
                # ... and computes; Redis stops for longer than its lease meanwhile.
                time.sleep(0.2)
                redis_proc.pause()
                time.sleep(1.5 * lease_ms / 1000)
                redis_proc.resume()
        finally:
            client.close()

        def settled() -> dict[str, Any] | None:
            status = http.get(f"/v1/selectors/{name}/chunks/{log_id}").json()
            return None if status["status"] == "pending" else status

        status = wait_for(settled, 120, f"chunk {log_id} to be applied or rejected")
        again = http.post(f"/v1/selectors/{name}/chunks", content=body, headers=headers)
        described = http.get(f"/v1/selectors/{name}").json()

    figures = {
        "pauses_during_attempts": attempts_hit,
        "status": status["status"],
        "rows_seen": described["rows_seen"],
        "retry_status": again.status_code,
        "stale_commits": service.metric("sift_stale_commits_total"),
        "dead_lettered": service.metric("sift_chunks_dead_lettered_total"),
    }
    report(record_property, "test_redis_pauses_never_dead_letter_an_acknowledged_chunk", figures)
    assert attempts_hit > 3, f"the pauses did not hit enough attempts to mean anything: {figures}"
    assert status["status"] == "applied", f"the chunk ended {status}: {figures}"
    assert described["rows_seen"] == rows and described["version"] == 1, described
    assert again.status_code == 200 and again.json()["duplicate"], again.text
    assert figures["dead_lettered"] == 0, figures


#: Pauses of redis-server under load in the chaos test, each 1-2 leases long.
REDIS_PAUSE_TRIALS = 6


@pytest.mark.slow
def test_redis_pauses_under_load_lose_nothing_and_reject_nothing(
    redis_proc: RedisProcess, spawn_service: Spawn, record_property: Any
) -> None:
    """Two services, three producers, redis-server SIGSTOPped six times for one to two leases:
    every acknowledged chunk is applied exactly once, and none is rejected."""
    started = time.monotonic()
    services = [spawn_service("a"), spawn_service("b")]
    urls = [service.url for service in services]
    name = "paused-load"
    create_selector(urls[0], {"name": name, "method": "ocfs", "n_features": 3})

    def pause_and_resume(rng: random.Random) -> float:
        pause = rng.uniform(1.0, 2.0) * DEFAULT_LEASE_MS / 1000
        redis_proc.pause()
        try:
            time.sleep(pause)
        finally:
            redis_proc.resume()
        return pause

    ledger, traffic, paused_s = ocfs_chaos(
        urls, name, REDIS_PAUSE_TRIALS, SEED + 7, pause_and_resume
    )

    assert all(service.alive and service.starts == 1 for service in services)
    described = wait_all_applied(urls[0], name, timeout_s=60)
    tally, problems = exactly_once_problems(redis_proc, urls, name, ledger)
    dead_lettered = sum(s.metric("sift_chunks_dead_lettered_total") for s in services)
    figures = {
        "redis_pauses": len(paused_s),
        "redis_paused_total_s": round(sum(paused_s), 2),
        "requests": traffic.requests,
        "answers_5xx_by_status": traffic.statuses(),
        "stale_commits": sum(s.metric("sift_stale_commits_total") for s in services),
        "dead_lettered": dead_lettered,
        "final_version": described["version"],
        "seconds": round(time.monotonic() - started, 1),
        **ledger.figures(),
        **tally.figures(),
    }
    report(record_property, "test_redis_pauses_under_load_lose_nothing_and_reject_nothing", figures)
    assert tally.acknowledged >= 50, f"too few chunks acknowledged to mean anything: {figures}"
    assert dead_lettered == 0, f"a Redis pause rejected a chunk: {figures}"
    assert not problems, "after redis-server pauses:\n" + "\n".join(problems)
