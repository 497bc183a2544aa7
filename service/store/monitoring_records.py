"""Records of the ranking history and of the monitoring the store hands out: history entries,
the baseline, alerts, their claimed deliveries and judgements."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import orjson

from service.errors import CodecError


@dataclass(frozen=True)
class Judgement:
    """An alert's judgement of one committed version (``Monitoring.claim_crossing``): whether
    it is over the alert's threshold, the event a crossing raises (its JSON without its closing
    brace: the claim adds its id and crossing number), and whether the alert is told when it
    resolves (an Alertmanager's)."""

    alert_id: str
    incarnation: str
    version: int
    over: bool
    event_prefix: str = "{"
    resolves: bool = False


@dataclass(frozen=True)
class RankedList:
    """The top features of one ranking of a version: ``view`` (multi-view selectors) or None,
    the features' indices (within the view) in rank order and their scores."""

    view: str | None
    indices: list[int]
    scores: list[float]


@dataclass(frozen=True)
class HistoryEntry:
    """One committed version's top features, as the ranking history keeps it."""

    version: int
    items_seen: int
    updated_at: float
    rankings: list[RankedList]
    #: The stability of the version's top 10 (``index``, ``interval``, ``resamples``, ``h``:
    #: ``service.algorithms.stability.Stability.as_dict``), for methods that estimate it.
    stability: dict[str, Any] | None = None

    def to_json(self, with_time: bool = True) -> str:
        """The stored JSON; without ``updated_at`` when the commit script adds its own clock."""
        entry: dict[str, object] = {"version": self.version, "items_seen": self.items_seen}
        if with_time:
            entry["updated_at"] = self.updated_at
        if self.stability is not None:
            entry["stability"] = self.stability
        # A test's score that is not a number (``TestsSignificance``) is kept as null.
        entry["top"] = [
            [r.view, r.indices, [x if math.isfinite(x) else None for x in r.scores]]
            for r in self.rankings
        ]
        return orjson.dumps(entry).decode()  # compact, as the commit script extends it

    @classmethod
    def from_json(cls, raw: str | bytes) -> HistoryEntry:
        try:
            data = json.loads(raw)
            return cls(
                version=int(data["version"]),
                items_seen=int(data["items_seen"]),
                updated_at=float(data["updated_at"]),
                rankings=[
                    RankedList(
                        None if view is None else str(view),
                        [int(i) for i in indices],
                        [math.nan if x is None else float(x) for x in scores],
                    )
                    for view, indices, scores in data["top"]
                ],
                stability=_stability_record(data.get("stability")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored history entry does not parse: {exc}") from exc


@dataclass(frozen=True)
class Baseline:
    """The version a selector's drift is measured against: its history entry, chosen
    automatically (the first version whose ranking is stable) or pinned, and when."""

    entry: HistoryEntry
    #: ``auto`` or ``pinned``.
    how: str
    pinned_at: float
    #: The incarnation whose version it is (``SelectorMeta.incarnation``).
    incarnation: str

    def to_json(self) -> str:
        return orjson.dumps(
            {
                "how": self.how,
                "pinned_at": self.pinned_at,
                "incarnation": self.incarnation,
                "entry": orjson.loads(self.entry.to_json()),
            }
        ).decode()

    @classmethod
    def from_json(cls, raw: str | bytes) -> Baseline:
        try:
            data = json.loads(raw)
            return cls(
                entry=HistoryEntry.from_json(json.dumps(data["entry"])),
                how=str(data["how"]),
                pinned_at=float(data["pinned_at"]),
                incarnation=str(data["incarnation"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored baseline does not parse: {exc}") from exc


@dataclass(frozen=True)
class Alert:
    """A webhook raised when a version's drift since the baseline crosses ``threshold``."""

    id: str
    url: str
    #: The top h compared.
    h: int
    #: Drift (1 - rank-biased overlap with the baseline's top h) at or over which it fires.
    threshold: float
    #: Fires only while the version's top h is at least this stable (None: whatever it is).
    min_stability: float | None
    label: str
    created_at: float
    #: The secret every delivery is signed under (``service.monitoring.signing``; shown once,
    #: at creation or rotation).
    secret: str
    #: The secret before the last rotation, which signs beside ``secret`` until
    #: ``previous_until`` (Unix seconds), so that receivers switch at their own pace.
    previous_secret: str | None = None
    previous_until: float | None = None
    #: ``webhook`` (the event as JSON) or ``alertmanager`` (Alertmanager's API v2:
    #: ``service.monitoring.formats``).
    kind: str = "webhook"

    def signing_secrets(self, now: float) -> list[str]:
        """The secrets in force at ``now``: the current one, and the previous one while its
        overlap lasts."""
        if self.previous_secret and self.previous_until is not None and now < self.previous_until:
            return [self.secret, self.previous_secret]
        return [self.secret]

    def public(self) -> dict[str, Any]:
        """What listings show: everything but the secret."""
        return {
            "id": self.id,
            "url": self.url,
            "h": self.h,
            "threshold": self.threshold,
            "min_stability": self.min_stability,
            "label": self.label,
            "created_at": self.created_at,
            "kind": self.kind,
        }

    def to_json(self) -> str:
        secrets = {"secret": self.secret}
        if self.previous_secret is not None:
            secrets |= {"previous_secret": self.previous_secret}
        return orjson.dumps(
            {**self.public(), **secrets, "previous_until": self.previous_until}
        ).decode()

    @classmethod
    def from_json(cls, raw: str | bytes) -> Alert:
        try:
            data = json.loads(raw)
            floor = data.get("min_stability")
            previous, until = data.get("previous_secret"), data.get("previous_until")
            return cls(
                id=str(data["id"]),
                url=str(data["url"]),
                h=int(data["h"]),
                threshold=float(data["threshold"]),
                min_stability=None if floor is None else float(floor),
                label=str(data.get("label", "")),
                created_at=float(data["created_at"]),
                secret=str(data["secret"]),
                previous_secret=None if previous is None else str(previous),
                previous_until=None if until is None else float(until),
                kind=str(data.get("kind", "webhook")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored alert does not parse: {exc}") from exc


@dataclass(frozen=True)
class ClaimedDelivery:
    """An event this process claimed from its selector's outbox (``claim_deliveries.lua``)."""

    event_id: str
    #: The event as recorded (what a webhook sends, byte for byte), and parsed.
    raw: bytes
    event: dict[str, Any]
    #: Attempts so far, this one included.
    attempts: int

    @property
    def alert_id(self) -> str:
        return str(self.event.get("alert", ""))

    def __str__(self) -> str:
        return self.event_id


@dataclass(frozen=True)
class AlertState:
    """An alert's judgement of the last version it saw (``claim_crossing.lua``)."""

    version: int
    firing: bool
    crossings: int

    @classmethod
    def from_json(cls, raw: str | bytes) -> AlertState:
        try:
            data = json.loads(raw)
            return cls(int(data["version"]), bool(data["firing"]), int(data["crossings"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise CodecError(f"stored alert state does not parse: {exc}") from exc


def _stability_record(raw: object) -> dict[str, Any] | None:
    """A history entry's stability as stored (checked for its shape), or None."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TypeError("a history entry's stability is an object")
    low, high = raw["interval"]
    return {
        "index": float(raw["index"]),
        "interval": [float(low), float(high)],
        "resamples": int(raw["resamples"]),
        "h": int(raw["h"]),
    }
