"""Drift, the baseline, alerts, their events and deliveries."""

from __future__ import annotations

from typing import Literal

import orjson
from pydantic import (
    ConfigDict,
    Field,
)

from service.selectors.results.core import Result


class FeatureRef(Result):
    """A feature, as answers about rankings name it."""

    index: int = Field(description="Its index (within its view, for multi-view selectors).")
    name: str
    view: str | None = Field(default=None, description="Multi-view selectors: its view.")


class VersionDrift(Result):
    """How the top h moved since an earlier version (``version``)."""

    version: int = Field(description="The earlier version.")
    rows_seen: int | None = Field(default=None, description="Row streams: then.")
    features_seen: int | None = Field(default=None, description="Feature streams: then.")
    rbo: float = Field(
        description="Rank-biased overlap (RBO_ext, Webber, Moffat & Zobel 2010, p = 0.9) of the "
        "two tops: 1 for the same ranking, 0 for disjoint ones (multi-view: the views' mean)."
    )
    jaccard: float = Field(description="Shared features over all features of the two tops.")
    drift: float = Field(description="1 - rbo: how far the ranking moved (0 to 1).")
    entered: list[FeatureRef] = Field(description="In the current top h, not in the earlier.")
    left: list[FeatureRef] = Field(description="In the earlier top h, not in the current.")


class BaselineDrift(VersionDrift):
    how: Literal["auto", "pinned"] = Field(
        description="auto: the first version whose ranking was stable; pinned: POST .../baseline."
    )
    pinned_at: float = Field(description="When it became the baseline (seconds, epoch).")


class BaselineRule(Result):
    """When a selector without a baseline gets one: the rule, and where its newest version
    stands (``service.algorithms.drift.is_stable``)."""

    h: int = Field(
        description="The top h whose stability is judged: 10, or the smallest h of the "
        "selector's alerts if smaller, and at most the selector's features less one (its "
        "widest view's, multi-view): not necessarily the h of this answer."
    )
    threshold: float = Field(description="The index it must reach (SIFT_BASELINE_STABILITY).")
    stability: float | None = Field(
        default=None,
        description="The newest version's stability index of that top h (null: not estimated "
        "for that h, or not yet).",
    )


class DriftOut(Result):
    """How far the top h moved since the previous version and since the baseline."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "news",
                    "method": "fsds",
                    "h": 3,
                    "version": 12,
                    "rows_seen": 12000,
                    "previous": {
                        "version": 11,
                        "rows_seen": 11000,
                        "rbo": 1.0,
                        "jaccard": 1.0,
                        "drift": 0.0,
                        "entered": [],
                        "left": [],
                    },
                    "baseline": None,
                }
            ]
        }
    )
    name: str
    method: str
    h: int
    version: int = Field(description="The newest version in the history (0: none yet).")
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    previous: VersionDrift | None = Field(
        default=None, description="Since the version before (null: no earlier version kept)."
    )
    baseline: BaselineDrift | None = Field(
        default=None,
        description="Since the baseline (null: none yet, until a version's ranking is stable "
        "or one is pinned).",
    )
    baseline_rule: BaselineRule | None = Field(
        default=None,
        description="Without a baseline: what makes a version the baseline, at which h, and the "
        "newest version's stability there.",
    )

    def render(self) -> bytes:
        body = self.model_dump(exclude_none=True, by_alias=True)
        body.setdefault("previous", None)
        body.setdefault("baseline", None)
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


class BaselineOut(Result):
    """The version a selector's drift is measured against."""

    name: str
    version: int
    rows_seen: int | None = Field(default=None, description="Row streams.")
    features_seen: int | None = Field(default=None, description="Feature streams.")
    how: Literal["auto", "pinned"]
    pinned_at: float


class AlertOut(Result):
    """An alert: a webhook called when a committed version's drift since the baseline crosses
    the threshold."""

    shows_nulls = True

    id: str
    url: str
    h: int
    threshold: float
    min_stability: float | None = Field(
        default=None, description="Fires only while the top h is at least this stable."
    )
    label: str
    created_at: float
    kind: Literal["webhook", "alertmanager"] = Field(
        default="webhook",
        description="webhook: the event as JSON; alertmanager: Alertmanager's API v2.",
    )
    firing: bool = Field(description="Whether the last version judged was over the threshold.")
    crossings: int = Field(description="Times it crossed (one event each).")
    judged_version: int | None = Field(
        default=None, description="The last version judged (null: none yet)."
    )


class AlertCreated(AlertOut):
    secret: str = Field(
        description="The Standard Webhooks secret (`whsec_...`) that signs every delivery "
        "(`webhook-signature`), shown only in this answer: store it now."
    )


class AlertSecret(Result):
    """An alert's new secret, after a rotation."""

    shows_nulls = True

    id: str
    secret: str = Field(
        description="The new Standard Webhooks secret (`whsec_...`), shown only in this answer."
    )
    previous_valid_until: float = Field(
        description="Until then (Unix seconds) the previous secret signs every delivery too "
        "(`webhook-signature` carries both), so that receivers can switch at their own pace."
    )


class AlertList(Result):
    shows_nulls = True
    name: str
    alerts: list[AlertOut]


class DeliveryOut(Result):
    status: Literal["pending", "delivered", "failed"] = Field(
        description="pending: in the outbox, not yet acknowledged (being attempted or retried); "
        "delivered: a 2xx came back; failed: given up after SIFT_ALERT_ATTEMPTS attempts, a "
        "destination the settings forbid, or its alert deleted (POST "
        ".../alerts/events/{id}/redeliver sends it again)."
    )
    attempts: int
    outcome: str | None = Field(
        default=None,
        description="How the last attempt went, in Sift's words (never the receiver's): "
        "delivered, status, timeout, refused, reset, unreachable, dns, tls, not-http, "
        "forbidden, dropped.",
    )
    last_status: int | None = Field(default=None, description="The last HTTP status received.")
    last_error: str | None = Field(default=None, description="Why the last attempt failed.")
    updated_at: float | None = None


class AlertEventOut(Result):
    """One crossing of an alert: what was POSTed to its webhook, and how that went."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="<alert id>-<crossing>: the webhook-id header of the delivery.")
    type: str
    alert: str
    crossing: int
    selector: str
    method: str
    h: int
    threshold: float
    version: int
    baseline_version: int
    drift: float
    rbo: float
    jaccard: float
    stability: float | None = None
    entered: list[FeatureRef]
    left: list[FeatureRef]
    at: float
    summary: str | None = Field(
        default=None,
        description="The event in one line for people, its numbers rounded (drift, rbo, "
        "jaccard and stability are the exact values the service judged).",
    )
    delivery: DeliveryOut | None = None


class AlertEventList(Result):
    name: str
    events: list[AlertEventOut]


class Redelivery(Result):
    """An event put back in its selector's outbox."""

    shows_nulls = True

    id: str
    queued: bool = Field(
        description="true: put back in the outbox, due now, its attempts counted afresh; "
        "false: it was in the outbox already (being attempted or retried)."
    )
