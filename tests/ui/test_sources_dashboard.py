"""Sources beside the selectors they feed, in the dashboard: Debian's chromium against a real
``sift serve`` process, reading a real Redis stream (the session's redis-server is the bus).

Three sources: ``sensor-feed`` reads a stream (whose key is markup: it reaches the page as text
only) into the selector ``sensors``; ``broken-feed`` reads a closed port into ``lonely``, so it
retries and says why; ``stream-feed`` reads into the stream ``line``, which feeds the selector
attached to it. The page shows each one's name, state, lag and rows/s in the selector list and
in the shown selector's view (the error too, where it has one), follows what a source appends
without a reload, shows a stream's sources under its selectors' columns, and shows no sources
(and no problem) when the key may not read them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, Route

from tests.support.harness import ServiceProcess, wait_for
from tests.support.kafka import KafkaBroker, create_topic, produce
from tests.support.redis import RedisServer, free_port
from tests.support.ui import OfflinePage

pytestmark = pytest.mark.slow

HOSTILE = "<img src=x onerror=f()>"
NAMES = ["alpha", "beta", "gamma", "delta"]
FOLLOW_MS = 15_000
ENTRIES = 50
#: Where the list cuts an error (ERROR_CHARS in dashboard.js; the tooltip has it whole).
ERROR_CHARS = 60


@pytest.fixture
def bus(redis_server: RedisServer) -> Iterator[tuple[redis.Redis, str]]:
    """The bus (the session's redis-server) and a prefix for this test's keys, deleted after."""
    client = redis.Redis.from_url(redis_server.url)
    prefix = f"ui-sources-{secrets.token_hex(4)}"
    try:
        yield client, prefix
    finally:
        for key in client.scan_iter(match=f"{prefix}*"):
            client.delete(key)
        client.close()


def write(bus: redis.Redis, key: str, start: int, count: int) -> None:
    pipe = bus.pipeline(transaction=False)
    for i in range(start, start + count):
        pipe.xadd(key, {name: repr(float((i % 7) * (j + 1))) for j, name in enumerate(NAMES)})
    pipe.execute()


def created(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, json=body)
    assert response.status_code == 201, response.text
    answer: dict[str, Any] = response.json()
    return answer


def source(client: httpx.Client, name: str) -> dict[str, Any]:
    answer: dict[str, Any] = client.get(f"/v1/sources/{name}").json()
    return answer


def shown(page: Page, where: str) -> str:
    locator = page.locator(where)
    return locator.first.inner_text() if locator.count() else ""


def wait_for_text(page: Page, where: str, expected: str, what: str) -> None:
    """Wait until the first element at ``where`` holds ``expected`` (as text)."""
    try:
        page.wait_for_function(
            "([where, expected]) => (document.querySelector(where)?.textContent ?? '')"
            ".includes(expected)",
            arg=[where, expected],
            timeout=FOLLOW_MS,
        )
    except PlaywrightError as exc:
        raise AssertionError(
            f"the page did not show {what} ({expected!r} in {where}); it shows "
            f"{shown(page, where)!r}; the selectors: {shown(page, '#selectors')!r}"
        ) from exc


def in_list(name: str, source_name: str) -> str:
    return (
        f'#selectors tbody tr.fed[data-of="{name}"] td.sources .source[data-source="{source_name}"]'
    )


def test_sources_show_beside_the_selectors_they_feed(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
    redis_server: RedisServer,
    bus: tuple[redis.Redis, str],
    artifacts: Path,
) -> None:
    bus_client, prefix = bus
    hostile_key = f"{prefix}{HOSTILE}"
    line_key = f"{prefix}-line"
    service = live_sift("sources", SIFT_SOURCE_PRIVATE="127.0.0.0/8")
    with httpx.Client(base_url=service.url, timeout=30.0) as client:
        created(
            client,
            "/v1/selectors",
            {"name": "sensors", "method": "variance", "n_features": 4, "feature_names": NAMES},
        )
        created(client, "/v1/selectors", {"name": "lonely", "method": "variance", "n_features": 4})
        created(client, "/v1/streams", {"name": "line", "n_features": 4, "feature_names": NAMES})
        created(
            client, "/v1/selectors", {"name": "on-line", "method": "variance", "stream": "line"}
        )
        write(bus_client, hostile_key, 0, ENTRIES)
        write(bus_client, line_key, 0, 10)
        into_sensors = {"selector": "sensors"}
        feed = {"name": "sensor-feed", "kind": "redis-stream", "url": redis_server.url}
        created(client, "/v1/sources", {**feed, "key": hostile_key, "into": into_sensors})
        closed = f"redis://127.0.0.1:{free_port()}"
        broken = {"name": "broken-feed", "kind": "redis-stream", "url": closed, "key": "k"}
        created(client, "/v1/sources", {**broken, "into": {"selector": "lonely"}})
        into_line = {"stream": "line"}
        created(
            client,
            "/v1/sources",
            {**feed, "name": "stream-feed", "key": line_key, "into": into_line},
        )

        # The API's own account first: caught up, and retrying with a reason.
        def caught_up(name: str, rows: int) -> bool:
            described = source(client, name)
            return bool(described["rows"] == rows and described["lag"] == 0)

        wait_for(lambda: caught_up("sensor-feed", ENTRIES), 20.0, "sensor-feed caught up")
        wait_for(lambda: caught_up("stream-feed", 10), 20.0, "stream-feed caught up")

        def retried() -> dict[str, Any] | None:
            described = source(client, "broken-feed")
            return described if described["state"] == "retrying" else None

        error = str(wait_for(retried, 20.0, "broken-feed retrying")["last_error"])
        assert error
        listed = client.get("/v1/selectors").json()["selectors"]
        assert {s["name"]: s.get("stream") for s in listed}["on-line"] == "line"

    opened = offline_page(service.url)
    page = opened.page
    page.add_init_script("window.f = () => { window.__injected = true; };")
    page.goto(f"{service.url}/ui#sensors")

    # In the list, under the selector: name, state, lag and rows/s.
    wait_for_text(page, in_list("sensors", "sensor-feed"), "sensor-feed · running · lag 0", "it")
    cell = page.locator(in_list("sensors", "sensor-feed"))
    assert cell.locator(".source-name").inner_text() == "sensor-feed"
    assert cell.locator(".source-state").inner_text() == "running"
    assert cell.locator(".source-lag").inner_text() == "lag 0"
    assert cell.locator(".source-rate").inner_text().endswith(" rows/s")
    assert cell.locator(".source-error").count() == 0
    # The row of sources follows its selector's row, across every column.
    assert (
        page.locator('#selectors tbody tr[data-name="sensors"] + tr.fed td[colspan]').count() == 1
    )
    # Each selector shows the sources that feed it, and no other.
    for name, feeding in {"sensors": "sensor-feed", "lonely": "broken-feed"}.items():
        names = page.locator(f'#selectors tbody tr.fed[data-of="{name}"] td.sources .source-name')
        assert names.all_text_contents() == [feeding], name

    # In the shown selector's view, with what it read (the key is shown as text, not markup).
    in_detail = '#detail-sources li[data-source="sensor-feed"]'
    wait_for_text(page, in_detail, f"{ENTRIES} rows appended", "the rows appended")
    detail = page.locator(in_detail).inner_text()
    assert "sensor-feed · running · lag 0" in detail
    assert f"redis-stream {hostile_key} at {redis_server.url}" in detail
    assert page.locator("img").count() == 0 and page.evaluate("window.__injected") is None

    # It follows what the source appends, without a reload.
    page.evaluate("window.__sameDocument = true")
    write(bus_client, hostile_key, ENTRIES, 20)
    wait_for_text(page, in_detail, f"{ENTRIES + 20} rows appended", "the new rows appended")
    wait_for_text(page, in_list("sensors", "sensor-feed"), "lag 0", "the lag caught up")
    assert page.evaluate("window.__sameDocument") is True

    # A source that retries says why, beside its selector (cut) and in its view (whole).
    broken_cell = in_list("lonely", "broken-feed")
    wait_for_text(page, broken_cell, "broken-feed · retrying", "the retrying source")
    # The reason, whole in the tooltip (its retry delay grows between polls: compared before).
    reason = error.split("; retrying in")[0]
    title = page.locator(f"{broken_cell} .source-error").get_attribute("title") or ""
    assert title.split("; retrying in")[0] == reason, (title, error)
    cut = page.locator(f"{broken_cell} .source-error").inner_text()
    assert cut == title if len(title) <= ERROR_CHARS else cut == title[: ERROR_CHARS - 1] + "…"
    page.click('#selectors tbody tr[data-name="lonely"]')
    page.wait_for_function("() => location.hash === '#lonely'")
    broken_detail = '#detail-sources li[data-source="broken-feed"] .source-error'
    page.locator(broken_detail).wait_for(timeout=FOLLOW_MS)
    shown_error = page.locator(broken_detail).inner_text()
    assert shown_error.split("; retrying in")[0] == reason, (shown_error, error)

    # A stream's source feeds its attached selectors: beside them, and under their columns.
    wait_for_text(page, in_list("on-line", "stream-feed"), "stream-feed · running · lag 0", "it")
    row = page.locator('#streams tbody tr.fed[data-of="line"] td.sources').inner_text()
    assert "stream-feed" in row
    page.screenshot(path=str(artifacts / "dashboard-sources.png"), full_page=True)
    page.click('#streams tbody tr[data-name="line"]')
    column = (
        '#side-by-side .ranking[data-name="on-line"] .sources .source[data-source="stream-feed"]'
    )
    wait_for_text(page, column, "stream-feed · running · lag 0", "the stream's source")
    page.locator("#stream-detail").screenshot(path=str(artifacts / "stream-sources.png"))
    page.click('#selectors tbody tr[data-name="on-line"]')
    wait_for_text(
        page, '#detail-sources li[data-source="stream-feed"]', "through stream line", "it"
    )
    assert page.locator("#problem").is_hidden()
    opened.assert_clean()


@pytest.mark.parametrize("status", [403, 404])
def test_no_sources_when_the_key_may_not_read_them(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
    status: int,
) -> None:
    service = live_sift(f"no-sources-{status}")
    with httpx.Client(base_url=service.url, timeout=30.0) as client:
        created(client, "/v1/selectors", {"name": "plain", "method": "variance", "n_features": 2})
    opened = offline_page(service.url)
    page = opened.page
    refused: list[str] = []

    def refuse(route: Route) -> None:
        refused.append(route.request.url)
        problem = {"title": "Forbidden" if status == 403 else "Not Found", "status": status}
        route.fulfill(status=status, json=problem, content_type="application/problem+json")

    page.route("**/v1/sources*", refuse)
    page.goto(f"{service.url}/ui")
    page.locator('#selectors tbody tr[data-name="plain"]').wait_for(timeout=FOLLOW_MS)
    page.wait_for_function(
        "() => document.querySelector('#status').textContent.startsWith('Live')",
        timeout=FOLLOW_MS,
    )
    assert refused, "the page did not ask for the sources"
    assert page.locator(".source").count() == 0
    assert page.locator("#selectors tbody tr.fed").count() == 0
    assert page.locator("#detail-sources").is_hidden()
    assert page.locator("#problem").is_hidden()
    opened.assert_clean()


def test_a_kafka_source_shows_its_topic_and_each_partitions_lag(
    live_sift: Callable[..., ServiceProcess],
    offline_page: Callable[[str], OfflinePage],
    kafka_broker: KafkaBroker,
) -> None:
    """A Kafka source's view names its topic and the lag of each of its partitions."""
    topic = f"ui-{secrets.token_hex(4)}"
    rows = [{name: float(i * (j + 1)) for j, name in enumerate(NAMES)} for i in range(30)]

    async def fill() -> None:
        await create_topic(kafka_broker.bootstrap, topic, 3)
        await produce(kafka_broker.bootstrap, topic, rows, lambda i: i % 3)

    # Playwright's sync API runs an event loop in this thread: the producer runs in another.
    with concurrent.futures.ThreadPoolExecutor(1) as apart:
        apart.submit(asyncio.run, fill()).result()
    service = live_sift("kafka-ui", SIFT_SOURCE_PRIVATE="127.0.0.0/8")
    with httpx.Client(base_url=service.url, timeout=30.0) as client:
        created(
            client,
            "/v1/selectors",
            {"name": "orders", "method": "variance", "n_features": 4, "feature_names": NAMES},
        )
        body = {"name": "orders-feed", "kind": "kafka", "bootstrap": kafka_broker.bootstrap}
        created(client, "/v1/sources", {**body, "topic": topic, "into": {"selector": "orders"}})
    opened = offline_page(service.url)
    page = opened.page
    page.goto(f"{service.url}/ui#orders")
    in_detail = '#detail-sources li[data-source="orders-feed"]'
    wait_for_text(page, in_detail, "30 rows appended", "the rows appended")
    wait_for_text(page, in_detail, "lag by partition 0: 0, 1: 0, 2: 0", "each partition's lag")
    assert (
        f"kafka topic {topic} at kafka://{kafka_broker.bootstrap}"
        in page.locator(in_detail).inner_text()
    )
    opened.assert_clean()
