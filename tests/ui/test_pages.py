"""The pages for people without a browser: served without a key, nothing from another origin.

``/``, ``/ui`` and ``/docs`` (with their assets) answer without an API key even with
``SIFT_API_TOKEN`` set, reference only their own origin, and every file they reference is
served. The browser half (rendering, live updates, the key prompt) is tests/ui/test_dashboard.py.
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from service.api.routes.ui import DASHBOARD_ASSETS, STATIC_DIR, SWAGGER_ASSETS
from tests.support.api import make_settings, running_app
from tests.support.harness import REPO_ROOT

TOKEN = "pages-test-token-0123456789"


@pytest.fixture
async def guarded(redis_url: str, redis_client: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The real app with ``SIFT_API_TOKEN`` set; a client that sends no key."""
    async with running_app(make_settings(redis_url, api_token=TOKEN)) as (_, client):
        yield client


class References(HTMLParser):
    """Every ``src`` and ``href`` of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls.extend(value for name, value in attrs if name in ("src", "href") and value)


def references(html: str) -> list[str]:
    parser = References()
    parser.feed(html)
    return parser.urls


def is_other_origin(url: str) -> bool:
    """Whether ``url`` would be fetched from another host (absolute or protocol-relative)."""
    parts = urlsplit(url)
    return bool(parts.netloc) or parts.scheme not in ("", "data")


async def test_pages_and_assets_need_no_key(guarded: httpx.AsyncClient) -> None:
    assert (await guarded.get("/v1/selectors")).status_code == 401  # authentication is on

    page = await guarded.get("/ui")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp
    assert "connect-src 'self'" in csp
    for asset, media_type in DASHBOARD_ASSETS.items():
        answer = await guarded.get(f"/ui/assets/{asset}")
        assert answer.status_code == 200, asset
        assert answer.headers["content-type"] == media_type
        assert answer.content == (STATIC_DIR / asset).read_bytes()

    docs = await guarded.get("/docs")
    assert docs.status_code == 200
    for asset, media_type in SWAGGER_ASSETS.items():
        answer = await guarded.get(f"/docs/assets/{asset}")
        assert answer.status_code == 200, asset
        assert answer.headers["content-type"] == media_type
    bundle = await guarded.get("/docs/assets/swagger-ui-bundle.js")
    assert b"SwaggerUIBundle" in bundle.content and len(bundle.content) > 500_000
    assert "Apache License" in (await guarded.get("/docs/assets/LICENSE")).text
    assert (await guarded.get("/openapi.json")).status_code == 200

    head = await guarded.head("/ui")
    assert head.status_code == 200 and head.content == b""

    # / holds no data either: where things are, or (a browser) the way to the dashboard.
    root = await guarded.get("/")
    assert root.status_code == 200 and root.json()["ui"] == "/ui"
    browser = await guarded.get("/", headers={"accept": "text/html"})
    assert browser.status_code == 307 and browser.headers["location"] == "/ui"


@pytest.mark.parametrize("path", ["/ui", "/docs"])
async def test_pages_reference_only_their_own_origin(guarded: httpx.AsyncClient, path: str) -> None:
    html = (await guarded.get(path)).text
    urls = references(html)
    assert urls, f"{path} references nothing: the parser missed its assets"
    assert [url for url in urls if is_other_origin(url)] == []
    assert "cdn" not in html.lower()
    # And every file it references is served here.
    for url in urls:
        if urlsplit(url).scheme == "data":
            continue
        target = urljoin(f"http://sift{path}", url)
        if urlsplit(target).path == "/docs":
            continue  # the dashboard's link to the API docs: a page, checked on its own
        answer = await guarded.get(target)
        assert answer.status_code == 200, f"{path} references {url}, which answers {answer}"


def test_external_references_are_recognised() -> None:
    """The check above can fail: each kind of reference to another host is caught."""
    html = (
        '<link href="https://cdn.example/x.css"><script src="//cdn.example/x.js"></script>'
        '<img src="http://example.org/a.png"><a href="docs"></a><link href="data:,">'
    )
    assert [url for url in references(html) if is_other_origin(url)] == [
        "https://cdn.example/x.css",
        "//cdn.example/x.js",
        "http://example.org/a.png",
    ]


@pytest.mark.parametrize(
    "path",
    [
        "/ui/assets/missing.js",
        "/ui/assets/dashboard.html",  # a real file, but not an asset of the allowlist
        "/ui/assets/..%2Fstatic%2Fdashboard.js",
        "/docs/assets/swagger-editor-bundle.js",  # shipped by the package, not served
        "/docs/assets/..%2F__init__.py",
        "/redoc",
    ],
)
async def test_only_allowlisted_files_are_served(guarded: httpx.AsyncClient, path: str) -> None:
    answer = await guarded.get(path)
    assert answer.status_code == 404
    assert answer.headers["content-type"] == "application/problem+json"


def test_package_data_ships_every_static_file() -> None:
    """A non-editable install carries the dashboard: pyproject's package-data covers it all."""
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["service.api"]
    package = REPO_ROOT / "service" / "api"
    files = [path.relative_to(package).as_posix() for path in STATIC_DIR.rglob("*")]
    assert files
    uncovered = [f for f in files if not any(fnmatch.fnmatch(f, p) for p in patterns)]
    assert uncovered == []
    for asset in [*DASHBOARD_ASSETS, "dashboard.html"]:
        assert (STATIC_DIR / asset).is_file()


def test_the_dashboard_page_shows_the_committed_screenshot() -> None:
    screenshot = REPO_ROOT / "docs" / "dashboard.png"
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](dashboard.png)" in (REPO_ROOT / "docs" / "dashboard.md").read_text()
