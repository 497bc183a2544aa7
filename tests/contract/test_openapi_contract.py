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

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from tests.support.contract import (
    CHECKS,
    TOKEN,
    acceptance,
    aim,
    cases_run,
    credentials,
    fill_pool,
    forget,
)
from tests.support.harness import ServiceProcess, live_service

pytestmark = pytest.mark.slow

#: Examples per operation and generation mode; 21 operations make well over 1000 cases.
EXAMPLES = int(os.environ.get("SIFT_CONTRACT_EXAMPLES", "40"))
MIN_CASES = 1000


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
