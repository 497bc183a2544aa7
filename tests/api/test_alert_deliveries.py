"""Alert deliveries against receivers that misbehave: real sockets on loopback that flood,
drip, hang or speak another protocol. None of them can take memory, time or secrets from the
service, or hold up another selector's events."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import pytest

from service.monitoring.destinations import DestinationPolicy
from service.monitoring.http_post import Outcome
from service.monitoring.outbox import delivery_status
from service.monitoring.webhooks import PER_DESTINATION, Webhooks
from tests.support.hostile_peers import banner, binary, closed_port, drip, flood, hang, tcp_peer
from tests.support.webhooks import webhook_receiver

#: The operator's opt-in the tests' receivers need: they listen on loopback.
LOOPBACK = DestinationPolicy.of("", "127.0.0.0/8")
DEFAULT = DestinationPolicy.of("", "")
BODY = json.dumps({"id": "a1-1", "type": "sift.ranking.drift", "selector": "s"}).encode()


SECRETS = ["whsec_" + "A" * 43]


async def deliver_once(
    url: str, policy: DestinationPolicy = LOOPBACK, timeout: float = 2.0
) -> tuple[Outcome, float]:
    """One attempt; its outcome and how long it took."""
    started = time.monotonic()
    outcome = await Webhooks(policy, timeout).attempt("s", url, SECRETS, "a1-1", BODY)
    return outcome, time.monotonic() - started


async def test_a_flood_of_body_is_never_read():
    """200 and then an endless body: delivered, and the service read the status line only
    (the peer could push no more than the sockets' buffers before being cut off)."""
    with tcp_peer(flood) as peer:
        outcome, took = await deliver_once(peer.url())
        await asyncio.sleep(0.5)
        assert outcome == Outcome("delivered", 200) and took < 2
        assert peer.bytes_sent < 32 * 2**20, peer.bytes_sent


async def test_a_dripping_receiver_meets_one_deadline_for_the_whole_attempt():
    with tcp_peer(drip) as peer:
        outcome, took = await deliver_once(peer.url(), timeout=1.0)
        assert outcome.kind == "timeout" and outcome.retried
        assert 0.9 < took < 2.5, took  # not reset by every byte that trickles in


async def test_other_protocols_are_not_http_and_their_bytes_are_never_kept():
    with tcp_peer(banner) as secret_service, tcp_peer(binary) as binary_service:
        first, _ = await deliver_once(secret_service.url())
        second, _ = await deliver_once(binary_service.url())
    # What the event's record keeps is the outcome's kind, status and text: Sift's words only.
    for outcome in (first, second):
        assert outcome == Outcome("not-http")
        text = json.dumps(delivery_status(outcome, 1, done=False))
        assert "hunter2" not in text and "SECRET" not in text and "ERR" not in text
    # One kind of peer cannot be told from another by what the record says.
    assert first.text == second.text


async def test_a_closed_port_is_refused():
    with closed_port() as port:
        outcome, _ = await deliver_once(f"http://127.0.0.1:{port}/hook")
    assert outcome == Outcome("refused") and outcome.text == "the connection was refused"


async def test_hung_receivers_delay_only_their_own_events():
    """100 attempts at a receiver that never answers, then one at a receiver that works, for
    another selector: that one is delivered at once, and the hung receiver never holds more
    than its share of connections."""
    hooks = Webhooks(LOOPBACK, 5.0)
    with tcp_peer(hang) as hung, webhook_receiver() as good:
        stuck = [
            asyncio.create_task(hooks.attempt(f"hung-{i % 3}", hung.url(), SECRETS, "a1-1", BODY))
            for i in range(100)
        ]
        try:
            await asyncio.sleep(0.3)
            started = time.monotonic()
            outcome = await hooks.attempt("other", good.url, SECRETS, "a1-1", BODY)
            assert outcome.delivered and time.monotonic() - started < 1.0
            assert hung.connections <= PER_DESTINATION
        finally:
            for task in stuck:
                task.cancel()
            await asyncio.gather(*stuck, return_exceptions=True)


async def test_loopback_is_never_reached_by_default():
    with tcp_peer(hang) as peer:
        outcome, _ = await deliver_once(peer.url(), policy=DEFAULT)
        assert outcome == Outcome("forbidden")
        assert not outcome.retried  # the settings decide, not the receiver
        assert peer.connections == 0


def loopback_alias() -> str | None:
    """A name other than ``localhost`` that this machine resolves to a loopback address (an
    ``/etc/hosts`` entry): what a rebinding DNS would answer for a name that was public."""
    try:
        lines = Path("/etc/hosts").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and fields[0].startswith("127."):
            for name in fields[1:]:
                loopback_name = name == "localhost" or name.endswith(".localhost")
                if not loopback_name and socket.gethostbyname(name).startswith("127."):
                    return name
    return None


async def test_the_address_judged_is_the_address_connected_to():
    """A name accepted when the alert was created (it is not an address) that resolves to
    loopback when delivering is refused then, before any connection; opted in, it goes."""
    name = loopback_alias()
    if name is None:
        pytest.skip("no name other than localhost resolves to loopback here")
    with webhook_receiver() as receiver:
        url = receiver.url.replace("127.0.0.1", name)
        outcome, _ = await deliver_once(url, policy=DEFAULT)
        assert outcome == Outcome("forbidden") and receiver.all() == []
        outcome, _ = await deliver_once(url, policy=DestinationPolicy.of("", name))
        assert outcome.delivered and len(receiver.all()) == 1
