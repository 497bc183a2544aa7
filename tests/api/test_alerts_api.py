"""Alerts over HTTP: created, listed and deleted; a crossing POSTed once, signed, to a real
receiver this test starts, retried when it fails, never in a commit's way."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import numpy as np
import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from service.errors import Unavailable
from service.monitoring.signing import new_secret
from siftstream.webhooks import verify
from tests.support.api import assert_problem, wait_for
from tests.support.webhooks import Receiver, webhook_receiver

FEATURES = 12
#: The receivers listen on loopback, which alerts reach only when the operator allows it.
LOOPBACK = "127.0.0.0/8"
#: Phase one: features 0-4 vary most; phase two: features 7-11, far more.
BEFORE = np.array([5.0, 4.0, 3.5, 3.0, 2.5] + [1.0] * 7)
AFTER = np.array([1.0] * 7 + [12.0, 11.0, 10.0, 9.0, 8.0])


def rows(rng: np.random.Generator, n: int, scale: np.ndarray) -> list[list[float]]:
    chunk: list[list[float]] = (rng.standard_normal((n, FEATURES)) * scale).tolist()
    return chunk


async def create(http: httpx.AsyncClient, name: str = "s") -> None:
    created = await http.post(
        "/v1/selectors", json={"name": name, "method": "variance", "n_features": FEATURES}
    )
    assert created.status_code == 201, created.text


async def push(http: httpx.AsyncClient, name: str, chunk: list[list[float]]) -> dict[str, Any]:
    response = await http.post(f"/v1/selectors/{name}/chunks", json={"rows": chunk})
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def alert(http: httpx.AsyncClient, name: str, **body: Any) -> httpx.Response:
    return await http.post(f"/v1/selectors/{name}/alerts", json=body)


async def baseline_of(http: httpx.AsyncClient, name: str) -> dict[str, Any] | None:
    drift = (await http.get(f"/v1/selectors/{name}/drift", params={"h": 5})).json()
    found: dict[str, Any] | None = drift["baseline"]
    return found


async def settle_baseline(http: httpx.AsyncClient, name: str, rng: np.random.Generator) -> int:
    """Phase one until the monitor made a version the baseline; its version."""
    for _ in range(20):
        await push(http, name, rows(rng, 400, BEFORE))
        await asyncio.sleep(0.05)
        found = await baseline_of(http, name)
        if found is not None:
            assert found["how"] == "auto"
            return int(found["version"])
    raise AssertionError("no version became the baseline")


async def test_alerts_are_created_listed_and_deleted_and_never_show_their_secret(client):
    await create(client)
    response = await alert(
        client, "s", url="http://hooks.example.invalid/hook", h=5, threshold=0.4, label="five"
    )
    assert response.status_code == 201, response.text
    created = response.json()
    assert created["secret"].startswith("whsec_") and len(created["secret"]) == 50
    assert created["h"] == 5 and created["threshold"] == 0.4
    assert response.headers["location"] == f"/v1/selectors/s/alerts/{created['id']}"
    assert created["min_stability"] is None and created["firing"] is False
    listed = (await client.get("/v1/selectors/s/alerts")).json()["alerts"]
    assert [a["id"] for a in listed] == [created["id"]]
    assert "secret" not in listed[0] and listed[0]["label"] == "five"
    assert listed[0]["crossings"] == 0 and listed[0]["judged_version"] is None
    gone = await client.delete(f"/v1/selectors/s/alerts/{created['id']}")
    assert gone.status_code == 204
    assert (await client.get("/v1/selectors/s/alerts")).json()["alerts"] == []
    again = await client.delete(f"/v1/selectors/s/alerts/{created['id']}")
    assert_problem(again, 404, "no alert")


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"url": "ftp://hooks.example.invalid/x", "threshold": 0.5}, 422, "url"),
        ({"url": "http://user:pw@hooks.example.invalid/x", "threshold": 0.5}, 422, "url"),
        ({"url": "http://hooks.example.invalid:70000/x", "threshold": 0.5}, 422, "url"),
        ({"url": "http://hooks.example.invalid/x", "threshold": 0}, 422, "threshold"),
        ({"url": "http://hooks.example.invalid/x", "threshold": 1.5}, 422, "threshold"),
        (
            {"url": "http://hooks.example.invalid/x", "threshold": 0.5, "h": 101},
            422,
            "SIFT_HISTORY_TOP",
        ),
        (
            {"url": "http://hooks.example.invalid/x", "threshold": 0.5, "min_stability": 2},
            422,
            "min",
        ),
        ({"url": "http://hooks.example.invalid/x", "threshold": 0.5, "extra": 1}, 422, "extra"),
        ({"url": "http://" + "a" * 2100, "threshold": 0.5}, 422, "url"),
    ],
)
async def test_an_alert_is_checked_before_anything_is_written(client, body, status, says):
    await create(client)
    response = await alert(client, "s", **body)
    assert_problem(response, status)
    assert says in response.text
    assert (await client.get("/v1/selectors/s/alerts")).json()["alerts"] == []


async def test_alerts_of_unknown_selectors_are_404(client):
    assert_problem(
        await alert(client, "nope", url="http://hooks.example.invalid/x", threshold=0.5),
        404,
        "nope",
    )
    assert_problem(await client.get("/v1/selectors/nope/alerts"), 404)
    assert_problem(await client.get("/v1/selectors/nope/alerts/events"), 404)


async def crossing_scenario(
    http: httpx.AsyncClient, receiver: Receiver, rng: np.random.Generator
) -> tuple[dict[str, Any], int]:
    """A selector whose ranking settles, an alert on its top 5, then a phase that moves it:
    the alert's creation answer and the baseline's version."""
    await create(http)
    created = (await alert(http, "s", url=receiver.url, h=5, threshold=0.5)).json()
    baseline = await settle_baseline(http, "s", rng)
    return created, baseline


async def test_a_crossing_is_posted_once_signed_with_what_moved(app_factory):
    rng = np.random.default_rng(1)
    with webhook_receiver() as receiver:
        async with app_factory(alert_private=LOOPBACK, alert_backoff_seconds=0.05) as (_app, http):
            created, baseline = await crossing_scenario(http, receiver, rng)
            assert receiver.all() == []  # stable: nothing to say
            for _ in range(12):  # the ranking moves, and stays moved for several versions
                await push(http, "s", rows(rng, 400, AFTER))
                await asyncio.sleep(0.02)
            await wait_for(lambda: _has(receiver, 1))
            await asyncio.sleep(0.3)
            (delivery,) = receiver.all()  # once per crossing, however many versions stay over
            body = delivery.body
            # An independent implementation of Standard Webhooks verifies it, and so does the
            # client's; neither accepts another secret.
            assert Webhook(created["secret"]).verify(body, delivery.headers) == delivery.event
            with pytest.raises(WebhookVerificationError):
                Webhook(new_secret()).verify(body, delivery.headers)
            assert verify(created["secret"], delivery.headers, body, time.time())
            assert not verify(new_secret(), delivery.headers, body, time.time())
            event = delivery.event
            assert delivery.headers["webhook-id"] == event["id"] == f"{created['id']}-1"
            assert event["selector"] == "s" and event["alert"] == created["id"]
            assert event["baseline_version"] == baseline and event["version"] > baseline
            assert event["drift"] >= 0.5 and event["crossing"] == 1
            entered = {f["name"] for f in event["entered"]}
            left = {f["name"] for f in event["left"]}
            assert entered <= {f"f{i}" for i in range(7, 12)} and entered
            assert left <= {f"f{i}" for i in range(5)} and left
            events = (await http.get("/v1/selectors/s/alerts/events")).json()["events"]
            assert [e["id"] for e in events] == [event["id"]]
            assert events[0]["delivery"]["status"] == "delivered"
            assert events[0]["delivery"]["attempts"] == 1
            listed = (await http.get("/v1/selectors/s/alerts")).json()["alerts"][0]
            assert listed["firing"] is True and listed["crossings"] == 1
            # Back below the threshold (the baseline pinned to now), then over again: a new
            # crossing, a new event.
            assert (await http.post("/v1/selectors/s/baseline")).status_code == 200
            await push(http, "s", rows(rng, 400, AFTER))
            await wait_for(lambda: _judged_below(http))
            for _ in range(6):
                await push(http, "s", rows(rng, 400, BEFORE * 20))
            await wait_for(lambda: _has(receiver, 2))
            second = receiver.all()[1].event
            assert second["id"] == f"{created['id']}-2" and second["crossing"] == 2


async def _has(receiver: Receiver, count: int) -> bool:
    return len(receiver.all()) >= count


async def _judged_below(http: httpx.AsyncClient) -> bool:
    listed = (await http.get("/v1/selectors/s/alerts")).json()["alerts"][0]
    return listed["firing"] is False


async def test_a_failing_receiver_gets_the_same_event_again_with_backoff(app_factory):
    rng = np.random.default_rng(2)
    with webhook_receiver(failures=2) as receiver:
        async with app_factory(alert_private=LOOPBACK, alert_backoff_seconds=0.1) as (_app, http):
            await crossing_scenario(http, receiver, rng)
            for _ in range(12):
                await push(http, "s", rows(rng, 400, AFTER))
            await wait_for(lambda: _has(receiver, 3))
            first, second, third = receiver.all()
            assert [r.status for r in (first, second, third)] == [500, 500, 204]
            assert first.body == second.body == third.body  # the same event, the same id
            assert second.at - first.at >= 0.09 and third.at - second.at >= 0.19  # doubling
            events = (await http.get("/v1/selectors/s/alerts/events")).json()["events"]
            await wait_for(lambda: _delivered(http))
            assert len(events) == 1


async def _delivered(http: httpx.AsyncClient) -> bool:
    events = (await http.get("/v1/selectors/s/alerts/events")).json()["events"]
    return bool(events) and events[0]["delivery"]["status"] == "delivered"


async def test_a_receiver_that_never_answers_in_time_is_given_up(app_factory):
    rng = np.random.default_rng(3)
    with webhook_receiver(failures=100) as receiver:
        async with app_factory(
            alert_private=LOOPBACK, alert_backoff_seconds=0.01, alert_attempts=3
        ) as (_app, http):
            await crossing_scenario(http, receiver, rng)
            for _ in range(12):
                await push(http, "s", rows(rng, 400, AFTER))

            async def failed() -> bool:
                events = (await http.get("/v1/selectors/s/alerts/events")).json()["events"]
                return bool(events) and events[0]["delivery"]["status"] == "failed"

            await wait_for(failed)
            assert len(receiver.all()) == 3
            delivery = (await http.get("/v1/selectors/s/alerts/events")).json()["events"][0]
            assert delivery["delivery"]["last_status"] == 500


async def test_a_slow_receiver_never_slows_a_commit(app_factory):
    """The receiver takes 3 s per request; pushes that commit while it is being called are
    answered as fast as without it."""
    rng = np.random.default_rng(4)
    with webhook_receiver(delay=3.0) as receiver:
        async with app_factory(alert_private=LOOPBACK, alert_backoff_seconds=0.05) as (_app, http):
            await crossing_scenario(http, receiver, rng)
            timings = []
            for _ in range(12):
                started = time.perf_counter()
                await push(http, "s", rows(rng, 400, AFTER))
                timings.append(time.perf_counter() - started)
            pushed = time.time()
            await wait_for(lambda: _has(receiver, 1), timeout=30)
            assert max(timings) < 1.0, timings  # a commit never waits for the 3 s receiver
            # ... and the receiver was being called while the pushes went on.
            assert receiver.all()[0].at - 3.0 < pushed


async def test_a_rotated_secret_signs_beside_the_new_one(app_factory):
    """After a rotation, deliveries carry a signature under each secret, so a receiver that
    still holds the old one and one that has the new one both verify them."""
    rng = np.random.default_rng(5)
    with webhook_receiver() as receiver:
        async with app_factory(alert_private=LOOPBACK, alert_backoff_seconds=0.05) as (_, http):
            created, _baseline = await crossing_scenario(http, receiver, rng)
            path = f"/v1/selectors/s/alerts/{created['id']}/secret"
            rotated = await http.post(path)
            assert rotated.status_code == 200, rotated.text
            answer = rotated.json()
            assert answer["id"] == created["id"] and answer["secret"].startswith("whsec_")
            assert answer["secret"] != created["secret"]
            assert answer["previous_valid_until"] > time.time() + 23 * 3600
            listed = (await http.get("/v1/selectors/s/alerts")).json()["alerts"][0]
            assert "secret" not in listed and "previous_secret" not in str(listed)
            for _ in range(12):
                await push(http, "s", rows(rng, 400, AFTER))
            await wait_for(lambda: _has(receiver, 1))
            delivery = receiver.all()[0]
            assert len(delivery.headers["webhook-signature"].split(" ")) == 2
            for secret in (created["secret"], answer["secret"]):
                assert Webhook(secret).verify(delivery.body, delivery.headers)
            assert_problem(await http.post("/v1/selectors/s/alerts/0123456789abcdef/secret"), 404)


async def test_a_failed_event_is_listed_counted_and_delivered_again_on_request(app_factory):
    rng = np.random.default_rng(6)
    with webhook_receiver(failures=100) as receiver:
        settings = {"alert_private": LOOPBACK, "alert_backoff_seconds": 0.01, "alert_attempts": 2}
        async with app_factory(**settings) as (app, http):
            await crossing_scenario(http, receiver, rng)
            for _ in range(12):
                await push(http, "s", rows(rng, 400, AFTER))

            async def failed() -> list[dict[str, Any]]:
                answer = await http.get("/v1/selectors/s/alerts/events?status=failed")
                listed: list[dict[str, Any]] = answer.json()["events"]
                return listed

            await wait_for(failed)
            (event,) = await failed()
            assert event["delivery"]["attempts"] == 2 and event["delivery"]["outcome"] == "status"
            pending = await http.get("/v1/selectors/s/alerts/events?status=pending")
            assert pending.json()["events"] == []
            assert app.state.runtime.metrics.alert_events_failed._value.get() == 1
            # Still firing: nothing new is sent until it is re-armed or the event redelivered.
            assert (await http.get("/v1/selectors/s/alerts")).json()["alerts"][0]["firing"]

            receiver.failures = 0
            path = f"/v1/selectors/s/alerts/events/{event['id']}/redeliver"
            answer = await http.post(path)
            assert answer.status_code == 200 and answer.json() == {
                "id": event["id"],
                "queued": True,
            }
            await wait_for(lambda: _delivered(http))
            delivered = receiver.delivered()
            assert [d.event["id"] for d in delivered] == [event["id"]]  # the same id
            again = (await http.get("/v1/selectors/s/alerts/events")).json()["events"][0]
            assert again["delivery"]["attempts"] == 1  # counted afresh
            assert_problem(
                await http.post("/v1/selectors/s/alerts/events/0123456789abcdef-9/redeliver"), 404
            )
            assert (await http.post("/v1/selectors/s/alerts/events/x/redeliver")).status_code == 422


async def test_a_rearmed_alert_raises_its_next_crossing(app_factory):
    rng = np.random.default_rng(7)
    with webhook_receiver() as receiver:
        async with app_factory(alert_private=LOOPBACK, alert_backoff_seconds=0.05) as (_, http):
            created, _baseline = await crossing_scenario(http, receiver, rng)
            for _ in range(12):
                await push(http, "s", rows(rng, 400, AFTER))
            await wait_for(lambda: _has(receiver, 1))
            rearmed = await http.post(f"/v1/selectors/s/alerts/{created['id']}/rearm")
            assert rearmed.status_code == 200, rearmed.text
            assert rearmed.json()["firing"] is False and rearmed.json()["crossings"] == 1
            for _ in range(3):  # still over the threshold: a crossing again
                await push(http, "s", rows(rng, 400, AFTER))
            await wait_for(lambda: _has(receiver, 2))
            assert receiver.all()[1].event["crossing"] == 2
            missing = await http.post("/v1/selectors/s/alerts/0123456789abcdef/rearm")
            assert_problem(missing, 404)


async def test_an_event_whose_mark_was_lost_is_found_by_the_full_pass(app_factory, monkeypatch):
    """Redis fails between the script that queues an event and the mark that points the
    outboxes at it: the event is in Redis, unmarked. The periodic pass over every selector's
    outbox finds it, and it is delivered (late, not lost)."""
    from service.monitoring import outbox as outbox_module

    rng = np.random.default_rng(8)
    monkeypatch.setattr(outbox_module, "FULL_PASS_SECONDS", 0.5)
    with webhook_receiver() as receiver:
        async with app_factory(alert_private=LOOPBACK, alert_backoff_seconds=0.05) as (app, http):
            store = app.state.runtime.selectors.store
            marked = store.monitoring.mark_outbox
            failed: list[str] = []

            async def mark_once_failing(name: str, due_ms: float) -> None:
                if not failed:
                    failed.append(name)
                    raise Unavailable("Redis went away between the claim and its mark")
                await marked(name, due_ms)

            monkeypatch.setattr(store.monitoring, "mark_outbox", mark_once_failing)
            await crossing_scenario(http, receiver, rng)
            for _ in range(12):
                await push(http, "s", rows(rng, 400, AFTER))
            await wait_for(lambda: _has(receiver, 1))
            assert failed == ["s"]
            assert receiver.all()[0].event["crossing"] == 1
