"""What a receiver of Sift's alert webhooks runs on each delivery: ``verify`` its signature.

Every delivery is a POST of one JSON event with ``Sift-Signature: t=<unix seconds>,v1=<hex>``,
where ``v1`` is HMAC-SHA256, under the alert's secret (shown once, when the alert was
created), of ``"<t>." + body`` (the raw bytes received), and ``Sift-Event: <event id>``::

    from siftstream.webhooks import verify

    if not verify(secret, request.headers["Sift-Signature"], request.body):
        return 401
    event = json.loads(request.body)   # then drop an event id seen before: a retry

A retry sends the same event (the same id) again, so a receiver that acknowledged too late
recognises it.
"""

from __future__ import annotations

import hashlib
import hmac
import time

#: How old a signature may be (a replayed request is older).
TOLERANCE_SECONDS = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """``v1`` of a delivery signed at ``timestamp``."""
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify(
    secret: str,
    header: str,
    body: bytes,
    now: float | None = None,
    tolerance: float = TOLERANCE_SECONDS,
) -> bool:
    """Whether ``header`` (``Sift-Signature``) signs ``body`` under ``secret``, at most
    ``tolerance`` seconds ago (compared in constant time)."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), fields.get("v1", ""))
