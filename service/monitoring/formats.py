"""What an alert's delivery carries, by the alert's kind: the request's path under the alert's
URL and its body.

Numbers come two ways. The fields a machine compares (an event's ``drift``, ``rbo``,
``jaccard``, ``stability``, ``threshold``) are the exact values the service judged, as JSON
numbers: ``drift`` may read ``0.31499999999999995``, and a receiver that compares it with the
threshold agrees with the service. Text for people (an event's ``summary``, Alertmanager's
annotations) rounds them: drift and stability to 2 places (the drift to 3 in Alertmanager's
description, 4 in its ``drift`` annotation), the threshold as given.

* ``webhook``: the event itself, as JSON, at the alert's URL.
* ``alertmanager``: one alert of Prometheus Alertmanager's API v2 (``POST /api/v2/alerts``,
  a JSON list of ``postableAlert``), at the alert's URL (Alertmanager's base URL) plus
  ``/api/v2/alerts``. Labels identify it (``alertname`` ``SiftRankingDrift``, ``selector``,
  ``prefix``: the deployment's Redis key prefix, ``alert``: the alert's id, ``severity``);
  annotations say what moved. A crossing fires it: ``startsAt`` the crossing's time,
  ``endsAt`` ``FIRING_HOLD_SECONDS`` later (Alertmanager would otherwise resolve it after its
  own ``resolve_timeout`` when nobody sends it again, while the ranking stays moved); the
  first version judged below the threshold afterwards resolves it (``endsAt`` that version's
  time). Both carry the same labels, so Alertmanager pairs them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

#: How long a fired Alertmanager alert stands without a resolve.
FIRING_HOLD_SECONDS = 7 * 24 * 3600
ALERTMANAGER_PATH = "/api/v2/alerts"
ALERT_NAME = "SiftRankingDrift"
#: Features a summary names of those that entered (or left); beyond, a count.
FEATURES_SUMMARISED = 5


def summary(event: Mapping[str, Any]) -> str:
    """One line for people of what an event says (module docstring), from its fields: which
    top moved (or, resolved, settled back), how far since which baseline, and which features
    entered and left."""
    h, selector = event.get("h"), event.get("selector")
    drift = float(event.get("drift") or 0.0)
    threshold = float(event.get("threshold") or 0.0)
    against = f"since the baseline (version {event.get('baseline_version')})"
    if event.get("resolved"):
        return (
            f"the top {h} of selector {selector} settled back: drift {drift:.2f} {against} at "
            f"version {event.get('version')}, under the threshold {threshold:g}"
        )
    text = (
        f"the top {h} of selector {selector} moved: drift {drift:.2f} {against} at version "
        f"{event.get('version')}, threshold {threshold:g}"
    )
    stability = event.get("stability")
    if stability is not None:
        text += f", stability {float(stability):.2f}"
    for what in ("entered", "left"):
        names = [str(f.get("name")) for f in event.get(what) or []]
        if names:
            shown = ", ".join(names[:FEATURES_SUMMARISED])
            more = len(names) - FEATURES_SUMMARISED
            text += f"; {what} {shown}" + (f" and {more} more" if more > 0 else "")
    return text


def delivery(
    kind: str, url: str, raw: bytes, event: Mapping[str, Any], prefix: str
) -> tuple[str, bytes]:
    """Where to POST an event (``raw`` as recorded, ``event`` parsed) for an alert of ``kind``
    at ``url``, and the body: a webhook gets the recorded bytes as they are."""
    if kind == "alertmanager":
        body = orjson.dumps([alertmanager_alert(event, prefix)])
        return url.rstrip("/") + ALERTMANAGER_PATH, body
    return url, raw


def alertmanager_alert(event: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The ``postableAlert`` of an event (module docstring)."""
    at = float(event.get("at") or time.time())
    resolved = bool(event.get("resolved"))
    label = str(event.get("label") or "")
    labels = {
        "alertname": ALERT_NAME,
        "selector": str(event["selector"]),
        "prefix": prefix,
        "alert": str(event["alert"]),
        "severity": "warning",
    }
    entered = ", ".join(str(f.get("name")) for f in event.get("entered") or [])
    left = ", ".join(str(f.get("name")) for f in event.get("left") or [])
    h, drift = event.get("h"), float(event.get("drift") or 0.0)
    threshold = float(event.get("threshold") or 0.0)
    headline = (
        f"the top {h} of selector {event['selector']} settled back (drift {drift:.2f})"
        if resolved
        else f"the top {h} of selector {event['selector']} moved (drift {drift:.2f})"
    )
    annotations = {
        "summary": headline,
        "description": (
            f"{label + ': ' if label else ''}version {event.get('version')} against the "
            f"baseline version {event.get('baseline_version')}: drift {drift:.3f} "
            f"(threshold {threshold:g})"
        ),
        "entered": entered,
        "left": left,
        "drift": f"{drift:.4f}",
    }
    ends = at if resolved else at + FIRING_HOLD_SECONDS
    return {
        "labels": labels,
        "annotations": annotations,
        "startsAt": _iso(float(event.get("fired_at") or at)),
        "endsAt": _iso(ends),
    }


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat().replace("+00:00", "Z")
