"""The dashboard in a real browser: Debian's chromium against a real ``sift serve`` process.

The data is built so that the ranking is known: a ``variance`` selector whose columns alternate
``+s_j, -s_j`` has per-feature variance ``s_j**2`` exactly, so the scales decide the order. The
test checks that order against the server's own ``/top`` too, then that the page shows it, and
follows it when more data changes it (without a reload). Every request to another origin is
aborted and recorded: the page and ``/docs`` must work offline.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

from tests.support.harness import ServiceProcess
from tests.support.ui import OfflinePage
from tests.support.webhooks import webhook_receiver

pytestmark = pytest.mark.slow

#: A feature name that would become an element (and try to run ``f()``) if the page ever put
#: names into the DOM as markup; short enough to be shown whole at 1,280 px.
HOSTILE = "<img src=x onerror=f()>"
NAMES = ["temperature", "pressure", HOSTILE, "humidity", "light", "noise"]
#: Column scales of the first chunk: variance is scale**2, so this is the ranking.
SCALES = [8.0, 6.0, 5.0, 4.0, 2.0, 1.0]
ROWS = 10
TOKEN = "dashboard-test-token-0123456789"
#: How long the page may take to show what the server has (it polls every 2 s).
FOLLOW_MS = 15_000


def alternating(scales: list[float], rows: int) -> list[list[float]]:
    """Rows whose column j alternates +scales[j], -scales[j]: mean 0, variance scales[j]**2."""
    return [[scale if i % 2 == 0 else -scale for scale in scales] for i in range(rows)]


def api(service: ServiceProcess, token: str | None = None) -> httpx.Client:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=service.url, headers=headers, timeout=30.0)


def create_selector(client: httpx.Client, body: dict[str, Any]) -> None:
    response = client.post("/v1/selectors", json=body)
    assert response.status_code == 201, response.text


def push_rows(client: httpx.Client, name: str, rows: list[list[float]]) -> int:
    response = client.post(f"/v1/selectors/{name}/chunks", json={"rows": rows})
    assert response.status_code == 200, response.text
    version: int = response.json()["version"]
    return version


def server_top(client: httpx.Client, name: str, h: int) -> list[str]:
    response = client.get(f"/v1/selectors/{name}/top", params={"h": h})
    assert response.status_code == 200, response.text
    return [feature["name"] for feature in response.json()["features"]]


def texts(page: Page, selector: str) -> list[str]:
    return list(page.locator(selector).all_text_contents())


def wait_until(page: Page, condition: str, arg: Any, what: str, show: str) -> None:
    """Wait for the JS ``condition(arg)`` to hold; on timeout, fail with what ``show`` finds."""
    try:
        page.wait_for_function(condition, arg=arg, timeout=FOLLOW_MS)
    except PlaywrightError as exc:
        raise AssertionError(
            f"the page did not show {what} within {FOLLOW_MS / 1000:.0f} s; "
            f"it shows {texts(page, show)}"
        ) from exc


SHOWS_LABELS = """(expected) => JSON.stringify(
    Array.from(document.querySelectorAll('#bar-chart text.label'), (node) => node.textContent)
) === JSON.stringify(expected)"""
RANK_VERSIONS = """(least) => {
    const chart = document.querySelector('#rank-chart svg');
    return chart !== null && Number(chart.getAttribute('data-versions')) >= least;
}"""


def wait_for_labels(page: Page, expected: list[str]) -> None:
    wait_until(page, SHOWS_LABELS, expected, f"the bars {expected}", "#bar-chart text.label")


def rank_versions(page: Page) -> int:
    value = page.locator("#rank-chart svg").get_attribute("data-versions")
    assert value is not None, "the rank chart has no versions"
    return int(value)


def table_row(page: Page, name: str) -> list[str]:
    return texts(page, f'#selectors tbody tr[data-name="{name}"] td')


def test_dashboard_follows_a_selector_live(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
    artifacts: Path,
) -> None:
    service = live_sift("dashboard")
    with api(service) as client:
        create_selector(
            client,
            {"name": "sensors", "method": "variance", "n_features": 6, "feature_names": NAMES},
        )
        create_selector(client, {"name": "idle", "method": "fsds", "n_features": 4})
        assert push_rows(client, "sensors", alternating(SCALES, ROWS)) == 1
        expected = server_top(client, "sensors", 10)
    # The construction decides the order; the server agrees with it.
    assert expected == NAMES

    opened = offline_page(service.url)
    page = opened.page
    page.add_init_script("window.f = () => { window.__injected = true; };")
    page.goto(f"{service.url}/ui#sensors")
    wait_for_labels(page, NAMES)
    # The hostile name is shown as text: no element was made of it, no script ran.
    assert page.locator("img").count() == 0
    assert page.evaluate("window.__injected") is None
    wait_until(
        page,
        "() => document.querySelector('#selectors tbody tr[data-name=\"sensors\"] td.pending')"
        " ?.textContent === '0'",
        None,
        "the pending count of 'sensors'",
        "#selectors tbody tr",
    )
    row = table_row(page, "sensors")
    assert row[:5] == ["sensors", "variance", "10 rows", "1", "0"], row
    assert row[5].endswith("ago") or row[5] == "just now", row
    wait_until(page, RANK_VERSIONS, 1, "a rank chart", "#rank-chart")
    versions_before = rank_versions(page)

    # h is selectable.
    page.select_option("#h", "5")
    wait_for_labels(page, NAMES[:5])
    page.select_option("#h", "10")
    wait_for_labels(page, NAMES)

    # More data, where 'noise' varies most: the page follows by itself, without a reload.
    page.evaluate("window.__sameDocument = true")
    with api(service) as client:
        changed = [[0.0] * 5 + [40.0 if i % 2 == 0 else -40.0] for i in range(ROWS)]
        assert push_rows(client, "sensors", changed) == 2
        reranked = server_top(client, "sensors", 10)
    assert reranked == ["noise", *NAMES[:5]]
    wait_for_labels(page, reranked)
    assert page.evaluate("window.__sameDocument") is True, "the page was reloaded"
    assert page.locator("#bar-chart svg").get_attribute("data-version") == "2"
    wait_until(page, RANK_VERSIONS, versions_before + 1, "one more version", "#rank-chart")
    # The rank chart draws one line (with its label) per current top feature.
    assert texts(page, "#rank-chart .series text.label") == reranked
    assert texts(page, "#rank-chart text.version-tick")[-1] == "v2"

    screenshot = artifacts / "dashboard.png"
    page.screenshot(path=str(screenshot), full_page=True)
    print(f"dashboard screenshot: {screenshot}")

    # A selector without data shows what to do, not an error.
    page.click('#selectors tbody tr[data-name="idle"]')
    page.wait_for_function("() => location.hash === '#idle'")
    message = page.locator("#detail-message")
    message.wait_for(state="visible", timeout=FOLLOW_MS)
    assert "No data yet" in message.inner_text()
    assert page.locator("#charts").is_hidden()
    assert page.locator("#problem").is_hidden()

    # The service goes away: the page says so and backs off; it comes back: the page recovers.
    service.kill()
    problem = page.locator("#problem")
    problem.wait_for(state="visible", timeout=FOLLOW_MS)
    assert "did not answer" in problem.inner_text()
    assert "retrying in" in page.locator("#status").inner_text()
    service.start()
    problem.wait_for(state="hidden", timeout=FOLLOW_MS)
    assert page.locator("#status").inner_text().startswith("Live")
    opened.assert_clean()


def test_docs_render_offline(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
    artifacts: Path,
) -> None:
    """Swagger UI renders every operation with every other origin blocked."""
    service = live_sift("docs")
    opened = offline_page(service.url)
    page = opened.page
    page.goto(f"{service.url}/docs")
    page.locator(".opblock").first.wait_for(timeout=FOLLOW_MS)
    operations = httpx.get(f"{service.url}/openapi.json").json()["paths"]
    expected = sum(len(methods) for methods in operations.values())
    assert page.locator(".opblock").count() == expected
    paths = set(texts(page, ".opblock-summary-path"))
    assert "/v1/selectors/{name}/top" in {path.replace("\u200b", "") for path in paths}
    page.screenshot(path=str(artifacts / "docs.png"))
    opened.assert_clean()


def test_key_prompt_with_api_token(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
) -> None:
    """With SIFT_API_TOKEN set, the page asks for a key on 401, keeps it, and uses it."""
    service = live_sift("guarded", SIFT_API_TOKEN=TOKEN)
    with api(service, TOKEN) as client:
        create_selector(
            client,
            {"name": "guarded", "method": "variance", "n_features": 6, "feature_names": NAMES},
        )
        push_rows(client, "guarded", alternating(SCALES, ROWS))
    # The page and its assets need no key; the API does.
    assert httpx.get(f"{service.url}/ui").status_code == 200
    assert httpx.get(f"{service.url}/v1/selectors").status_code == 401

    opened = offline_page(service.url)
    page = opened.page
    page.goto(f"{service.url}/ui")
    dialog = page.locator("#key-dialog")
    dialog.wait_for(state="visible", timeout=FOLLOW_MS)
    assert "needs an API key" in page.locator("#key-reason").inner_text()

    # A wrong key is refused and asked for again.
    page.fill("#key-input", "not-the-key")
    page.click("#key-submit")
    wait_until(
        page,
        "() => document.querySelector('#key-dialog').open"
        " && document.querySelector('#key-reason').textContent.includes('refused')",
        None,
        "the key refused",
        "#key-reason",
    )
    assert page.evaluate("sessionStorage.getItem('sift.apiKey')") is None

    page.fill("#key-input", TOKEN)
    page.click("#key-submit")
    wait_for_labels(page, NAMES)
    assert dialog.is_hidden()
    assert page.evaluate("sessionStorage.getItem('sift.apiKey')") == TOKEN

    # The key stays for the tab's session: a reload does not ask again.
    page.reload()
    wait_for_labels(page, NAMES)
    assert dialog.is_hidden()

    # Forgetting it brings the prompt back.
    page.click("#forget-key")
    dialog.wait_for(state="visible", timeout=FOLLOW_MS)
    opened.assert_clean()


#: Twelve features: the first five vary most at first, the last five (one of them HOSTILE: the
#: alert's event names it) once the stream moves.
MOVING = [f"m{i}" for i in range(11)] + [HOSTILE]
BEFORE = [5.0, 4.0, 3.5, 3.0, 2.5] + [1.0] * 7
AFTER = [1.0] * 7 + [12.0, 11.0, 10.0, 9.0, 8.0]


def noisy(scales: list[float], rows: int, seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    values: list[list[float]] = (rng.standard_normal((rows, len(scales))) * scales).tolist()
    return values


def test_dashboard_shows_bands_stability_drift_and_alert_events(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
    artifacts: Path,
) -> None:
    service = live_sift(
        "moving", SIFT_ALERT_BACKOFF_SECONDS="0.05", SIFT_ALERT_PRIVATE="127.0.0.0/8"
    )
    with webhook_receiver() as receiver, api(service) as client:
        create_selector(
            client,
            {"name": "moving", "method": "variance", "n_features": 12, "feature_names": MOVING},
        )
        hook = {"url": receiver.url, "h": 5, "threshold": 0.5}
        assert client.post("/v1/selectors/moving/alerts", json=hook).status_code == 201
        for seed in range(30):
            push_rows(client, "moving", noisy(BEFORE, 400, seed))
            drift = client.get("/v1/selectors/moving/drift", params={"h": 5}).json()
            if drift["baseline"] is not None:
                break
        assert drift["baseline"] is not None, "no version became the baseline"

        opened = offline_page(service.url)
        page = opened.page
        page.add_init_script("window.f = () => { window.__injected = true; };")
        page.goto(f"{service.url}/ui#moving")
        # One whisker per bar: the feature's ranks over the resamples, its rank within them.
        wait_until(
            page,
            "() => document.querySelectorAll('#bar-chart g.whisker').length === 10",
            None,
            "a whisker on every bar",
            "#bar-chart",
        )
        top = client.get("/v1/selectors/moving/top", params={"h": 10}).json()
        bands = page.eval_on_selector_all(
            "#bar-chart g.whisker", "(nodes) => nodes.map((n) => n.getAttribute('data-band'))"
        )
        assert bands == [f"{f['band'][0]}-{f['band'][1]}" for f in top["features"]]
        stability = page.locator("#stability").inner_text()
        assert stability.startswith("Stability of the top 10: ")
        assert f"{top['stability']['index']:.2f}" in stability
        assert "Since the baseline (auto, version " in page.locator("#drift-facts").inner_text()
        assert page.locator("#no-events").is_visible()

        # The stream moves: the alert fires once, its event shows with its delivery.
        for seed in range(10):
            push_rows(client, "moving", noisy(AFTER, 400, 100 + seed))
        wait_until(
            page,
            "() => document.querySelector('#alert-events td.delivery')?.textContent"
            " === 'delivered'",
            None,
            "a delivered alert event",
            "#alert-events",
        )
        # Its figures, and under them the features that entered and left.
        (row,) = [texts(page, "#alert-events tbody tr[data-event] td")]
        assert row[0].endswith("-1") and float(row[2]) >= 0.5, row
        (moved,) = texts(page, f'#alert-events tbody tr.moved[data-of="{row[0]}"] td.features')
        assert moved.startswith("entered ") and "left " in moved, moved
        assert HOSTILE in moved or HOSTILE in page.locator("#drift-facts").inner_text()
        assert page.locator("img").count() == 0 and page.evaluate("window.__injected") is None
        assert len(receiver.all()) == 1
        page.screenshot(path=str(artifacts / "dashboard-movement.png"), full_page=True)
        opened.assert_clean()
