"""What an entry may spell, against a live app and real buses: one grammar of numbers written as
text (a CSV body's fields and a Redis stream entry's values take and refuse the same strings;
JetStream and Kafka messages carry JSON numbers), and a JSON message giving a key twice set
aside with a reason on JetStream and on Kafka (as a Redis entry is), never applied as its last
value."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import numpy as np

from tests.support.kafka import KafkaBroker, create_topic, produce
from tests.support.nats import add_stream, publish
from tests.support.sources import applied, settled, source_body

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
