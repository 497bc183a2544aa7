"""What a receiver of Sift's alert webhooks runs on each delivery: ``verify`` its signature.

Deliveries follow the Standard Webhooks specification (https://www.standardwebhooks.com):
every one is a POST of one JSON event with the headers ``webhook-id`` (the event's id, the same
on every attempt), ``webhook-timestamp`` (Unix seconds) and ``webhook-signature``, one or more
``v1,<base64>`` separated by spaces (two while the alert's secret is being rotated): the
HMAC-SHA256, under the secret's key, of ``"<id>.<timestamp>.<body>"``, the raw bytes
received. The secret is the ``whsec_...`` string shown once, when the alert was created (or its
secret rotated). Any Standard Webhooks library verifies them as well::

    from siftstream.webhooks import verify

    if not verify(secret, request.headers, request.body):
        return 401
    event = json.loads(request.body)   # then drop an event id seen before: a retry

A retry sends the same event (the same id) again, so a receiver that acknowledged too late
recognises it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping

#: How far a delivery's timestamp may be from the receiver's clock (a replay is older).
TOLERANCE_SECONDS = 300
SECRET_PREFIX = "whsec_"
#: The longest timestamp header read (Unix seconds have 10 digits until 2286).
_TIMESTAMP_DIGITS = 12


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes | str,
    now: float | None = None,
    tolerance: float = TOLERANCE_SECONDS,
) -> bool:
    """Whether ``headers`` carry a signature of ``body`` under ``secret``, made at most
    ``tolerance`` seconds away from ``now`` (compared in constant time).

    Answers False, and never raises, whatever the headers, the body or the secret hold: a
    receiver answers a forged request 401, not 500 (which would be retried).
    """
    try:
        lowered = {str(name).lower(): value for name, value in headers.items()}
        event_id = lowered.get("webhook-id")
        stamp = lowered.get("webhook-timestamp")
        signatures = lowered.get("webhook-signature")
        if not (
            isinstance(event_id, str) and isinstance(stamp, str) and isinstance(signatures, str)
        ):
            return False
        if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= _TIMESTAMP_DIGITS):
            return False
        clock = time.time() if now is None else now
        if abs(clock - int(stamp)) > tolerance:
            return False
        payload = body.encode() if isinstance(body, str) else bytes(body)
        encoded = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
        key = base64.b64decode(encoded + "==")
        message = f"{event_id}.{stamp}.".encode() + payload
        expected = hmac.new(key, message, hashlib.sha256).digest()
        for candidate in signatures.split(" "):
            version, _, given = candidate.partition(",")
            if version != "v1":
                continue
            try:
                decoded = base64.b64decode(given, validate=True)
            except (binascii.Error, ValueError):
                continue
            if hmac.compare_digest(expected, decoded):
                return True
        return False
    except Exception:  # hostile input of any shape: not a valid signature
        return False
