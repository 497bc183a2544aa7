"""``/`` of a real ``sift serve``: a browser is sent to the dashboard, an API client is told
where the API, its docs and the pages are (and every place it names answers)."""

from __future__ import annotations

import httpx
import pytest

from tests.support.harness import ServiceProcess

#: What Chromium and Firefox send for a page.
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_browser_is_sent_to_the_dashboard(service: ServiceProcess, method: str) -> None:
    answer = httpx.request(method, f"{service.url}/", headers={"accept": BROWSER})
    assert answer.status_code == 307 and answer.headers["location"] == "/ui"
    assert "accept" in answer.headers["vary"].lower()
    page = httpx.get(f"{service.url}/", headers={"accept": BROWSER}, follow_redirects=True)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.url.path == "/ui"


@pytest.mark.parametrize(
    "accept", [None, "*/*", "application/json", "text/html;q=0, application/json"]
)
def test_an_api_client_is_told_where_everything_is(
    service: ServiceProcess, accept: str | None
) -> None:
    headers = {} if accept is None else {"accept": accept}
    answer = httpx.get(f"{service.url}/", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert "accept" in answer.headers["vary"].lower()
    places = answer.json()
    assert places["api"] == "/v1" and places["docs"] == "/docs" and places["ui"] == "/ui"
    assert places["openapi"] == "/openapi.json" and places["health"] == "/v1/healthz"
    for path in (places["docs"], places["openapi"], places["ui"], places["health"]):
        assert httpx.get(f"{service.url}{path}").status_code == 200, path
    selectors = httpx.get(f"{service.url}{places['api']}/selectors")
    assert selectors.status_code == 200, selectors.text
