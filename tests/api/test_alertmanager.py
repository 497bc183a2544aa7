"""An alert of kind ``alertmanager`` against a real Prometheus Alertmanager, whose route then
notifies a test receiver: the crossing fires an alert with Sift's labels and annotations, and
the first version judged below the threshold resolves it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from tests.api.test_alerts_api import AFTER, LOOPBACK, create, push, rows, settle_baseline
from tests.support.alertmanager import alertmanager
from tests.support.api import wait_for
from tests.support.webhooks import Receiver, webhook_receiver


def notifications(receiver: Receiver, status: str) -> list[dict[str, Any]]:
    """The notifications Alertmanager sent with ``status`` (firing, resolved)."""
    return [r.event for r in receiver.all() if r.event.get("status") == status]


async def test_a_crossing_fires_in_alertmanager_and_resolves_when_the_ranking_settles(
    app_factory, tmp_path: Path
):
    rng = np.random.default_rng(11)
    with webhook_receiver() as receiver, alertmanager(tmp_path, receiver.url) as am:
        async with app_factory(alert_private=LOOPBACK, alert_backoff_seconds=0.05) as (_, http):
            await create(http)
            body = {"url": am, "h": 5, "threshold": 0.5, "kind": "alertmanager", "label": "news"}
            created = await http.post("/v1/selectors/s/alerts", json=body)
            assert created.status_code == 201, created.text
            assert created.json()["kind"] == "alertmanager"
            await settle_baseline(http, "s", rng)
            for _ in range(12):
                await push(http, "s", rows(rng, 400, AFTER))
                await asyncio.sleep(0.02)

            async def fired() -> bool:
                return bool(notifications(receiver, "firing"))

            await wait_for(fired, timeout=30)
            (notification,) = notifications(receiver, "firing")[:1]
            (alert,) = notification["alerts"]
            labels = alert["labels"]
            assert labels["alertname"] == "SiftRankingDrift" and labels["selector"] == "s"
            assert labels["alert"] == created.json()["id"] and labels["prefix"]
            assert "moved" in alert["annotations"]["summary"]
            firing_annotations = alert["annotations"]
            entered = set(alert["annotations"]["entered"].split(", "))
            assert entered <= {f"f{i}" for i in range(7, 12)} and entered
            async with httpx.AsyncClient() as client:
                active = (await client.get(f"{am}/api/v2/alerts")).json()
            assert [a["labels"]["selector"] for a in active] == ["s"]
            assert active[0]["status"]["state"] == "active"

            # Settled back: the baseline pinned to now, the next version is judged below.
            assert (await http.post("/v1/selectors/s/baseline")).status_code == 200
            await push(http, "s", rows(rng, 400, AFTER))

            async def resolved() -> bool:
                return bool(notifications(receiver, "resolved"))

            await wait_for(resolved, timeout=30)
            (alert,) = notifications(receiver, "resolved")[0]["alerts"]
            assert alert["labels"]["alert"] == created.json()["id"]
            assert alert["status"] == "resolved"
            events = (await http.get("/v1/selectors/s/alerts/events")).json()["events"]
            assert [e["id"] for e in events] == [
                f"{created.json()['id']}-1-resolved",
                f"{created.json()['id']}-1",
            ]
            assert all(e["delivery"]["status"] == "delivered" for e in events)
            # Exact numbers in the events (machines compare them), rounded in the text.
            fired_event, resolving = events[1], events[0]
            drift = fired_event["drift"]
            assert drift == 1.0 - fired_event["rbo"]
            assert firing_annotations["drift"] == f"{drift:.4f}"
            assert f"drift {drift:.3f} (threshold 0.5)" in firing_annotations["description"]
            assert fired_event["summary"].startswith(
                f"the top 5 of selector s moved: drift {drift:.2f} since the baseline"
            )
            assert resolving["summary"].startswith("the top 5 of selector s settled back: drift")
            assert resolving["summary"].endswith("under the threshold 0.5")
