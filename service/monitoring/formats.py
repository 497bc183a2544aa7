"""What an alert's delivery carries, by the alert's kind: the request's path under the alert's
URL and its body.

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
    summary = (
        f"the top {h} of selector {event['selector']} settled back (drift {drift:.2f})"
        if resolved
        else f"the top {h} of selector {event['selector']} moved (drift {drift:.2f})"
    )
    annotations = {
        "summary": summary,
        "description": (
            f"{label + ': ' if label else ''}version {event.get('version')} against the "
            f"baseline version {event.get('baseline_version')}: drift {drift:.3f} "
            f"(threshold {event.get('threshold')})"
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
