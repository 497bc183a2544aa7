"""Alerts against real service processes: two replicas on one Redis deliver a crossing once; a
service SIGKILLed mid-attempt delivers it after its restart; a receiver that floods its answer
costs the service nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.support.harness import ServiceProcess, poll
from tests.support.hostile_peers import flood, tcp_peer
from tests.support.webhooks import webhook_receiver

pytestmark = pytest.mark.slow

FEATURES = 12
BEFORE = np.array([5.0, 4.0, 3.5, 3.0, 2.5] + [1.0] * 7)
AFTER = np.array([1.0] * 7 + [12.0, 11.0, 10.0, 9.0, 8.0])


def push(client: httpx.Client, service: ServiceProcess, rows: np.ndarray) -> None:
    answer = client.post(f"{service.url}/v1/selectors/s/chunks", json={"rows": rows.tolist()})
    assert answer.status_code == 200, answer.text


def test_two_replicas_deliver_one_crossing_once(
    spawn_service: Callable[..., ServiceProcess],
) -> None:
    env = {
        # Each replica lets go of the selector as soon as it applied what it took, so that the
        # next chunk is applied (and its version judged) by the replica it was sent to.
        "SIFT_APPLIER_LINGER_SECONDS": "0",
        "SIFT_ALERT_BACKOFF_SECONDS": "0.05",
        "SIFT_ALERT_PRIVATE": "127.0.0.0/8",  # the receiver listens on loopback
    }
    first, second = spawn_service("a", **env), spawn_service("b", **env)
    replicas = (first, second)
    rng = np.random.default_rng(0)
    with webhook_receiver() as receiver, httpx.Client(timeout=30) as client:
        created = client.post(
            f"{first.url}/v1/selectors",
            json={"name": "s", "method": "variance", "n_features": FEATURES},
        )
        assert created.status_code == 201, created.text
        hook = {"url": receiver.url, "h": 5, "threshold": 0.5}
        assert client.post(f"{second.url}/v1/selectors/s/alerts", json=hook).status_code == 201

        def baseline() -> bool:
            for i in range(2):
                push(client, replicas[i], rng.standard_normal((300, FEATURES)) * BEFORE)
            drift = client.get(f"{first.url}/v1/selectors/s/drift", params={"h": 5}).json()
            return drift["baseline"] is not None

        poll(baseline, timeout_s=30, interval_s=0.1)
        applied = [s.metric("sift_rows_applied_total") for s in replicas]

        def both_applied() -> bool:
            return all(
                s.metric("sift_rows_applied_total") >= a + 600
                for s, a in zip(replicas, applied, strict=True)
            )

        # The ranking moves and stays moved: many versions over the threshold, committed by
        # both replicas in turn (a chunk is usually applied by the replica it was sent to; a
        # busy machine may hand a few to the other, so push until each has applied two).
        for i in range(40):
            push(client, replicas[i % 2], rng.standard_normal((300, FEATURES)) * AFTER)
            if i >= 15 and both_applied():
                break
        assert both_applied(), [s.metric("sift_rows_applied_total") for s in replicas]
        poll(lambda: receiver.all(), timeout_s=20)
        time.sleep(1.5)  # time for a second delivery, were there one
        (delivery,) = receiver.all()
        assert delivery.event["crossing"] == 1 and delivery.event["drift"] >= 0.5
        claimed = [s.metric("sift_alert_events_total") for s in replicas]
        assert sorted(claimed) == [0.0, 1.0]  # one replica claimed it; the other never did
        events = client.get(f"{first.url}/v1/selectors/s/alerts/events").json()["events"]
        assert [e["id"] for e in events] == [delivery.event["id"]]
        listed = client.get(f"{second.url}/v1/selectors/s/alerts").json()["alerts"][0]
        assert listed["crossings"] == 1 and listed["firing"] is True


def test_an_event_whose_deliverer_is_killed_mid_attempt_is_delivered_after_restart(
    spawn_service: Callable[..., ServiceProcess],
) -> None:
    """The receiver holds the first attempt open; the service is SIGKILLed meanwhile. The
    event is in Redis's outbox, not in the dead process: the restarted service attempts it
    again once the attempt's lease ends, and it is delivered (at least once, same id)."""
    env = {
        "SIFT_ALERT_BACKOFF_SECONDS": "0.05",
        "SIFT_ALERT_TIMEOUT_SECONDS": "1",  # the lease: 2 x 1 s + 5 s
        "SIFT_ALERT_PRIVATE": "127.0.0.1/32",
    }
    service = spawn_service("killed", **env)
    rng = np.random.default_rng(3)
    with webhook_receiver(delay=30.0) as receiver, httpx.Client(timeout=30) as client:
        settled_with_alert(client, service, receiver.url, rng)
        for _ in range(12):
            push(client, service, rng.standard_normal((300, FEATURES)) * AFTER)
        assert poll(lambda: receiver.all() or receiver.pending, timeout_s=20)
        service.kill()  # mid-attempt: the receiver has the request and has not answered
        receiver.delay = 0.0
        started = time.monotonic()
        service.restart()
        delivered = poll(receiver.delivered, timeout_s=30)
        assert delivered, "the event was never delivered after the restart"
        assert time.monotonic() - started < 20
        events = client.get(f"{service.url}/v1/selectors/s/alerts/events").json()["events"]
        assert [e["id"] for e in events] == [delivered[0].event["id"]]
        assert events[0]["delivery"]["status"] == "delivered"
        assert events[0]["delivery"]["attempts"] >= 2  # the killed attempt counts


def test_a_receiver_that_floods_its_answer_costs_the_service_nothing(
    spawn_service: Callable[..., ServiceProcess],
) -> None:
    """A real ``sift serve`` whose alert's receiver answers 200 and then an endless body (up to
    1 GB): the event is delivered, the service's memory stays where it was, and the receiver
    could push no more than the sockets' buffers before being cut off."""
    env = {"SIFT_ALERT_BACKOFF_SECONDS": "0.05", "SIFT_ALERT_PRIVATE": "127.0.0.0/8"}
    service = spawn_service("flooded", **env)
    rng = np.random.default_rng(4)
    with tcp_peer(flood) as peer, httpx.Client(timeout=30) as client:
        settled_with_alert(client, service, peer.url(), rng)
        before = rss_bytes(service)
        for _ in range(12):
            push(client, service, rng.standard_normal((300, FEATURES)) * AFTER)

        def delivered() -> bool:
            events = client.get(f"{service.url}/v1/selectors/s/alerts/events").json()["events"]
            return bool(events) and events[0]["delivery"]["status"] == "delivered"

        assert poll(delivered, timeout_s=30), "the event was never delivered"
        time.sleep(1.0)
        assert rss_bytes(service) - before < 64 * 2**20, (before, rss_bytes(service))
        assert peer.bytes_sent < 32 * 2**20, peer.bytes_sent
        assert client.get(f"{service.url}/v1/healthz").status_code == 200


def settled_with_alert(
    client: httpx.Client, service: ServiceProcess, url: str, rng: np.random.Generator
) -> None:
    """Selector ``s`` with an alert on its top 5 to ``url``, fed until its ranking settled
    into the baseline."""
    created = client.post(
        f"{service.url}/v1/selectors",
        json={"name": "s", "method": "variance", "n_features": FEATURES},
    )
    assert created.status_code == 201, created.text
    hook = {"url": url, "h": 5, "threshold": 0.5}
    assert client.post(f"{service.url}/v1/selectors/s/alerts", json=hook).status_code == 201

    def baseline() -> bool:
        push(client, service, rng.standard_normal((300, FEATURES)) * BEFORE)
        drift = client.get(f"{service.url}/v1/selectors/s/drift", params={"h": 5}).json()
        return drift["baseline"] is not None

    poll(baseline, timeout_s=30, interval_s=0.1)


def rss_bytes(service: ServiceProcess) -> int:
    for line in Path(f"/proc/{service.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")
