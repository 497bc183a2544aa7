"""A stream's selectors side by side in the dashboard: Debian's chromium against a real
``sift serve`` process.

A labelled stream with two ``variance`` selectors (one method, one stream: the same ranking,
agreement 1) and an ``ocfs`` one, which puts first the feature that separates the classes and
the others in variance's order: top 5 of the same features in another order (Jaccard 1, RBO
below 1). The page shows each selector's top h in a column as the server's own
``/top`` has it, the agreement of every pair as ``GET /v1/streams/{name}/rankings`` says, and
follows a push without a reload. Feature names reach the page as text only.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

from tests.support.harness import ServiceProcess
from tests.support.ui import OfflinePage

pytestmark = pytest.mark.slow

HOSTILE = "<img src=x onerror=f()>"
NAMES = ["temperature", "pressure", HOSTILE, "humidity", "light", "noise"]
SCALES = [8.0, 6.0, 5.0, 4.0, 2.0, 1.0]
FOLLOW_MS = 15_000
SELECTORS = {"a-var": "variance", "b-var": "variance", "c-ocfs": "ocfs"}
H = 5


def alternating(scales: list[float], rows: int = 10) -> list[list[float]]:
    return [[s if i % 2 == 0 else -s for s in scales] for i in range(rows)]


def labelled_chunk() -> dict[str, Any]:
    """Class a (rows 0-4) and b (5-9); 'noise' is shifted +3 in a and -3 in b: its variance
    (10) ranks it fifth, its class means first for ocfs ((3.2)^2 against (s/5)^2)."""
    rows = alternating(SCALES)
    for i, row in enumerate(rows):
        row[5] += 3.0 if i < 5 else -3.0
    return {"rows": rows, "labels": ["a" if i < 5 else "b" for i in range(10)]}


def column(page: Page, name: str) -> list[str]:
    return list(
        page.locator(f'#side-by-side .ranking[data-name="{name}"] li .feature').all_text_contents()
    )


def wait_for(page: Page, condition: str, arg: Any, what: str) -> None:
    try:
        page.wait_for_function(condition, arg=arg, timeout=FOLLOW_MS)
    except PlaywrightError as exc:
        shown = page.locator("#stream-detail").inner_text()
        raise AssertionError(f"the page did not show {what}; it shows {shown!r}") from exc


SHOWS_COLUMN = """([name, expected]) => JSON.stringify(Array.from(
    document.querySelectorAll(`#side-by-side .ranking[data-name="${name}"] li .feature`),
    (node) => node.textContent)) === JSON.stringify(expected)"""


def test_a_streams_selectors_side_by_side(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
    artifacts: Path,
) -> None:
    service = live_sift("streams")
    with httpx.Client(base_url=service.url, timeout=30.0) as client:
        created = client.post(
            "/v1/streams",
            json={"name": "sensors", "n_features": 6, "feature_names": NAMES, "labelled": True},
        )
        assert created.status_code == 201, created.text
        for name, method in SELECTORS.items():
            body = {"name": name, "method": method, "stream": "sensors"}
            assert client.post("/v1/selectors", json=body).status_code == 201
        pushed = client.post("/v1/streams/sensors/chunks", json=labelled_chunk())
        assert pushed.status_code == 200 and pushed.json()["status"] == "applied"
        tops = {
            name: [
                f["name"]
                for f in client.get(f"/v1/selectors/{name}/top", params={"h": H}).json()["features"]
            ]
            for name in SELECTORS
        }
        side = client.get("/v1/streams/sensors/rankings", params={"h": H}).json()
    # The construction decides the orders.
    assert tops["a-var"] == tops["b-var"] == [*NAMES[:4], "noise"]
    assert tops["c-ocfs"] == ["noise", *NAMES[:4]]

    opened = offline_page(service.url)
    page = opened.page
    page.add_init_script("window.f = () => { window.__injected = true; };")
    page.goto(f"{service.url}/ui#stream=sensors")
    page.select_option("#h", str(H))
    for name, expected in tops.items():
        wait_for(page, SHOWS_COLUMN, [name, expected], f"{name}'s column {expected}")
    assert page.locator("img").count() == 0 and page.evaluate("window.__injected") is None
    assert page.locator("#stream-title").inner_text() == "Stream sensors"
    row = page.locator('#streams tbody tr[data-name="sensors"] td').all_text_contents()
    assert row[:3] == ["sensors", "labelled rows", "1"], row  # the log follows checkpoints
    # The agreement table: every pair, as the API computes it.
    shown = {
        tuple(cells[:2]): cells
        for cells in (
            row.locator("td").all_text_contents()
            for row in page.locator("#agreement tbody tr").all()
        )
    }
    assert set(shown) == {(p["a"], p["b"]) for p in side["agreement"]}
    for pair in side["agreement"]:
        cells = shown[(pair["a"], pair["b"])]
        assert cells[3:5] == [f"{pair['jaccard']:.2f}", f"{pair['rbo']:.2f}"], cells
    assert shown[("a-var", "b-var")][3:5] == ["1.00", "1.00"]
    assert shown[("a-var", "c-ocfs")][3] == "1.00" and shown[("a-var", "c-ocfs")][4] != "1.00"

    # Another push, where 'noise' varies most: the columns follow without a reload.
    page.evaluate("window.__sameDocument = true")
    with httpx.Client(base_url=service.url, timeout=30.0) as client:
        changed = [[0.0] * 5 + [40.0 if i % 2 == 0 else -40.0] for i in range(10)]
        more = {"rows": changed, "labels": ["a"] * 10}
        assert client.post("/v1/streams/sensors/chunks", json=more).status_code == 200
        top = client.get("/v1/selectors/a-var/top", params={"h": H}).json()
        reranked = [f["name"] for f in top["features"]]
    assert reranked[0] == "noise"
    wait_for(page, SHOWS_COLUMN, ["a-var", reranked], "a-var's new column")
    wait_for(page, SHOWS_COLUMN, ["b-var", reranked], "b-var's new column")
    assert page.evaluate("window.__sameDocument") is True
    page.locator("#stream-detail").screenshot(path=str(artifacts / "stream-dashboard.png"))
    # Choosing a selector from the list still shows it below.
    page.click('#selectors tbody tr[data-name="a-var"]')
    page.wait_for_function("() => location.hash === '#a-var'")
    assert column(page, "c-ocfs"), "the stream stays shown"
    opened.assert_clean()
