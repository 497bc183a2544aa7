"""The monitoring room of the store: each selector's baseline (the version drift is measured
against), its alerts, their judgement of the last version, and the events they raised.

Every key carries the selector's hash tag (one slot) and is deleted with the selector. What
must be atomic is a script: the automatic baseline is set once per incarnation
(``set_baseline.lua``), and a crossing is claimed by exactly one caller, whichever replica asks
first (``claim_crossing.lua``).
"""

from __future__ import annotations

import json
from typing import Any

from service.errors import CodecError, Conflict, NotFound
from service.store.core import StoreCore, not_found
from service.store.records import Alert, AlertState, Baseline, as_text
from service.store.redis_errors import map_redis_errors

#: Events kept per selector (newest first), with their delivery status.
EVENTS_KEPT = 100


class Monitoring(StoreCore):
    """Baselines, alerts and alert events."""

    # -- baseline ------------------------------------------------------------------------------

    @map_redis_errors
    async def baseline(self, name: str) -> Baseline | None:
        raw = await self.redis.get(self.keys(name).baseline)
        return None if raw is None else Baseline.from_json(raw)

    @map_redis_errors
    async def set_baseline(self, name: str, baseline: Baseline, pin: bool) -> bool:
        """Make ``baseline`` the selector's (``pin``), or only if it has none (automatic);
        whether it was written (never into another incarnation's keys)."""
        k = self.keys(name)
        reply = await self._run(
            "set_baseline",
            [k.head, k.baseline],
            [
                baseline.to_json(),
                baseline.entry.version,
                baseline.incarnation,
                "pin" if pin else "auto",
            ],
        )
        return bool(reply)

    @map_redis_errors
    async def forget_baseline(self, name: str) -> bool:
        """Drop the baseline (the next stable version becomes the baseline again)."""
        return bool(await self.redis.delete(self.keys(name).baseline))

    # -- alerts --------------------------------------------------------------------------------

    @map_redis_errors
    async def watched(self, name: str) -> tuple[Baseline | None, list[Alert]]:
        """The baseline and the alerts, in one round trip (what a monitor reads per commit)."""
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(k.baseline)
        pipe.hvals(k.alerts)
        raw_baseline, raw_alerts = await pipe.execute()
        baseline = None if raw_baseline is None else Baseline.from_json(raw_baseline)
        return baseline, sorted((Alert.from_json(a) for a in raw_alerts), key=_created)

    @map_redis_errors
    async def create_alert(self, name: str, alert: Alert, most: int) -> None:
        """Add ``alert``: NotFound for a selector that does not exist, Conflict when it has
        ``most`` alerts already."""
        k = self.keys(name)
        reply = as_text(
            await self._run("create_alert", [k.head, k.alerts], [alert.id, alert.to_json(), most])
        )
        if reply == "NOTFOUND":
            raise not_found(name)
        if reply == "FULL":
            raise Conflict(
                f"selector '{name}' has {most} alerts already, the most one selector may have; "
                "delete one first"
            )

    @map_redis_errors
    async def alerts(self, name: str) -> list[tuple[Alert, AlertState | None]]:
        """Every alert of the selector, oldest first, with its judgement of the last version."""
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(k.head)
        pipe.hvals(k.alerts)
        pipe.hgetall(k.alert_states)
        exists, raw_alerts, raw_states = await pipe.execute()
        if not exists:
            raise not_found(name)
        states = {as_text(key): AlertState.from_json(value) for key, value in raw_states.items()}
        alerts = sorted((Alert.from_json(a) for a in raw_alerts), key=_created)
        return [(alert, states.get(alert.id)) for alert in alerts]

    @map_redis_errors
    async def delete_alert(self, name: str, alert_id: str) -> None:
        """Remove an alert and its judgement (its events stay until they are trimmed)."""
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(k.head)
        pipe.hdel(k.alerts, alert_id)
        pipe.hdel(k.alert_states, alert_id)
        exists, removed, _ = await pipe.execute()
        if not exists:
            raise not_found(name)
        if not removed:
            raise NotFound(f"selector '{name}' has no alert '{alert_id}'")

    @map_redis_errors
    async def claim_crossing(
        self,
        name: str,
        alert_id: str,
        incarnation: str,
        version: int,
        over: bool,
        event_prefix: str,
        delivery: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Judge ``version`` for the alert (``claim_crossing.lua``): the event to deliver if
        this caller claimed a crossing, else None. ``event_prefix`` is the event's JSON without
        its closing brace (the script adds its id and crossing number)."""
        k = self.keys(name)
        reply = await self._run(
            "claim_crossing",
            [k.head, k.alerts, k.alert_states, k.alert_events, k.alert_deliveries],
            [
                alert_id,
                incarnation,
                version,
                "1" if over else "0",
                event_prefix,
                EVENTS_KEPT,
                json.dumps(delivery),
            ],
        )
        if not reply:
            return None
        try:
            event: dict[str, Any] = json.loads(reply[1])
        except ValueError as exc:
            raise CodecError(f"a claimed event does not parse: {exc}") from exc
        return event

    @map_redis_errors
    async def record_delivery(
        self, name: str, incarnation: str, event_id: str, delivery: dict[str, Any]
    ) -> bool:
        """Record how an event's delivery went (only while the event and its selector are)."""
        k = self.keys(name)
        reply = await self._run(
            "record_delivery",
            [k.head, k.alert_deliveries],
            [incarnation, event_id, json.dumps(delivery)],
        )
        return bool(reply)

    @map_redis_errors
    async def alert_events(
        self, name: str, limit: int
    ) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """The newest ``limit`` events with their delivery status, newest first."""
        k = self.keys(name)
        pipe = self.redis.pipeline(transaction=False)
        pipe.exists(k.head)
        pipe.lrange(k.alert_events, 0, max(limit, 1) - 1)
        pipe.hgetall(k.alert_deliveries)
        exists, raw_events, raw_deliveries = await pipe.execute()
        if not exists:
            raise not_found(name)
        deliveries = {as_text(key): value for key, value in raw_deliveries.items()}
        out = []
        for raw in raw_events:
            try:
                event = json.loads(raw)
                delivery = deliveries.get(str(event["id"]))
                out.append((event, None if delivery is None else json.loads(delivery)))
            except (ValueError, KeyError, TypeError) as exc:
                raise CodecError(f"a stored alert event does not parse: {exc}") from exc
        return out


def _created(alert: Alert) -> tuple[float, str]:
    return alert.created_at, alert.id
