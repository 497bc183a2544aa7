"""How alert deliveries are signed: the Standard Webhooks specification
(https://www.standardwebhooks.com, ``spec/standard-webhooks.md``), so that a receiver verifies
them with that project's libraries (``standardwebhooks`` on PyPI, and its siblings in other
languages) or with ``siftstream.webhooks.verify``.

Every delivery carries three headers:

* ``webhook-id``: the event's id, the same on every attempt (a receiver drops ids it has seen);
* ``webhook-timestamp``: the attempt's time, integer Unix seconds (a receiver refuses one more
  than five minutes away from its clock: a replay);
* ``webhook-signature``: ``v1,<base64 HMAC-SHA256>`` of ``"<id>.<timestamp>.<body>"`` under the
  secret's key, one per secret in force, space-separated: while a secret is being rotated the
  old and the new both sign, so that receivers can switch at their own pace.

A secret is ``whsec_`` and the base64 of its key (32 random bytes). The key of a secret is what
the reference libraries take it to be: the base64 decoding of what follows the prefix, padded
(which also gives alerts created before this convention, with 64 hex digits, a key those
libraries derive the same way).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"
#: Bytes of a new secret's key.
KEY_BYTES = 32
ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"


def new_secret() -> str:
    """A fresh secret, ``whsec_<base64 of 32 random bytes>``."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


def key_of(secret: str) -> bytes:
    """The HMAC key of ``secret`` (module docstring)."""
    encoded = secret[len(SECRET_PREFIX) :] if secret.startswith(SECRET_PREFIX) else secret
    return base64.b64decode(encoded + "==")


def signature(secret: str, event_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of a delivery under ``secret``."""
    message = f"{event_id}.{timestamp}.".encode() + body
    digest = hmac.new(key_of(secret), message, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signed_headers(
    signing_secrets: Sequence[str], event_id: str, body: bytes, now: float
) -> dict[str, str]:
    """The headers of one delivery attempt of ``body``, signed under every secret in force."""
    timestamp = int(now)
    return {
        "Content-Type": "application/json",
        "User-Agent": "sift-alerts",
        ID_HEADER: event_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: " ".join(
            signature(secret, event_id, timestamp, body) for secret in signing_secrets
        ),
    }
