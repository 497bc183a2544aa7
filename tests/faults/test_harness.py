"""The fault tests' own checks must see what they claim to see: a lost chunk, a doubled one, a
503 that leaks the Redis address. Quick: one service, no faults."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from tests.support.harness import (
    Answer,
    RedisProcess,
    ServiceProcess,
    metric_value,
    ocfs_chunk,
    tally_ocfs,
)


def test_tally_sees_lost_doubled_and_unacknowledged_chunks(
    redis_proc: RedisProcess, spawn_service: Callable[..., ServiceProcess]
) -> None:
    service = spawn_service("check")
    http = httpx.Client(base_url=service.url, timeout=30)
    try:
        created = http.post("/v1/selectors", json={"name": "t", "method": "ocfs", "n_features": 3})
        assert created.status_code == 201, created.text
        once, twice, never, unacked = (
            ocfs_chunk(1, 3, "once"),
            ocfs_chunk(2, 4, "twice", npz=True),
            ocfs_chunk(3, 2, "never"),
            ocfs_chunk(4, 5, "unacked"),
        )
        # "twice" goes in under two keys (a producer that did not reuse its key).
        for chunk, key in [(once, "once"), (twice, "twice-1"), (twice, "twice-2"), (unacked, "u")]:
            answer = http.post(
                "/v1/selectors/t/chunks",
                content=chunk.body,
                headers={"content-type": chunk.content_type, "idempotency-key": key},
            )
            assert answer.status_code == 200, answer.text
    finally:
        http.close()
    client = redis_proc.client()
    try:
        tally = tally_ocfs(client, "t", [once, twice, never], [unacked])
    finally:
        client.close()
    assert tally.exactly_once == 1
    assert tally.lost == ["never"]
    assert tally.doubled == ["twice applied 2 times"]
    assert tally.unacknowledged_applied == 1
    assert tally.rows_seen == 3 + 2 * 4 + 5
    assert tally.rows_expected == 3 + 5
    assert len(tally.problems()) == 3, tally.problems()


def test_answer_defects_catch_leaks_and_missing_retry_after() -> None:
    def answer(detail: str, headers: dict[str, str]) -> Answer:
        body = json.dumps({"status": 503, "detail": detail})
        return Answer("http://sift", 503, headers, body)

    good = {"content-type": "application/problem+json", "retry-after": "1"}
    assert answer("Redis is unreachable; retry shortly", good).defects([":6390"]) == []
    leaked = answer("Error 111 connecting to 127.0.0.1:6390. Connection refused.", good)
    assert len(leaked.defects([":6390"])) == 1
    assert "internal text" in leaked.defects([":6390"])[0]
    no_retry = answer("Redis is unreachable", {"content-type": "application/problem+json"})
    assert any("Retry-After" in d for d in no_retry.defects())


def test_metric_value_sums_label_sets() -> None:
    text = (
        "# HELP sift_stale_commits_total x\n"
        "sift_stale_commits_total 2.0\n"
        'sift_rows_applied_total{method="ocfs"} 3.0\n'
        'sift_rows_applied_total{method="ioc"} 4.0\n'
    )
    assert metric_value(text, "sift_stale_commits_total") == 2.0
    assert metric_value(text, "sift_rows_applied_total") == 7.0
    assert metric_value(text, "sift_missing_total") == 0.0
