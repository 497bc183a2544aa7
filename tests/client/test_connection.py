"""Where the client connects and what it says when that goes wrong, against real processes: a
port nobody listens on (the service is down), a plain ``http.server`` that is not Sift, URLs
without a scheme or with ``/v1``, the API key from the environment (``SIFT_API_TOKEN``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from siftstream import (
    AsyncClient,
    AuthenticationError,
    Client,
    InvalidURLError,
    NotSiftError,
    ServerError,
    ServiceUnreachableError,
    SiftSelector,
    UnavailableError,
)
from siftstream._http import DEFAULT_RETRY_BUDGET
from tests.support.client import ADMIN_TOKEN, sift
from tests.support.harness import ServiceProcess
from tests.support.hostile_peers import closed_port

#: What a deadline may be overrun by: the last attempt's own time and the interpreter's.
MARGIN = 1.5


@contextmanager
def tiny_server(
    status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
) -> Iterator[str]:
    """A real HTTP server on a free port answering every request with ``status`` and ``body``;
    its URL."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


HTML_404 = (
    b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body>\n"
    + (b"<h1>Not Found</h1><p>The requested URL was not found on this server.</p>\n" * 20)
    + b"</body></html>\n"
)


# -- a service that is down -------------------------------------------------------------------


def test_a_service_that_is_down_fails_within_the_budget_saying_where_and_what_to_check() -> None:
    with closed_port() as port:
        url = f"http://127.0.0.1:{port}"
        with Client(url, retry_budget=2.0) as client:
            started = time.monotonic()
            with pytest.raises(ServiceUnreachableError) as raised:
                client.list_selectors()
            elapsed = time.monotonic() - started
    assert 2.0 - 0.1 <= elapsed < 2.0 + MARGIN  # the whole budget, and not much more
    message = str(raised.value)
    assert f"cannot reach the service at {url}" in message
    assert "nothing answered" in message and "GET /v1/selectors" in message
    assert "Is it running" in message and "SIFT_URL" in message
    assert raised.value.attempts > 1  # it did retry, within the budget


def test_the_default_budget_is_at_most_ten_seconds() -> None:
    assert DEFAULT_RETRY_BUDGET <= 10
    with closed_port() as port, Client(f"127.0.0.1:{port}") as client:
        started = time.monotonic()
        with pytest.raises(ServiceUnreachableError):
            client.health()
        elapsed = time.monotonic() - started
    assert 0 < elapsed < DEFAULT_RETRY_BUDGET + MARGIN


def test_the_async_client_has_the_same_budget() -> None:
    async def attempt(url: str) -> float:
        async with AsyncClient(url, retry_budget=1.0) as client:
            started = time.monotonic()
            with pytest.raises(ServiceUnreachableError, match="cannot reach the service"):
                await client.list_selectors()
            return time.monotonic() - started

    with closed_port() as port:
        elapsed = asyncio.run(attempt(f"http://127.0.0.1:{port}"))
    assert 0 < elapsed < 1.0 + MARGIN


def test_503_with_retry_after_is_retried_within_the_budget() -> None:
    problem = (
        b'{"type": "urn:sift:problem:unavailable", "title": "Service Unavailable", '
        b'"status": 503, "detail": "Redis is unavailable"}'
    )
    with tiny_server(503, problem, "application/problem+json", {"Retry-After": "1"}) as url:
        with Client(url, retry_budget=2.5) as client:
            started = time.monotonic()
            with pytest.raises(UnavailableError, match="Redis is unavailable"):
                client.list_selectors()
            elapsed = time.monotonic() - started
        assert 1.0 <= elapsed < 2.5 + MARGIN  # waited as asked, and no longer than the budget
        # A Retry-After beyond the budget is not waited for.
    with (
        tiny_server(503, problem, "application/problem+json", {"Retry-After": "60"}) as url,
        Client(url, retry_budget=2.0) as client,
    ):
        started = time.monotonic()
        with pytest.raises(UnavailableError):
            client.list_selectors()
        assert time.monotonic() - started < 2.0


def test_the_cli_retry_budget_is_the_clients(capsys: pytest.CaptureFixture[str]) -> None:
    problem = (
        b'{"type": "urn:sift:problem:unavailable", "title": "t", "status": 503, "detail": "d"}'
    )
    with tiny_server(503, problem, "application/problem+json", {"Retry-After": "0.3"}) as url:
        started = time.monotonic()
        status, _, err = sift(capsys, "--url", url, "ls", "--retry-budget", "1")
        elapsed = time.monotonic() - started
    assert status == 1 and "503" in err
    assert 0.3 <= elapsed < 1.0 + MARGIN


# -- something that is not Sift -----------------------------------------------------------------


@pytest.mark.parametrize("status", [404, 200])
def test_a_server_that_is_not_sift_is_recognised_in_one_line(status: int) -> None:
    with (
        tiny_server(status, HTML_404, "text/html; charset=utf-8") as url,
        Client(url, retry_budget=1.0) as client,
        pytest.raises(NotSiftError) as raised,
    ):
        client.list_selectors()
    message = str(raised.value)
    assert f"{url} did not answer as a Sift service" in message
    assert f"got {status}" in message and "text/html" in message
    assert "\n" not in message and "<" not in message  # never the page itself


def test_another_apis_json_is_not_sift_either() -> None:
    body = b'{"detail": "Not Found"}'
    with (
        tiny_server(404, body, "application/json") as url,
        Client(url) as client,
        pytest.raises(NotSiftError, match="did not answer as a Sift service"),
    ):
        client.describe("news")


def test_a_proxys_html_502_is_retried_then_said_in_one_line() -> None:
    with (
        tiny_server(502, HTML_404, "text/html") as url,
        Client(url, retry_budget=0.5) as client,
        pytest.raises(ServerError) as raised,
    ):
        client.list_selectors()
    message = str(raised.value)
    assert "502" in message and "not Sift's problem+json" in message
    assert "<" not in message and "\n" not in message


def test_the_cli_says_not_sift_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with tiny_server(404, HTML_404, "text/html") as url:
        status, out, err = sift(capsys, "--url", url, "ls")
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and "did not answer as a Sift service" in err and "<" not in err


# -- URLs -------------------------------------------------------------------------------------


def test_urls_without_a_scheme_or_with_v1_reach_the_service(service: ServiceProcess) -> None:
    host_port = service.url.removeprefix("http://")
    for url in (host_port, f"{host_port}/v1", f"{service.url}/v1/", f"{service.url}/", service.url):
        with Client(url) as client:
            assert client.url == service.url
            assert client.health()
            client.list_selectors()

    async def listed() -> None:
        async with AsyncClient(f"{host_port}/v1/") as client:
            assert client.url == service.url
            await client.list_selectors()

    asyncio.run(listed())
    assert SiftSelector("x", url=f"{host_port}/v1")._client().url == service.url


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("ftp://127.0.0.1:8000", "http:// or https://"),
        ("http://127.0.0.1:8000/v1/selectors", "give the service's base URL"),
        ("http://127.0.0.1:8000/?page=2", "base URL"),
        ("http://:8000", "no host"),
        ("", "empty"),
    ],
)
def test_unusable_urls_are_refused_clearly(url: str, says: str) -> None:
    with pytest.raises(InvalidURLError, match=says):
        Client(url)


def test_the_cli_takes_the_same_urls(
    service: ServiceProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host_port = service.url.removeprefix("http://")
    status, _, err = sift(capsys, "--url", f"{host_port}/v1", "ls")
    assert status == 0, err
    monkeypatch.setenv("SIFT_URL", f"{host_port}/v1/")
    status, _, err = sift(capsys, "ls")
    assert status == 0, err
    status, _, err = sift(capsys, "--url", f"{service.url}/v1/selectors", "ls")
    assert status == 1 and "give the service's base URL" in err and err.count("\n") == 1


# -- the API key --------------------------------------------------------------------------------


def test_the_cli_takes_sift_api_token_when_sift_api_key_is_unset(
    secured: ServiceProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, _, err = sift(capsys, "--url", secured.url, "ls")
    assert status == 1 and "(401 Unauthorized)" in err
    monkeypatch.setenv("SIFT_API_TOKEN", ADMIN_TOKEN)
    status, _, err = sift(capsys, "--url", secured.url, "ls")
    assert status == 0, err
    # SIFT_API_KEY comes first, and --api-key before both.
    monkeypatch.setenv("SIFT_API_KEY", "not-a-key-of-this-service")
    status, _, err = sift(capsys, "--url", secured.url, "ls")
    assert status == 1 and "(401 Unauthorized)" in err
    status, _, err = sift(capsys, "--url", secured.url, "ls", "--api-key", ADMIN_TOKEN)
    assert status == 0, err


def test_the_client_reads_the_key_as_the_cli_does(
    secured: ServiceProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIFT_API_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("SIFT_URL", secured.url.removeprefix("http://"))
    with Client() as client:
        assert client.url == secured.url
        client.list_selectors()
    with Client(api_key="") as client, pytest.raises(AuthenticationError):
        client.list_selectors()  # "" sends no key, whatever the environment says
    monkeypatch.setenv("SIFT_API_KEY", "not-a-key-of-this-service")
    with Client() as client, pytest.raises(AuthenticationError):
        client.list_selectors()
