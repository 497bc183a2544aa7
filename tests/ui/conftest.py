"""Fixtures of the dashboard tests: a real ``sift serve`` process and Debian's chromium.

* ``live_sift``: ``live_sift(name, **env)`` starts a service process (``python -m service serve``,
  tests/support/harness.py) over its own redis-server; both are stopped after the test.
* ``browser`` (module): Debian's chromium driven by Playwright. A machine without chromium
  FAILS these tests with the command that installs it (``.ci/run`` installs it); nothing skips.
* ``offline_page``: a page whose every request to another origin than the service is aborted
  and recorded, so a page that needs a CDN shows it (blank, and a non-empty ``blocked`` list).
* ``artifacts``: ``tests/artifacts/`` (git-ignored) for screenshots.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Route, sync_playwright

from tests.support.harness import REPO_ROOT, RedisProcess, ServiceProcess
from tests.support.ui import OfflinePage

ARTIFACTS = REPO_ROOT / "tests" / "artifacts"
#: Headless, and none of chromium's own traffic (updates, sync, QUIC probes) leaves the machine.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_executable() -> str:
    """Debian's chromium; a clear failure (not a skip) where it is missing."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found is None:
        pytest.fail(
            "the dashboard tests need Debian's chromium: apt-get install -y chromium "
            "(.ci/run installs it)",
            pytrace=False,
        )
    return found


@pytest.fixture
def live_sift(tmp_path: Path) -> Iterator[Callable[..., ServiceProcess]]:
    """``live_sift(name, **env)``: a started service over its own redis-server."""
    started: list[tuple[RedisProcess, ServiceProcess]] = []

    def start(name: str, **env: str) -> ServiceProcess:
        redis_server = RedisProcess(tmp_path / f"redis-{name}")
        service = ServiceProcess(name, redis_server.url, tmp_path, env)
        started.append((redis_server, service))
        service.start()
        return service

    try:
        yield start
    finally:
        for redis_server, service in started:
            try:
                service.kill()
            finally:
                redis_server.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    executable = chromium_executable()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def offline_page(browser: Browser) -> Iterator[Callable[[str], OfflinePage]]:
    """``offline_page(origin)``: a fresh context (own session storage) limited to ``origin``."""
    contexts = []

    def open_page(origin: str) -> OfflinePage:
        context = browser.new_context(viewport={"width": 1280, "height": 860})
        contexts.append(context)
        page = context.new_page()
        opened = OfflinePage(page, origin)

        def only_the_service(route: Route) -> None:
            url = route.request.url
            if url == origin or url.startswith(origin + "/") or url.startswith("data:"):
                route.continue_()
            else:
                opened.blocked.append(url)
                route.abort()

        context.route("**/*", only_the_service)
        page.on("pageerror", lambda error: opened.errors.append(str(error)))
        return opened

    try:
        yield open_page
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
