"""Alerts: webhooks called when a committed version's drift since the baseline crosses a
threshold (raised by ``service.monitoring.monitor``, delivered by
``service.monitoring.webhooks``); created, listed and deleted here, with the events they
raised and how each delivery went.

An alert's secret (the Standard Webhooks key that signs its deliveries,
``service.monitoring.signing``) is drawn here, returned once in the creation's answer (or a
rotation's) and kept in Redis to sign with: unlike an API key it cannot be stored as a hash.
Listings never show it. A rotation draws a new secret and keeps the old one signing beside it
for ``ROTATION_OVERLAP_SECONDS``.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
from typing import Any, Literal

from service.algorithms import get_method
from service.algorithms.base import EstimatesStability, offers
from service.algorithms.drift import STABLE_H, judged_h
from service.config import Settings
from service.errors import Conflict, InvalidInput, SelectorMismatch
from service.monitoring.destinations import parse_destination
from service.monitoring.monitor import Monitor, estimates_stability
from service.monitoring.signing import new_secret
from service.selectors.drift import Drift
from service.selectors.results import (
    AlertCreated,
    AlertEventList,
    AlertEventOut,
    AlertList,
    AlertOut,
    AlertSecret,
    Redelivery,
)
from service.store.monitoring_records import Alert, AlertState
from service.store.parts.monitoring import EVENTS_KEPT, no_alert
from service.store.parts.monitoring import Monitoring as MonitoringRecords
from service.store.records import SelectorMeta

#: Most alerts one selector may have.
MAX_ALERTS = 20
DeliveryStatus = Literal["pending", "delivered", "failed"]
#: Events ``GET .../alerts/events`` shows unless asked otherwise.
DEFAULT_EVENTS = 20
#: How long a rotated secret keeps signing beside the new one.
ROTATION_OVERLAP_SECONDS = 24 * 3600
#: Rotations of one alert racing each other: attempts before giving up (Conflict).
ROTATION_ATTEMPTS = 5


class Alerts:
    def __init__(
        self, drift: Drift, records: MonitoringRecords, monitor: Monitor, settings: Settings
    ) -> None:
        self.drift = drift
        #: The store's baselines, alerts and deliveries.
        self.records = records
        self.monitor = monitor
        self.settings = settings

    async def create(
        self,
        name: str,
        url: str,
        h: int | None,
        threshold: float,
        min_stability: float | None,
        label: str,
        kind: str = "webhook",
    ) -> AlertCreated:
        """A new alert on ``name`` (of the top ``h``: None, the deepest it can judge up to
        10); its secret is in this answer only. Refused when it could never fire
        (``judgeable``)."""
        meta, _ = await self.drift.monitored(name)
        h = judgeable(meta, h, min_stability, self.settings.history_top)
        alert = Alert(
            id=secrets.token_hex(8),
            url=self.monitor.destinations.check(parse_destination(url)).url,
            h=h,
            threshold=threshold,
            min_stability=min_stability,
            label=label,
            created_at=time.time(),
            secret=new_secret(),
            kind=kind,
        )
        await self.records.create_alert(name, alert, MAX_ALERTS)
        self.monitor.changed(name)
        return AlertCreated(**_shown(alert, None), secret=alert.secret)

    async def all(self, name: str) -> AlertList:
        await self.drift.monitored(name)
        alerts = await self.records.alerts(name)
        return AlertList(
            name=name, alerts=[AlertOut(**_shown(alert, state)) for alert, state in alerts]
        )

    async def rotate_secret(self, name: str, alert_id: str) -> AlertSecret:
        """A new secret for the alert; the current one signs beside it for
        ``ROTATION_OVERLAP_SECONDS`` (a secret rotated before that is dropped at once)."""
        await self.drift.monitored(name)
        for _ in range(ROTATION_ATTEMPTS):
            read = await self.records.alert(name, alert_id)
            until = time.time() + ROTATION_OVERLAP_SECONDS
            rotated = dataclasses.replace(
                read, secret=new_secret(), previous_secret=read.secret, previous_until=until
            )
            if await self.records.replace_alert(name, read, rotated):
                self.monitor.changed(name)
                return AlertSecret(id=alert_id, secret=rotated.secret, previous_valid_until=until)
        raise Conflict(
            f"alert '{alert_id}' of selector '{name}' is being rotated by someone else; "
            "read its secret again later"
        )

    async def delete(self, name: str, alert_id: str) -> None:
        await self.drift.monitored(name)
        await self.records.delete_alert(name, alert_id)
        self.monitor.changed(name)

    async def events(
        self, name: str, limit: int | None, status: DeliveryStatus | None = None
    ) -> AlertEventList:
        """The newest events (one per crossing), newest first, with their delivery; with
        ``status``, only those whose delivery has it (of the events kept)."""
        await self.drift.monitored(name)
        wanted = DEFAULT_EVENTS if limit is None else limit
        events = await self.records.alert_events(name, EVENTS_KEPT if status else wanted)
        shown = [
            AlertEventOut.model_validate({**event, "delivery": delivery})
            for event, delivery in events
            if status is None or (delivery is not None and delivery.get("status") == status)
        ]
        return AlertEventList(name=name, events=shown[:wanted])

    async def redeliver(self, name: str, event_id: str) -> Redelivery:
        """Put a kept event back in the outbox, due now, with its attempts counted afresh."""
        await self.drift.monitored(name)
        status = {"status": "pending", "attempts": 0, "updated_at": time.time()}
        queued = await self.records.redeliver_event(name, event_id, status)
        if queued:
            await self.monitor.outbox.queued(name)
        return Redelivery(id=event_id, queued=queued)

    async def rearm(self, name: str, alert_id: str) -> AlertOut:
        """Make the alert's next version over its threshold a crossing again (an alert left
        firing by an event its receiver never got)."""
        await self.drift.monitored(name)
        await self.records.rearm_alert(name, alert_id)
        self.monitor.changed(name)
        for alert, state in await self.records.alerts(name):
            if alert.id == alert_id:
                return AlertOut(**_shown(alert, state))
        raise no_alert(name, alert_id)


def judgeable(meta: SelectorMeta, h: int | None, min_stability: float | None, top: int) -> int:
    """The h of a new alert on ``meta`` (None: ``STABLE_H``, fitted to the selector), or
    SelectorMismatch saying why it could never fire: a top deeper than the selector's features
    less one (``drift.judged_h``: the baseline is judged there, and the top of every feature
    has no stability), a selector of one feature (its ranking cannot move), or a
    ``min_stability`` on a selector without a stability estimate. InvalidInput beyond ``top``
    (``SIFT_HISTORY_TOP``): the history keeps no more."""
    features = meta.ranked_features
    name = meta.name
    if features is not None and features < 2:
        raise SelectorMismatch(
            f"selector '{name}' ranks {features} feature: its ranking cannot move, so an alert "
            "on it could never fire"
        )
    if h is None:
        h = min(judged_h(STABLE_H, features), top)
    if not 1 <= h <= top:
        raise InvalidInput(
            f"h must be between 1 and {top}, the features each version keeps "
            f"(SIFT_HISTORY_TOP); got {h}"
        )
    if features is not None and h > features - 1:
        ranks = f"{features} features" + (" in its widest view" if meta.views else "")
        deepest = features - 1
        raise SelectorMismatch(
            f"selector '{name}' ranks {ranks}, so an alert judges at most its top {deepest}: "
            f"that already orders all {features}, and a top of all {features} has no "
            "stability (every resample selects them all), so no baseline could be judged at "
            f"h={h}; ask for h between 1 and {deepest}, or leave h out ({min(STABLE_H, deepest)})"
        )
    if min_stability is not None and not estimates_stability(meta):
        raise SelectorMismatch(
            f"selector '{name}' estimates no stability ({_why_unestimated(meta)}), so an alert "
            f"with min_stability={min_stability:g} could never fire: leave min_stability out"
        )
    return h


def _why_unestimated(meta: SelectorMeta) -> str:
    method = get_method(meta.method)
    if not offers(method, EstimatesStability):
        return f"{meta.method} keeps no resamples"
    return "it was created with resamples: 0"


def _shown(alert: Alert, state: AlertState | None) -> dict[str, Any]:
    return {
        **alert.public(),
        "firing": bool(state and state.firing),
        "crossings": 0 if state is None else state.crossings,
        "judged_version": None if state is None else state.version,
    }
