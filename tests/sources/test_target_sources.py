"""Sources of rows with a target against a live app: a real Redis stream (a redis-server of its
own, the bus) and a real NATS JetStream stream read into an ``f_regression`` selector, and into
a stream of rows with a target (``"targets": true``) that feeds an ``f_regression`` and a
``variance`` selector. Each entry's target comes from the source's ``target_field``: the scores
Sift holds are scikit-learn's ``f_regression`` on the good entries, to 1e-9; an entry whose
target is missing, not a number or not finite is set aside with a reason naming the field and
later entries still land; a source that names a target field where none belongs, or none where
one is needed, is refused at creation saying what was expected."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import numpy as np
import pytest
from sklearn.feature_selection import f_regression

from tests.support.api import assert_problem
from tests.support.nats import NatsServer, add_stream, publish
from tests.support.sources import applied, settled, source_body, write

NAMES = ["alpha", "beta", "gamma", "delta"]
TARGET = "y"


def sample(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose target depends on two of their four features (alpha and gamma), and noise."""
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(n, 4)) * [1.0, 10.0, 3.0, 0.5]
    targets = 3.0 * rows[:, 0] - 0.7 * rows[:, 2] + rng.normal(size=n)
    return rows, targets


def as_text(row: np.ndarray, target: float) -> dict[str, str]:
    """An entry as a Redis producer writes it: one field per feature name and the target."""
    return {**dict(zip(NAMES, map(repr, row.tolist()), strict=True)), TARGET: repr(float(target))}


async def scores(http: httpx.AsyncClient, selector: str) -> tuple[np.ndarray, np.ndarray]:
    """The selector's F statistics and p-values, by feature index (from its top m)."""
    answer = await http.get(f"/v1/selectors/{selector}/top", params={"h": len(NAMES)})
    assert answer.status_code == 200, answer.text
    features = answer.json()["features"]
    assert sorted(f["index"] for f in features) == list(range(len(NAMES)))
    by_index = sorted(features, key=lambda f: f["index"])
    return (
        np.array([f["score"] for f in by_index]),
        np.array([f["p_value"] for f in by_index]),
    )


async def assert_scikit_learn_s(http: httpx.AsyncClient, selector: str, rows, targets) -> None:
    f, p = await scores(http, selector)
    expected_f, expected_p = f_regression(rows, targets)
    np.testing.assert_allclose(f, expected_f, rtol=1e-9)
    np.testing.assert_allclose(p, expected_p, rtol=1e-9, atol=1e-300)
    top = (await http.get(f"/v1/selectors/{selector}/top", params={"h": 2})).json()["features"]
    assert {f["name"] for f in top} == {"alpha", "gamma"}


async def f_regression_selector(http: httpx.AsyncClient, name: str = "f") -> None:
    body = {"name": name, "method": "f_regression", "n_features": 4, "feature_names": NAMES}
    created = await http.post("/v1/selectors", json=body)
    assert created.status_code == 201, created.text


async def test_a_redis_stream_feeds_f_regression_as_scikit_learn_scores_it(client, bus, bus_url):
    http = client
    await f_regression_selector(http)
    rows, targets = sample(600, seed=21)
    entries = [as_text(row, target) for row, target in zip(rows, targets, strict=True)]
    # Fields in another order land by name, the target among them.
    entries[1::3] = [dict(reversed(list(e.items()))) for e in entries[1::3]]
    await write(bus, "events", entries[:250])
    answer = await http.post(
        "/v1/sources",
        json=source_body("s", bus_url, "events", into={"selector": "f"}, target_field=TARGET),
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["target_field"] == TARGET and answer.json()["label_field"] is None
    await write(bus, "events", entries[250:])
    described = await settled(http, "s", 600)
    assert (described["rows"], described["rejected"]) == (600, 0), described
    await applied(http, "f", 600)
    await assert_scikit_learn_s(http, "f", rows, targets)


async def test_a_stream_of_rows_with_a_target_feeds_f_regression_and_variance(client, bus, bus_url):
    """The stream's rows carry their targets: f_regression takes both, variance the rows."""
    http = client
    stream = {"name": "st", "n_features": 4, "feature_names": NAMES, "targets": True}
    made = await http.post("/v1/streams", json=stream)
    assert made.status_code == 201, made.text
    for name, method in (("f", "f_regression"), ("v", "variance")):
        made = await http.post(
            "/v1/selectors", json={"name": name, "method": method, "stream": "st"}
        )
        assert made.status_code == 201, made.text
    rows, targets = sample(500, seed=8)
    # Each entry one field holding a msgpack map (the struct decoders' path), the target in it.
    messages = [
        {"m": msgspec.msgpack.encode({**dict(zip(NAMES, row.tolist(), strict=True)), "y": t})}
        for row, t in zip(rows, targets.tolist(), strict=True)
    ]
    await write(bus, "pairs", messages)
    body = source_body(
        "s",
        bus_url,
        "pairs",
        into={"stream": "st"},
        target_field=TARGET,
        value_field="m",
        format="msgpack",
    )
    answer = await http.post("/v1/sources", json=body)
    assert answer.status_code == 201, answer.text
    described = await settled(http, "s", 500)
    assert (described["rows"], described["rejected"]) == (500, 0), described
    for name in ("f", "v"):
        await applied(http, name, 500)
    await assert_scikit_learn_s(http, "f", rows, targets)
    weights = (await http.get("/v1/selectors/v/weights")).json()["weights"]
    np.testing.assert_allclose(weights, np.var(rows, axis=0), rtol=1e-9)


async def test_bad_targets_are_set_aside_naming_the_field_and_later_entries_land(
    client, bus, bus_url
):
    http = client
    await f_regression_selector(http)
    rows, targets = sample(300, seed=4)
    entries: list[dict[str, Any]] = [as_text(r, t) for r, t in zip(rows, targets, strict=True)]
    bad = {
        10: {k: v for k, v in entries[10].items() if k != TARGET},
        20: {**entries[20], TARGET: "twelve"},
        30: {**entries[30], TARGET: "nan"},
        40: {**entries[40], TARGET: "inf"},
        50: {**entries[50], TARGET: "1e300"},
        60: {**entries[60], TARGET: ""},
    }
    entries = [bad.get(i, entry) for i, entry in enumerate(entries)]
    ids = await write(bus, "events", entries[:200])
    answer = await http.post(
        "/v1/sources",
        json=source_body("s", bus_url, "events", into={"selector": "f"}, target_field=TARGET),
    )
    assert answer.status_code == 201, answer.text
    described = await settled(http, "s", 200)
    assert (described["entries"], described["rows"], described["rejected"]) == (200, 194, 6)
    # Entries written after the bad ones land too: the source goes on.
    ids += await write(bus, "events", entries[200:])
    described = await settled(http, "s", 300)
    good = [i for i in range(300) if i not in bad]
    assert (described["entries"], described["rows"], described["rejected"]) == (300, 294, 6)
    assert described["state"] in ("running", "paused"), described
    assert described["positions"] == {"0": ids[-1]}
    reasons = {r["position"]: r["reason"] for r in described["rejected_entries"]}
    assert set(reasons) == {ids[i] for i in bad}
    assert reasons[ids[10]] == "missing target field 'y'"
    assert reasons[ids[20]] == "target field 'y' is not a number: got \"twelve\""
    assert reasons[ids[30]].startswith("target field 'y'") and "finite" in reasons[ids[30]]
    assert reasons[ids[40]].startswith("target field 'y'") and "finite" in reasons[ids[40]]
    assert reasons[ids[50]].startswith("target field 'y'") and "within" in reasons[ids[50]]
    assert reasons[ids[60]].startswith("target field 'y' is not a number")
    await applied(http, "f", len(good))
    await assert_scikit_learn_s(http, "f", rows[good], targets[good])


async def test_a_jetstream_stream_of_json_messages_feeds_f_regression(
    client, nats_server: NatsServer
):
    """JSON messages (decoded into structs in one pass): a target that is a JSON string, null
    or absent sets its message aside; the others land exactly."""
    http = client
    await f_regression_selector(http)
    await add_stream(nats_server.url, "EVENTS", ["events.>"])
    rows, targets = sample(400, seed=13)
    documents: list[Any] = [
        {**dict(zip(NAMES, row.tolist(), strict=True)), TARGET: t}
        for row, t in zip(rows, targets.tolist(), strict=True)
    ]
    bad = {
        5: {**documents[5], TARGET: str(documents[5][TARGET])},
        6: {**documents[6], TARGET: None},
        7: {k: v for k, v in documents[7].items() if k != TARGET},
        8: {**documents[8], TARGET: True},
    }
    documents = [bad.get(i, d) for i, d in enumerate(documents)]
    sequences = await publish(nats_server.url, "events.x", documents)
    source = {
        "name": "js",
        "kind": "nats",
        "url": nats_server.url,
        "stream": "EVENTS",
        "into": {"selector": "f"},
        "target_field": TARGET,
    }
    answer = await http.post("/v1/sources", json=source)
    assert answer.status_code == 201, answer.text
    described = await settled(http, "js", 400)
    assert (described["rows"], described["rejected"]) == (396, 4), described
    reasons = {r["position"]: r["reason"] for r in described["rejected_entries"]}
    assert set(reasons) == {str(sequences[i]) for i in bad}
    assert all("target field 'y'" in reason for reason in reasons.values()), reasons
    good = [i for i in range(400) if i not in bad]
    await applied(http, "f", len(good))
    await assert_scikit_learn_s(http, "f", rows[good], targets[good])


@pytest.mark.parametrize(
    ("target", "given", "fragments"),
    [
        # A target that needs a target field, given none, or a label field.
        (
            {"selector": "f"},
            {},
            ["selector 'f' takes rows with a target", "expected target_field, the field"],
        ),
        (
            {"selector": "f"},
            {"label_field": "y"},
            ["selector 'f' takes rows with a target", "expected target_field", "no label_field"],
        ),
        (
            {"stream": "targets"},
            {},
            ["stream 'targets' takes rows with a target", "expected target_field"],
        ),
        # A target field for targets that take none.
        (
            {"selector": "v"},
            {"target_field": "y"},
            ["selector 'v' takes rows", "expected no target_field", "rows with a target"],
        ),
        (
            {"stream": "plain"},
            {"target_field": "y"},
            ["stream 'plain' takes rows", "expected no target_field"],
        ),
        (
            {"selector": "o"},
            {"target_field": "y", "label_field": "k"},
            ["selector 'o' takes labelled rows", "expected label_field", "no target_field"],
        ),
        (
            {"selector": "o"},
            {"target_field": "y"},
            ["selector 'o' takes labelled rows", "expected label_field", "no target_field"],
        ),
        # The target in a field of its own, not a feature's.
        (
            {"selector": "f"},
            {"target_field": "beta"},
            ["target_field 'beta' is one of its feature names"],
        ),
    ],
)
async def test_a_target_field_where_none_belongs_or_none_where_needed_is_refused(
    client, bus_url, target: dict[str, str], given: dict[str, str], fragments: list[str]
):
    http = client
    await f_regression_selector(http)
    creations: list[tuple[str, dict[str, Any]]] = [
        ("/v1/selectors", {"name": "v", "method": "variance", "n_features": 4}),
        ("/v1/selectors", {"name": "o", "method": "ocfs", "n_features": 4}),
        ("/v1/streams", {"name": "plain", "n_features": 4}),
        (
            "/v1/streams",
            {"name": "targets", "n_features": 4, "feature_names": NAMES, "targets": True},
        ),
    ]
    for route, body in creations:
        made = await http.post(route, json=body)
        assert made.status_code == 201, made.text
    refused = await http.post(
        "/v1/sources", json=source_body("s", bus_url, "events", into=target, **given)
    )
    assert_problem(refused, 422, *fragments)
    assert (await http.get("/v1/sources")).json()["sources"] == []


async def test_a_target_field_is_a_field_name(client, bus_url):
    http = client
    await f_regression_selector(http)
    for value in ("", "x" * 257, 7):
        body = source_body("s", bus_url, "events", into={"selector": "f"}, target_field=value)
        assert_problem(await http.post("/v1/sources", json=body), 422, "target_field")
