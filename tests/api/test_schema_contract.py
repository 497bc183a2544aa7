"""A bounded schemathesis run against a live ``sift serve``: every limit the service enforces is
one the OpenAPI document states, and every 405 names the methods of the route its path names.

The live process serves its own ``/openapi.json``. For every operation, schemathesis's coverage
phase makes schema-valid requests at and near each declared bound (a sample of them, evenly
spread, for the operations with many): each must be accepted, or refused only for a reason the
schema cannot state (``tests.support.contract.acceptance``); one without a body, whose rules
are all in its parameters, is never refused for them (``invalid-input``, ``inconsistent``).
Then every method the schema does not declare at a path (and no other template the path fits
declares) is sent there: a 405 whose ``Allow`` lists exactly the path's documented methods.
The full run is ``tests/contract`` (slow); this one takes a few hundred cases.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation.drivers import CoverageGenerator
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.generation.overrides import Override

from tests.support.contract import (
    AUTH,
    POOL,
    TOKEN,
    acceptance,
    aim,
    credentials,
    fill_pool,
    forget,
)
from tests.support.harness import ServiceProcess, live_service

#: Schema-valid coverage cases run per operation at most (sampled evenly over all it makes).
COVERAGE_PER_OPERATION = 12
#: The history keeps this many features per version here (not the default): the schema must
#: state the setting of the process it documents.
HISTORY_TOP = 40
CHECKS = [not_a_server_error]
#: Problem types that say a request broke a rule of its parameters.
PARAMETER_RULES = {"urn:sift:problem:invalid-input", "urn:sift:problem:inconsistent"}
#: Every method a 405 check tries at each path.
METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS", "TRACE")
#: A value for each path parameter the schema names, that fits its pattern.
PATH_VALUES = {
    "name": POOL["fsds"],
    "tenant": "t-",
    "key_id": "0123456789abcdef",
    "alert_id": "0123456789abcdef",
    "event_id": "0123456789abcdef-1",
    "log_id": "1-0",
    "view": "v",
}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    env = {
        "SIFT_API_TOKEN": TOKEN,
        "SIFT_MAX_STATE_BYTES": str(4 * 2**20),
        "SIFT_APPLY_WAIT_SECONDS": "5",
        "SIFT_HISTORY_TOP": str(HISTORY_TOP),
    }
    with live_service(Path(tmp_path_factory.mktemp("schema")), "schema", env) as service:
        with httpx.Client(base_url=service.url, timeout=30) as http:
            fill_pool(http)
        yield service


def coverage(api: Any, operation: Any, mode: GenerationMode) -> list[Any]:
    generation = api.config.generation_for(operation=operation, phase="coverage")
    return list(
        CoverageGenerator(
            operation=operation,
            generation_modes=[mode],
            generation_config=generation,
            auth_storage=None,
            override=Override(),
            feedback=FeedbackSources(),
        )
    )


def sample(cases: list[Any], most: int) -> list[Any]:
    """``most`` of ``cases``, evenly spread (the first and the last among them)."""
    if len(cases) <= most:
        return cases
    step = (len(cases) - 1) / (most - 1)
    return [cases[round(i * step)] for i in range(most)]


def has_body(case: Any) -> bool:
    return case.operation.body is not None and len(case.operation.body) > 0


def run(case: Any, live: ServiceProcess) -> None:
    aim(case, live)
    headers = credentials(case)
    response = case.call(base_url=live.url, headers=headers, timeout=30)
    forget(case, response, live)
    case.validate_response(response, checks=CHECKS, headers=headers)
    if case.meta is not None and case.meta.generation.mode == GenerationMode.POSITIVE:
        acceptance(case, response)
        if not has_body(case) and response.status_code == 422:
            assert response.json().get("type") not in PARAMETER_RULES, (
                f"a request the schema allows was refused for its parameters: {case.method} "
                f"{case.formatted_path} query={case.query} -> {response.text[:400]}"
            )
    assert live.alive, f"the service died on {case.method} {case.formatted_path}"


def test_every_limit_the_service_enforces_is_stated(live):
    api = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    ran = 0
    failures: dict[str, str] = {}
    for result in api.get_all_operations():
        assert isinstance(result, Ok), f"invalid operation in the live schema: {result.err()}"
        operation = result.ok()
        cases = coverage(api, operation, GenerationMode.POSITIVE)
        for case in sample(cases, COVERAGE_PER_OPERATION):
            try:
                run(case, live)
            except (Exception, BaseExceptionGroup) as exc:
                failures.setdefault(f"{case.method} {operation.path}", str(exc)[:2000])
            ran += 1
    print(f"schema: {ran} schema-valid cases, {len(failures)} operations failing")
    assert not failures, "\n\n".join(f"{where}:\n{what}" for where, what in failures.items())
    assert ran >= 250, ran


def fits(template: str, path: str, parameters: dict[str, str]) -> bool:
    """Whether ``path`` is one of ``template``'s, each parameter fitting its pattern."""
    names = re.findall(r"{([^}]+)}", template)
    shape = re.escape(template)
    for name in names:
        shape = shape.replace(re.escape(f"{{{name}}}"), f"(?P<{name}>[^/]+)")
    match = re.fullmatch(shape, path)
    if match is None:
        return False
    return all(re.search(parameters[name], value) for name, value in match.groupdict().items())


def test_every_undeclared_method_is_a_405_naming_the_paths_methods(live):
    """Schemathesis's ``unsupported_method`` and ``allow_header_conformance``, at every path of
    the live schema with parameters that fit: the methods another template the same path fits
    serves (``GET /v1/selectors/import``: the selector named ``import``) are not tried."""
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        schema = http.get("/openapi.json").json()
        patterns: dict[str, dict[str, str]] = {}
        for template, operations in schema["paths"].items():
            patterns[template] = {
                parameter["name"]: parameter["schema"].get("pattern", "")
                for operation in operations.values()
                for parameter in operation.get("parameters", [])
                if parameter["in"] == "path"
            }
        tried = 0
        wrong = []
        for template, operations in schema["paths"].items():
            path = template.format(**PATH_VALUES)
            documented = {method.upper() for method in operations}
            served = set(documented)
            for other, elsewhere in schema["paths"].items():
                if other != template and fits(other, path, patterns[other]):
                    served |= {method.upper() for method in elsewhere}
            for method in METHODS:
                if method in served:
                    continue
                answer = http.request(method, path)
                tried += 1
                allow = {m.strip() for m in answer.headers.get("allow", "").split(",")}
                if answer.status_code != 405 or allow != documented:
                    wrong.append(f"{method} {path}: {answer.status_code}, Allow {sorted(allow)}")
    assert not wrong, "\n".join(wrong)
    assert tried >= 200, tried


def test_the_limits_found_refused_are_stated_and_their_bounds_accepted(live):
    """The refusals the schema did not state: ``h`` of drift, alerts and the history (a
    setting of the process), ``limit`` of the history, and a deletion by prefix's rule."""
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        schema = http.get("/openapi.json").json()
        paths = schema["paths"]

        def query_bound(path: str, name: str) -> Any:
            (parameter,) = [p for p in paths[path]["get"]["parameters"] if p["name"] == name]
            (numeric,) = [b for b in parameter["schema"]["anyOf"] if b["type"] == "integer"]
            return numeric["maximum"]

        assert query_bound("/v1/selectors/{name}/drift", "h") == HISTORY_TOP
        assert query_bound("/v1/selectors/{name}/history", "h") == HISTORY_TOP
        assert query_bound("/v1/selectors/{name}/history", "limit") == 200
        alert_h = schema["components"]["schemas"]["AlertIn"]["properties"]["h"]["anyOf"]
        assert [b["maximum"] for b in alert_h if b.get("type") == "integer"] == [40]
        # At the bound: accepted; over it: refused as the schema says.
        for path in ("drift", "history"):
            assert http.get(f"/v1/selectors/c-fsds/{path}", params={"h": 40}).status_code == 200
            over = http.get(f"/v1/selectors/c-fsds/{path}", params={"h": 41})
            assert over.status_code == 422 and over.json()["type"].endswith(":invalid-input")
        hook = {"url": "https://hooks.example.invalid/x", "threshold": 0.5}
        # A selector wide enough that the bound is the setting's, not its features less one.
        wide = {"name": "c-wide", "method": "variance", "n_features": 50}
        assert http.post("/v1/selectors", json=wide).status_code == 201
        made = http.post("/v1/selectors/c-wide/alerts", json={**hook, "h": 40})
        assert made.status_code == 201, made.text
        over = http.post("/v1/selectors/c-wide/alerts", json={**hook, "h": 41})
        assert over.status_code == 422 and "SIFT_HISTORY_TOP" in over.text
        # DELETE /v1/selectors: a prefix or all=true (not both), stated on the query as one
        # object; temporary=true alone is not a selection.
        (selection,) = paths["/v1/selectors"]["delete"]["parameters"]
        assert (selection["in"], selection["style"], selection["explode"]) == (
            "query",
            "form",
            True,
        )
        rules = selection["schema"]
        assert {"prefix", "all", "temporary", "limit", "after"} <= set(rules["properties"])
        assert rules["anyOf"] and rules["not"]
        refused = http.delete("/v1/selectors", params={"temporary": "true"})
        assert refused.status_code == 422, refused.text
        assert http.get("/v1/selectors/c-fsds").status_code == 200


def test_a_405_lists_the_methods_of_the_route_its_path_names(live):
    """A literal segment names its route before a parameter does: ``/v1/selectors/import`` is
    the import (POST), not the selector named ``import``; ``.../alerts/events`` the events
    (GET), not an alert (whose ids are 16 hex digits)."""
    with httpx.Client(base_url=live.url, headers=AUTH, timeout=30) as http:
        for method, path, allowed in (
            ("OPTIONS", "/v1/selectors/import", "POST"),
            ("PUT", "/v1/selectors/import", "POST"),
            ("OPTIONS", "/v1/selectors/c-fsds/alerts/events", "GET"),
            ("DELETE", "/v1/selectors/c-fsds/alerts/events", "GET"),
            ("PUT", "/v1/selectors/c-fsds", "DELETE, GET"),
            ("PATCH", "/v1/selectors", "DELETE, GET, POST"),
            ("PUT", "/v1/selectors/c-fsds/alerts/0123456789abcdef", "DELETE"),
        ):
            answer = http.request(method, path)
            assert answer.status_code == 405, (method, path, answer.text)
            assert answer.headers["allow"] == allowed, (method, path, answer.headers)
            assert allowed in answer.json()["detail"]
        # The selector named "import" is still a selector, and an alert id an alert's path.
        assert http.get("/v1/selectors/import").status_code == 404
        gone = http.delete("/v1/selectors/c-fsds/alerts/0123456789abcdef")
        assert gone.status_code == 404 and "alert" in gone.json()["detail"]
