"""The OpenAPI create body documents every method's parameters: a schema with the defaults that
hold at every size, and an example body per method whose params are what the method resolves
(the service answers exactly those params when the example is posted)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from service.algorithms import METHODS


async def documented(client: Any) -> dict[str, Any]:
    spec = (await client.get("/openapi.json")).json()
    body: dict[str, Any] = spec["paths"]["/v1/selectors"]["post"]["requestBody"]["content"][
        "application/json"
    ]
    return body


def params_schemas(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Method -> the schema of its ``params`` (without the null alternative)."""
    out = {}
    for shape in body["schema"]["oneOf"]:
        method = shape["properties"]["method"]["const"]
        out[method] = shape["properties"]["params"]["anyOf"][0]
    return out


def scaled(document: dict[str, Any], factor: int) -> dict[str, Any]:
    """The example's shape fields with every size multiplied by ``factor``."""
    out: dict[str, Any] = {}
    for key, value in document.items():
        if isinstance(value, dict):
            out[key] = {k: v * factor for k, v in value.items()}
        elif isinstance(value, int) and not isinstance(value, bool):
            out[key] = value * factor
        else:
            out[key] = value
    return out


async def test_every_method_has_a_params_schema_and_an_example(client: Any) -> None:
    body = await documented(client)
    schemas = params_schemas(body)
    # One example per method, and one of a selector attached to a stream.
    assert sorted(schemas) == sorted(METHODS) == sorted(set(body["examples"]) - {"attached"})
    assert body["examples"]["attached"]["value"]["stream"]
    for method, schema in schemas.items():
        example = body["examples"][method]["value"]
        assert example["method"] == method and isinstance(example["params"], dict)
        jsonschema.Draft202012Validator(schema).validate(example["params"])
        assert set(example["params"]) <= set(schema["properties"])
        for name, prop in schema["properties"].items():
            if "default" in prop:
                jsonschema.Draft202012Validator(prop).validate(prop["default"])
                # A parameter that does not apply is left out (FSDS's decay of 1); the
                # conformance suite checks that passing its default changes nothing.
                assert example["params"].get(name, prop["default"]) == prop["default"], name
    # The size-independent defaults are there; the size-dependent ones are not.
    fsds = schemas["fsds"]["properties"]
    assert fsds["alpha_exponent"]["default"] == 3.0 and fsds["kernel"]["default"] == "cosine"
    assert "default" not in fsds["k"] and "default" not in fsds["ell"]
    assert schemas["ofs"]["properties"]["epsilon"]["default"] == 0.5
    assert "default" not in schemas["ofs"]["properties"]["c"]
    assert "default" not in schemas["iqrp"]["properties"]["block_columns"]  # shrinks with m
    assert schemas["variance"]["properties"]["ddof"]["default"] == 0


@pytest.mark.parametrize("method", sorted(METHODS))
async def test_posting_the_example_answers_its_params(client: Any, method: str) -> None:
    example = (await documented(client))["examples"][method]["value"]
    created = await client.post("/v1/selectors", json=example)
    assert created.status_code == 201, created.text
    schema = params_schemas(await documented(client))[method]
    answered = {
        k: v
        for k, v in created.json()["params"].items()
        if k in schema["properties"] and v is not None  # not the shape (views), not "computed"
    }
    assert answered == example["params"]
    # Without params, at another size: every documented default is what the method resolves.
    shape = {k: v for k, v in example.items() if k not in ("name", "params")}
    other = await client.post("/v1/selectors", json={**scaled(shape, 2), "name": f"{method}-x2"})
    assert other.status_code == 201, other.text
    resolved = other.json()["params"]
    for name, prop in schema["properties"].items():
        if "default" in prop:
            assert resolved.get(name, prop["default"]) == prop["default"], (method, name)
