"""Client fixtures: a real ``sift serve`` process over its own redis-server, shared by the client
tests of a session (each test uses selector names of its own), and clients bound to it.

* ``service`` (session): the ``ServiceProcess`` (``.url``), over a ``RedisProcess``;
* ``sift`` (function): a ``Client`` of it;
* ``selector_name`` (function): a selector name no other test uses;
* ``secured`` (session): another service process, with API keys required and chunks answered
  202 at once (started only by the tests that use it).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest

from siftstream import Client
from tests.support.client import ADMIN_TOKEN
from tests.support.harness import ServiceProcess, live_service

_numbers = itertools.count()


@pytest.fixture(autouse=True)
def _no_connection_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Client`` and ``sift`` read SIFT_URL, SIFT_API_KEY and SIFT_API_TOKEN: the shell's
    must not reach the tests (those that test them set them)."""
    for variable in ("SIFT_URL", "SIFT_API_KEY", "SIFT_API_TOKEN"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    # The alert tests' receivers and the source tests' buses listen on loopback, which alerts
    # and sources reach only when allowed.
    env = {"SIFT_ALERT_PRIVATE": "127.0.0.0/8", "SIFT_SOURCE_PRIVATE": "127.0.0.0/8"}
    with live_service(tmp_path_factory.mktemp("client-service"), "client", env) as process:
        yield process


@pytest.fixture
def sift(service: ServiceProcess) -> Iterator[Client]:
    with Client(service.url) as client:
        yield client


@pytest.fixture
def selector_name(request: pytest.FixtureRequest) -> str:
    """``<test name>-<n>``, within the service's name pattern."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:100].strip("-")
    return f"{stem}-{next(_numbers)}"


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A service that requires API keys (``SIFT_API_TOKEN`` is ``ADMIN_TOKEN``) and answers a
    chunk's POST at once with 202 (``SIFT_APPLY_WAIT_SECONDS=0``), so clients poll."""
    env = {"SIFT_API_TOKEN": ADMIN_TOKEN, "SIFT_APPLY_WAIT_SECONDS": "0"}
    with live_service(tmp_path_factory.mktemp("secured-service"), "secured", env) as process:
        yield process
