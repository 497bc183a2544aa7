"""Drift, the baseline, alerts and their events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from siftstream.results._common import Answer, Json


@dataclass(frozen=True)
class FeatureRef(Answer):
    """A feature as drift and alerts name it (``view``: multi-view selectors)."""

    index: int
    name: str
    view: str | None = None


@dataclass(frozen=True)
class Moved(Answer):
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


@dataclass(frozen=True)
class BaselineRule(Answer):
    """Without a baseline: a version becomes it when the stability index of its top ``h``
    reaches ``threshold``; ``stability`` is the newest version's there (None: not known)."""

    h: int
    threshold: float
    stability: float | None = None


@dataclass(frozen=True)
class Drift(Answer):
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


@dataclass(frozen=True)
class Baseline(Answer):
    """The version a selector's drift is measured against."""

    name: str
    version: int
    how: str
    pinned_at: float
    rows_seen: int | None = None
    features_seen: int | None = None


@dataclass(frozen=True)
class Alert(Answer):
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


@dataclass(frozen=True)
class RotatedSecret(Answer):
    """An alert's new Standard Webhooks secret, in this answer only; the previous one signs
    beside it until ``previous_valid_until`` (Unix seconds)."""

    id: str
    secret: str = field(repr=False)
    previous_valid_until: float


@dataclass(frozen=True)
class CreatedAlert(Answer):
    """A new alert: ``secret`` (``whsec_...``, the Standard Webhooks secret of its signatures)
    is in this answer only."""

    alert: Alert
    secret: str = field(repr=False)

    @classmethod
    def wire_doc(cls, doc: Json) -> Json:
        return {"alert": doc, "secret": doc["secret"]}


@dataclass(frozen=True)
class AlertEvent(Answer):
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
