"""The dashboard's layout at 1,280 and 1,920 px, and its bidi isolation: Debian's chromium
against real ``sift serve`` processes, checked from the DOM (tests/support/ui.py).

Two services, one with 3 selectors of interest and one with those and 297 more (the list shows a
page of 25). In both: a selector with a long name, 12 features with long names, a Hebrew and an
Arabic one and one holding U+202E (RIGHT-TO-LEFT OVERRIDE), fed by a source (reading a real
Redis stream whose key holds U+202E too), over 100 versions (the rank chart's version labels
are 4 characters wide) and an alert event whose features entered and left; a stream with a
source, two attached selectors, one named with the longest name allowed; and an ``fsds``
selector, whose stability index is not scaled to every row seen (a line of its own wording).

At each width the page must not scroll sideways, no table may overflow its container, a name is
whole or cut by design (an ellipsis, the whole name in its tooltip), the charts are drawn at
their pixel width with no two texts overlapping, and the generated text has no slips. The
screenshots are saved in the test's ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import redis
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

from tests.support.api import make_settings, running_app
from tests.support.harness import ServiceProcess, live_service, wait_for
from tests.support.redis import RedisServer
from tests.support.ui import (
    OfflinePage,
    bidi_problems,
    control_in_order,
    generated_text,
    layout_problems,
)
from tests.support.webhooks import webhook_receiver

pytestmark = pytest.mark.slow

RLO = "\u202e"
FSI, PDI = "\u2068", "\u2069"
HEBREW = "\u05e9\u05d9\u05e2\u05d5\u05e8_\u05d2\u05e9\u05dd"
ARABIC = "\u0633\u0631\u0639\u0629 \u0627\u0644\u0631\u064a\u0627\u062d"
#: Short: shown whole; long: cut in the charts, its ellipsis outside the override.
OVERRIDDEN = f"cost{RLO}nimda"
OVERRIDDEN_LONG = f"average{RLO}ylkeew_erutarepmet_muminim"
NAMES = [
    "temperature",
    "relative_humidity_at_two_metres",
    "pressure",
    "wind_speed",
    "wind_direction_degrees_from_north",
    "od280/od315_of_diluted_wines",
    "solar_radiation",
    ARABIC,
    OVERRIDDEN,
    OVERRIDDEN_LONG,
    HEBREW,
    "dew_point",
]
#: Characters of the names the bidi check follows.
MARKS = [RLO, HEBREW[0], ARABIC[0]]
#: Variance is scale**2: the first five lead, then the last five (the alert fires).
BEFORE = [5.0, 4.0, 3.5, 3.0, 2.5] + [1.0] * 7
AFTER = [1.0] * 7 + [12.0, 11.0, 10.0, 9.0, 8.0]
MAIN = "weather-events-north-station-hourly"
MAIN_FEED = "weather-events-north-station-hourly-feed"
LONGEST = ("north-station-line-" * 7)[:128]
STREAM = "station-line"
VERSIONS = 120
WIDTHS = [1280, 1920]
FOLLOW_MS = 15_000


@dataclass
class Scene:
    service: ServiceProcess
    selectors: int


def ok(response: httpx.Response) -> Any:
    assert response.status_code < 300, response.text
    return response.json()


def rows(scales: list[float], count: int, rng: np.random.Generator) -> list[list[float]]:
    values: list[list[float]] = (rng.standard_normal((count, len(scales))) * scales).tolist()
    return values


async def create_others(redis_url: str, count: int) -> None:
    """``count`` more selectors through the app's own lifecycle (no HTTP): a second or two."""
    async with running_app(make_settings(redis_url)) as (app, _):
        lifecycle = app.state.runtime.selectors.lifecycle
        gate = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            async with gate:
                method = "fsds" if i % 3 == 2 else "variance"
                await lifecycle.create(
                    {"name": f"zone-{i:04d}", "method": method, "n_features": 12}
                )

        await asyncio.gather(*(one(i) for i in range(count)))


def furnish(service: ServiceProcess, bus_url: str, prefix: str) -> None:
    """The scene's selectors, stream, sources and alert event (see the module's docstring)."""
    rng = np.random.default_rng(7)
    bus = redis.Redis.from_url(bus_url)
    with webhook_receiver() as receiver, httpx.Client(base_url=service.url, timeout=30) as client:
        body = {"method": "variance", "n_features": 12, "feature_names": NAMES}
        ok(client.post("/v1/selectors", json={"name": MAIN, **body}))
        ok(client.post("/v1/selectors", json={**body, "name": "gusts", "method": "fsds"}))
        ok(
            client.post(
                f"/v1/selectors/{MAIN}/alerts", json={"url": receiver.url, "h": 5, "threshold": 0.5}
            )
        )
        for _ in range(30):
            ok(client.post(f"/v1/selectors/{MAIN}/chunks", json={"rows": rows(BEFORE, 400, rng)}))
            if client.get(f"/v1/selectors/{MAIN}/drift", params={"h": 5}).json()["baseline"]:
                break
        for _ in range(10):
            ok(client.post(f"/v1/selectors/{MAIN}/chunks", json={"rows": rows(AFTER, 400, rng)}))

        def delivered() -> bool:
            events = client.get(f"/v1/selectors/{MAIN}/alerts/events").json()["events"]
            return any(
                (event.get("delivery") or {}).get("status") == "delivered" for event in events
            )

        wait_for(delivered, 20.0, "a delivered alert event")
        version = ok(client.get(f"/v1/selectors/{MAIN}"))["version"]
        for _ in range(VERSIONS - version):
            ok(client.post(f"/v1/selectors/{MAIN}/chunks", json={"rows": rows(AFTER, 20, rng)}))
        for _ in range(3):
            ok(client.post("/v1/selectors/gusts/chunks", json={"rows": rows(BEFORE, 400, rng)}))

        main_key = f"{prefix}weather:{RLO}stneve"
        line_key = f"{prefix}line"
        for i in range(20):
            bus.xadd(main_key, {name: repr(float(i % 5 + j)) for j, name in enumerate(NAMES)})
            bus.xadd(line_key, {name: repr(float(i % 7 * j)) for j, name in enumerate(NAMES)})
        ok(
            client.post(
                "/v1/streams", json={"name": STREAM, "n_features": 12, "feature_names": NAMES}
            )
        )
        for name, method in [("line-variance", "variance"), (LONGEST, "variance")]:
            ok(
                client.post(
                    "/v1/selectors", json={"name": name, "method": method, "stream": STREAM}
                )
            )
        ok(client.post(f"/v1/streams/{STREAM}/chunks", json={"rows": rows(BEFORE, 400, rng)}))
        source = {"kind": "redis-stream", "url": bus_url}
        ok(
            client.post(
                "/v1/sources",
                json={**source, "name": MAIN_FEED, "key": main_key, "into": {"selector": MAIN}},
            )
        )
        ok(
            client.post(
                "/v1/sources",
                json={
                    **source,
                    "name": "station-line-feed",
                    "key": line_key,
                    "into": {"stream": STREAM},
                },
            )
        )

        def caught_up() -> bool:
            read = [
                client.get(f"/v1/sources/{n}").json()["rows"]
                for n in (MAIN_FEED, "station-line-feed")
            ]
            return read == [20, 20]

        wait_for(caught_up, 20.0, "both sources caught up")
    bus.close()


@pytest.fixture(scope="module")
def bus_prefix(redis_server: RedisServer) -> Iterator[str]:
    """The bus (the session's redis-server, not the services' own) and this module's keys."""
    prefix = "ui-layout-"
    yield prefix
    bus = redis.Redis.from_url(redis_server.url)
    for key in bus.scan_iter(match=f"{prefix}*"):
        bus.delete(key)
    bus.close()


@pytest.fixture(scope="module")
def scene(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    redis_server: RedisServer,
    bus_prefix: str,
) -> Iterator[Scene]:
    count: int = request.param
    folder = tmp_path_factory.mktemp(f"layout-{count}")
    env = {
        "SIFT_ALERT_PRIVATE": "127.0.0.0/8",
        "SIFT_ALERT_BACKOFF_SECONDS": "0.05",
        # The bus is the session's redis-server on loopback: opted in, as an operator would.
        "SIFT_SOURCE_PRIVATE": "127.0.0.1",
    }
    with live_service(folder, f"layout-{count}", env) as service:
        assert service.redis_url is not None
        if count > 3:
            # In a thread of its own: Playwright's sync API may run a loop in this one.
            with ThreadPoolExecutor(1) as apart:
                apart.submit(asyncio.run, create_others(service.redis_url, count - 3)).result()
        furnish(service, redis_server.url, f"{bus_prefix}{count}-")
        yield Scene(service, count)


def wait_until(page: Page, condition: str, what: str) -> None:
    try:
        page.wait_for_function(condition, timeout=FOLLOW_MS)
    except PlaywrightError as exc:
        raise AssertionError(f"the page did not show {what}") from exc


#: Everything the checks look at: the chosen selector's charts, sources and alert event; the
#: list's row of sources; the stream's columns, sources and agreement.
SHOWN = f"""() => {{
    const q = (s) => document.querySelector(s);
    return q('#bar-chart svg') && q('#rank-chart svg')
        && Number(q('#rank-chart svg').dataset.versions) === 20
        && q('#selectors tr.fed[data-of="{MAIN}"] .source')
        && q('#detail-sources li .source-facts')?.textContent.includes('20 rows appended')
        && q('#alert-events td.features')
        && q('#side-by-side .ranking[data-name="{LONGEST}"] li')
        && q('#side-by-side .ranking .sources .source')
        && q('#agreement tbody tr');
}}"""


def drawn_at(width: int) -> str:
    """The charts redrawn for a window ``width`` px wide (their svg as wide as their place)."""
    return f"""() => window.innerWidth === {width}
        && Array.from(document.querySelectorAll('.chart svg')).every((svg) =>
            svg.width.baseVal.value === Math.max(320, Math.floor(svg.parentElement.clientWidth)))"""


#: Slips of generated text: doubled or unbalanced brackets, a count of one in the plural,
#: doubled punctuation, values that were never filled in.
SLIPS = [
    (re.compile(r"\)\)|\(\("), "a doubled parenthesis"),
    (
        re.compile(r"(?<![\d,.])1 (rows|features|chunks|entries|resamples|versions|samples)\b"),
        "1 in the plural",
    ),
    (re.compile(r" [,;:.]|,,|;;|·\s*·"), "doubled or loose punctuation"),
    (re.compile(r"\b(undefined|NaN|null|\[object)\b"), "a value never filled in"),
]


def slips(texts: list[str]) -> list[str]:
    found = []
    for text in texts:
        for pattern, what in SLIPS:
            for match in pattern.finditer(text):
                found.append(f"{what}: {text[max(0, match.start() - 40) : match.end() + 40]!r}")
        for line in text.splitlines():
            if line.count("(") != line.count(")"):
                found.append(f"unbalanced parentheses: {line!r}")
    return found


def check_layout(page: Page, width: int, shots: Path, label: str) -> dict[str, Any]:
    found = layout_problems(page)
    shot = shots / f"dashboard-{label}-{width}.png"
    page.screenshot(path=str(shot), full_page=True)
    print(f"screenshot: {shot}")
    assert found["problems"] == [], f"at {width} px ({shot}): {found['problems']}"
    assert found["charts"] == 2, found
    return found


@pytest.mark.parametrize("scene", [3, 300], ids=["3-selectors", "300-selectors"], indirect=True)
def test_the_layout_fits_at_1280_and_1920(
    scene: Scene,
    offline_page: Callable[[str], OfflinePage],
    tmp_path: Path,
) -> None:
    service = scene.service
    opened = offline_page(service.url)
    page = opened.page
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})
    page.goto(f"{service.url}/ui#{MAIN}")
    page.locator(f'#streams tbody tr[data-name="{STREAM}"]').click()
    page.wait_for_function("() => location.hash === '#stream=station-line'")
    wait_until(page, SHOWN, "the selector, its sources and event, and the stream")
    label = f"{scene.selectors}-selectors"
    newest = httpx.get(f"{service.url}/v1/selectors/{MAIN}").json()["version"]
    assert newest > 100  # 4-character version labels
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        wait_until(page, drawn_at(width), f"the charts drawn again at {width} px")
        found = check_layout(page, width, tmp_path, label)
        # The longest name is cut by design, everywhere it is in a table.
        assert found["cut"] >= 2, found
        # Names that fit are whole: the list's names and the sources' names.
        for name in [MAIN, "gusts", "line-variance"]:
            link = page.locator(f'#selectors tbody tr[data-name="{name}"] .name-text')
            if width >= 1920 or len(name) < 20:
                assert link.evaluate("(el) => el.scrollWidth <= el.clientWidth"), (name, width)
        for source in [MAIN_FEED, "station-line-feed"]:
            shown = page.locator(f'#selectors tr.fed .source[data-source="{source}"] .source-name')
            assert shown.first.inner_text() == source
        # The version labels under the rank chart: the newest, then every few, none touching.
        ticks = page.locator("#rank-chart text.version-tick").all_text_contents()
        assert ticks[-1] == f"v{newest}" and len(ticks) >= 4, ticks
        if scene.selectors > 3:
            assert page.locator("#selectors tbody tr[data-name]").count() == 25
            assert page.locator("#selector-next").is_enabled()
        assert slips(generated_text(page)) == []
    # The check sees two labels that touch (it can fail): a copy of the newest, 3 px aside.
    page.evaluate("""() => {
        const tick = Array.from(document.querySelectorAll('#rank-chart text.version-tick')).pop();
        const copy = tick.cloneNode(true);
        copy.setAttribute('x', Number(tick.getAttribute('x')) - 3);
        copy.id = 'overlap-control';
        tick.after(copy);
    }""")
    touching = [p for p in layout_problems(page)["problems"] if "overlap-control" in p]
    assert touching and "overlap" in touching[0], touching
    page.evaluate("() => document.getElementById('overlap-control').remove()")
    # The fsds selector: its stability line says the index is one resample's.
    page.locator('#selectors tbody tr[data-name="gusts"] a').click()
    wait_until(
        page,
        "() => document.querySelector('#stability')?.textContent.includes(\"one resample's rows\")",
        "the stability of gusts",
    )
    stability = page.locator("#stability").inner_text()
    assert re.fullmatch(
        r"Stability of the top 10: -?\d\.\d\d \(95% interval -?\d\.\d\d to -?\d\.\d\d over 4 "
        r"resamples; the index of one resample's rows, not of all of them\) · whiskers: each "
        r"feature's ranks over the resamples",
        stability,
    ), stability
    assert slips(generated_text(page)) == []
    check_layout(page, WIDTHS[-1], tmp_path, f"{label}-fsds")
    assert page.locator("#problem").is_hidden()
    opened.assert_clean()


@pytest.mark.parametrize("scene", [3], ids=["3-selectors"], indirect=True)
def test_user_given_names_are_bidi_isolated(
    scene: Scene,
    offline_page: Callable[[str], OfflinePage],
) -> None:
    service = scene.service
    # Selector, stream, source and view names are letters, digits and '._-' only: the API
    # refuses an override in them, so only feature names and bus keys can hold one.
    with httpx.Client(base_url=service.url, timeout=30) as client:
        refused = client.post("/v1/selectors", json={"name": f"a{RLO}b", "method": "variance"})
        assert refused.status_code == 422, refused.text
    opened = offline_page(service.url)
    page = opened.page
    page.goto(f"{service.url}/ui#{MAIN}")
    page.locator(f'#streams tbody tr[data-name="{STREAM}"]').click()
    wait_until(page, SHOWN, "the selector, its sources and event, and the stream")

    # The check sees a name that reorders its neighbours (it can fail).
    assert control_in_order(page, OVERRIDDEN) is False
    assert control_in_order(page, "plain") is True

    found = bidi_problems(page, MARKS)
    assert found["problems"] == [], found["problems"]
    # Every place that shows them: the bars, the rank chart, the drift line, the alert event,
    # the stream's columns, the source's bus key.
    places = {
        "#bar-chart text.label tspan.name": 4,
        "#rank-chart text.label tspan.name": 1,
        "#drift-facts bdi": 1,
        "#alert-events td.features bdi": 1,
        "#side-by-side .feature bdi": 1,
        "#detail-sources .source-facts bdi": 1,
    }
    for where, least in places.items():
        names = page.locator(where).all_text_contents()
        marked = [name for name in names if any(mark in name for mark in MARKS)]
        assert len(marked) >= least, (where, names)
    assert found["isolates"] >= sum(places.values())
    # The long overridden name is cut in the bar chart: its ellipsis outside the override.
    long_label = page.locator("#bar-chart text.label", has=page.locator("tspan.cut"))
    assert any(RLO in text for text in long_label.all_text_contents())
    # Tooltips are plain text: a name inside other words sits between FSI and PDI.
    for text in generated_text(page)[1:]:
        for name in (n for n in NAMES if any(mark in n for mark in MARKS)):
            if name in text and text != name:
                assert f"{FSI}{name}{PDI}" in text, text
    titles = page.locator("#bar-chart g.bar > title").all_text_contents()
    assert any(f"{FSI}{OVERRIDDEN}{PDI} (index" in title for title in titles), titles
    opened.assert_clean()
