"""The live OpenAPI schema against the live service, with schemathesis.

A real ``sift serve`` process (authentication on) over a real redis-server serves its own
``/openapi.json``; schemathesis generates requests from it, valid and invalid, for every
operation, and checks every answer:

* no 5xx, ever;
* the status code, content type, headers and body are the documented ones;
* a request that breaks the schema is refused (4xx); a request without the key is a 401;
* 405 answers carry ``Allow`` with the documented methods;
* a request the schema allows is accepted, or refused only for a reason the schema cannot state
  (``acceptance`` below): the selector it names does not exist or does not fit it, or fields
  contradict each other, or a state would not fit.

Path parameters naming a selector are pointed, most of the time, at real selectors of every
method (created with data by the fixture), so that the core of each route runs; DELETE gets a
throwaway selector made for it. Those naming a stream are pointed at a labelled stream with two
selectors attached (DELETE: a throwaway stream, with a selector attached one time in two). At
least 1000 cases run in all. ``SIFT_CONTRACT_ONLY=/v1/streams,/v1/selectors`` runs the
operations at those paths and under them (a targeted run; the case count is then not required).
"""

from __future__ import annotations

import itertools
import os
import zlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
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
from schemathesis.core.result import Ok

from service.algorithms import METHODS
from service.algorithms.base import Clusters, Mergeable, Projects, offers
from tests.support.archive import SCENARIOS
from tests.support.harness import ServiceProcess, live_service

pytestmark = pytest.mark.slow

TOKEN = "contract-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Examples per operation and generation mode; 21 operations make well over 1000 cases.
EXAMPLES = int(os.environ.get("SIFT_CONTRACT_EXAMPLES", "40"))
MIN_CASES = 1000
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


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    env = {
        "SIFT_API_TOKEN": TOKEN,
        # Random creations must stay small: the state limit refuses large ones (422).
        "SIFT_MAX_STATE_BYTES": str(4 * 2**20),
        "SIFT_APPLY_WAIT_SECONDS": "5",
    }
    with live_service(tmp_path_factory.mktemp("contract"), "contract", env) as service:
        with httpx.Client(base_url=service.url, timeout=30) as http:
            fill_pool(http)
        yield service


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
    """The admin key, unless the case is about a missing or broken Authorization header."""
    return {} if negative_at(case, ParameterLocation.HEADER) else AUTH


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


def run_operation(operation: Any, mode: GenerationMode, live: ServiceProcess) -> None:
    """``EXAMPLES`` generated cases of one operation in one mode, each called and checked."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=os.environ.get("SIFT_CONTRACT_RANDOM") is None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # report, do not shrink
        database=None,
    )
    def check(case: Any) -> None:
        aim(case, live)
        headers = credentials(case)
        response = case.call(base_url=live.url, headers=headers, timeout=30)
        forget(case, response, live)
        cases_run[f"{case.method} {case.path}"] += 1
        case.validate_response(response, checks=CHECKS, headers=headers)
        acceptance(case, response)
        assert live.alive, f"the service died on {case.method} {case.formatted_path}"

    check()


def test_every_answer_keeps_the_contract(live: ServiceProcess) -> None:
    """Every operation of the live schema, valid and invalid requests (see module docstring)."""
    api = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    only = os.environ.get("SIFT_CONTRACT_ONLY")
    paths = None if only is None else [path.strip() for path in only.split(",")]
    failures: dict[str, str] = {}
    for result in api.get_all_operations():
        # An operation the schema does not describe validly is an Err: it fails with its error.
        assert isinstance(result, Ok), f"invalid operation in the live schema: {result.err()}"
        operation = result.ok()
        if paths is not None and not any(
            operation.path == path or operation.path.startswith(path + "/") for path in paths
        ):
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                run_operation(operation, mode, live)
            except Unsatisfiable:
                assert mode == GenerationMode.NEGATIVE, operation.path  # nothing to break
            except (Exception, BaseExceptionGroup) as exc:  # report every operation's first
                failures[f"{operation.method.upper()} {operation.path} ({mode.value})"] = str(exc)
    total = sum(cases_run.values())
    print(f"contract: {total} cases over {len(cases_run)} operations, {len(failures)} failing")
    assert not failures, "\n\n".join(f"{where}:\n{what[:3000]}" for where, what in failures.items())
    if only is None:
        assert total >= MIN_CASES, dict(cases_run)
        assert {key.split()[0] for key in cases_run} >= {"GET", "POST", "DELETE"}
    assert live.alive
