"""Alerts: webhooks called when a committed version's drift since the baseline crosses a
threshold (raised by ``service.monitoring.monitor``, delivered by
``service.monitoring.webhooks``); created, listed and deleted here, with the events they
raised and how each delivery went.

An alert's secret (the HMAC key that signs its deliveries) is drawn here, returned once in the
creation's answer and kept in Redis to sign with: unlike an API key it cannot be stored as a
hash. Listings never show it.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from service.config import Settings
from service.errors import Inconsistent
from service.monitoring.monitor import Monitor
from service.monitoring.webhooks import allowed_hosts, check_url
from service.selectors.drift import Drift
from service.selectors.results import (
    AlertCreated,
    AlertEventList,
    AlertEventOut,
    AlertList,
    AlertOut,
)
from service.store.records import Alert, AlertState

#: Most alerts one selector may have.
MAX_ALERTS = 20
#: Events ``GET .../alerts/events`` shows unless asked otherwise.
DEFAULT_EVENTS = 20


class Alerts:
    def __init__(self, drift: Drift, monitor: Monitor, settings: Settings) -> None:
        self.drift = drift
        self.monitor = monitor
        self.settings = settings
        self.store = drift.reader.store

    async def create(
        self,
        name: str,
        url: str,
        h: int,
        threshold: float,
        min_stability: float | None,
        label: str,
    ) -> AlertCreated:
        """A new alert on ``name``; its secret is in this answer only."""
        await self.drift.monitored(name)
        if not 1 <= h <= self.settings.history_top:
            raise Inconsistent(
                f"h must be between 1 and {self.settings.history_top}, the features each version "
                f"keeps (SIFT_HISTORY_TOP); got {h}"
            )
        alert = Alert(
            id=secrets.token_hex(8),
            url=check_url(url, allowed_hosts(self.settings.alert_hosts)),
            h=h,
            threshold=threshold,
            min_stability=min_stability,
            label=label,
            created_at=time.time(),
            secret=secrets.token_hex(32),
        )
        await self.store.create_alert(name, alert, MAX_ALERTS)
        self.monitor.changed(name)
        return AlertCreated(**_shown(alert, None), secret=alert.secret)

    async def all(self, name: str) -> AlertList:
        await self.drift.monitored(name)
        alerts = await self.store.alerts(name)
        return AlertList(
            name=name, alerts=[AlertOut(**_shown(alert, state)) for alert, state in alerts]
        )

    async def delete(self, name: str, alert_id: str) -> None:
        await self.drift.monitored(name)
        await self.store.delete_alert(name, alert_id)
        self.monitor.changed(name)

    async def events(self, name: str, limit: int | None) -> AlertEventList:
        """The newest events (one per crossing), newest first, with their delivery."""
        await self.drift.monitored(name)
        events = await self.store.alert_events(name, DEFAULT_EVENTS if limit is None else limit)
        return AlertEventList(
            name=name,
            events=[
                AlertEventOut.model_validate({**event, "delivery": delivery})
                for event, delivery in events
            ],
        )


def _shown(alert: Alert, state: AlertState | None) -> dict[str, Any]:
    return {
        **alert.public(),
        "firing": bool(state and state.firing),
        "crossings": 0 if state is None else state.crossings,
        "judged_version": None if state is None else state.version,
    }
