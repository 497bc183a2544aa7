"""The monitoring part of the store: each selector's baseline (the version drift is measured
against), its alerts, their judgement of the last version, and the events they raised.

Every key carries the selector's hash tag (one slot) and is deleted with the selector. What
must be atomic is a script: the automatic baseline is set once per incarnation
(``set_baseline.lua``), and a crossing is claimed by exactly one caller, whichever replica asks
first (``claim_crossing.lua``).
"""

from __future__ import annotations

import json
from typing import Any, cast

from service.errors import CodecError, Conflict, NotFound
from service.store.core import Room, not_found
from service.store.monitoring_records import (
    Alert,
    AlertState,
    Baseline,
    ClaimedDelivery,
    Judgement,
)
from service.store.records import as_text
from service.store.redis_errors import map_redis_errors

#: Events kept per selector (newest first), with their delivery status.
EVENTS_KEPT = 100
#: Selectors whose outbox keys are read in one pipeline (a process's first pass).
OUTBOX_SCAN_BATCH = 500


class Monitoring(Room):
    """Baselines, alerts, alert events and their outbox."""

    # -- baseline ------------------------------------------------------------------------------

    @map_redis_errors
    async def baseline(self, name: str) -> Baseline | None:
        raw = await self.core.redis.get(self.core.keys(name).baseline)
        return None if raw is None else Baseline.from_json(raw)

    @map_redis_errors
    async def set_baseline(self, name: str, baseline: Baseline, pin: bool) -> bool:
        """Make ``baseline`` the selector's (``pin``), or only if it has none (automatic);
        whether it was written (never into another incarnation's keys)."""
        k = self.core.keys(name)
        reply = await self.core.run(
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
        return bool(await self.core.redis.delete(self.core.keys(name).baseline))

    # -- alerts --------------------------------------------------------------------------------

    @map_redis_errors
    async def watched(self, name: str) -> tuple[Baseline | None, list[Alert]]:
        """The baseline and the alerts, in one round trip (what a monitor reads per commit)."""
        k = self.core.keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.get(k.baseline)
        pipe.hvals(k.alerts)
        raw_baseline, raw_alerts = await pipe.execute()
        baseline = None if raw_baseline is None else Baseline.from_json(raw_baseline)
        return baseline, sorted((Alert.from_json(a) for a in raw_alerts), key=_created)

    @map_redis_errors
    async def create_alert(self, name: str, alert: Alert, most: int) -> None:
        """Add ``alert``: NotFound for a selector that does not exist, Conflict when it has
        ``most`` alerts already."""
        k = self.core.keys(name)
        reply = as_text(
            await self.core.run(
                "create_alert", [k.head, k.alerts], [alert.id, alert.to_json(), most]
            )
        )
        if reply == "NOTFOUND":
            raise not_found(name)
        if reply == "FULL":
            raise Conflict(
                f"selector '{name}' has {most} alerts already, the most one selector may have; "
                "delete one first"
            )

    @map_redis_errors
    async def alert(self, name: str, alert_id: str) -> Alert:
        """One alert, its secrets included; NotFound for the selector or the alert."""
        k = self.core.keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.exists(k.head)
        pipe.hget(k.alerts, alert_id)
        exists, raw = await pipe.execute()
        if not exists:
            raise not_found(name)
        if raw is None:
            raise no_alert(name, alert_id)
        return Alert.from_json(raw)

    @map_redis_errors
    async def replace_alert(self, name: str, read: Alert, changed: Alert) -> bool:
        """Store ``changed`` in place of ``read`` if the alert's secret is still ``read``'s
        (False: it was rotated meanwhile, read it again); NotFound for the selector or the
        alert."""
        k = self.core.keys(name)
        reply = as_text(
            await self.core.run(
                "rotate_alert_secret",
                [k.head, k.alerts],
                [read.id, changed.to_json(), read.secret],
            )
        )
        if reply == "NOTFOUND":
            raise not_found(name)
        if reply == "GONE":
            raise no_alert(name, read.id)
        return reply == "OK"

    @map_redis_errors
    async def alerts(self, name: str) -> list[tuple[Alert, AlertState | None]]:
        """Every alert of the selector, oldest first, with its judgement of the last version."""
        k = self.core.keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
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
        k = self.core.keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
        pipe.exists(k.head)
        pipe.hdel(k.alerts, alert_id)
        pipe.hdel(k.alert_states, alert_id)
        exists, removed, _ = await pipe.execute()
        if not exists:
            raise not_found(name)
        if not removed:
            raise no_alert(name, alert_id)

    @map_redis_errors
    async def claim_crossing(
        self, name: str, judgement: Judgement, delivery: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Claim what ``judgement`` of a version of ``name`` raises (``claim_crossing.lua``):
        the event to deliver if this caller claimed a crossing (or, for an alert told when it
        resolves, the end of one), else None; ``delivery`` is the event's first delivery
        status."""
        k = self.core.keys(name)
        reply = await self.core.run(
            "claim_crossing",
            [
                *(k.head, k.alerts, k.alert_states, k.alert_events, k.alert_deliveries),
                *(k.outbox, k.outbox_events),
            ],
            [
                judgement.alert_id,
                judgement.incarnation,
                judgement.version,
                "1" if judgement.over else "0",
                judgement.event_prefix,
                EVENTS_KEPT,
                json.dumps(delivery),
                "1" if judgement.resolves else "0",
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
    async def alert_or_none(self, name: str, alert_id: str) -> Alert | None:
        """One alert (its secrets included), or None if it (or its selector) is gone."""
        raw = await self.core.redis.hget(self.core.keys(name).alerts, alert_id)
        return None if raw is None else Alert.from_json(raw)

    @map_redis_errors
    async def rearm_alert(self, name: str, alert_id: str) -> None:
        """Make the alert's next version over its threshold a crossing again
        (``rearm_alert.lua``); NotFound for the selector or the alert."""
        k = self.core.keys(name)
        reply = as_text(
            await self.core.run("rearm_alert", [k.head, k.alerts, k.alert_states], [alert_id])
        )
        if reply == "NOTFOUND":
            raise not_found(name)
        if reply == "GONE":
            raise no_alert(name, alert_id)

    # -- the outbox ----------------------------------------------------------------------------

    @map_redis_errors
    async def mark_outbox(self, name: str, due_ms: float) -> None:
        """Look at ``name``'s outbox at ``due_ms`` (or earlier, if marked so already)."""
        await self.core.redis.zadd(self.core.outboxes_key, {name: round(due_ms)}, lt=True)

    @map_redis_errors
    async def remark_outbox(self, name: str, read_score: float, due_ms: float | None) -> None:
        """Move ``name``'s mark, read at ``read_score``, to ``due_ms`` (None: remove it),
        unless it was marked again since it was read (``remark.lua``)."""
        await self.core.run(
            "remark",
            [self.core.outboxes_key],
            [name, f"{read_score:.0f}", "" if due_ms is None else f"{due_ms:.0f}"],
        )

    @map_redis_errors
    async def due_outboxes(self, now_ms: float, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` earliest marks due at ``now_ms``, with their scores."""
        marked = cast(
            list[tuple[bytes, float]],
            await self.core.redis.zrangebyscore(
                self.core.outboxes_key, "-inf", f"{now_ms:.0f}", start=0, num=limit, withscores=True
            ),
        )
        return [(as_text(member), float(score)) for member, score in marked]

    @map_redis_errors
    async def names_with_outbox(self) -> list[str]:
        """Every selector whose outbox holds an event (a process's first pass)."""
        names = sorted(as_text(n) for n in await self.core.redis.smembers(self.core.registry_key))
        out: list[str] = []
        for start in range(0, len(names), OUTBOX_SCAN_BATCH):
            batch = self.core.keyed(names[start : start + OUTBOX_SCAN_BATCH])
            pipe = self.core.redis.pipeline(transaction=False)
            for name in batch:
                pipe.zcard(self.core.keys(name).outbox)
            counts = await pipe.execute()
            out += [name for name, count in zip(batch, counts, strict=True) if count]
        return out

    @map_redis_errors
    async def claim_deliveries(
        self, name: str, lease_ms: int, most: int
    ) -> tuple[bool, list[ClaimedDelivery], float | None]:
        """Claim up to ``most`` events of ``name`` due now, each for ``lease_ms``
        (``claim_deliveries.lua``): whether the selector is gone, the events, and when its
        outbox's next event is due (None: it is empty)."""
        k = self.core.keys(name)
        reply = await self.core.run(
            "claim_deliveries", [k.head, k.outbox, k.outbox_events], [lease_ms, most]
        )
        if as_text(reply[0]) == "GONE":
            return True, [], None
        claimed = []
        for i in range(1, len(reply), 3):
            raw = bytes(reply[i + 1])
            try:
                event = json.loads(raw)
            except ValueError as exc:
                raise CodecError(f"an outbox event does not parse: {exc}") from exc
            claimed.append(ClaimedDelivery(as_text(reply[i]), raw, event, int(reply[i + 2])))
        following = as_text(reply[0])
        return False, claimed, float(following) if following else None

    @map_redis_errors
    async def settle_delivery(
        self, name: str, event_id: str, status: dict[str, Any], due_ms: float | None
    ) -> None:
        """Record how an attempt went; the event leaves the outbox (``due_ms`` None) or is
        due again at ``due_ms`` (``settle_delivery.lua``)."""
        k = self.core.keys(name)
        await self.core.run(
            "settle_delivery",
            [k.head, k.outbox, k.outbox_events, k.alert_deliveries],
            [event_id, json.dumps(status), "" if due_ms is None else f"{due_ms:.0f}"],
        )

    @map_redis_errors
    async def redeliver_event(self, name: str, event_id: str, status: dict[str, Any]) -> bool:
        """Put a kept event back in the outbox, due now, attempts counted afresh
        (``redeliver_event.lua``): False if it was in the outbox already; NotFound for the
        selector or an event not kept."""
        k = self.core.keys(name)
        reply = as_text(
            await self.core.run(
                "redeliver_event",
                [k.head, k.alert_events, k.outbox, k.outbox_events, k.alert_deliveries],
                [event_id, json.dumps(status)],
            )
        )
        if reply == "NOTFOUND":
            raise not_found(name)
        if reply == "GONE":
            raise NotFound(f"selector '{name}' keeps no alert event '{event_id}'")
        return reply == "OK"

    @map_redis_errors
    async def alert_events(
        self, name: str, limit: int
    ) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """The newest ``limit`` events with their delivery status, newest first."""
        k = self.core.keys(name)
        pipe = self.core.redis.pipeline(transaction=False)
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


def no_alert(name: str, alert_id: str) -> NotFound:
    return NotFound(f"selector '{name}' has no alert '{alert_id}'")


def _created(alert: Alert) -> tuple[float, str]:
    return alert.created_at, alert.id
