"""What the schemathesis runs against a live service share: the selectors they aim path
parameters at, the admin key, and the checks of an answer (``tests/contract``, and the bounded
run in ``tests/api/test_schema_contract.py``)."""

from __future__ import annotations

import itertools
import zlib
from collections import Counter
from typing import Any

import httpx
from schemathesis import GenerationMode
from schemathesis.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)
from schemathesis.core.parameters import ParameterLocation

from service.algorithms import METHODS
from service.algorithms.base import Clusters, Mergeable, Projects, offers
from tests.support.archive import SCENARIOS
from tests.support.harness import ServiceProcess

TOKEN = "contract-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Problem types that a schema-valid request may get: the schema cannot state their rules.
SCHEMA_CANNOT_STATE = {
    # Where an alert may send is the operator's setting (SIFT_ALERT_PRIVATE, SIFT_ALERT_HOSTS).
    "urn:sift:problem:destination-not-allowed",
    "urn:sift:problem:selector-mismatch",
    "urn:sift:problem:inconsistent",
    "urn:sift:problem:invalid-params",
    "urn:sift:problem:state-too-large",
}
#: Bodies whose schema says only "a string": a CSV's rules (a header the selector's names, rows as
#: wide as it) are in the media type's description, so a generated string is refused as it
#: should be (and the other checks, no 5xx first, still hold).
SCHEMA_IS_A_STRING = {"text/csv"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    missing_required_header,
    unsupported_method,
    allow_header_conformance,
    ignored_auth,
]

#: Selectors the fixture creates (with data): one per registered method, made as its first
#: example (``Method.examples``: small, so that generated bodies sometimes fit).
POOL = {name: f"c-{name}" for name in METHODS}


#: ... and the routes they serve best.
def offering(capability: type) -> list[str]:
    return [POOL[name] for name, method in METHODS.items() if offers(method, capability)]


AIMED = {
    "/v1/selectors/{name}/features": [
        POOL[name] for name, method in METHODS.items() if method.chunk_kind == "columns"
    ],
    "/v1/selectors/{name}/cluster": offering(Clusters),
    "/v1/selectors/{name}/merge": offering(Mergeable),
    "/v1/selectors/{name}/projection": offering(Projects),
    "/v1/selectors/{name}/transform": offering(Projects),
}

#: The stream the fixture creates (labelled rows of 2 features), and its attached selectors.
STREAM = "c-stream"
STREAM_SELECTORS = ("c-s-ocfs", "c-s-var")

cases_run: Counter[str] = Counter()
throwaway = itertools.count()
#: The names a key that deletes selectors by prefix (``DELETE /v1/selectors``) may see: every
#: generated deletion, ``all=true`` too, deletes only throwaway selectors, never the pool.
BULK_PREFIX = "zz-"
#: That key's header (``fill_pool`` makes it).
BULK_AUTH: dict[str, str] = {}


def post(http: httpx.Client, path: str, body: Any, expect: int = 200) -> httpx.Response:
    response = http.post(path, json=body, headers=AUTH)
    assert response.status_code == expect, response.text
    return response


def fill_pool(http: httpx.Client) -> None:
    """One selector per method (``POOL``), made and fed as the archive tests make them."""
    for method, name in POOL.items():
        made = SCENARIOS[method]
        post(http, "/v1/selectors", {"name": name, "method": method, **made.create}, 201)
        post(http, f"/v1/selectors/{name}/{made.route}", made.chunk(0))
    post(http, "/v1/streams", {"name": STREAM, "n_features": 2, "labelled": True}, 201)
    for name, method in zip(STREAM_SELECTORS, ("ocfs", "variance"), strict=True):
        post(http, "/v1/selectors", {"name": name, "method": method, "stream": STREAM}, 201)
    rows = {"rows": [[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]], "labels": [0, 1, "x"]}
    post(http, f"/v1/streams/{STREAM}/chunks", rows)
    bulk = post(http, "/v1/keys", {"scopes": ["admin"], "prefix": BULK_PREFIX}, 201).json()
    BULK_AUTH.clear()
    BULK_AUTH["Authorization"] = f"Bearer {bulk['key']}"


def aim(case: Any, live: ServiceProcess) -> None:
    """Point the ``name`` path parameter at a real selector (or a fresh one for DELETE).

    Deterministic per case (a checksum of what was generated), so Hypothesis can replay and
    shrink; one case in five keeps its generated name, to exercise the 404s too.
    """
    if "name" not in case.path_parameters or negative_at(case, ParameterLocation.PATH):
        return
    draw = zlib.crc32(repr((case.method, case.path_parameters, case.query, case.body)).encode())
    if draw % 5 == 0:
        return
    streams = case.path.startswith("/v1/streams/")
    if case.method == "DELETE":
        name = f"t-{next(throwaway)}"
        with httpx.Client(base_url=live.url, timeout=30) as http:
            if streams:
                post(http, "/v1/streams", {"name": name, "n_features": 1}, 201)
                if draw % 2:
                    body = {"name": f"{name}-v", "method": "variance", "stream": name}
                    post(http, "/v1/selectors", body, 201)
            else:
                post(http, "/v1/selectors", {"name": name, "method": "ocfs", "n_features": 1}, 201)
    elif streams:
        name = STREAM
    else:
        candidates = AIMED.get(case.path, list(POOL.values()))
        name = candidates[draw % len(candidates)]
    case.path_parameters = {**case.path_parameters, "name": name}


def negative_at(case: Any, location: ParameterLocation) -> bool:
    return case.meta is not None and case.meta.is_negative_at(location)


def credentials(case: Any) -> dict[str, str]:
    """The admin key (``BULK_AUTH`` for deletions by prefix), unless the case is about a
    missing or broken Authorization header."""
    if negative_at(case, ParameterLocation.HEADER):
        return {}
    return BULK_AUTH if (case.method, case.path) == ("DELETE", "/v1/selectors") else AUTH


def acceptance(case: Any, response: httpx.Response) -> None:
    """A request the schema allows is accepted, or refused for a reason it cannot state."""
    if case.meta is None or case.meta.generation.mode != GenerationMode.POSITIVE:
        return
    if case.media_type in SCHEMA_IS_A_STRING:
        return
    status = response.status_code
    if status < 400 or status in (404, 409):
        return
    try:
        problem = response.json()
    except ValueError:
        problem = {}
    assert status == 422 and problem.get("type") in SCHEMA_CANNOT_STATE, (
        f"a request the schema allows was refused: {case.method} {case.formatted_path} "
        f"query={case.query} body={str(case.body)[:300]} -> {status} {response.text[:500]}"
    )


def forget(case: Any, response: httpx.Response, live: ServiceProcess) -> None:
    """Delete what a random creation made, so the Redis of the run stays small."""
    if case.method == "POST" and case.path == "/v1/selectors" and response.status_code == 201:
        httpx.delete(f"{live.url}/v1/selectors/{response.json()['name']}", headers=AUTH)
    if case.method == "POST" and case.path == "/v1/streams" and response.status_code == 201:
        httpx.delete(
            f"{live.url}/v1/streams/{response.json()['name']}",
            params={"force": "true"},
            headers=AUTH,
        )
