"""Retries: the policy (``exchange``, driven step by step with scripted outcomes and a clock that
advances by the sleeps it asks for), and the promise against real processes: a chunk whose
answer is lost, a service SIGKILLed and restarted, a Redis stopped and started again, all in
the middle of a push, and ``rows_seen`` is exact afterwards (nothing lost, nothing doubled)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from siftstream import (
    Client,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RetryPolicy,
    TransportError,
    UnavailableError,
)
from siftstream._http import Call, Sleep, exchange
from siftstream.results import ChunkReceipt
from tests.support.harness import RedisProcess, ServiceProcess, wait_for

URL = "http://sift.test/v1/selectors/news/chunks"


def answer(
    status: int, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> httpx.Response:
    """An answer as Sift writes it (a refusal's body is problem+json)."""
    problem = body or {"type": "urn:sift:problem:x", "title": "t", "status": status, "detail": "d"}
    media = "application/problem+json" if status >= 400 else "application/json"
    return httpx.Response(
        status,
        content=json.dumps(problem).encode(),
        headers={"content-type": media, "x-request-id": "r", **(headers or {})},
        request=httpx.Request("POST", URL),
    )


def refused() -> httpx.ConnectError:
    return httpx.ConnectError("connection refused", request=httpx.Request("POST", URL))


def lost() -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError("server disconnected", request=httpx.Request("POST", URL))


class Script:
    """Drives ``exchange`` with scripted outcomes on a fake clock; records the sleeps."""

    def __init__(self, call: Call[Any], policy: RetryPolicy) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.sent = 0
        self.call = call
        self.steps = exchange(call, policy, clock=lambda: self.now)

    def run(self, outcomes: Sequence[httpx.Response | httpx.TransportError]) -> Any:
        step = next(self.steps)
        pending = list(outcomes)
        while True:
            if isinstance(step, Sleep):
                self.sleeps.append(step.seconds)
                self.now += step.seconds
                outcome: Any = None
            else:
                assert step.path == self.call.path and step.connect_within is not None
                assert step.connect_within >= 0.5  # what is left of the budget, or half a second
                self.sent += 1
                self.now += 0.01
                outcome = pending.pop(0)
            try:
                step = self.steps.send(outcome)
            except StopIteration as done:
                return done.value


def chunk_call(**options: Any) -> Call[int]:
    return Call("POST", "/v1/selectors/news/chunks", lambda r: r.status_code, **options)


def test_transport_errors_and_503_are_retried_with_growing_capped_delays() -> None:
    policy = RetryPolicy(first_delay=1.0, max_delay=4.0, budget=1000)
    script = Script(chunk_call(), policy)
    outcomes: list[httpx.Response | httpx.TransportError] = [
        refused(),
        lost(),
        answer(503),
        answer(502),
        lost(),
        lost(),
        answer(200, {}),
    ]
    assert script.run(outcomes) == 200
    assert script.sent == 7
    bounds = [1, 2, 4, 4, 4, 4]  # first_delay * 2**(n-1), capped at max_delay; jitter [0.5, 1]
    assert len(script.sleeps) == 6
    for slept, bound in zip(script.sleeps, bounds, strict=True):
        assert bound / 2 <= slept <= bound


def test_retry_after_is_honoured() -> None:
    script = Script(chunk_call(), RetryPolicy(first_delay=0.1, budget=100))
    assert script.run([answer(503, headers={"retry-after": "7"}), answer(200, {})]) == 200
    assert script.sleeps[0] >= 7


def test_the_budget_ends_retrying_with_the_last_refusal() -> None:
    script = Script(chunk_call(), RetryPolicy(first_delay=1.0, max_delay=2.0, budget=10))
    with pytest.raises(UnavailableError) as raised:
        script.run([answer(503, {"detail": "Redis is unavailable", "status": 503})] * 50)
    assert raised.value.detail == "Redis is unavailable"
    assert sum(script.sleeps) <= 10 and 4 <= script.sent <= 11


def test_a_call_keeps_trying_for_its_whole_budget() -> None:
    """The last delay is cut short to end with the budget: the default's 10 s are 10 s of
    trying, not the 7 s after which a full next delay would have overrun it."""
    for _ in range(20):  # the jitter varies; every draw must reach the budget
        script = Script(chunk_call(), RetryPolicy())
        with pytest.raises(TransportError):
            script.run([refused()] * 100)
        assert 10.0 - 0.1 <= script.now <= 10.0 + 0.1, script.sleeps
        assert sum(script.sleeps) <= 10.0


def test_max_attempts() -> None:
    script = Script(chunk_call(), RetryPolicy(max_attempts=3, budget=1000))
    with pytest.raises(TransportError) as raised:
        script.run([refused()] * 5)
    assert script.sent == 3 and raised.value.attempts == 3


def test_other_refusals_are_not_retried() -> None:
    for status, kind in ((422, InvalidInputError), (409, ConflictError)):
        script = Script(chunk_call(), RetryPolicy())
        with pytest.raises(kind):
            script.run([answer(status)])
        assert script.sent == 1


def test_a_probe_503_is_an_answer_not_a_wait() -> None:
    script = Script(chunk_call(retry_unavailable=False), RetryPolicy())
    with pytest.raises(UnavailableError):
        script.run([answer(503)])
    assert script.sent == 1


def test_a_call_that_could_apply_twice_is_retried_only_when_it_was_not_sent() -> None:
    unsafe = chunk_call(replay_safe=False)
    script = Script(unsafe, RetryPolicy(budget=100))
    assert script.run([refused(), refused(), answer(201, {})]) == 201
    script = Script(unsafe, RetryPolicy(budget=100))
    with pytest.raises(TransportError):
        script.run([lost(), answer(201, {})])
    assert script.sent == 1


def test_done_earlier_counts_only_after_an_attempt_that_may_have_arrived() -> None:
    create = chunk_call(done_earlier=frozenset({409}))
    script = Script(create, RetryPolicy(budget=100))
    assert script.run([lost(), answer(409)]) == 409  # the first attempt created it
    script = Script(create, RetryPolicy(budget=100))
    with pytest.raises(ConflictError):  # never sent before: a real conflict
        script.run([refused(), answer(409)])


# -- against real processes -----------------------------------------------------------------


class CountingTransport(httpx.HTTPTransport):
    """httpx's transport, one connection per request, counting requests and transport errors."""

    def __init__(self) -> None:
        super().__init__(limits=httpx.Limits(max_keepalive_connections=0))
        self.requests = 0
        self.failures = 0
        self.statuses: dict[int, int] = {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        try:
            response = super().handle_request(request)
        except httpx.TransportError:
            self.failures += 1
            raise
        self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1
        return response


class LosingProxy:
    """A TCP proxy to a service that forwards every request and, for those ``lose`` picks,
    waits for the service's answer and then drops it: the connection closes without it.

    With one connection per request (``CountingTransport``), the first bytes of a connection
    are a request's line and headers.
    """

    def __init__(self, upstream_port: int, lose: Callable[[bytes], bool]) -> None:
        self.upstream_port = upstream_port
        self.lose = lose
        self.lost = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self.closed:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(downstream,), daemon=True).start()

    def _serve(self, downstream: socket.socket) -> None:
        with downstream, socket.create_connection(("127.0.0.1", self.upstream_port)) as upstream:
            first = downstream.recv(1 << 16)
            drop = self.lose(first)
            upstream.sendall(first)
            threading.Thread(target=_pump, args=(downstream, upstream), daemon=True).start()
            while answer := upstream.recv(1 << 16):
                if drop:  # the service answered (it applied the chunk); the client never hears
                    self.lost += 1
                    downstream.shutdown(socket.SHUT_RDWR)  # at once, though _pump still reads
                    return
                downstream.sendall(answer)

    def close(self) -> None:
        self.closed = True
        self.listener.close()


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(1 << 16):
            target.sendall(data)
    except OSError:
        pass


def test_a_chunk_whose_answer_is_lost_is_retried_and_not_applied_twice(
    service: ServiceProcess, selector_name: str
) -> None:
    chunk_requests = iter(range(1000))

    def third_chunk(head: bytes) -> bool:
        return head.startswith(b"POST ") and b"/chunks" in head and next(chunk_requests) == 2

    proxy = LosingProxy(service.port, third_chunk)
    x = np.random.default_rng(0).normal(size=(600, 5))
    transport = CountingTransport()
    try:
        with Client(proxy.url, transport=transport) as sift:
            sift.create(selector_name, "variance", n_features=5)
            summary = sift.push(selector_name, x, chunk_rows=100)
            weights = sift.weights(selector_name).weights
    finally:
        proxy.close()
    assert proxy.lost == 1 and transport.failures == 1
    # The retry of the third chunk carried its key: answered from the first application.
    assert [r.duplicate for r in summary.receipts] == [False, False, True, False, False, False]
    assert summary.seen == 600
    np.testing.assert_allclose(weights, x.var(axis=0), rtol=1e-10)


def push_through_a_fault(
    process: ServiceProcess, name: str, fault: Callable[[CountingTransport], None]
) -> CountingTransport:
    """Push 2000 rows in 100 chunks from a thread, do ``fault`` once 25 chunks are
    acknowledged, and check that the push completed and that every row counts exactly once
    (``rows_seen`` and the variances, which any loss or double would change)."""
    x = np.random.default_rng(1).normal(size=(2000, 20))
    with Client(process.url) as sift:
        sift.create(name, "variance", n_features=20)
    transport = CountingTransport()
    receipts: list[ChunkReceipt] = []
    errors: list[BaseException] = []

    def push() -> None:
        try:
            with Client(process.url, transport=transport, retry=RetryPolicy(budget=60)) as sift:
                sift.push(name, x, chunk_rows=20, on_chunk=receipts.append)
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=push, daemon=True)
    thread.start()
    wait_for(lambda: len(receipts) >= 25, 30, "25 chunks acknowledged")
    fault(transport)
    thread.join(90)
    assert not thread.is_alive() and not errors, errors
    assert len(receipts) == 100
    with Client(process.url) as sift:
        assert sift.describe(name).rows_seen == 2000
        np.testing.assert_allclose(sift.weights(name).weights, x.var(axis=0), rtol=1e-9)
    return transport


@pytest.fixture
def own_service(tmp_path: Path) -> Iterator[tuple[ServiceProcess, RedisProcess]]:
    redis_server = RedisProcess(tmp_path / "redis")
    process = ServiceProcess("retries", redis_server.url, tmp_path)
    try:
        process.start()
        yield process, redis_server
    finally:
        process.kill()
        redis_server.close()


@pytest.mark.slow
def test_push_survives_a_service_sigkill_and_restart(
    own_service: tuple[ServiceProcess, RedisProcess],
) -> None:
    process, _ = own_service

    def kill_and_restart(transport: CountingTransport) -> None:
        process.kill()
        time.sleep(0.5)
        process.start()

    transport = push_through_a_fault(process, "killed", kill_and_restart)
    assert transport.failures >= 1, "the push never met the killed service"


@pytest.mark.slow
def test_push_survives_redis_stopped_and_started_again(
    own_service: tuple[ServiceProcess, RedisProcess],
) -> None:
    process, redis_server = own_service

    def stop_and_start_redis(transport: CountingTransport) -> None:
        redis_server.stop()
        wait_for(lambda: transport.statuses.get(503, 0) >= 1, 30, "a 503 while Redis is down")
        time.sleep(1.0)
        redis_server.start()

    push_through_a_fault(process, "redis-down", stop_and_start_redis)


def test_creating_and_deleting_when_their_answers_are_lost(
    service: ServiceProcess, selector_name: str
) -> None:
    """A create whose answer is lost is retried, meets "name exists" and answers the selector
    the first attempt made; a delete likewise meets 404 and is done."""

    victims = {
        b"POST /v1/selectors HTTP/1.1",
        f"DELETE /v1/selectors/{selector_name} HTTP/1.1".encode(),
    }

    def first_create_and_delete(head: bytes) -> bool:
        request_line = head.split(b"\r\n", 1)[0]
        if request_line in victims:
            victims.remove(request_line)  # only the first attempt loses its answer
            return True
        return False

    proxy = LosingProxy(service.port, first_create_and_delete)
    try:
        with Client(proxy.url, transport=CountingTransport()) as sift:
            created = sift.create(selector_name, "variance", n_features=3)
            assert proxy.lost == 1
            assert (created.name, created.method, created.n_features) == (
                selector_name,
                "variance",
                3,
            )
            sift.delete(selector_name)
            assert proxy.lost == 2
    finally:
        proxy.close()
    with Client(service.url) as sift, pytest.raises(NotFoundError):
        sift.describe(selector_name)
