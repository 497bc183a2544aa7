"""Drift, the baseline, alerts and their events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from siftstream.results._common import Json, _int_or_none


@dataclass(frozen=True)
class FeatureRef:
    """A feature as drift and alerts name it (``view``: multi-view selectors)."""

    index: int
    name: str
    view: str | None = None

    @classmethod
    def from_json(cls, doc: Json) -> FeatureRef:
        view = doc.get("view")
        return cls(int(doc["index"]), str(doc["name"]), None if view is None else str(view))


@dataclass(frozen=True)
class Moved:
    """How a top h moved since an earlier ``version``: rank-biased overlap, Jaccard, drift
    (1 - rbo), and the features that entered and left it. ``how``/``pinned_at``: of a
    baseline (``auto`` or ``pinned``)."""

    version: int
    rbo: float
    jaccard: float
    drift: float
    entered: list[FeatureRef]
    left: list[FeatureRef]
    rows_seen: int | None = None
    features_seen: int | None = None
    how: str | None = None
    pinned_at: float | None = None

    @classmethod
    def from_json(cls, doc: Json) -> Moved:
        pinned = doc.get("pinned_at")
        return cls(
            int(doc["version"]),
            float(doc["rbo"]),
            float(doc["jaccard"]),
            float(doc["drift"]),
            [FeatureRef.from_json(f) for f in doc["entered"]],
            [FeatureRef.from_json(f) for f in doc["left"]],
            _int_or_none(doc.get("rows_seen")),
            _int_or_none(doc.get("features_seen")),
            doc.get("how"),
            None if pinned is None else float(pinned),
        )


@dataclass(frozen=True)
class BaselineRule:
    """Without a baseline: a version becomes it when the stability index of its top ``h``
    reaches ``threshold``; ``stability`` is the newest version's there (None: not known)."""

    h: int
    threshold: float
    stability: float | None = None

    @classmethod
    def from_json(cls, doc: Json) -> BaselineRule:
        stability = doc.get("stability")
        return cls(
            int(doc["h"]), float(doc["threshold"]), None if stability is None else float(stability)
        )


@dataclass(frozen=True)
class Drift:
    """How far a selector's top h moved since the previous version and since the baseline
    (None: no earlier version kept, no baseline yet)."""

    name: str
    method: str
    h: int
    version: int
    previous: Moved | None
    baseline: Moved | None
    rows_seen: int | None = None
    features_seen: int | None = None
    baseline_rule: BaselineRule | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> Drift:
        previous, baseline = doc.get("previous"), doc.get("baseline")
        rule = doc.get("baseline_rule")
        return cls(
            str(doc["name"]),
            str(doc["method"]),
            int(doc["h"]),
            int(doc["version"]),
            None if previous is None else Moved.from_json(previous),
            None if baseline is None else Moved.from_json(baseline),
            _int_or_none(doc.get("rows_seen")),
            _int_or_none(doc.get("features_seen")),
            None if rule is None else BaselineRule.from_json(rule),
            raw=doc,
        )


@dataclass(frozen=True)
class Baseline:
    """The version a selector's drift is measured against."""

    name: str
    version: int
    how: str
    pinned_at: float
    rows_seen: int | None = None
    features_seen: int | None = None

    @classmethod
    def from_json(cls, doc: Json) -> Baseline:
        return cls(
            str(doc["name"]),
            int(doc["version"]),
            str(doc["how"]),
            float(doc["pinned_at"]),
            _int_or_none(doc.get("rows_seen")),
            _int_or_none(doc.get("features_seen")),
        )


@dataclass(frozen=True)
class Alert:
    """An alert: ``url`` gets an event when a version's drift since the baseline reaches
    ``threshold`` (and its top h is at least ``min_stability`` stable, if set)."""

    id: str
    url: str
    h: int
    threshold: float
    min_stability: float | None
    label: str
    created_at: float
    firing: bool = False
    crossings: int = 0
    judged_version: int | None = None
    #: webhook (the event as JSON) or alertmanager (Prometheus Alertmanager's API v2).
    kind: str = "webhook"

    @classmethod
    def from_json(cls, doc: Json) -> Alert:
        floor = doc.get("min_stability")
        return cls(
            str(doc["id"]),
            str(doc["url"]),
            int(doc["h"]),
            float(doc["threshold"]),
            None if floor is None else float(floor),
            str(doc.get("label", "")),
            float(doc["created_at"]),
            bool(doc.get("firing", False)),
            int(doc.get("crossings", 0)),
            _int_or_none(doc.get("judged_version")),
            str(doc.get("kind", "webhook")),
        )


@dataclass(frozen=True)
class RotatedSecret:
    """An alert's new Standard Webhooks secret, in this answer only; the previous one signs
    beside it until ``previous_valid_until`` (Unix seconds)."""

    id: str
    secret: str = field(repr=False)
    previous_valid_until: float

    @classmethod
    def from_json(cls, doc: Json) -> RotatedSecret:
        return cls(str(doc["id"]), str(doc["secret"]), float(doc["previous_valid_until"]))


@dataclass(frozen=True)
class CreatedAlert:
    """A new alert: ``secret`` (``whsec_...``, the Standard Webhooks secret of its signatures)
    is in this answer only."""

    alert: Alert
    secret: str = field(repr=False)

    @classmethod
    def from_json(cls, doc: Json) -> CreatedAlert:
        return cls(Alert.from_json(doc), str(doc["secret"]))


@dataclass(frozen=True)
class AlertEvent:
    """One crossing of an alert, as POSTed to its webhook, with how its delivery went
    (``delivery``: status, attempts, last_status, last_error)."""

    id: str
    alert: str
    crossing: int
    version: int
    baseline_version: int
    drift: float
    entered: list[FeatureRef]
    left: list[FeatureRef]
    at: float
    stability: float | None = None
    delivery: dict[str, Any] | None = None
    raw: Json = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, doc: Json) -> AlertEvent:
        stability = doc.get("stability")
        return cls(
            str(doc["id"]),
            str(doc["alert"]),
            int(doc["crossing"]),
            int(doc["version"]),
            int(doc["baseline_version"]),
            float(doc["drift"]),
            [FeatureRef.from_json(f) for f in doc["entered"]],
            [FeatureRef.from_json(f) for f in doc["left"]],
            float(doc["at"]),
            None if stability is None else float(stability),
            doc.get("delivery"),
            raw=doc,
        )
