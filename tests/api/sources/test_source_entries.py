"""What an entry may spell, against a live app and real buses: one grammar of numbers written as
text (a CSV body's fields and a Redis stream entry's values take and refuse the same strings;
JetStream and Kafka messages carry JSON numbers), and a JSON message giving a key twice set
aside with a reason on JetStream and on Kafka (as a Redis entry is), never applied as its last
value. A Redis stream whose entries carry one field holding a JSON or msgpack message
(``value_field``), and msgpack messages on JetStream: the good ones' variance is numpy's, each
bad one set aside at its position with its reason."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import jsonschema
import msgspec
import numpy as np
import orjson

from tests.support.api import assert_problem
from tests.support.kafka import KafkaBroker, create_topic, produce
from tests.support.nats import add_stream, publish
from tests.support.sources import applied, settled, source_body, write

#: Numbers as text: taken (the value they spell) and refused, by CSV and by a Redis entry.
TAKEN = {" 7": 7.0, "7 ": 7.0, "+7": 7.0, ".5": 0.5, "5.": 5.0, "1e2": 100.0, "0007": 7.0}
REFUSED = ["1_000", "\uff17", "0x10", "1e", "seven", "7-"]
#: Numbers as JSON text in a message (the value they spell, or None: not JSON).
JSON_SPELLINGS: dict[str, float | None] = {
    " 7 ": 7.0,
    "1e2": 100.0,
    "-0.5": -0.5,
    "1_000": None,
    "\uff17": None,
    "0x10": None,
    "+7": None,
}


async def selector(http: httpx.AsyncClient, name: str) -> None:
    body = {"name": name, "method": "variance", "n_features": 2, "feature_names": ["a", "b"]}
    assert (await http.post("/v1/selectors", json=body)).status_code == 201


async def test_csv_and_a_redis_stream_take_and_refuse_the_same_numbers(
    client, bus, bus_redis_server
):
    http = client
    await selector(http, "csv")
    for text in TAKEN:
        answer = await http.post(
            "/v1/selectors/csv/chunks",
            content=f"a,b\n{text},1\n".encode(),
            headers={"content-type": "text/csv"},
        )
        assert answer.status_code in (200, 202), (text, answer.text)
    for text in REFUSED:
        answer = await http.post(
            "/v1/selectors/csv/chunks",
            content=f"a,b\n{text},1\n".encode(),
            headers={"content-type": "text/csv"},
        )
        assert answer.status_code == 422, (text, answer.text)
        assert "expected numbers" in answer.json()["detail"]
    await selector(http, "redis")
    strings = [*TAKEN, *REFUSED]
    ids = []
    for text in strings:
        ids.append((await bus.xadd("numbers", {"a": text, "b": "1"})).decode())
    source = source_body("r", bus_redis_server.url, "numbers", into={"selector": "redis"})
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    described = await settled(http, "r", len(strings))
    reasons = {r["position"]: r["reason"] for r in described["rejected_entries"]}
    refused = {ids[i] for i, text in enumerate(strings) if text in REFUSED}
    assert set(reasons) == refused, reasons
    assert all("field 'a' is not a number" in reason for reason in reasons.values())
    # What was taken is what CSV took: the same values, the same variance.
    await applied(http, "redis", len(TAKEN))
    await applied(http, "csv", len(TAKEN))
    csv_weights = (await http.get("/v1/selectors/csv/weights")).json()["weights"]
    redis_weights = (await http.get("/v1/selectors/redis/weights")).json()["weights"]
    assert csv_weights == redis_weights
    np.testing.assert_allclose(csv_weights[0], np.var(list(TAKEN.values())), rtol=1e-12)


def spelled(text: str) -> bytes:
    return f'{{"a": {text}, "b": 1}}'.encode()


#: Messages giving a key twice (refused), and one giving each once with a string holding a
#: quote (a label-free target: it is refused for its value, not for a key given twice).
TWICE = [
    b'{"a": "x", "a": 7, "b": 1}',
    b'{"a": 1, "b": 2, "a": 3}',
    b'{"a": 1, "\\u0061": 2, "b": 3}',
]


def check_json_answer(described: dict[str, Any], positions: list[str]) -> None:
    """The spellings, then the messages giving a key twice, at ``positions``."""
    reasons = {r["position"]: r["reason"] for r in described["rejected_entries"]}
    spellings = list(JSON_SPELLINGS.values())
    for i, value in enumerate(spellings):
        if value is None:
            assert "not JSON" in reasons[positions[i]], reasons
        else:
            assert positions[i] not in reasons, reasons
    for i in range(len(spellings), len(spellings) + len(TWICE)):
        assert "is given twice" in reasons[positions[i]], reasons
        assert "field 'a'" in reasons[positions[i]]
    good = [value for value in spellings if value is not None]
    assert described["rows"] == len(good)
    assert described["rejected"] == len(positions) - len(good)


async def test_jetstream_messages_spell_json_numbers_and_give_each_key_once(client, nats_server):
    http = client
    subject = f"entries.{secrets.token_hex(4)}"
    stream = subject.replace(".", "-")
    await add_stream(nats_server.url, stream, [subject])
    await selector(http, "js")
    messages = [spelled(text) for text in JSON_SPELLINGS] + TWICE
    sequences = await publish(nats_server.url, subject, messages)
    source = {
        "name": "js",
        "kind": "nats",
        "url": nats_server.url,
        "stream": stream,
        "subject": subject,
        "into": {"selector": "js"},
    }
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    described = await settled(http, "js", len(messages))
    check_json_answer(described, [str(s) for s in sequences])
    good = [value for value in JSON_SPELLINGS.values() if value is not None]
    await applied(http, "js", len(good))
    weights = (await http.get("/v1/selectors/js/weights")).json()["weights"]
    np.testing.assert_allclose(weights[0], np.var(good), rtol=1e-12)


async def test_kafka_messages_spell_json_numbers_and_give_each_key_once(
    client, kafka_broker: KafkaBroker
):
    http = client
    topic = f"entries-{secrets.token_hex(4)}"
    await create_topic(kafka_broker.bootstrap, topic, partitions=1)
    await selector(http, "k")
    # A batch of good messages but for a key given twice (the batch's fast path) first.
    twice_in_good = [*[b'{"a": 1, "b": 2}'] * 5, b'{"a": 1, "b": 2, "a": 1000}']
    messages = twice_in_good + [spelled(text) for text in JSON_SPELLINGS] + TWICE
    await produce(kafka_broker.bootstrap, topic, messages)
    source = {
        "name": "k",
        "kind": "kafka",
        "bootstrap": kafka_broker.bootstrap,
        "topic": topic,
        "into": {"selector": "k"},
    }
    assert (await http.post("/v1/sources", json=source)).status_code == 201
    described = await settled(http, "k", len(messages))
    reasons = {r["position"]: r["reason"] for r in described["rejected_entries"]}
    assert "field 'a' is given twice" in reasons["5"]
    offset = len(twice_in_good)
    rest = {
        **described,
        "rows": described["rows"] - 5,
        "rejected": described["rejected"] - 1,
        "rejected_entries": [r for r in described["rejected_entries"] if r["position"] != "5"],
    }
    check_json_answer(rest, [str(offset + i) for i in range(len(messages) - offset)])


#: Good rows of a and b (wide magnitudes), and the messages set aside in each format: what
#: each is, and a fragment of its reason.
ROWS = np.random.default_rng(21).normal(size=(120, 2)) * [1e-3, 1e4]
BAD_MESSAGES: dict[str, list[tuple[bytes, str]]] = {
    "json": [
        (b"not json", "not JSON"),
        (b'{"a": 1}', "missing field 'b'"),
        (b'{"a": 1, "b": 2, "c": 3}', "unknown field 'c'"),
        (b'{"a": "1", "b": 2}', "field 'a' is not a number"),
        (b'{"a": 1, "b": true}', "field 'b' is not a number"),
        (b'{"a": 1, "b": 2, "a": 3}', "field 'a' is given twice"),
        (b'{"a": 1e51, "b": 2}', "field 'a'"),
    ],
    "msgpack": [
        (b"\xc1", "not msgpack"),
        (b'{"a": 1, "b": 2}', "not msgpack"),
        (msgspec.msgpack.encode([1.0, 2.0]), "unknown field 'f0'"),
        (msgspec.msgpack.encode({"a": 1.0}), "missing field 'b'"),
        (msgspec.msgpack.encode({"a": 1.0, "b": 2.0, "c": 3.0}), "unknown field 'c'"),
        (msgspec.msgpack.encode({"a": "1", "b": 2.0}), "field 'a' is not a number"),
        (msgspec.msgpack.encode({"a": b"1", "b": 2.0}), "got binary data"),
        (b"\x83\xa1a\x01\xa1b\x02\xa1a\x03", "field 'a' is given twice"),
        (msgspec.msgpack.encode({"a": float("inf"), "b": 2.0}), "field 'a'"),
    ],
}


def messages(format: str) -> tuple[list[bytes], dict[int, str]]:
    """The good rows as messages of ``format``, the bad ones spread among them: the messages
    and, by index, the fragment of each bad one's reason."""
    encode = orjson.dumps if format == "json" else msgspec.msgpack.encode
    out = [encode({"a": a, "b": b}) for a, b in ROWS.tolist()]
    bad: dict[int, str] = {}
    for k, (message, reason) in enumerate(BAD_MESSAGES[format]):
        at = 5 + 13 * k
        out.insert(at, message)
        bad[at] = reason
    return out, bad


async def check_messages(
    http: httpx.AsyncClient, source: str, positions: list[str], bad: dict[int, str]
) -> dict[str, Any]:
    """Every message consumed, each bad one set aside at its position with its reason, and
    the good rows' variance numpy's."""
    described = await settled(http, source, len(positions))
    reasons = {r["position"]: r["reason"] for r in described["rejected_entries"]}
    assert set(reasons) == {positions[i] for i in bad}, reasons
    for i, fragment in bad.items():
        assert fragment in reasons[positions[i]], (fragment, reasons[positions[i]])
    assert (described["rows"], described["rejected"]) == (len(ROWS), len(bad))
    assert described["positions"] == {"0": positions[-1]}
    await applied(http, described["into"]["selector"], len(ROWS))
    name = described["into"]["selector"]
    weights = (await http.get(f"/v1/selectors/{name}/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.var(ROWS, axis=0), rtol=1e-12)
    return dict(described)


async def test_a_redis_stream_of_one_json_field_per_entry(client, bus, bus_redis_server):
    """``XADD key * data '{"a": 1, ...}'``: the field's value is the entry's message."""
    http = client
    await selector(http, "one")
    values, bad = messages("json")
    entries: list[dict[Any, Any]] = [{"data": value} for value in values]
    # The entry's other faults: no such field, another besides it.
    entries.insert(40, {"payload": values[0]})
    entries.insert(41, {"data": values[0], "ts": "1"})
    bad = {i + 2 * (i >= 40): fragment for i, fragment in bad.items()}
    bad[40] = "missing field 'data'"
    bad[41] = "unknown field 'ts': expected only the field 'data'"
    ids = await write(bus, "one-field", entries)
    source = source_body(
        "one", bus_redis_server.url, "one-field", value_field="data", into={"selector": "one"}
    )
    created = await http.post("/v1/sources", json=source)
    assert created.status_code == 201, created.text
    assert (created.json()["value_field"], created.json()["format"]) == ("data", "json")
    await check_messages(http, "one", ids, bad)


async def test_a_redis_stream_of_msgpack_messages(client, bus, bus_redis_server):
    http = client
    await selector(http, "packed")
    values, bad = messages("msgpack")
    ids = await write(bus, "packed", [{"m": value} for value in values])
    source = source_body(
        "packed",
        bus_redis_server.url,
        "packed",
        value_field="m",
        format="msgpack",
        into={"selector": "packed"},
    )
    created = await http.post("/v1/sources", json=source)
    assert created.status_code == 201, created.text
    assert created.json()["format"] == "msgpack"
    await check_messages(http, "packed", ids, bad)


async def test_jetstream_messages_in_json_and_in_msgpack(client, nats_server):
    http = client
    for format in ("json", "msgpack"):
        subject = f"packed.{secrets.token_hex(4)}"
        stream = subject.replace(".", "-")
        await add_stream(nats_server.url, stream, [subject])
        await selector(http, f"js-{format}")
        values, bad = messages(format)
        sequences = await publish(nats_server.url, subject, values)
        source = {
            "name": f"js-{format}",
            "kind": "nats",
            "url": nats_server.url,
            "stream": stream,
            "subject": subject,
            "format": format,
            "into": {"selector": f"js-{format}"},
            "batch_rows": 50,
        }
        assert (await http.post("/v1/sources", json=source)).status_code == 201
        await check_messages(http, f"js-{format}", [str(s) for s in sequences], bad)


async def test_a_format_and_a_value_field_are_refused_where_they_cannot_serve(
    client, bus_redis_server, nats_server
):
    http = client
    await selector(http, "s")
    redis = source_body("r", bus_redis_server.url, "k", into={"selector": "s"})
    nats_body = {"name": "n", "kind": "nats", "url": nats_server.url, "stream": "S"}
    refusals: list[tuple[Any, ...]] = [
        ({**redis, "format": "xml"}, "format", "'json' or 'msgpack'"),
        ({**redis, "format": "msgpack"}, "expected value_field"),
        ({**redis, "value_field": ""}, "value_field"),
        ({**nats_body, "into": {"selector": "s"}, "value_field": "data"}, "value_field"),
        ({**nats_body, "into": {"selector": "s"}, "format": 1}, "format"),
    ]
    for body, *fragments in refusals:
        answer = await http.post("/v1/sources", json=body)
        assert_problem(answer, 422, *fragments)
        # The URL (and its credentials) never repeated.
        assert "nats-secret-pw" not in answer.text
    assert (await http.get("/v1/sources")).json()["sources"] == []
    # The schema states the msgpack rule, so a client that validates against it agrees.
    schemas = (await http.get("/openapi.json")).json()["components"]["schemas"]
    rule = jsonschema.Draft202012Validator(
        {key: schemas["RedisStreamSource"][key] for key in ("if", "then")}
    )
    assert not rule.is_valid({**redis, "format": "msgpack"})
    assert rule.is_valid({**redis, "format": "msgpack", "value_field": "data"})
    assert rule.is_valid({**redis, "format": "json"}) and rule.is_valid(redis)
