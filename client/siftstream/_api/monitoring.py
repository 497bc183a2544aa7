"""Drift, the baseline and alerts (and their events)."""

from __future__ import annotations

from typing import Any, TypedDict, Unpack
from urllib.parse import quote

from siftstream._api.core import (
    JSON_HEADERS,
    Api,
    _drop_none,
    _json,
    _nothing,
    _only,
    _read,
    json_body,
    selector_path,
)
from siftstream._http import Call
from siftstream.results import (
    Alert,
    AlertEvent,
    Baseline,
    CreatedAlert,
    Drift,
    RotatedSecret,
)


def drift(api: Api, name: str, h: int = 10) -> Call[Drift]:
    """How far the top h moved since the previous version and since the baseline."""
    return _read(name, ("drift",), Drift.from_json, {"h": h})


def set_baseline(api: Api, name: str) -> Call[Baseline]:
    """Pin the current version as the baseline drift and alerts are measured against."""
    return Call("POST", selector_path(name, "baseline"), lambda r: Baseline.from_json(_json(r)))


def forget_baseline(api: Api, name: str) -> Call[None]:
    """Forget the baseline: the next version whose ranking is stable becomes it."""
    return Call("DELETE", selector_path(name, "baseline"), _nothing)


class AlertOptions(TypedDict, total=False):
    """``create_alert``'s options (its docstring tells each one; ``label``: free text sent
    with the events)."""

    h: int | None
    min_stability: float | None
    label: str
    kind: str


def create_alert(
    api: Api, name: str, url: str, threshold: float, **options: Unpack[AlertOptions]
) -> Call[CreatedAlert]:
    """An alert on ``name`` (admin): ``url`` gets a signed event when a committed version's
    drift since the baseline of its top ``h`` reaches ``threshold`` (``kind="alertmanager"``:
    ``url`` is a Prometheus Alertmanager, which gets an alert that fires and resolves). ``h``
    None: the service's choice, 10, or the selector's features less one on a selector of 10
    or fewer (a deeper h is refused there: the top of every feature cannot be judged). Its
    secret (``CreatedAlert.secret``, which verifies the signatures) is in this answer only."""
    _only(options, AlertOptions, "create_alert")
    body: dict[str, Any] = {
        "url": url,
        "threshold": threshold,
        "label": options.get("label", ""),
        "kind": options.get("kind", "webhook"),
    }
    body.update(_drop_none(h=options.get("h"), min_stability=options.get("min_stability")))
    return Call(
        "POST",
        selector_path(name, "alerts"),
        lambda r: CreatedAlert.from_json(_json(r)),
        content=json_body(body),
        headers=JSON_HEADERS,
        replay_safe=False,  # a replay would make a second alert, its secret never shown
    )


def list_alerts(api: Api, name: str) -> Call[list[Alert]]:
    """The selector's alerts (without their secrets), with their last judgement."""
    return Call(
        "GET",
        selector_path(name, "alerts"),
        lambda r: [Alert.from_json(a) for a in _json(r)["alerts"]],
    )


def rotate_alert_secret(api: Api, name: str, alert_id: str) -> Call[RotatedSecret]:
    """A new secret for the alert (admin), in this answer only; the previous one signs
    every delivery beside it for a day, so that receivers switch at their own pace."""
    return Call(
        "POST",
        selector_path(name, "alerts", quote(alert_id, safe=""), "secret"),
        lambda r: RotatedSecret.from_json(_json(r)),
        replay_safe=False,  # a replay would rotate again, this answer's secret never used
    )


def delete_alert(api: Api, name: str, alert_id: str) -> Call[None]:
    return Call(
        "DELETE",
        selector_path(name, "alerts", quote(alert_id, safe="")),
        _nothing,
        done_earlier=frozenset({404}),
    )


def alert_events(
    api: Api, name: str, limit: int = 20, status: str | None = None
) -> Call[list[AlertEvent]]:
    """The events the selector's alerts raised (one per crossing), newest first; with
    ``status`` (pending, delivered, failed), only those whose delivery has it."""
    params: dict[str, Any] = {"limit": limit}
    if status is not None:
        params["status"] = status
    return Call(
        "GET",
        selector_path(name, "alerts", "events"),
        lambda r: [AlertEvent.from_json(e) for e in _json(r)["events"]],
        params=params,
    )


def redeliver_alert_event(api: Api, name: str, event_id: str) -> Call[bool]:
    """Send a kept event again (admin): back in the outbox, due now, its attempts counted
    afresh. False if it was in the outbox already."""
    return Call(
        "POST",
        selector_path(name, "alerts", "events", quote(event_id, safe=""), "redeliver"),
        lambda r: bool(_json(r)["queued"]),
    )


def rearm_alert(api: Api, name: str, alert_id: str) -> Call[Alert]:
    """Re-arm an alert left firing (admin): the next version over its threshold is a
    crossing again, with a new event."""
    return Call(
        "POST",
        selector_path(name, "alerts", quote(alert_id, safe=""), "rearm"),
        lambda r: Alert.from_json(_json(r)),
    )
