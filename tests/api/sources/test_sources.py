"""Sources against a live app: a real Redis stream (on a redis-server of its own, the bus) and a
real NATS JetStream stream (``nats-server -js``) read into selectors and streams, exactly: the
variance Sift holds is numpy's on the good entries, to 1e-9; bad entries are set aside with
their positions and reasons; a source obeys keys and prefixes, refuses what it cannot feed,
pauses while its target is behind, stops when deleted, and never shows the bus's credentials.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import numpy as np

from service.store.redis_store import SelectorStore
from service.store.sources import SourceStore
from tests.support.api import assert_problem
from tests.support.nats import add_stream, publish
from tests.support.sources import LOOPBACK, applied, settled, source_body, until, write

NAMES = ["alpha", "beta", "gamma", "delta"]


async def test_a_redis_stream_lands_exactly_and_bad_entries_are_set_aside(client, bus, bus_url):
    http = client
    created = await http.post(
        "/v1/selectors",
        json={"name": "v", "method": "variance", "n_features": 4, "feature_names": NAMES},
    )
    assert created.status_code == 201, created.text
    rng = np.random.default_rng(7)
    rows = rng.normal(size=(600, 4)) * [1, 10, 100, 1000]
    entries: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        fields = dict(zip(NAMES, (repr(float(v)) for v in row), strict=True))
        if i % 3 == 0:  # fields in another order land by name
            fields = dict(reversed(list(fields.items())))
        entries.append(fields)
    bad = {
        50: {**entries[50], "beta": "twelve"},
        120: {**entries[120], "epsilon": "1"},
        200: {k: v for k, v in entries[200].items() if k != "gamma"},
        310: {**entries[310], "delta": "nan"},
        311: {**entries[311], "alpha": "1e300"},
    }
    entries = [bad.get(i, fields) for i, fields in enumerate(entries)]
    ids = await write(bus, "events", entries[:300])

    answer = await http.post(
        "/v1/sources", json=source_body("s", bus_url, "events", into={"selector": "v"})
    )
    assert answer.status_code == 201, answer.text
    assert answer.headers["location"] == "/v1/sources/s"
    ids += await write(bus, "events", entries[300:])
    described = await settled(http, "s", 600)
    good = [i for i in range(600) if i not in bad]
    await applied(http, "v", len(good))

    weights = (await http.get("/v1/selectors/v/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.var(rows[good], axis=0), rtol=1e-9)
    assert (described["rows"], described["rejected"]) == (len(good), len(bad))
    assert described["positions"] == {"0": ids[-1]}
    assert described["state"] in ("running", "paused")
    reasons = {r["position"]: r["reason"] for r in described["rejected_entries"]}
    assert set(reasons) == {ids[i] for i in bad}
    assert "'beta' is not a number" in reasons[ids[50]]
    assert "unknown field 'epsilon'" in reasons[ids[120]]
    assert "missing field 'gamma'" in reasons[ids[200]]
    assert "finite" in reasons[ids[310]] and "'delta'" in reasons[ids[310]]
    assert "within" in reasons[ids[311]]

    async def caught_up() -> bool:
        return bool((await http.get("/v1/sources/s")).json()["lag"] == 0)

    await until(caught_up)
    listed = (await http.get("/v1/sources")).json()["sources"]
    assert [s["name"] for s in listed] == ["s"]
    metrics = (await http.get("/metrics")).text
    assert f'sift_source_rows_total{{source="s"}} {float(len(good))}' in metrics
    assert f'sift_source_rejected_total{{source="s"}} {float(len(bad))}' in metrics


async def test_a_consumer_of_a_replaced_source_does_not_speak_for_the_new_one(
    client, bus, bus_url, redis_client
):
    """A consumer of an earlier source of the same name (deleted and created again: another
    id) that writes its last word late does not change what the new source says."""
    http = client
    body = {"name": "v", "method": "variance", "n_features": 4, "feature_names": NAMES}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.random.default_rng(5).normal(size=(30, 4))
    await write(bus, "events", [dict(zip(NAMES, map(repr, r.tolist()), strict=True)) for r in rows])
    answer = await http.post(
        "/v1/sources", json=source_body("s", bus_url, "events", into={"selector": "v"})
    )
    assert answer.status_code == 201, answer.text
    described = await settled(http, "s", 30)
    assert described["state"] in ("running", "paused"), described
    records = SourceStore(SelectorStore(redis_client, prefix="sift"))
    current = str((await records.get("s"))["id"])
    stale = {"id": secrets.token_hex(8), "state": "failed", "last_error": "stale", "at": 0.0}
    assert stale["id"] != current
    await records.write_status("s", stale)
    again = (await http.get("/v1/sources/s")).json()
    assert again["state"] == described["state"] and again["last_error"] is None, again


async def test_labelled_rows_take_their_label_from_the_label_field(client, bus, bus_url):
    http = client
    body = {"name": "o", "method": "ocfs", "n_features": 3, "feature_names": NAMES[:3]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    refused = await http.post(
        "/v1/sources", json=source_body("s", bus_url, "labelled", into={"selector": "o"})
    )
    assert_problem(refused, 422, "label_field")
    rng = np.random.default_rng(3)
    rows = rng.normal(size=(90, 3))
    labels = ["cat", "dog", "7"] * 30
    entries = [
        {**dict(zip(NAMES[:3], map(str, row), strict=True)), "y": label}
        for row, label in zip(rows, labels, strict=True)
    ]
    entries[4] = {k: v for k, v in entries[4].items() if k != "y"}
    await write(bus, "labelled", entries)
    answer = await http.post(
        "/v1/sources",
        json=source_body("s", bus_url, "labelled", into={"selector": "o"}, label_field="y"),
    )
    assert answer.status_code == 201, answer.text
    described = await settled(http, "s", 90)
    assert (described["rows"], described["rejected"]) == (89, 1)
    assert "missing field 'y'" in described["rejected_entries"][0]["reason"]
    await applied(http, "o", 89)
    classes = (await http.get("/v1/selectors/o")).json()["classes"]
    # "7" is the integer label 7: a Redis entry holds text.
    assert {(c["label"], c["count"]) for c in classes} == {("cat", 30), ("dog", 29), (7, 30)}


async def test_a_stream_target_feeds_every_attached_selector(client, bus, bus_url):
    http = client
    stream = {"name": "st", "n_features": 2, "feature_names": ["x", "y"]}
    assert (await http.post("/v1/streams", json=stream)).status_code == 201
    for name, method in (("a", "variance"), ("b", "fsds")):
        made = await http.post(
            "/v1/selectors", json={"name": name, "method": method, "stream": "st"}
        )
        assert made.status_code == 201, made.text
    rows = np.arange(200, dtype=float).reshape(100, 2) ** 1.5
    await write(bus, "pairs", [{"x": str(a), "y": str(b)} for a, b in rows])
    refused = await http.post(
        "/v1/sources", json=source_body("s", bus_url, "pairs", into={"selector": "a"})
    )
    assert_problem(refused, 422, "attached to stream 'st'")
    answer = await http.post(
        "/v1/sources", json=source_body("s", bus_url, "pairs", into={"stream": "st"})
    )
    assert answer.status_code == 201, answer.text
    await settled(http, "s", 100)
    for name in ("a", "b"):
        await applied(http, name, 100)
    weights = (await http.get("/v1/selectors/a/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.var(rows, axis=0), rtol=1e-9)


async def test_creation_refuses_what_it_cannot_feed_and_says_why(client, bus_url):
    http = client
    body = {"name": "v", "method": "variance", "n_features": 2}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    cases: list[tuple[dict[str, Any], str]] = [
        ({"kind": "kafka"}, "kind"),
        ({"url": "http://example.com"}, "url"),
        ({"into": {"selector": "v", "stream": "x"}}, "into"),
        ({"into": {}}, "into"),
        ({"start": "soon"}, "start"),
        ({"batch_rows": 0}, "batch_rows"),
        ({"extra": 1}, "extra"),
    ]
    for change, fragment in cases:
        document = {**source_body("s", bus_url, "k", into={"selector": "v"}), **change}
        assert_problem(await http.post("/v1/sources", json=document), 422, fragment)
    missing = source_body("s", bus_url, "k", into={"selector": "nobody"})
    assert_problem(await http.post("/v1/sources", json=missing), 404, "nobody")
    ofs = {"name": "cols", "method": "ofs", "n_samples": 5}
    assert (await http.post("/v1/selectors", json=ofs)).status_code == 201
    columns = source_body("s", bus_url, "k", into={"selector": "cols"})
    assert_problem(await http.post("/v1/sources", json=columns), 422, "rows")
    first = await http.post(
        "/v1/sources", json=source_body("s", bus_url, "k", into={"selector": "v"})
    )
    assert first.status_code == 201
    again = await http.post(
        "/v1/sources", json=source_body("s", bus_url, "k2", into={"selector": "v"})
    )
    assert_problem(again, 409, "already exists")
    assert_problem(await http.get("/v1/sources/none"), 404, "none")


async def test_credentials_never_show_and_an_absent_bus_is_retried(client, caplog):
    http = client
    body = {"name": "v", "method": "variance", "n_features": 2}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    secret = "hunter2-very-secret"
    url = f"redis://bob:{secret}@127.0.0.1:1/0"
    answer = await http.post("/v1/sources", json=source_body("s", url, "k", into={"selector": "v"}))
    assert answer.status_code == 201, answer.text
    assert answer.json()["url"] == "redis://bob:***@127.0.0.1:1/0"

    async def retrying() -> dict[str, Any] | None:
        described = (await http.get("/v1/sources/s")).json()
        return described if described["state"] == "retrying" else None

    described = await until(retrying)
    assert "does not answer" in described["last_error"]
    health = await http.get("/v1/readyz")
    assert health.status_code == 200
    seen = [
        (await http.get("/v1/sources")).text,
        (await http.get("/v1/sources/s")).text,
        (await http.get("/metrics")).text,
        caplog.text,
    ]
    assert not any(secret in text for text in seen)


async def test_keys_and_prefixes_bound_who_creates_sources(app_factory, bus_url):
    async with app_factory(api_token="root", source_private=LOOPBACK) as (_app, http):
        root = {"authorization": "Bearer root"}
        for name in ("t-v", "other"):
            body = {"name": name, "method": "variance", "n_features": 2}
            assert (await http.post("/v1/selectors", json=body, headers=root)).status_code == 201
        keys = {}
        for scope in ("admin", "write"):
            made = await http.post(
                "/v1/keys", json={"scopes": [scope], "prefix": "t-"}, headers=root
            )
            keys[scope] = {"authorization": f"Bearer {made.json()['key']}"}
        inside = source_body("t-s", bus_url, "k", into={"selector": "t-v"})
        assert_problem(await http.post("/v1/sources", json=inside, headers=keys["write"]), 403)
        outside_name = source_body("s", bus_url, "k", into={"selector": "t-v"})
        refused = await http.post("/v1/sources", json=outside_name, headers=keys["admin"])
        assert_problem(refused, 403, "'t-'")
        outside_target = source_body("t-s", bus_url, "k", into={"selector": "other"})
        refused = await http.post("/v1/sources", json=outside_target, headers=keys["admin"])
        assert_problem(refused, 403, "'other'")
        made = await http.post("/v1/sources", json=inside, headers=keys["admin"])
        assert made.status_code == 201, made.text
        root_source = source_body("r", bus_url, "k", into={"selector": "other"})
        assert (await http.post("/v1/sources", json=root_source, headers=root)).status_code == 201
        listed = (await http.get("/v1/sources", headers=keys["admin"])).json()["sources"]
        assert [s["name"] for s in listed] == ["t-s"]
        assert_problem(await http.get("/v1/sources/r", headers=keys["admin"]), 404)


async def test_a_source_pauses_while_its_target_is_behind_then_catches_up(
    app_factory, bus, bus_url, redis_client
):
    async with app_factory(source_max_pending=2, source_private=LOOPBACK) as (_app, http):
        body = {"name": "v", "method": "variance", "n_features": 2, "feature_names": ["x", "y"]}
        assert (await http.post("/v1/selectors", json=body)).status_code == 201
        # Another applier holds the selector's lease: nothing gets applied meanwhile.
        await redis_client.set("sift:{v}:lease", "someone-else", px=60_000)
        rows = np.random.default_rng(1).normal(size=(400, 2))
        await write(bus, "k", [{"x": str(a), "y": str(b)} for a, b in rows])
        source = source_body("s", bus_url, "k", into={"selector": "v"}, batch_rows=20)
        assert (await http.post("/v1/sources", json=source)).status_code == 201

        async def paused() -> dict[str, Any] | None:
            described = (await http.get("/v1/sources/s")).json()
            return described if described["state"] == "paused" else None

        described = await until(paused)
        # At most max_pending chunks (and the one that found it over) went ahead.
        assert described["entries"] <= 3 * 20
        await asyncio.sleep(0.5)
        assert (await http.get("/v1/sources/s")).json()["entries"] == described["entries"]
        await redis_client.delete("sift:{v}:lease")
        await settled(http, "s", 400)
        await applied(http, "v", 400)
        weights = (await http.get("/v1/selectors/v/weights")).json()["weights"]
        np.testing.assert_allclose(weights, np.var(rows, axis=0), rtol=1e-9)


async def test_a_deleted_source_stops_within_a_second(client, bus, bus_url):
    http = client
    body = {"name": "v", "method": "variance", "n_features": 1, "feature_names": ["x"]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    source = source_body("s", bus_url, "k", into={"selector": "v"}, batch_rows=10, batch_ms=5)
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    await write(bus, "k", [{"x": str(i)} for i in range(50)])
    await settled(http, "s", 50)
    assert (await http.delete("/v1/sources/s")).status_code == 204
    assert_problem(await http.get("/v1/sources/s"), 404)
    await asyncio.sleep(1.0)
    seen = (await http.get("/v1/selectors/v")).json()["rows_seen"]
    await write(bus, "k", [{"x": str(i)} for i in range(50)])
    await asyncio.sleep(1.0)
    assert (await http.get("/v1/selectors/v")).json()["rows_seen"] == seen
    # A new source of the name starts again from its own start.
    again = source_body("s", bus_url, "k", into={"selector": "v"}, start="latest")
    assert (await http.post("/v1/sources", json=again)).status_code == 201

    async def started() -> bool:
        return bool((await http.get("/v1/sources/s")).json()["positions"])

    await until(started)  # "latest" is where the stream ends when the source first reads it
    await write(bus, "k", [{"x": "1"}])
    described = await settled(http, "s", 1)
    assert described["entries"] == 1


async def test_a_jetstream_stream_lands_exactly_and_bad_messages_are_set_aside(client, nats_server):
    http = client
    subject = f"events.{secrets.token_hex(4)}"
    stream = subject.replace(".", "-")
    await add_stream(nats_server.url, stream, [subject])
    body = {"name": "v", "method": "variance", "n_features": 3, "feature_names": NAMES[:3]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    rows = np.random.default_rng(11).normal(size=(400, 3)) * [1, 50, 2500]
    documents: list[Any] = [dict(zip(NAMES[:3], row.tolist(), strict=True)) for row in rows]
    bad = {
        7: [1, 2, 3],
        8: b"not json",
        90: {**documents[90], "beta": "12"},
        91: {**documents[91], "beta": True},
        150: {**documents[150], "omega": 1.0},
    }
    documents = [bad.get(i, d) for i, d in enumerate(documents)]
    sequences = await publish(nats_server.url, subject, documents[:200])
    source = {
        "name": "js",
        "kind": "nats",
        "url": nats_server.url,
        "stream": stream,
        "subject": subject,
        "into": {"selector": "v"},
        "batch_rows": 64,
    }
    answer = await http.post("/v1/sources", json=source)
    assert answer.status_code == 201, answer.text
    assert "nats-secret-pw" not in answer.text and answer.json()["url"].startswith(
        "nats://sift:***@"
    )
    sequences += await publish(nats_server.url, subject, documents[200:])
    described = await settled(http, "js", 400)
    good = [i for i in range(400) if i not in bad]
    await applied(http, "v", len(good))
    weights = (await http.get("/v1/selectors/v/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.var(rows[good], axis=0), rtol=1e-9)
    assert (described["rows"], described["rejected"]) == (len(good), len(bad))
    assert described["positions"] == {"0": str(sequences[-1])}
    reasons = {r["position"]: r["reason"] for r in described["rejected_entries"]}
    assert set(reasons) == {str(sequences[i]) for i in bad}
    # An array is read as f0, f1, ... (for a selector without names), as Kafka's is.
    assert "unknown field 'f0'" in reasons[str(sequences[7])]
    assert "not JSON" in reasons[str(sequences[8])]
    assert "'beta' is not a number" in reasons[str(sequences[90])]
    assert "'beta' is not a number" in reasons[str(sequences[91])]
    assert "unknown field 'omega'" in reasons[str(sequences[150])]

    async def caught_up() -> bool:
        return bool((await http.get("/v1/sources/js")).json()["lag"] == 0)

    await until(caught_up)


async def test_a_refused_nats_login_is_retried_and_never_shown(client, nats_server, caplog):
    http = client
    body = {"name": "v", "method": "variance", "n_features": 1}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    wrong = f"nats://sift:wrong-pw-value@127.0.0.1:{nats_server.port}"
    source = {"name": "js", "kind": "nats", "url": wrong, "stream": "x", "into": {"selector": "v"}}
    assert (await http.post("/v1/sources", json=source)).status_code == 201

    async def retrying() -> dict[str, Any] | None:
        described = (await http.get("/v1/sources/js")).json()
        return described if described["state"] == "retrying" else None

    described = await until(retrying)
    assert described["last_error"]
    seen = [(await http.get("/v1/sources/js")).text, (await http.get("/metrics")).text, caplog.text]
    assert not any("wrong-pw-value" in text for text in seen)


async def test_a_missing_jetstream_stream_is_named_with_how_to_create_it(client, nats_server):
    http = client
    subject = f"later.{secrets.token_hex(4)}"
    stream = subject.replace(".", "-")
    body = {"name": "v", "method": "variance", "n_features": 3, "feature_names": NAMES[:3]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201
    source = {
        "name": "js",
        "kind": "nats",
        "url": nats_server.url,
        "stream": stream,
        "subject": subject,
        "into": {"selector": "v"},
    }
    assert (await http.post("/v1/sources", json=source)).status_code == 201

    async def retrying() -> dict[str, Any] | None:
        described = (await http.get("/v1/sources/js")).json()
        return described if described["state"] == "retrying" else None

    described = await until(retrying)
    error = described["last_error"]
    assert f"the NATS server has no JetStream stream '{stream}'" in error, error
    assert f"nats stream add {stream} --subjects '{subject}'" in error
    assert "add_stream" in error and "NotFoundError" not in error
    assert "nats-secret-pw" not in error and described["lag"] is None
    # Created: the source reads it, from its first message.
    await add_stream(nats_server.url, stream, [subject])
    await publish(nats_server.url, subject, [dict.fromkeys(NAMES[:3], 1.0)] * 3)
    described = await settled(http, "js", 3)
    assert described["rows"] == 3
