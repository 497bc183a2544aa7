"""The dashboard over 1,000 selectors, in chromium against a real ``sift serve``: the list is
searched, filtered and paged by the server (a page of 25, never the whole registry), temporary
selectors are hidden until asked for, and the chosen selector's charts show beside the list.

The 1,000 selectors are created through the app's own ``Lifecycle.create`` on the service's
Redis, side by side (no HTTP, no quota lock): a few seconds instead of a minute of POSTs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from playwright.sync_api import Page

from tests.support.api import make_settings, running_app
from tests.support.harness import ServiceProcess
from tests.support.ui import OfflinePage

pytestmark = pytest.mark.slow

#: How long the page may take to show what the server has (it polls every 2 s).
FOLLOW_MS = 15_000
#: 990 kept selectors (660 variance, 330 fsds) and 10 temporary ones (a grid search's).
KEPT = [f"sel-{i:04d}" for i in range(990)]
TEMPORARY = [f"gs-{i:02d}" for i in range(10)]


async def create_many(redis_url: str) -> float:
    """Create every selector through the app's lifecycle, 64 at a time; the seconds taken."""
    async with running_app(make_settings(redis_url)) as (app, _):
        lifecycle = app.state.runtime.selectors.lifecycle
        gate = asyncio.Semaphore(64)

        async def one(name: str, method: str, temporary: bool) -> None:
            async with gate:
                body = {"name": name, "method": method, "n_features": 12, "temporary": temporary}
                await lifecycle.create(body)

        started = time.perf_counter()
        await asyncio.gather(
            *(one(n, "fsds" if i % 3 == 2 else "variance", False) for i, n in enumerate(KEPT)),
            *(one(n, "variance", True) for n in TEMPORARY),
        )
        return time.perf_counter() - started


def listed(page: Page) -> list[str]:
    names: list[str] = page.locator("#selectors tbody tr[data-name]").evaluate_all(
        "(rows) => rows.map((row) => row.dataset.name)"
    )
    return names


def wait_listed(page: Page, condition: str, arg: Any = None) -> None:
    page.wait_for_function(
        f"""(arg) => {{
            const names = Array.from(document.querySelectorAll('#selectors tbody tr[data-name]'),
                                     (row) => row.dataset.name);
            return {condition};
        }}""",
        arg=arg,
        timeout=FOLLOW_MS,
    )


def test_a_thousand_selectors_searched_filtered_and_paged(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
    artifacts: Path,
) -> None:
    service = live_sift("many")
    assert service.redis_url is not None
    # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
    with ThreadPoolExecutor(1) as thread:
        took = thread.submit(asyncio.run, create_many(service.redis_url)).result()
    print(f"created 1,000 selectors in {took:.1f} s")
    chosen = "sel-0777"
    with httpx.Client(base_url=service.url, timeout=30.0) as client:
        # Enough rows for the resamples to estimate how stable its top 10 of 12 is.
        scales = np.arange(12, 0, -1.0)
        rows = (np.random.default_rng(0).normal(size=(400, 12)) * scales).tolist()
        pushed = client.post(f"/v1/selectors/{chosen}/chunks", json={"rows": rows})
        assert pushed.status_code == 200, pushed.text

    opened = offline_page(service.url)
    page = opened.page
    lists: list[str] = []
    page.on(
        "request",
        lambda request: lists.append(request.url) if "/v1/selectors?" in request.url else None,
    )
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{service.url}/ui")
    # The first page: 25 kept selectors, temporary ones hidden.
    wait_listed(page, "names.length === 25 && names[0] === 'sel-0000'")
    assert listed(page) == KEPT[:25]
    assert page.locator("#selector-page").inner_text() == "Page 1"
    assert page.locator("#selector-prev").is_disabled()
    # Paging: the server's cursor, forwards and back.
    page.click("#selector-next")
    wait_listed(page, "names[0] === 'sel-0025'")
    assert listed(page) == KEPT[25:50]
    assert page.locator("#selector-page").inner_text() == "Page 2"
    page.click("#selector-prev")
    wait_listed(page, "names[0] === 'sel-0000'")
    # Search finds one among a thousand; the method filter keeps its method's only.
    page.fill("#selector-search", "0777")
    wait_listed(page, "names.length === 1 && names[0] === 'sel-0777'")
    page.fill("#selector-search", "")
    page.select_option("#selector-method", "fsds")
    wait_listed(page, "names[0] === 'sel-0002' && names.length === 25")
    assert listed(page) == [n for i, n in enumerate(KEPT) if i % 3 == 2][:25]
    page.select_option("#selector-method", "")
    # Temporary ones show when asked for, marked.
    wait_listed(page, "names[0] === 'sel-0000'")
    page.check("#show-temporary")
    wait_listed(page, "names[0] === 'gs-00'")
    assert listed(page)[:10] == TEMPORARY
    badge = page.locator('#selectors tbody tr[data-name="gs-00"] .badge')
    assert badge.inner_text() == "temporary"
    # Choose one: its charts beside the list, not below it.
    page.fill("#selector-search", "0777")
    wait_listed(page, "names.length === 1")
    page.click(f'#selectors tbody tr[data-name="{chosen}"] a')
    page.wait_for_function(
        "() => document.querySelectorAll('#bar-chart svg .bar, #bar-chart svg rect').length > 0",
        timeout=FOLLOW_MS,
    )
    assert page.locator("#detail-title").inner_text() == chosen
    listing = page.locator("#selectors-panel").bounding_box()
    detail = page.locator("#detail").bounding_box()
    assert listing is not None and detail is not None
    assert detail["x"] >= listing["x"] + listing["width"] - 1, (listing, detail)
    assert detail["y"] < 400, detail  # at the top of the page, beside the list
    # The stability legend explains the index, the interval and the whiskers.
    page.locator("#stability").wait_for(state="visible", timeout=FOLLOW_MS)
    legend = page.locator("#stability-legend").inner_text()
    assert "stability index" in legend and "interval" in legend and "whisker" in legend
    # Never more than a page of 25 at a time.
    assert lists and all("limit=25" in url for url in lists), lists[:3]
    page.screenshot(path=str(artifacts / "dashboard-many.png"), full_page=False)
    opened.assert_clean()
