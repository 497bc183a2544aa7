"""Adding a method is its module, its registry line and its docs page: the test suite's own
method (``tests/support/added_method.py``: its maths only), registered before the app is made,
is documented, created, fed, ranked with the stability of its top, merged, exported and
imported over HTTP against a real redis-server, with no other line of the service (or of these
helpers) naming it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from service.algorithms.base import order_by_score
from service.algorithms.stability import assess
from service.algorithms.subsamples import DEFAULT_RESAMPLES
from tests.support.added_method import NAME, MeanAbs, registered
from tests.support.archive import SCENARIOS, answers, create, export, import_, push, weights

pytestmark = pytest.mark.asyncio


@pytest.fixture
def added() -> Iterator[MeanAbs]:
    """The method in the registry for the test (requested before the app is made)."""
    with registered() as method:
        yield method


async def test_an_added_method_is_documented_created_fed_and_ranked(
    added: MeanAbs, client: httpx.AsyncClient
) -> None:
    listed = (await client.get("/v1/methods")).json()["methods"]
    [described] = [m for m in listed if m["name"] == NAME]
    assert described["chunk_kind"] == "rows"
    assert described["capabilities"] == ["merge", "stability", "partitions"]
    assert set(described["params_schema"]["properties"]) == {"power", "resamples"}
    schema = (await client.get("/openapi.json")).json()
    body = schema["paths"]["/v1/selectors"]["post"]["requestBody"]["content"]["application/json"]
    assert NAME in body["examples"]
    assert any(
        option["properties"]["method"] == {"type": "string", "const": NAME}
        for option in body["schema"]["oneOf"]
    )

    created = await create(client, "added", NAME)
    assert created["method"] == NAME
    assert created["params"] == {"power": 1.0, "resamples": DEFAULT_RESAMPLES}
    scenario = SCENARIOS[NAME]
    pushed: list[Any] = []
    for i in range(scenario.before):
        await push(client, "added", NAME, i)
        pushed.extend(scenario.chunk(i))
    expected = np.abs(np.asarray(pushed)).mean(axis=0)
    np.testing.assert_allclose(await weights(client, "added"), expected, rtol=1e-12)
    top = (await client.get("/v1/selectors/added/top", params={"h": 3})).json()
    assert [f["index"] for f in top["features"]] == order_by_score(expected, 3).tolist()
    # Its resamples: the stability of the subsamples' scores, as the method computes them.
    params = added.resolve_params({}, expected.size)
    state = added.update(added.initial_state(params), params, np.asarray(pushed))
    resampled = added.resample_scores(state, params)
    assert resampled is not None
    assessed = assess(added.weights(state, params), resampled, 3)
    assert assessed is not None
    assert top["stability"]["index"] == pytest.approx(assessed.stability.index, abs=1e-12)
    assert top["stability"]["estimated_by"] == added.stability_estimate

    response = await import_(client, await export(client, "added"), name="copy")
    assert response.status_code == 201, response.text
    assert await answers(client, "copy", NAME) == await answers(client, "added", NAME)


async def test_an_added_methods_parameters_are_resolved_and_refused_as_declared(
    added: MeanAbs, client: httpx.AsyncClient
) -> None:
    squares = {"name": "squares", "method": NAME, "n_features": 3, "params": {"power": 2}}
    response = await client.post("/v1/selectors", json=squares)
    assert response.status_code == 201, response.text
    assert response.json()["params"] == {"power": 2.0, "resamples": DEFAULT_RESAMPLES}
    rows = [[1.0, -2.0, 0.5], [3.0, 0.0, -0.5]]
    assert (await client.post("/v1/selectors/squares/chunks", json=rows)).status_code == 200
    np.testing.assert_allclose(
        await weights(client, "squares"), (np.asarray(rows) ** 2).mean(axis=0), rtol=1e-12
    )
    more = [[0.0, 1.0, 2.0]]
    other = {**squares, "name": "more"}
    assert (await client.post("/v1/selectors", json=other)).status_code == 201
    assert (await client.post("/v1/selectors/more/chunks", json=more)).status_code == 200
    merged = await client.post("/v1/selectors/squares/merge", json={"from": "more"})
    assert merged.status_code == 200, merged.text
    assert merged.json()["rows_seen"] == 3 and merged.json()["merged"]["rows"] == 1
    np.testing.assert_allclose(
        await weights(client, "squares"), (np.asarray(rows + more) ** 2).mean(axis=0), rtol=1e-12
    )
    bad = {**squares, "name": "bad", "params": {"power": 3}}
    response = await client.post("/v1/selectors", json=bad)
    assert response.status_code == 422
    assert "power must be a finite number in (0, 2]; got 3" in response.json()["detail"]
