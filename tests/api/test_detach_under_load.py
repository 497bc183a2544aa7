"""Detaching a selector from a stream that never goes quiet, against a live ``sift serve``: two
producers pushing to the stream without a pause, or a source reading a real Redis stream
(its own redis-server) that a writer keeps filling. The detach answers within seconds; the
selector's state is exactly the stream's entries through the cut the answer names
(``detached_at``), every push after the cut is not the selector's (nor waits for it), a
selector that stays attached applies every entry, and the detached one takes chunks directly
from then on.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import redis

from tests.support.harness import RedisProcess, ServiceProcess, live_service

NPY = {"content-type": "application/x-npy"}
#: A detach under load answers within this (it waits for nothing the producers do).
DETACH_SECONDS = 5.0
NAMES = ["f0", "f1", "f2", "f3"]


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def log_id(text: str) -> tuple[int, int]:
    ms, seq = text.split("-")
    return int(ms), int(seq)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    # The bus of the source test is a redis-server on loopback: the operator's opt-in.
    env = {"SIFT_SOURCE_PRIVATE": "127.0.0.1"}
    with live_service(Path(tmp_path_factory.mktemp("detach")), "detach", env) as service:
        yield service


@dataclass
class Pushes:
    """Every acknowledged push: its log id, its rows, and the answer."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    answers: list[dict[str, Any]] = field(default_factory=list)
    rows: dict[str, np.ndarray] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def produce(url: str, stream: str, seed: int, stop: threading.Event, pushes: Pushes) -> None:
    generator = np.random.default_rng(seed)
    with httpx.Client(base_url=url, timeout=60) as http:
        while not stop.is_set():
            rows = generator.normal(size=(int(generator.integers(1, 12)), 4))
            answer = http.post(f"/v1/streams/{stream}/chunks", content=npy(rows), headers=NPY)
            with pushes.lock:
                if answer.status_code not in (200, 202):
                    pushes.errors.append(f"{answer.status_code} {answer.text[:300]}")
                    continue
                body = answer.json()
                pushes.answers.append(body)
                pushes.rows[body["log_id"]] = rows


def attach(http: httpx.Client, name: str, stream: str) -> None:
    made = http.post("/v1/selectors", json={"name": name, "method": "variance", "stream": stream})
    assert made.status_code == 201, made.text


def variance_of(http: httpx.Client, name: str) -> np.ndarray:
    answer = http.get(f"/v1/selectors/{name}/weights")
    assert answer.status_code == 200, answer.text
    return np.array(answer.json()["weights"])


def detach(http: httpx.Client, name: str) -> dict[str, Any]:
    started = time.monotonic()
    answer = http.post(f"/v1/selectors/{name}/detach", timeout=DETACH_SECONDS + 10)
    took = time.monotonic() - started
    assert answer.status_code == 200, answer.text
    assert took < DETACH_SECONDS, f"the detach took {took:.1f} s under load"
    detached: dict[str, Any] = answer.json()
    assert "stream" not in detached and detached["detached_at"]
    return detached


def test_detach_while_two_producers_push_is_bounded_and_exact(live):
    with httpx.Client(base_url=live.url, timeout=60) as http:
        made = http.post("/v1/streams", json={"name": "busy", "n_features": 4})
        assert made.status_code == 201, made.text
        attach(http, "leaving", "busy")
        attach(http, "staying", "busy")
        stop, pushes = threading.Event(), Pushes()
        producers = [
            threading.Thread(target=produce, args=(live.url, "busy", seed, stop, pushes))
            for seed in range(2)
        ]
        for producer in producers:
            producer.start()
        try:
            time.sleep(1.5)
            detached = detach(http, "leaving")
            time.sleep(1.0)  # the producers go on, past the cut
        finally:
            stop.set()
            for producer in producers:
                producer.join()
        assert not pushes.errors, pushes.errors[:3]
        cut = log_id(detached["detached_at"])
        before = [a for a in pushes.answers if log_id(a["log_id"]) <= cut]
        after = [a for a in pushes.answers if log_id(a["log_id"]) > cut]
        assert before and after, (len(before), len(after))
        # Exactly the stream's entries through the cut, whichever process applied them.
        rows_through_cut = sum(a["items"] for a in before)
        (at_cut,) = [a for a in before if a["log_id"] == detached["detached_at"]]
        assert rows_through_cut == at_cut["first_index"] + at_cut["items"]
        assert detached["rows_seen"] == rows_through_cut
        assert http.get("/v1/selectors/leaving").json()["rows_seen"] == rows_through_cut
        taken = np.vstack([pushes.rows[a["log_id"]] for a in before])
        assert np.allclose(variance_of(http, "leaving"), taken.var(axis=0))
        # A push before the cut waited for the selector; none after it did.
        for answer in pushes.answers:
            named = {s["name"] for s in answer["selectors"]}
            assert ("leaving" in named) == (log_id(answer["log_id"]) <= cut), answer
            assert "staying" in named
        # The selector that stays applies every push.
        everything = sum(a["items"] for a in pushes.answers)
        deadline = time.monotonic() + 20
        while http.get("/v1/selectors/staying").json()["rows_seen"] < everything:
            assert time.monotonic() < deadline, "the attached selector did not catch up"
            time.sleep(0.05)
        # The stream keeps nothing for the detached selector, which takes chunks directly.
        stream = http.get("/v1/streams/busy").json()
        assert [s["name"] for s in stream["selectors"]] == ["staying"]
        rows = np.ones((3, 4))
        direct = http.post("/v1/selectors/leaving/chunks", content=npy(rows), headers=NPY)
        assert direct.status_code == 200, direct.text
        assert direct.json()["rows_seen"] == rows_through_cut + 3
        assert np.allclose(variance_of(http, "leaving"), np.vstack([taken, rows]).var(axis=0))
        again = http.post("/v1/selectors/leaving/detach")
        assert again.status_code == 409, again.text


def test_detach_from_a_stream_a_source_keeps_feeding(live, tmp_path: Path):
    """Bus entry k carries f0 = k: the detached selector's count n and its variance of f0
    (that of 0 .. n-1) say that its state is exactly the first n rows of the stream."""
    bus = RedisProcess(tmp_path / "bus")
    stop = threading.Event()
    written = [0]

    def write() -> None:
        client = redis.Redis.from_url(bus.url)
        while not stop.is_set():
            pipe = client.pipeline(transaction=False)
            for _ in range(20):
                k = written[0]
                pipe.xadd("rows", {"f0": k, "f1": k % 7, "f2": 1.5, "f3": -k})
                written[0] += 1
            pipe.execute()
            time.sleep(0.005)
        client.close()

    writer = threading.Thread(target=write)
    try:
        with httpx.Client(base_url=live.url, timeout=60) as http:
            made = http.post(
                "/v1/streams", json={"name": "fed", "n_features": 4, "feature_names": NAMES}
            )
            assert made.status_code == 201, made.text
            attach(http, "fed-leaving", "fed")
            attach(http, "fed-staying", "fed")
            source = {
                "name": "fed-bus",
                "kind": "redis-stream",
                "url": bus.url,
                "key": "rows",
                "start": "earliest",
                "into": {"stream": "fed"},
            }
            created = http.post("/v1/sources", json=source)
            assert created.status_code == 201, created.text
            writer.start()
            deadline = time.monotonic() + 20
            while http.get("/v1/selectors/fed-leaving").json()["rows_seen"] < 200:
                assert time.monotonic() < deadline, http.get("/v1/sources/fed-bus").json()
                time.sleep(0.05)
            detached = detach(http, "fed-leaving")
            time.sleep(1.0)  # the source goes on, past the cut
            stop.set()
            writer.join()
            n = detached["rows_seen"]
            assert 200 <= n < written[0]
            f0 = np.arange(n, dtype=float)
            scores = variance_of(http, "fed-leaving")
            assert np.isclose(scores[0], f0.var()), (scores, n)
            assert np.isclose(scores[3], f0.var()) and scores[2] == 0
            assert http.get("/v1/selectors/fed-leaving").json()["rows_seen"] == n
            # The selector that stays gets every entry the source read, after the cut too.
            deadline = time.monotonic() + 30
            while http.get("/v1/selectors/fed-staying").json()["rows_seen"] < written[0]:
                assert time.monotonic() < deadline, http.get("/v1/sources/fed-bus").json()
                time.sleep(0.05)
            assert http.get("/v1/selectors/fed-leaving").json()["rows_seen"] == n
            direct = http.post("/v1/selectors/fed-leaving/chunks", json=[[1.0, 2.0, 3.0, 4.0]])
            assert direct.status_code == 200 and direct.json()["rows_seen"] == n + 1
            assert http.delete("/v1/sources/fed-bus").status_code == 204
    finally:
        stop.set()
        if writer.is_alive():
            writer.join()
        bus.close()
